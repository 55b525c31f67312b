use super::*;

fn hermes_think() -> OutputFormat {
    OutputFormat {
        think: Some(ThinkTags {
            open: "<think>".into(),
            close: "</think>".into(),
        }),
        tools: ToolSyntax::Hermes,
    }
}

fn options(tool_calls: bool) -> ParseOptions {
    ParseOptions {
        tool_calls,
        ..ParseOptions::default()
    }
}

#[test]
fn thinking_content_and_calls() {
    let text = "<think>\nplan\n</think>\n\nSure.<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>";
    let out = parse(&hermes_think(), &options(true), text, false);
    assert_eq!(out.reasoning_content, "plan");
    assert_eq!(out.content, "Sure.");
    assert_eq!(out.tool_calls.len(), 1);
    assert_eq!(
        (
            out.tool_calls[0].name.as_str(),
            out.tool_calls[0].arguments.as_str()
        ),
        ("f", "{\"a\": 1}")
    );
    // Without tools offered, the call is text.
    let out = parse(&hermes_think(), &options(false), text, false);
    assert!(out.content.contains("<tool_call>"));
}

#[test]
fn streamed_deltas_add_up_to_the_whole() {
    let text = "<think>\nplan it\n</think>\n\nSure, calling.<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"x\\\"y\"}}\n</tool_call><tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>";
    let whole_out = stream::whole(&hermes_think(), &options(true), text, |i| {
        format!("call_{i}")
    });
    // Every split into pieces (one char at a time) adds up to the same message.
    let mut parser = StreamParser::new(hermes_think(), options(true), |i| format!("call_{i}"));
    let mut sum = ChatOutput::default();
    let add = |d: Delta, sum: &mut ChatOutput| {
        sum.content += &d.content;
        sum.reasoning_content += &d.reasoning_content;
        for c in d.tool_calls {
            if let Some(name) = c.name {
                sum.tool_calls.push(ToolCall {
                    id: c.id.unwrap(),
                    name,
                    arguments: String::new(),
                });
            }
            sum.tool_calls[c.index].arguments += &c.arguments;
        }
    };
    for (i, ch) in text.char_indices() {
        let d = parser.push(&text[i..i + ch.len_utf8()]);
        assert!(!d.content.contains('<'), "a marker leaked: {d:?}");
        add(d, &mut sum);
    }
    let (last, d) = parser.finish();
    add(d, &mut sum);
    assert_eq!(sum, whole_out);
    assert_eq!(last, whole_out);
    assert_eq!(whole_out.tool_calls[1].id, "call_1");
}

#[test]
fn generic_answers_and_calls() {
    let generic = OutputFormat {
        think: None,
        tools: ToolSyntax::Generic,
    };
    let out = parse(
        &generic,
        &options(true),
        r#"{"response": "Hi \"you\""}"#,
        false,
    );
    assert_eq!(out.content, "Hi \"you\"");
    let calls = r#"{"tool_calls": [{"name": "f", "arguments": {"q": "x"}}, {"name": "g", "arguments": {}}]}"#;
    let out = parse(&generic, &options(true), calls, false);
    assert_eq!(
        out.tool_calls
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>(),
        ["f", "g"]
    );
    assert_eq!(out.tool_calls[0].arguments, r#"{"q": "x"}"#);
    // Cut mid-string: the string so far.
    let out = parse(&generic, &options(true), r#"{"response": "Hel\u00"#, true);
    assert_eq!(out.content, "Hel");
    // Not the format: the text is the answer.
    assert_eq!(
        parse(&generic, &options(true), "plain", false).content,
        "plain"
    );
}

#[test]
fn partial_markers_are_held_back() {
    assert_eq!(partial_marker_len("abc<tool", "<tool_call>"), 5);
    assert_eq!(partial_marker_len("abc", "<tool_call>"), 0);
    assert_eq!(partial_marker_len("é<", "<x>"), 1);
    let out = parse(&hermes_think(), &options(true), "Hello <tool_ca", true);
    assert_eq!(out.content, "Hello");
    let out = parse(&hermes_think(), &options(true), "<thi", true);
    assert_eq!(out, ChatOutput::default());
}
