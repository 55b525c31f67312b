//! Tool calling and thinking in a chat request: OpenAI's `tools`, `tool_choice` and
//! `parallel_tool_calls`, llama-server's `reasoning_format` and `chat_template_kwargs`, and the
//! thinking switches (`enable_thinking`, `reasoning_effort`). [`prepare_chat`] turns them, with
//! the model's template, into the prompt, the grammar that keeps tool calls well formed, and
//! how the answer is read back ([`crate::chat_output`]).

use serde::{Deserialize, Deserializer};
use serde_json::{json, Value};
use tessera_tokenizer::chat_template::{ChatContext, ChatMessage, ChatTemplate};
use tessera_tokenizer::Tokenizer;

use super::asked::bounded;
use super::structured::{ResponseFormat, Schema, MAX_GRAMMAR_BYTES};
use super::{Options, RequestError};
use crate::chat_output::{
    answer_schema, hermes, system_prompt, OutputFormat, ParseOptions, ToolSyntax,
};
use crate::constraint::Grammar;
use crate::generate::{tokenize_chat_with, GenerateError};

/// Most tools a request may offer.
pub const MAX_TOOLS: usize = 128;

/// OpenAI's tool definition: `{"type": "function", "function": {name, description,
/// parameters}}`.
#[derive(Deserialize, Debug, Clone)]
pub struct Tool {
    #[serde(rename = "type")]
    pub kind: String,
    pub function: FunctionDef,
}

#[derive(Deserialize, Debug, Clone)]
pub struct FunctionDef {
    pub name: String,
    pub description: Option<String>,
    /// The arguments' JSON schema (absent: no arguments).
    pub parameters: Option<Schema>,
    pub strict: Option<bool>,
}

/// `tool_choice`: `"auto"`, `"none"`, `"required"`, or one function by name.
#[derive(Deserialize, Debug, Clone)]
#[serde(
    untagged,
    expecting = "\"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}"
)]
pub enum ToolChoice {
    Mode(String),
    Named { function: NamedFunction },
}

#[derive(Deserialize, Debug, Clone)]
pub struct NamedFunction {
    pub name: String,
}

/// `chat_template_kwargs`: variables for the template, kept while small (a few switches).
#[derive(Debug, Clone)]
pub struct TemplateKwargs(pub Option<serde_json::Map<String, Value>>);

impl<'de> Deserialize<'de> for TemplateKwargs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<TemplateKwargs, D::Error> {
        match bounded(d, 4096)? {
            Some(Value::Object(map)) => Ok(TemplateKwargs(Some(map))),
            Some(Value::Null) => Ok(TemplateKwargs(None)),
            Some(_) => Err(serde::de::Error::custom("expected an object")),
            None => Err(serde::de::Error::custom(
                "larger than 4096 scalars, keys and characters",
            )),
        }
    }
}

/// A chat request made ready to generate.
pub struct PreparedChat {
    pub prompt: Vec<u32>,
    /// The grammar that keeps the tool calls well formed, when the request's tools need one.
    pub grammar: Option<Grammar>,
    /// How to read the answer into content, reasoning and tool calls; `None`: the answer is
    /// plain content, as generated.
    pub output: Option<(OutputFormat, ParseOptions)>,
}

#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error(transparent)]
    Generate(#[from] GenerateError),
}

/// The tools offered and how they may be called.
struct Offer<'a> {
    tools: Vec<&'a Tool>,
    required: bool,
    parallel: bool,
}

/// Renders and tokenizes `messages` for `options`: the tools in the template's context (or,
/// for a template that knows none, described in a system message with a grammar for the
/// answer), the thinking switches as template variables; and how to read the answer.
pub fn prepare_chat(
    options: &Options,
    tokenizer: &Tokenizer,
    template: &ChatTemplate,
    mut messages: Vec<ChatMessage>,
) -> Result<PreparedChat, PrepareError> {
    let format = OutputFormat::detect(template.source());
    let offer = offer(options)?;
    let mut context = ChatContext::default();
    if let Some(kwargs) = options
        .chat_template_kwargs
        .as_ref()
        .and_then(|k| k.0.as_ref())
    {
        context
            .variables
            .extend(kwargs.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    if let Some(on) = options.enable_thinking {
        context
            .variables
            .insert("enable_thinking".into(), Value::Bool(on));
    }
    if let Some(effort) = &options.reasoning_effort {
        context
            .variables
            .insert("reasoning_effort".into(), Value::String(effort.clone()));
    }
    let mut grammar = None;
    // The tools as templates and the answer's readers take them.
    let definitions: Vec<Value> = offer.as_ref().map_or(Vec::new(), |o| {
        o.tools.iter().map(|t| tool_json(t)).collect()
    });
    if let Some(offer) = &offer {
        match format.tools {
            ToolSyntax::Generic => {
                add_system_note(&mut messages, &system_prompt(&definitions));
                grammar = Some(Grammar::JsonSchema(answer_schema(
                    &signatures(&offer.tools),
                    offer.required,
                    offer.parallel,
                )));
            }
            syntax => {
                context.tools = Some(Value::Array(definitions.clone()));
                grammar = call_grammar(syntax, &offer.tools, offer.required, offer.parallel);
            }
        }
    }
    let prompt = tokenize_chat_with(
        tokenizer,
        template,
        &messages,
        &context,
        options.parse_special_in_content,
    )?;
    let reasoning = options.reasoning_format.unwrap_or_default();
    // Thinking is read apart whatever the request (gpt-oss's channels have no tags of their own).
    let reads = offer.is_some() || format.think.is_some() || format.tools == ToolSyntax::GptOss;
    let output = match reads {
        false => None,
        true => {
            let parse = ParseOptions {
                reasoning,
                prompt_opens_reasoning: format
                    .opened_reasoning(template, &messages, &context)
                    .map_err(GenerateError::from)?,
                tool_calls: offer.is_some(),
                tools: definitions,
                json_response: matches!(
                    options.response_format,
                    Some(ResponseFormat::JsonObject { .. } | ResponseFormat::JsonSchema { .. })
                ),
            };
            Some((format, parse))
        }
    };
    Ok(PreparedChat {
        prompt,
        grammar,
        output,
    })
}

/// The tools the request offers, `None` when it offers none (or `tool_choice: "none"`).
fn offer(options: &Options) -> Result<Option<Offer<'_>>, RequestError> {
    let tools = options.tools.as_deref().unwrap_or_default();
    if tools.len() > MAX_TOOLS {
        return Err(RequestError::new(
            "tools",
            format!("'tools' has {} tools; at most {MAX_TOOLS}", tools.len()),
        ));
    }
    for (i, t) in tools.iter().enumerate() {
        check_tool(i, t)?;
    }
    let (mode, named) = match &options.tool_choice {
        None => ("auto", None),
        Some(ToolChoice::Mode(m)) => (m.as_str(), None),
        Some(ToolChoice::Named { function }) => ("required", Some(function.name.as_str())),
    };
    let required = match mode {
        "auto" => false,
        "none" => return Ok(None),
        "required" => true,
        other => {
            return Err(RequestError::new(
                "tool_choice",
                format!("'tool_choice' must be \"auto\", \"none\", \"required\" or a named function, got {other:?}"),
            ))
        }
    };
    if tools.is_empty() {
        return match required {
            true => Err(RequestError::new(
                "tool_choice",
                "'tool_choice' asks for a tool call but 'tools' is empty",
            )),
            false => Ok(None),
        };
    }
    let tools: Vec<&Tool> = match named {
        None => tools.iter().collect(),
        Some(name) => {
            let tool = tools
                .iter()
                .find(|t| t.function.name == name)
                .ok_or_else(|| {
                    RequestError::new(
                        "tool_choice",
                        format!("'tool_choice' names {name:?}, which is not in 'tools'"),
                    )
                })?;
            vec![tool]
        }
    };
    if options.response_format.is_some()
        || options.json_schema.is_some()
        || options.grammar.is_some()
    {
        let constrains = super::structured::grammar(
            options.response_format.as_ref(),
            options.json_schema.as_ref(),
            options.grammar.as_deref(),
        )?
        .is_some();
        if constrains {
            return Err(RequestError::new(
                "tools",
                "'tools' and structured output ('response_format', 'json_schema', 'grammar') both constrain the answer: give one",
            ));
        }
    }
    Ok(Some(Offer {
        tools,
        required,
        // llama-server's default (OpenAI's is true): one call per answer unless asked.
        parallel: options.parallel_tool_calls.unwrap_or(false),
    }))
}

fn check_tool(i: usize, t: &Tool) -> Result<(), RequestError> {
    let at = format!("tools[{i}]");
    if t.kind != "function" {
        return Err(RequestError::new(
            format!("{at}.type"),
            format!("{at}: only \"function\" tools are supported"),
        ));
    }
    let name = &t.function.name;
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if !valid {
        return Err(RequestError::new(
            format!("{at}.function.name"),
            format!(
                "{at}.function.name must be 1 to 64 letters, digits, '_', '-' or '.', got {name:?}"
            ),
        ));
    }
    match &t.function.parameters {
        None | Some(Schema::Kept(Value::Object(_))) => Ok(()),
        Some(Schema::TooLarge) => Err(RequestError::new(
            format!("{at}.function.parameters"),
            format!("{at}.function.parameters is larger than {MAX_GRAMMAR_BYTES} scalars, keys and characters"),
        )),
        Some(Schema::Kept(_)) => Err(RequestError::new(
            format!("{at}.function.parameters"),
            format!("{at}.function.parameters must be a JSON schema (an object)"),
        )),
    }
}

/// A tool's arguments schema (no parameters: an empty object).
fn parameters(t: &Tool) -> Value {
    match &t.function.parameters {
        Some(Schema::Kept(v)) => v.clone(),
        _ => json!({"type": "object", "properties": {}}),
    }
}

fn signatures(tools: &[&Tool]) -> Vec<(String, Value)> {
    tools
        .iter()
        .map(|t| (t.function.name.clone(), parameters(t)))
        .collect()
}

/// The definition as templates and the model read it.
fn tool_json(t: &Tool) -> Value {
    let mut function = json!({"name": t.function.name, "parameters": parameters(t)});
    if let Some(d) = &t.function.description {
        function["description"] = json!(d);
    }
    json!({"type": "function", "function": function})
}

/// Appends `note` to the conversation's system message (one is added first if it has none).
fn add_system_note(messages: &mut Vec<ChatMessage>, note: &str) {
    match messages.first_mut() {
        Some(m) if m.role == "system" => {
            m.content = format!("{}\n\n{note}", m.content);
        }
        _ => messages.insert(0, ChatMessage::new("system", note)),
    }
}

/// The grammar of the tool calls in the model's own syntax, where Tessera writes one for it
/// (otherwise the calls are read unconstrained): answers that are only calls when a call is
/// `required`, else free text until the model opens a call, constrained from there on.
fn call_grammar(
    syntax: ToolSyntax,
    tools: &[&Tool],
    required: bool,
    parallel: bool,
) -> Option<Grammar> {
    let calls: Vec<Value> = signatures(tools)
        .into_iter()
        .map(|(name, parameters)| {
            json!({
                "type": "object",
                "properties": {"name": {"const": name}, "arguments": parameters},
                "required": ["name", "arguments"],
                "additionalProperties": false,
            })
        })
        .collect();
    let call_schema = crate::constraint::compact(&json!({"anyOf": calls}));
    match syntax {
        ToolSyntax::Hermes => {
            let (open, close) = (hermes::OPEN, hermes::CLOSE);
            let more = if parallel { "(WS? call)*" } else { "" };
            let body = format!("body: %json {call_schema}\nWS: /[ \\t\\r\\n]+/\n");
            Some(match required {
                true => Grammar::Lark(format!(
                    "start: call {more}\ncall: \"{open}\" WS? body WS? \"{close}\"\n{body}"
                )),
                // The lazy grammar starts after the opening marker the model wrote.
                false => Grammar::Lazy {
                    trigger: open.to_owned(),
                    then: Box::new(Grammar::Lark(format!(
                        "start: WS? body WS? \"{close}\" {more}\ncall: \"{open}\" WS? body WS? \"{close}\"\n{body}"
                    ))),
                },
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(v: Value) -> Options {
        super::super::deserialize(&v).unwrap()
    }

    fn tool(name: &str) -> Value {
        json!({"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}})
    }

    #[test]
    fn offers_follow_tool_choice() {
        let o = options(json!({"tools": [tool("a"), tool("b")]}));
        let all = offer(&o).unwrap().unwrap();
        assert_eq!(
            (all.tools.len(), all.required, all.parallel),
            (2, false, false)
        );
        let o = options(
            json!({"tools": [tool("a"), tool("b")], "tool_choice": {"type": "function", "function": {"name": "b"}}, "parallel_tool_calls": true}),
        );
        let named = offer(&o).unwrap().unwrap();
        assert_eq!(named.tools[0].function.name, "b");
        assert!(named.required && named.parallel);
        assert!(offer(&options(
            json!({"tools": [tool("a")], "tool_choice": "none"})
        ))
        .unwrap()
        .is_none());
        assert!(offer(&options(json!({"tool_choice": "auto"})))
            .unwrap()
            .is_none());
    }

    #[test]
    fn bad_offers_name_their_field() {
        for (v, field, says) in [
            (
                json!({"tools": [tool("a")], "tool_choice": "sometimes"}),
                "tool_choice",
                "sometimes",
            ),
            (
                json!({"tools": [tool("a")], "tool_choice": {"type": "function", "function": {"name": "z"}}}),
                "tool_choice",
                "\"z\"",
            ),
            (json!({"tool_choice": "required"}), "tool_choice", "empty"),
            (
                json!({"tools": [tool("a b")]}),
                "tools[0].function.name",
                "letters",
            ),
            (
                json!({"tools": [{"type": "retrieval", "function": {"name": "a"}}]}),
                "tools[0].type",
                "function",
            ),
            (
                json!({"tools": [{"type": "function", "function": {"name": "a", "parameters": 5}}]}),
                "tools[0].function.parameters",
                "schema",
            ),
            (
                json!({"tools": [tool("a")], "json_schema": {"type": "object"}}),
                "tools",
                "give one",
            ),
        ] {
            let e = offer(&options(v.clone()))
                .err()
                .unwrap_or_else(|| panic!("{v}"));
            assert_eq!(e.field, field, "{v}");
            assert!(e.message.contains(says), "{v}: {}", e.message);
        }
        let many: Vec<Value> = (0..=MAX_TOOLS).map(|i| tool(&format!("t{i}"))).collect();
        assert_eq!(
            offer(&options(json!({"tools": many}))).err().unwrap().field,
            "tools"
        );
    }
}
