//! Hostile chat templates: arbitrary template source and messages through `ChatTemplate::new`
//! and `render` (a GGUF's template is untrusted code). Compiling and rendering must end within
//! the limits (fuel, recursion, output cap, widths; `-timeout` and `-rss_limit_mb` catch what
//! they miss) and never panic. Where a render succeeds, the messages' contents located in it
//! (what keeps control-token text in a message from becoming control tokens) must be real:
//! in order, disjoint, each the content or the content trimmed.
//!
//! The whole chat tokenization (`tokenize_chat_with`, SmolLM2's tokenizer) then runs on
//! renderings up to 16 KiB and must keep the text: its ids decode to what the rendering's plain
//! tokenization decodes to.
//!
//! Input: one flags byte, then the template source, then the messages' contents, separated by
//! NUL bytes (invalid UTF-8 becomes U+FFFD). `TESSERA_MODELS` names the models folder
//! (default: the repository's `models/`).
#![no_main]

use std::ops::Range;
use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tessera_runtime::generate::{tokenize_chat_with, GenerateError};
use tessera_tokenizer::chat_template::{ChatContext, ChatMessage, ChatTemplate, ChatTemplateError};
use tessera_tokenizer::Tokenizer;

fn smollm2() -> &'static Tokenizer {
    static TOK: OnceLock<Tokenizer> = OnceLock::new();
    TOK.get_or_init(|| {
        let dir = std::env::var_os("TESSERA_MODELS")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../models")));
        let path = dir.join("SmolLM2-135M-Instruct.Q4_1.gguf");
        let file = tessera_gguf::GgufFile::open(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (set TESSERA_MODELS)", path.display()));
        Tokenizer::from_gguf(file.header()).unwrap()
    })
}

fuzz_target!(
    init: {
        smollm2();
    },
    |data: &[u8]| run(data)
);

fn run(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let mut parts = rest.split(|&b| b == 0);
    let source = String::from_utf8_lossy(parts.next().unwrap_or(&[]));
    let roles = ["user", "assistant"];
    let mut messages: Vec<ChatMessage> = parts
        .take(16)
        .enumerate()
        .map(|(i, p)| ChatMessage::new(roles[i % 2], String::from_utf8_lossy(p)))
        .collect();
    if flags & 1 == 1 && !messages.is_empty() {
        messages[0].role = "system".into();
    }
    let add_generation_prompt = flags & 2 == 2;
    let template = match ChatTemplate::new(&source, "<s>", "</s>") {
        Ok(t) => t,
        Err(ChatTemplateError::Syntax(_) | ChatTemplateError::Limit(_)) => return,
        Err(e) => panic!("compiling gave {e:?}"),
    };
    let Ok(rendered) = template.render(&messages, add_generation_prompt) else {
        return;
    };
    if let Some(spans) = template.content_spans(
        &messages,
        add_generation_prompt,
        &ChatContext::default(),
        &rendered,
    ) {
        check_spans(&spans, &messages, &rendered);
    }
    // The chat tokenization opens the assistant's turn.
    let Ok(rendered) = template.render(&messages, true) else {
        return;
    };
    if rendered.len() > 16 << 10 {
        return;
    }
    let tok = smollm2();
    match tokenize_chat_with(
        tok,
        &template,
        &messages,
        &ChatContext::default(),
        flags & 4 == 4,
    ) {
        // The text comes back as from plain special-token parsing (which drops only the
        // characters no token of the vocabulary covers, as llama.cpp does).
        Ok(ids) => assert_eq!(
            tok.decode(&ids, true),
            tok.decode(&tok.encode(&rendered, true, true), true),
            "tokenizing lost text"
        ),
        Err(GenerateError::ControlTextInContent { .. }) => {}
        Err(e) => panic!("tokenizing gave {e:?}"),
    }
}

/// Located contents are in order, disjoint, and each a content or the content trimmed.
fn check_spans(spans: &[Range<usize>], messages: &[ChatMessage], rendered: &str) {
    let mut end = 0;
    for span in spans {
        assert!(end <= span.start && span.start < span.end && span.end <= rendered.len());
        let text = &rendered[span.clone()];
        assert!(
            messages.iter().any(|m| [
                m.content.as_str(),
                m.content.trim(),
                m.content.trim_start(),
                m.content.trim_end()
            ]
            .contains(&text)),
            "span {span:?} = {text:?} is no content"
        );
        end = span.end;
    }
}
