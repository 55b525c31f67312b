use super::*;

const BOUNDS: Bounds = Bounds {
    n_vocab: 1000,
    n_ctx: 512,
    default_seed: 9,
    default_max_tokens: None,
};

fn options(json: &str) -> Options {
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    deserialize(&v).unwrap()
}

#[test]
fn ranges_are_checked_and_named() {
    for (json, field) in [
        (r#"{"temperature": -1}"#, "temperature"),
        (r#"{"temperature": 101}"#, "temperature"),
        (r#"{"top_p": 1.5}"#, "top_p"),
        (r#"{"top_k": 1000000}"#, "top_k"),
        (r#"{"top_k": -1}"#, "top_k"),
        (r#"{"repeat_penalty": 0}"#, "repeat_penalty"),
        (r#"{"max_tokens": 100000}"#, "max_tokens"),
        (r#"{"max_tokens": 0}"#, "max_tokens"),
        (r#"{"n_predict": -7}"#, "max_tokens"),
        (r#"{"seed": -2}"#, "seed"),
        (r#"{"logit_bias": {"99999999": 1}}"#, "logit_bias"),
        (r#"{"logit_bias": {"1.5": 1}}"#, "logit_bias"),
        (r#"{"logit_bias": {"5": 1000}}"#, "logit_bias"),
        (r#"{"repeat_last_n": -5}"#, "repeat_last_n"),
        (r#"{"stop": ["x", ""]}"#, "stop[1]"),
        (r#"{"n": 2}"#, "'n'"),
        (r#"{"logprobs": true}"#, "'logprobs'"),
        (
            r#"{"grammar": "root ::= \"yes\"\nno ::= \"no"}"#,
            "'grammar': GBNF line 2, column 8: unterminated string literal",
        ),
        (
            r#"{"grammar": "root ::= yes"}"#,
            "'grammar': GBNF line 1, column 10: rule 'yes' is used but never defined",
        ),
        (
            r#"{"json_schema": 5}"#,
            "'json_schema' must be a JSON schema",
        ),
        (
            r#"{"json_schema": {"type": "string"}, "grammar": "start: \"a\""}"#,
            "'json_schema' and 'grammar' both",
        ),
        (
            r#"{"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}"#,
            "'response_format.json_schema.schema' is missing",
        ),
        (r#"{"speculative": {"type": "draft"}}"#, "speculative"),
        (r#"{"speculative": {"type": "nonsense"}}"#, "speculative"),
    ] {
        let o = options(json);
        let e = match o.generate_params(&BOUNDS) {
            Err(e) => e,
            Ok(_) => o.spec_params().unwrap_err(),
        };
        assert!(e.message.contains(field), "{json}: {}", e.message);
        assert!(field.contains(e.field.as_str()), "{json}: {}", e.field);
    }
    let long = format!(r#"{{"stop": "{}"}}"#, "x".repeat(257));
    assert_eq!(
        options(&long).generate_params(&BOUNDS).unwrap_err().field,
        "stop"
    );
    let many = format!(r#"{{"stop": {:?}}}"#, vec!["x"; 17]);
    assert_eq!(
        options(&many).generate_params(&BOUNDS).unwrap_err().field,
        "stop"
    );
}

#[test]
fn options_become_generate_params() {
    let p = options(
        r#"{"temperature": 0, "max_tokens": 7, "stop": "\n", "seed": 3, "top_k": 1000,
            "logit_bias": {"5": -100, "2": 1}, "repeat_last_n": -1, "n": 1, "logprobs": false,
            "response_format": {"type": "text"}, "tools": [], "tool_choice": "none",
            "grammar": "", "json_schema": null}"#,
    )
    .generate_params(&BOUNDS)
    .unwrap();
    assert_eq!(p.max_tokens, Some(7));
    assert_eq!(p.stop, vec!["\n".to_string()]);
    assert_eq!(p.sampling.seed, 3);
    assert_eq!(p.sampling.temperature, 0.0);
    assert_eq!(p.sampling.top_k, 1000);
    assert_eq!(p.sampling.logit_bias, vec![(2, 1.0), (5, -100.0)]);
    assert_eq!(p.sampling.penalty_last_n, -1);
    let p = options("{}").generate_params(&BOUNDS).unwrap();
    assert_eq!((p.max_tokens, p.sampling.seed), (None, 9));
    let browser = Bounds {
        default_max_tokens: Some(256),
        ..BOUNDS
    };
    let p = options(r#"{"seed": -1}"#)
        .generate_params(&browser)
        .unwrap();
    assert_eq!((p.max_tokens, p.sampling.seed), (Some(256), 9));
    let p = options(r#"{"max_tokens": -1}"#)
        .generate_params(&browser)
        .unwrap();
    assert_eq!(p.max_tokens, None);
}

#[test]
fn logit_bias_pairs_and_a_ban() {
    let o = Options {
        logit_bias: Some(LogitBias::Pairs(vec![(7, f64::NEG_INFINITY), (5, 2.5)])),
        ..Options::default()
    };
    let p = o.generate_params(&BOUNDS).unwrap();
    assert_eq!(
        p.sampling.logit_bias,
        vec![(5, 2.5), (7, f32::NEG_INFINITY)]
    );
    let o = Options {
        logit_bias: Some(LogitBias::Pairs(vec![(7, f64::INFINITY)])),
        ..Options::default()
    };
    assert_eq!(o.generate_params(&BOUNDS).unwrap_err().field, "logit_bias");
}

#[test]
fn speculative_options_are_draftless() {
    let o = options(r#"{"speculative": {"type": "ngram-simple", "draft_max": 8}}"#);
    let p = o.spec_params().unwrap().unwrap();
    assert_eq!(p.n_max, 8);
    assert!(options(r#"{"speculative": {"type": "none"}}"#)
        .spec_params()
        .unwrap()
        .is_none());
}

fn messages(
    json: &str,
) -> Result<Vec<tessera_tokenizer::chat_template::ChatMessage>, RequestError> {
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    let m: Vec<Message> = deserialize(&v)?;
    chat_messages(&m)
}

#[test]
fn content_parts_are_joined_and_other_parts_refused() {
    let m = messages(
        r#"[{"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": null}]"#,
    )
    .unwrap();
    assert_eq!(
        (m[0].role.as_str(), m[0].content.as_str()),
        ("system", "a\nb")
    );
    assert_eq!(
        (m[1].role.as_str(), m[1].content.as_str()),
        ("assistant", "")
    );
    // `tool_calls: []` and `tool_call_id: null` are a plain turn.
    let plain = messages(
        r#"[{"role": "assistant", "content": "x", "tool_calls": [], "tool_call_id": null}]"#,
    );
    assert_eq!(plain.unwrap()[0].content, "x");
    for (json, field, says) in [
        (
            r#"[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]"#,
            "messages[0].content[0]",
            "image_url",
        ),
        (
            r#"[{"role": "robot", "content": "x"}]"#,
            "messages[0].role",
            "unknown role",
        ),
        (
            r#"[{"role": "user", "content": "x", "tool_calls": [{"function": {"name": "f"}}]}]"#,
            "messages[0].tool_calls",
            "only assistant turns",
        ),
        (
            r#"[{"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}]"#,
            "messages[0].tool_calls[0].function.arguments",
            "not JSON",
        ),
        (
            r#"[{"role": "assistant", "content": null, "function_call": {"name": "f"}}]"#,
            "messages[0].function_call",
            "send tool_calls",
        ),
        (
            r#"[{"role": "user", "content": 7}]"#,
            "[0].content",
            "a string or an array of content parts",
        ),
        ("[]", "messages", "empty"),
    ] {
        let e = messages(json).unwrap_err();
        assert_eq!(e.field, field, "{json}");
        assert!(e.message.contains(says), "{json}: {}", e.message);
    }
}

#[test]
fn wrong_types_name_their_field() {
    let v = serde_json::json!({"temperature": "hot"});
    let e = deserialize::<Options, _>(&v).unwrap_err();
    assert_eq!(e.field, "temperature");
    let v = serde_json::json!([{"role": 1, "content": "x"}]);
    let e = deserialize::<Vec<Message>, _>(&v).unwrap_err();
    assert_eq!(e.field, "[0].role");
    let e = deserialize_field::<Vec<Message>, _>("messages", &v).unwrap_err();
    assert_eq!(e.field, "messages[0].role");
    assert!(e.message.contains("'messages[0].role'"), "{}", e.message);
}

/// docs/js-api.md and docs/serve.md carry the table of every field's limits as [`FIELDS`]
/// renders it: change the table here, then paste `fields::markdown_table()` into both.
#[test]
fn the_docs_carry_the_fields_table() {
    let table = fields::markdown_table();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/");
    for doc in ["js-api.md", "serve.md"] {
        let text = std::fs::read_to_string(format!("{root}{doc}")).unwrap();
        assert!(
            text.contains(&table),
            "docs/{doc} lacks the request fields table as FIELDS renders it:\n{table}"
        );
    }
}

#[test]
fn structured_output_fields_become_the_grammar() {
    use crate::constraint::Grammar;
    let grammar = |json: &str| options(json).generate_params(&BOUNDS).unwrap().grammar;
    let object = Some(Grammar::JsonSchema(serde_json::json!({"type": "object"})));
    let schema = serde_json::json!({"type": "array", "maxItems": 2});
    let follows = Some(Grammar::JsonSchema(schema.clone()));
    assert_eq!(grammar(r#"{"response_format": {"type": "text"}}"#), None);
    assert_eq!(grammar(r#"{"grammar": "", "json_schema": null}"#), None);
    assert_eq!(
        grammar(r#"{"response_format": {"type": "json_object"}}"#),
        object
    );
    assert_eq!(grammar(r#"{"json_schema": {}}"#), object);
    let s = &schema;
    assert_eq!(grammar(&format!(r#"{{"json_schema": {s}}}"#)), follows);
    assert_eq!(
        grammar(&format!(
            r#"{{"response_format": {{"type": "json_object", "schema": {s}}}}}"#
        )),
        follows
    );
    assert_eq!(
        grammar(&format!(
            r#"{{"response_format": {{"type": "json_schema",
                "json_schema": {{"name": "pair", "strict": true, "schema": {s}}}}}}}"#
        )),
        follows
    );
    assert_eq!(
        grammar(r#"{"grammar": "start: \"yes\" | \"no\""}"#),
        Some(Grammar::Lark("start: \"yes\" | \"no\"".into()))
    );
    // llama.cpp's GBNF is converted; Lark that mentions `::=` stays Lark.
    assert_eq!(
        grammar(r##"{"grammar": "# yes or no\nroot ::= \"yes\" | \"no\""}"##),
        Some(Grammar::Lark(
            "start: \"y\" \"e\" \"s\" | \"n\" \"o\"\n".into()
        ))
    );
    assert_eq!(
        grammar(r#"{"grammar": "%llguidance {}\nroot ::= \"x\""}"#),
        Some(Grammar::Lark("%llguidance {}\nroot ::= \"x\"".into()))
    );
    assert_eq!(
        grammar(r#"{"grammar": "start: \"a ::= b\""}"#),
        Some(Grammar::Lark("start: \"a ::= b\"".into()))
    );
    // A schema too large to build is refused without being built.
    let huge = format!(
        r#"{{"json_schema": {{"enum": [{}0]}}}}"#,
        "0,".repeat(100_000)
    );
    let e = options(&huge).generate_params(&BOUNDS).unwrap_err();
    assert_eq!(e.field, "json_schema");
    assert!(e.message.contains("larger than"), "{}", e.message);
}
