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

fn format(think: Option<(&str, &str)>, tools: ToolSyntax) -> OutputFormat {
    OutputFormat {
        think: think.map(|(open, close)| ThinkTags {
            open: open.into(),
            close: close.into(),
        }),
        tools,
    }
}

fn reading(reasoning: ReasoningFormat) -> ParseOptions {
    ParseOptions {
        reasoning,
        tool_calls: true,
        tools: vec![
            serde_json::json!({"type": "function", "function": {"name": "f",
            "parameters": {"type": "object", "properties": {
                "n": {"type": "integer"}, "s": {"type": "string"}}}}}),
        ],
        ..ParseOptions::default()
    }
}

/// Each syntax with an answer that uses all of it.
fn samples() -> Vec<(OutputFormat, &'static str)> {
    let think = Some(("<think>", "</think>"));
    vec![
        (
            format(think, ToolSyntax::QwenXml),
            "<think>\nhm\n</think>\n\nOk.\n<tool_call>\n<function=f>\n<parameter=s>\na \"q\"\n\n</parameter>\n<parameter=n>\n4\n</parameter>\n</function>\n</tool_call>\n<function=f>\n</function>",
        ),
        (
            format(think, ToolSyntax::DeepSeek),
            "hm</think>Ok.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"n\": 1}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"s\": \"x\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        ),
        (
            format(Some(("[THINK]", "[/THINK]")), ToolSyntax::Mistral),
            "[THINK]hm[/THINK]Ok.[TOOL_CALLS]f[CALL_ID]abc123456[ARGS]{\"n\": 1}[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"s\": \"]\"}, \"id\": \"x1\"}]",
        ),
        (
            format(None, ToolSyntax::Llama3),
            "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"n\": 1}}; {\"type\": \"function\", \"name\": \"f\", \"parameters\": {}}",
        ),
        (
            format(None, ToolSyntax::GptOss),
            "<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"n\": 1}<|call|><|start|>assistant to=python<|channel|>commentary<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>Ok <|return|>",
        ),
        (
            format(
                Some((gemma4::THOUGHT, gemma4::CHANNEL_CLOSE)),
                ToolSyntax::Gemma4,
            ),
            "<|channel>thought\nhm<channel|>Ok.<|tool_call>call:f{s:<|\"|>a, \"b\"<|\"|>,n:-2,o:{k:[1,<|\"|>x<|\"|>,true]},w:maybe}<tool_call|><channel|>",
        ),
    ]
}

/// Each prefix's parse extends the one before: what a stream sends is never taken back.
fn assert_grows(format: &OutputFormat, options: &ParseOptions, text: &str) {
    let mut before = ChatOutput::default();
    let ends = text
        .char_indices()
        .map(|(i, c)| (i + c.len_utf8(), true))
        .chain([(text.len(), false)]);
    for (end, partial) in ends {
        let now = parse(format, options, &text[..end], partial);
        let cut = &text[..end];
        assert!(
            now.content.starts_with(&before.content),
            "{cut:?}: {now:?} after {before:?}"
        );
        assert!(
            now.reasoning_content.starts_with(&before.reasoning_content),
            "{cut:?}: {now:?} after {before:?}"
        );
        assert!(now.tool_calls.len() >= before.tool_calls.len(), "{cut:?}");
        for (n, b) in now.tool_calls.iter().zip(&before.tool_calls) {
            assert_eq!((&n.name, &n.id), (&b.name, &b.id), "{cut:?}");
            assert!(
                n.arguments.starts_with(&b.arguments),
                "{cut:?}: {now:?} after {before:?}"
            );
        }
        before = now;
    }
}

#[test]
fn every_syntax_only_grows_while_streaming() {
    for (format, text) in samples() {
        let whole = parse(&format, &reading(ReasoningFormat::Auto), text, false);
        assert!(!whole.tool_calls.is_empty(), "{format:?}: {whole:?}");
        for call in &whole.tool_calls {
            serde_json::from_str::<serde_json::Value>(&call.arguments)
                .unwrap_or_else(|e| panic!("{format:?}: {call:?}: {e}"));
        }
        assert_grows(&format, &reading(ReasoningFormat::Auto), text);
        assert_grows(&format, &reading(ReasoningFormat::None), text);
    }
}

#[test]
fn every_syntax_reads_garbage_without_panicking() {
    // Pieces of every syntax's markers, shuffled by a fixed generator: any input reads.
    let pieces = [
        "<tool_call>",
        "<function=f>",
        "<parameter=n>",
        "</parameter>",
        "</function>",
        "\n",
        "<｜tool▁calls▁begin｜>",
        "<｜tool▁call▁begin｜>",
        "<｜tool▁sep｜>",
        "```json",
        "[TOOL_CALLS]",
        "[ARGS]",
        "[CALL_ID]",
        "[",
        "{",
        "}",
        "\"",
        ":",
        ",",
        "<|\"|>",
        "<|channel|>",
        "<|message|>",
        "<|start|>",
        "<|end|>",
        " to=functions.f",
        "analysis",
        "<|channel>",
        "<channel|>",
        "<|tool_call>",
        "call:f",
        "<think>",
        "</think>",
        "é",
        "1",
        "<|python_tag|>",
        "\"name\"",
        "x",
    ];
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..300 {
        let mut text = String::new();
        for _ in 0..12 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            text.push_str(pieces[(seed % pieces.len() as u64) as usize]);
        }
        for (format, _) in samples() {
            for reasoning in [ReasoningFormat::Auto, ReasoningFormat::None] {
                let options = reading(reasoning);
                parse(&format, &options, &text, false);
                for (i, _) in text.char_indices() {
                    parse(&format, &options, &text[..i], true);
                }
            }
        }
    }
}

#[test]
fn fenced_json_answers_are_unwrapped() {
    let options = ParseOptions {
        json_response: true,
        ..ParseOptions::default()
    };
    let plain = format(None, ToolSyntax::Generic);
    let text = "```json\n{\"a\": 1}\n```";
    assert_eq!(parse(&plain, &options, text, false).content, "{\"a\": 1}");
    assert_grows(&plain, &options, text);
    assert_eq!(
        parse(&plain, &options, "{\"a\": 1}", false).content,
        "{\"a\": 1}"
    );
}

#[test]
fn templates_without_tools_stay_generic() {
    // SmolLM2 and Gemma 3 style: no tools, no thinking.
    let smol = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
    let gemma3 = "{{ bos_token }}{%- for message in messages -%}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{%- endfor -%}{%- if add_generation_prompt -%}{{'<start_of_turn>model\\n'}}{%- endif -%}";
    for source in [smol, gemma3] {
        let format = OutputFormat::detect(source);
        assert_eq!(format.tools, ToolSyntax::Generic);
        assert_eq!(format.think, None);
    }
}
