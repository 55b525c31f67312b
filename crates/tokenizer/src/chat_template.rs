//! Chat templates: the model's `tokenizer.chat_template` (Jinja) rendered with minijinja the
//! way Hugging Face's `apply_chat_template` renders it (`trim_blocks`, `lstrip_blocks`,
//! `raise_exception`, Python string methods like `.strip()` through minijinja-contrib's
//! pycompat).
//!
//! GGUF files converted without a template (the Gemma 3 270M test model is one) get Gemma's
//! turn format when their architecture is a Gemma, since that is the format the model was
//! trained on; other architectures without a template get `None`.
//!
//! A template is untrusted code (it comes with the model file): compiling and rendering it are
//! bounded ([`limits`]), and [`ChatTemplate::content_spans`] tells the messages' text from the
//! template's own so that a message cannot write the template's control tokens.

mod budget;
mod clock;
mod contents;
mod guards;
pub mod limits;
pub mod source;

pub use clock::{set_wall_clock, strftime_now};

use std::collections::BTreeMap;

use minijinja::machinery::{self, Instructions};
use minijinja::{Environment, ErrorKind, Value};

use crate::Tokenizer;

const KEY_TEMPLATE: &str = "tokenizer.chat_template";

/// Marks errors raised by the template's own `raise_exception(...)`.
const RAISED: &str = "raise_exception: ";

/// Gemma's turn format (`<start_of_turn>user ... <end_of_turn>`, assistant turns as `model`,
/// a system message folded into the first user turn, alternating roles enforced).
pub const GEMMA_TEMPLATE: &str = r#"{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- set first_user_prefix = messages[0]['content'] + '

' -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if message['role'] == 'assistant' -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '
' + (first_user_prefix if loop.first else "") }}
    {{- message['content'] | trim }}
    {{- '<end_of_turn>
' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{ '<start_of_turn>model
' }}
{%- endif -%}
"#;

#[derive(Debug, thiserror::Error)]
pub enum ChatTemplateError {
    #[error("chat template does not parse: {0}")]
    Syntax(String),
    /// The template rejected the conversation (its `raise_exception(...)`).
    #[error("chat template rejected the conversation: {0}")]
    Raised(String),
    #[error("chat template failed to render: {0}")]
    Render(String),
    /// The template exceeded one of the [`limits`] (source size, fuel, recursion, output size,
    /// a width or range): a hostile or broken template.
    #[error("chat template exceeded a limit: {0}")]
    Limit(String),
    #[error("GGUF metadata key tokenizer.chat_template is not a string")]
    NotAString,
}

/// One message of a conversation, as chat templates read it (OpenAI's message shape): an
/// assistant turn may carry the tool calls it made and its reasoning, a `tool` turn the id of
/// the call it answers. Absent fields are not in the template's context at all (templates test
/// `message.tool_calls is defined`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallMessage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The tool's name on a `tool` turn (some templates print it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
            ..ChatMessage::default()
        }
    }

    /// The bytes a template may copy from this message (its content, reasoning and calls).
    fn text_bytes(&self) -> usize {
        let calls: usize = self
            .tool_calls
            .iter()
            .map(|c| c.id.len() + c.function.name.len() + c.function.arguments.to_string().len())
            .sum();
        self.content.len() + self.reasoning_content.as_ref().map_or(0, String::len) + calls
    }
}

/// A tool call of an assistant turn, in OpenAI's shape (`{id, type: "function", function:
/// {name, arguments}}`). `arguments` is the JSON object itself, not its text: templates write
/// it with `tojson` or walk its items.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolCallMessage {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub function: ToolCallFunction,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolCallFunction {
    pub name: String,
    pub arguments: serde_json::Value,
}

/// What a template reads besides the messages: the tools the model may call (OpenAI's tool
/// definitions, as `tools`) and extra variables (`enable_thinking`, `reasoning_effort`, a
/// request's `chat_template_kwargs`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatContext {
    pub tools: Option<serde_json::Value>,
    pub variables: BTreeMap<String, serde_json::Value>,
}

impl ChatContext {
    fn text_bytes(&self) -> usize {
        let tools = self.tools.as_ref().map_or(0, |t| t.to_string().len());
        tools
            + self
                .variables
                .iter()
                .map(|(k, v)| k.len() + v.to_string().len())
                .sum::<usize>()
    }
}

pub struct ChatTemplate {
    env: Environment<'static>,
    source: String,
    bos_token: String,
    eos_token: String,
}

impl ChatTemplate {
    /// The model's template (`tokenizer.chat_template`), Gemma's for Gemma models that lack
    /// one, otherwise `None`.
    pub fn from_gguf(
        header: &tessera_gguf::Header,
        tokenizer: &Tokenizer,
    ) -> Result<Option<ChatTemplate>, ChatTemplateError> {
        let source = match header.get(KEY_TEMPLATE) {
            Some(v) => v.as_str().ok_or(ChatTemplateError::NotAString)?.to_owned(),
            None => match header.architecture() {
                Some(a) if a.starts_with("gemma") => GEMMA_TEMPLATE.to_owned(),
                _ => return Ok(None),
            },
        };
        let text = |id: Option<u32>| {
            id.and_then(|id| tokenizer.token_text(id))
                .unwrap_or("")
                .to_owned()
        };
        ChatTemplate::new(&source, &text(tokenizer.bos()), &text(tokenizer.eos())).map(Some)
    }

    /// A template from its Jinja source, with the texts of the BOS and EOS tokens. A source
    /// too large or too complex to compile safely ([`source`]) is refused before it is parsed.
    pub fn new(
        source: &str,
        bos_token: &str,
        eos_token: &str,
    ) -> Result<ChatTemplate, ChatTemplateError> {
        source::check(source)?;
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_recursion_limit(limits::RECURSION_LIMIT);
        minijinja_contrib::add_to_environment(&mut env);
        env.add_function(
            "raise_exception",
            |msg: String| -> Result<Value, minijinja::Error> {
                Err(minijinja::Error::new(
                    ErrorKind::InvalidOperation,
                    format!("{RAISED}{msg}"),
                ))
            },
        );
        env.add_function("strftime_now", |format: String| {
            clock::strftime_now(&format)
        });
        env.add_template_owned("chat", source.to_owned())
            .map_err(|e| ChatTemplateError::Syntax(describe(&e)))?;
        // Refused now rather than at every render.
        let tmpl = env
            .get_template("chat")
            .map_err(|e| ChatTemplateError::Syntax(describe(&e)))?;
        instrumented(machinery::get_compiled_template(&tmpl)).ok_or_else(no_other_templates)?;
        drop(tmpl);
        Ok(ChatTemplate {
            env,
            source: source.to_owned(),
            bos_token: bos_token.to_owned(),
            eos_token: eos_token.to_owned(),
        })
    }

    /// The Jinja source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Render a conversation; `add_generation_prompt` appends the opening of the assistant's
    /// turn. Fuel and the output cap scale with the conversation ([`limits`]).
    pub fn render(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, ChatTemplateError> {
        self.render_with(messages, add_generation_prompt, &ChatContext::default())
    }

    /// [`render`](Self::render) with tools and extra variables in the template's context.
    pub fn render_with(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        context: &ChatContext,
    ) -> Result<String, ChatTemplateError> {
        let text_bytes = input_bytes(messages, context);
        self.render_bounded(messages, add_generation_prompt, context, text_bytes)
    }

    /// [`render_with`](Self::render_with) with the limits of an input of `content_bytes`: the
    /// template's instructions instrumented with the work budget ([`budget`]) and run on
    /// minijinja's VM.
    fn render_bounded(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        context: &ChatContext,
        content_bytes: usize,
    ) -> Result<String, ChatTemplateError> {
        let fuel = limits::fuel(messages.len());
        let cap = limits::output_cap(content_bytes);
        let work = budget::Budget::new(
            limits::work_budget(messages.len(), content_bytes),
            limits::value_cap(content_bytes),
        );
        // Cloning shares the compiled template (reference-counted); fuel and the budget's
        // filters are this render's.
        let mut env = self.env.clone();
        env.set_fuel(Some(fuel));
        budget::add_filters(&mut env, &work);
        // After contrib's builtins, so that the checked ones win.
        guards::install(&mut env, &work);
        let tmpl = env
            .get_template("chat")
            .map_err(|e| ChatTemplateError::Render(describe(&e)))?;
        let compiled = machinery::get_compiled_template(&tmpl);
        let (instructions, blocks) = instrumented(compiled).ok_or_else(no_other_templates)?;
        // The request's variables first, so that the template's own ones win.
        let mut vars: BTreeMap<&str, Value> = context
            .variables
            .iter()
            .map(|(k, v)| (k.as_str(), Value::from_serialize(v)))
            .collect();
        vars.insert("messages", Value::from_serialize(messages));
        vars.insert("add_generation_prompt", Value::from(add_generation_prompt));
        vars.insert("bos_token", Value::from(self.bos_token.as_str()));
        vars.insert("eos_token", Value::from(self.eos_token.as_str()));
        if let Some(tools) = &context.tools {
            vars.insert("tools", Value::from_serialize(tools));
        }
        let ctx = Value::from_iter(vars);
        let mut text = String::new();
        let mut out = machinery::make_string_output(&mut text);
        machinery::Vm::new(&env)
            .eval(
                &instructions,
                ctx,
                &blocks,
                &mut out,
                compiled.initial_auto_escape,
            )
            .map_err(|e| classify(&e, fuel))?;
        if text.len() > cap {
            return Err(ChatTemplateError::Limit(format!(
                "the rendered chat exceeds {cap} bytes"
            )));
        }
        Ok(text)
    }
}

/// The bytes of input a render may copy (the limits scale with it).
fn input_bytes(messages: &[ChatMessage], context: &ChatContext) -> usize {
    messages.iter().map(ChatMessage::text_bytes).sum::<usize>() + context.text_bytes()
}

type Blocks<'s> = BTreeMap<&'s str, Instructions<'s>>;

/// The template's root and block instructions with the work budget's charges; `None` when it
/// includes, imports or extends another template.
fn instrumented<'s>(
    compiled: &machinery::CompiledTemplate<'s>,
) -> Option<(Instructions<'s>, Blocks<'s>)> {
    let blocks = compiled
        .blocks
        .iter()
        .map(|(name, b)| Some((*name, budget::instrument(b)?)))
        .collect::<Option<Blocks<'s>>>()?;
    Some((budget::instrument(&compiled.instructions)?, blocks))
}

fn no_other_templates() -> ChatTemplateError {
    ChatTemplateError::Syntax(
        "a chat template cannot include, import or extend other templates".into(),
    )
}

/// The typed error of a failed render: the template's own `raise_exception`, a limit, or
/// anything else minijinja reports.
fn classify(e: &minijinja::Error, fuel: u64) -> ChatTemplateError {
    if let Some(msg) = raised_message(e) {
        return ChatTemplateError::Raised(msg);
    }
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(mj) = err.downcast_ref::<minijinja::Error>() {
            let detail = mj.detail().unwrap_or("");
            let limit = match mj.kind() {
                ErrorKind::OutOfFuel => Some(format!(
                    "the template ran more than {fuel} instructions (fuel)"
                )),
                _ if detail == "recursion limit exceeded" => Some(format!(
                    "the template recurses deeper than {}",
                    limits::RECURSION_LIMIT
                )),
                _ => detail.strip_prefix(limits::LIMIT).map(str::to_owned),
            };
            if let Some(msg) = limit {
                return ChatTemplateError::Limit(msg);
            }
        }
        cur = err.source();
    }
    ChatTemplateError::Render(describe(e))
}

/// The message of a `raise_exception` anywhere in the error's chain.
fn raised_message(e: &minijinja::Error) -> Option<String> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(mj) = err.downcast_ref::<minijinja::Error>() {
            if let Some(msg) = mj.detail().and_then(|d| d.strip_prefix(RAISED)) {
                return Some(msg.to_owned());
            }
        }
        cur = err.source();
    }
    None
}

/// The error and its causes on one line.
fn describe(e: &minijinja::Error) -> String {
    let mut s = e.to_string();
    let mut cur = std::error::Error::source(e);
    while let Some(err) = cur {
        s.push_str(": ");
        s.push_str(&err.to_string());
        cur = err.source();
    }
    s
}
