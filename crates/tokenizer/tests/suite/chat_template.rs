//! Chat templates of both test models rendered like Hugging Face / jinja2 renders them. The
//! expected strings were worked out from the template text and checked with Python's jinja2
//! (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks).

use tessera_testkit::*;
use tessera_tokenizer::chat_template::{ChatMessage, ChatTemplate, ChatTemplateError};

fn conversation() -> Vec<ChatMessage> {
    vec![
        ChatMessage::new("system", "You are terse."),
        ChatMessage::new("user", "Hi!"),
        ChatMessage::new("assistant", "Hello."),
        ChatMessage::new("user", "  What is 2+2? "),
    ]
}

fn template_of(model: &str) -> ChatTemplate {
    let h = header(model);
    let tok = tessera_tokenizer::Tokenizer::from_gguf(&h).unwrap();
    ChatTemplate::from_gguf(&h, &tok)
        .unwrap()
        .expect("model has a chat template")
}

#[test]
fn smollm2_template() {
    let t = template_of(SMOLLM2);
    let conv = conversation();
    assert_eq!(
        t.render(&conv, false).unwrap(),
        "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n\
         <|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\n  What is 2+2? <|im_end|>\n"
    );
    assert_eq!(
        t.render(&conv, true).unwrap(),
        "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n\
         <|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\n  What is 2+2? <|im_end|>\n\
         <|im_start|>assistant\n"
    );
    // Without a system message the template supplies its own.
    assert_eq!(
        t.render(&conv[1..], true).unwrap(),
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n\
         <|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n\
         <|im_start|>user\n  What is 2+2? <|im_end|>\n<|im_start|>assistant\n"
    );
}

#[test]
fn gemma3_template_folds_system_into_first_user_turn() {
    let t = template_of(GEMMA3);
    let conv = conversation();
    assert_eq!(
        t.render(&conv, false).unwrap(),
        "<bos><start_of_turn>user\nYou are terse.\n\nHi!<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n\
         <start_of_turn>user\nWhat is 2+2?<end_of_turn>\n"
    );
    assert_eq!(
        t.render(&conv, true).unwrap(),
        "<bos><start_of_turn>user\nYou are terse.\n\nHi!<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n\
         <start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n"
    );
    assert_eq!(
        t.render(&conv[1..], true).unwrap(),
        "<bos><start_of_turn>user\nHi!<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n\
         <start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n"
    );
}

#[test]
fn raise_exception_is_a_typed_error() {
    let t = template_of(GEMMA3);
    let bad = [ChatMessage::new("user", "a"), ChatMessage::new("user", "b")];
    match t.render(&bad, true) {
        Err(ChatTemplateError::Raised(msg)) => {
            assert_eq!(
                msg,
                "Conversation roles must alternate user/assistant/user/assistant/..."
            )
        }
        other => panic!("expected Raised, got {other:?}"),
    }
}

#[test]
fn python_string_methods_and_filters() {
    let src = "{% for m in messages %}{{ m['role'].upper() }}:{{ m['content'].strip() }}\
               {% if m['content'].startswith('x') %}!{% endif %}|{{ m['content'] | trim | tojson }}\n{% endfor %}\
               {{ eos_token }}";
    let t = ChatTemplate::new(src, "<s>", "</s>").unwrap();
    let out = t
        .render(
            &[
                ChatMessage::new("user", " xy "),
                ChatMessage::new("bot", "q\""),
            ],
            false,
        )
        .unwrap();
    assert_eq!(out, "USER:xy|\"xy\"\nBOT:q\"|\"q\\\"\"\n</s>");
}

#[test]
fn syntax_errors_are_reported() {
    assert!(matches!(
        ChatTemplate::new("{% for %}", "", ""),
        Err(ChatTemplateError::Syntax(_))
    ));
    let t = ChatTemplate::new("{{ messages[0].content | no_such_filter }}", "", "");
    let err = match t {
        Err(e) => e,
        Ok(t) => t
            .render(&[ChatMessage::new("user", "a")], false)
            .unwrap_err(),
    };
    assert!(
        matches!(
            err,
            ChatTemplateError::Syntax(_) | ChatTemplateError::Render(_)
        ),
        "{err:?}"
    );
}
