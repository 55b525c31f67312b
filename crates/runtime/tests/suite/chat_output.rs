//! llama.cpp's own parser cases (its tests/test-chat.cpp, ported as data in
//! tests/data/chat_output_cases.json): given a real chat template and a model's output, the
//! content, reasoning and tool calls read from it, whole and streamed a character at a time.

use std::collections::BTreeMap;

use serde_json::Value;
use tessera_runtime::chat_output::{
    parse, ChatOutput, OutputFormat, ParseOptions, ReasoningFormat, StreamParser, ToolSyntax,
};
use tessera_tokenizer::chat_template::{
    ChatContext, ChatMessage, ChatTemplate, ToolCallFunction, ToolCallMessage,
};

/// The families whose every case runs; the others' cases run where their syntax is read.
const FAMILIES: &[&str] = &[
    "hermes",
    "qwen2.5",
    "qwq",
    "qwen3.5",
    "qwen3-coder",
    "gpt-oss",
    "deepseek-r1",
    "mistral",
    "llama3",
    "gemma",
];

fn cases() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/chat_output_cases.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn message(v: &Value) -> ChatMessage {
    let text = |k: &str| v[k].as_str().map(str::to_owned);
    let tool_calls = v["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| ToolCallMessage {
            id: c["id"].as_str().unwrap_or("").into(),
            kind: "function".into(),
            function: ToolCallFunction {
                name: c["function"]["name"].as_str().unwrap().into(),
                arguments: match &c["function"]["arguments"] {
                    Value::String(s) => serde_json::from_str(s).unwrap(),
                    other => other.clone(),
                },
            },
        })
        .collect();
    // As the request model reads them: OpenAI's `developer` is the system role.
    let role = match text("role").unwrap().as_str() {
        "developer" => "system".to_owned(),
        other => other.to_owned(),
    };
    ChatMessage {
        tool_calls,
        tool_call_id: text("tool_call_id"),
        reasoning_content: text("reasoning_content"),
        name: text("name"),
        ..ChatMessage::new(role, text("content").unwrap_or_default())
    }
}

/// Text as llama.cpp's test compares it (C `isspace` trimmed at both ends).
fn trimmed(s: &str) -> String {
    s.trim_matches(|c: char| c.is_ascii_whitespace() || c == '\u{b}')
        .to_owned()
}

/// Arguments as compact JSON in the model's key order (text that is not JSON: empty).
fn normal_arguments(s: &str) -> String {
    serde_json::from_str::<Value>(s).map_or(String::new(), |v| v.to_string())
}

fn normal(out: &ChatOutput) -> Value {
    serde_json::json!({
        "content": trimmed(&out.content),
        "reasoning_content": trimmed(&out.reasoning_content),
        "tool_calls": out.tool_calls.iter().map(|c| serde_json::json!({
            "name": c.name, "id": c.id, "arguments": normal_arguments(&c.arguments),
        })).collect::<Vec<_>>(),
    })
}

fn expected(e: &Value) -> Value {
    serde_json::json!({
        "content": trimmed(e["content"].as_str().unwrap_or("")),
        "reasoning_content": trimmed(e["reasoning_content"].as_str().unwrap_or("")),
        "tool_calls": e["tool_calls"].as_array().into_iter().flatten().map(|c| serde_json::json!({
            "name": c["name"], "id": c["id"].as_str().unwrap_or(""),
            "arguments": normal_arguments(c["arguments"].as_str().unwrap()),
        })).collect::<Vec<_>>(),
    })
}

/// The streamed deltas of `input`, one character at a time, added up.
fn streamed(format: &OutputFormat, options: &ParseOptions, input: &str) -> ChatOutput {
    let mut parser = StreamParser::new(format.clone(), options.clone(), |_| String::new());
    let mut sum = ChatOutput::default();
    let mut deltas = Vec::new();
    for (i, ch) in input.char_indices() {
        deltas.push(parser.push(&input[i..i + ch.len_utf8()]));
    }
    let (_, last) = parser.finish();
    deltas.push(last);
    for d in deltas {
        sum.content += &d.content;
        sum.reasoning_content += &d.reasoning_content;
        for c in d.tool_calls {
            if let Some(name) = c.name {
                sum.tool_calls.push(tessera_runtime::chat_output::ToolCall {
                    id: c.id.unwrap_or_default(),
                    name,
                    arguments: String::new(),
                });
            }
            sum.tool_calls[c.index].arguments += &c.arguments;
        }
    }
    sum
}

#[test]
fn llama_cpp_parser_cases() {
    let data = cases();
    let defaults = &data["defaults"];
    let mut templates: BTreeMap<String, ChatTemplate> = BTreeMap::new();
    let (mut ran, mut failures, mut skipped) = (BTreeMap::new(), Vec::new(), BTreeMap::new());
    for case in data["cases"].as_array().unwrap() {
        let family = case["family"].as_str().unwrap();
        let file = case["template"].as_str().unwrap();
        let template = templates.entry(file.to_owned()).or_insert_with(|| {
            let path = tessera_testkit::models_dir().join("templates").join(file);
            let source = std::fs::read_to_string(&path).unwrap_or_else(|e| {
                panic!(
                    "{}: {e} (scripts/fetch-models.sh templates)",
                    path.display()
                )
            });
            ChatTemplate::new(&source, "", "").unwrap()
        });
        let format = OutputFormat::detect(template.source());
        let tools: Vec<Value> = case["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|name| data["tools"][name.as_str().unwrap()].clone())
            .collect();
        let readable = tools.is_empty() || format.tools != ToolSyntax::Unknown;
        if !readable || (!FAMILIES.contains(&family) && format.think.is_none()) {
            *skipped.entry(family).or_insert(0) += 1;
            continue;
        }
        let messages: Vec<ChatMessage> = case
            .get("messages")
            .unwrap_or(&defaults["messages"])
            .as_array()
            .unwrap()
            .iter()
            .map(message)
            .collect();
        let get = |k: &str| case.get(k).unwrap_or(&defaults[k]).clone();
        let mut context = ChatContext {
            tools: (!tools.is_empty()).then(|| Value::Array(tools.clone())),
            ..ChatContext::default()
        };
        context
            .variables
            .insert("enable_thinking".into(), get("enable_thinking"));
        let reasoning: ReasoningFormat = serde_json::from_value(get("reasoning_format")).unwrap();
        let options = ParseOptions {
            reasoning,
            prompt_opens_reasoning: format
                .opened_reasoning(template, &messages, &context)
                .unwrap(),
            tool_calls: !tools.is_empty() && get("tool_choice") != "none",
            tools: tools.clone(),
            json_response: case["options"].get("json_schema").is_some(),
        };
        let input = case["input"].as_str().unwrap();
        let want = expected(&case["expect"]);
        let line = case["line"].as_u64().unwrap();
        let is_partial = case["is_partial"].as_bool().unwrap_or(false);
        if !is_partial {
            let got = normal(&parse(&format, &options, input, false));
            if got != want {
                failures.push(format!("{file}:{line} whole: got {got}, want {want}"));
            }
        }
        let got = normal(&streamed(&format, &options, input));
        if got != want {
            failures.push(format!("{file}:{line} streamed: got {got}, want {want}"));
        }
        *ran.entry(family).or_insert(0) += 1;
    }
    eprintln!("ran {ran:?}; not read yet {skipped:?}");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    for family in FAMILIES {
        assert!(
            ran.contains_key(family) && !skipped.contains_key(family),
            "{family}: {ran:?} {skipped:?}"
        );
    }
}

/// Each template the cases use is told as its family's format, and templates of other
/// families that share a marker are not taken for them.
#[test]
fn formats_detected_from_templates() {
    let expect = [
        ("Qwen3.5-4B.jinja", ToolSyntax::QwenXml, Some("<think>")),
        ("Qwen3-Coder.jinja", ToolSyntax::QwenXml, None),
        ("Qwen-Qwen2.5-7B-Instruct.jinja", ToolSyntax::Hermes, None),
        ("Qwen-QwQ-32B.jinja", ToolSyntax::Hermes, Some("<think>")),
        (
            "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
            ToolSyntax::Hermes,
            None,
        ),
        (
            "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
            ToolSyntax::Hermes,
            None,
        ),
        ("openai-gpt-oss-120b.jinja", ToolSyntax::GptOss, None),
        (
            "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja",
            ToolSyntax::DeepSeek,
            Some("<think>"),
        ),
        (
            "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
            ToolSyntax::DeepSeek,
            Some("<think>"),
        ),
        (
            "llama-cpp-deepseek-r1.jinja",
            ToolSyntax::DeepSeek,
            Some("<think>"),
        ),
        (
            "mistralai-Ministral-3-14B-Reasoning-2512.jinja",
            ToolSyntax::Mistral,
            Some("[THINK]"),
        ),
        (
            "mistralai-Mistral-Nemo-Instruct-2407.jinja",
            ToolSyntax::Mistral,
            None,
        ),
        (
            "Mistral-Small-3.2-24B-Instruct-2506.jinja",
            ToolSyntax::Mistral,
            None,
        ),
        (
            "unsloth-mistral-Devstral-Small-2507.jinja",
            ToolSyntax::Mistral,
            None,
        ),
        (
            "meta-llama-Llama-3.1-8B-Instruct.jinja",
            ToolSyntax::Llama3,
            None,
        ),
        (
            "meta-llama-Llama-3.2-3B-Instruct.jinja",
            ToolSyntax::Llama3,
            None,
        ),
        (
            "meta-llama-Llama-3.3-70B-Instruct.jinja",
            ToolSyntax::Llama3,
            None,
        ),
        (
            "google-gemma-4-31B-it.jinja",
            ToolSyntax::Gemma4,
            Some("<|channel>thought"),
        ),
        ("google-gemma-2-2b-it.jinja", ToolSyntax::Generic, None),
        // Same markers, other syntaxes: Seed-OSS's own call tag, functionary's JSON after
        // `<function=`, FireFunction's `functools`.
        ("ByteDance-Seed-OSS.jinja", ToolSyntax::Unknown, None),
        (
            "meetkai-functionary-medium-v3.1.jinja",
            ToolSyntax::Unknown,
            None,
        ),
        (
            "fireworks-ai-llama-3-firefunction-v2.jinja",
            ToolSyntax::Unknown,
            None,
        ),
    ];
    let data = cases();
    for case in data["cases"].as_array().unwrap() {
        let file = case["template"].as_str().unwrap();
        assert!(
            expect.iter().any(|(f, _, _)| *f == file),
            "{file}: no expected format"
        );
    }
    for (file, tools, think) in expect {
        let path = tessera_testkit::models_dir().join("templates").join(file);
        let source = std::fs::read_to_string(&path).unwrap();
        let format = OutputFormat::detect(&source);
        assert_eq!(format.tools, tools, "{file}");
        assert_eq!(format.think.map(|t| t.open).as_deref(), think, "{file}");
    }
}

/// llama.cpp's checks of rendered prompts (tests/data/chat_render_cases.json): the system and
/// user text present, the prompt ending with the generation prompt, that generation prompt
/// (what `add_generation_prompt` adds), for real templates with tool turns and thinking. Cases
/// that continue a prefilled assistant message are not run (Tessera has no prefill).
/// Cases whose rendering differs from llama.cpp's, and why (kept visible, not silently skipped).
const RENDER_DIFFERS: &[(u64, &str)] = &[(
    3221,
    "Gemma 4's template after a tool response: llama.cpp's renderer opens the model's turn, \
     minijinja's rendering leaves the template's namespace at the tool response and does not",
)];

#[test]
fn llama_cpp_render_cases() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/chat_render_cases.json"
    );
    let data: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let tools_data = cases()["tools"].clone();
    let (mut ran, mut failures) = (0, Vec::new());
    for case in data["cases"].as_array().unwrap() {
        if case["continue_final_message"]
            .as_str()
            .is_some_and(|c| c != "none")
        {
            continue;
        }
        let line_no = case["line"].as_u64().unwrap();
        if let Some((_, why)) = RENDER_DIFFERS.iter().find(|(l, _)| *l == line_no) {
            eprintln!("line {line_no} not run: {why}");
            continue;
        }
        let source = match case["template_source"].as_str() {
            Some(source) => source.to_owned(),
            None => {
                let file = case["template"].as_str().unwrap();
                std::fs::read_to_string(tessera_testkit::models_dir().join("templates").join(file))
                    .unwrap()
            }
        };
        let template = ChatTemplate::new(&source, "", "").unwrap();
        let messages: Vec<ChatMessage> = case["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(message)
            .collect();
        let tools: Vec<Value> = case["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|n| tools_data[n.as_str().unwrap()].clone())
            .collect();
        let mut context = ChatContext {
            tools: (!tools.is_empty()).then(|| Value::Array(tools)),
            ..ChatContext::default()
        };
        let thinking = case
            .get("enable_thinking")
            .cloned()
            .unwrap_or(Value::Bool(true));
        context.variables.insert("enable_thinking".into(), thinking);
        let add = case["add_generation_prompt"].as_bool().unwrap_or(true);
        let line = &case["line"];
        let text = template.render_with(&messages, add, &context).unwrap();
        let e = &case["expect"];
        for needle in e["contains"].as_array().into_iter().flatten() {
            if !text.contains(needle.as_str().unwrap()) {
                failures.push(format!("line {line}: lacks {needle}: {text:?}"));
            }
        }
        for needle in e["not_contains"].as_array().into_iter().flatten() {
            if text.contains(needle.as_str().unwrap()) {
                failures.push(format!("line {line}: has {needle}: {text:?}"));
            }
        }
        if let Some(end) = e["ends_with"].as_str() {
            if !text.ends_with(end) {
                failures.push(format!("line {line}: does not end with {end:?}: {text:?}"));
            }
        }
        if let Some(end) = e["not_ends_with"].as_str() {
            if text.ends_with(end) {
                failures.push(format!("line {line}: ends with {end:?}: {text:?}"));
            }
        }
        if let Some(want) = e["generation_prompt"].as_str() {
            let without = template.render_with(&messages, false, &context).unwrap();
            let common = text
                .bytes()
                .zip(without.bytes())
                .take_while(|(a, b)| a == b)
                .count();
            let common = (0..=common)
                .rev()
                .find(|&i| text.is_char_boundary(i))
                .unwrap_or(0);
            if &text[common..] != want {
                failures.push(format!(
                    "line {line}: generation prompt {:?}, want {want:?}",
                    &text[common..]
                ));
            }
        }
        ran += 1;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(ran >= 6, "{ran} cases ran");
}
