//! Constrained decoding on SmolLM2 and Gemma 3: answers follow the JSON schema, regular
//! expression or Lark grammar asked for, greedy and sampled; grammars that cannot be compiled
//! are refused with a message naming why; llama.cpp's GBNF grammars, converted, are followed too.

use tessera_testkit::*;

use serde_json::{json, Value};
use tessera_core::sampling::SamplingParams;
use tessera_runtime::constraint::{gbnf_to_lark, Constraint, Grammar, GrammarEnv, Guide};
use tessera_runtime::generate::{
    generate, tokenize_chat, GenerateError, GenerateParams, NoClock, StopReason,
};
use tessera_tokenizer::ChatMessage;

fn params(grammar: Grammar, temperature: f32, seed: u64) -> GenerateParams {
    GenerateParams {
        max_tokens: Some(96),
        sampling: SamplingParams {
            temperature,
            seed,
            ..SamplingParams::default()
        },
        stop: vec![],
        ignore_eos: false,
        grammar: Some(grammar),
    }
}

/// The answer to `question` under `p` on `model`, and why it ended.
fn answer(model: &str, question: &str, p: &GenerateParams) -> (String, StopReason) {
    let model = load_model(model);
    let template = model.chat_template().unwrap().unwrap();
    let chat = [ChatMessage::new("user", question)];
    let prompt = tokenize_chat(model.tokenizer(), &template, &chat).unwrap();
    let mut ctx = context(&model, 512, 512, 2);
    let mut text = String::new();
    let stats = generate(&mut ctx, &prompt, p, &NoClock, &mut |t| {
        text.push_str(t);
        true
    })
    .expect("generate");
    (text, stats.stop)
}

fn person_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 20},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "city": {"enum": ["Paris", "Berlin", "Rome"]}
        },
        "required": ["name", "age", "city"],
        "additionalProperties": false
    })
}

/// The checks of [`person_schema`], by hand (the complete answer is valid JSON of its shape).
fn check_person(text: &str) {
    let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text:?}"));
    let o = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {text:?}"));
    assert_eq!(o.len(), 3, "{text:?}");
    assert!(
        o["name"].as_str().is_some_and(|s| s.chars().count() <= 20),
        "{text:?}"
    );
    assert!(o["age"].as_u64().is_some_and(|a| a <= 150), "{text:?}");
    assert!(
        ["Paris", "Berlin", "Rome"].contains(&o["city"].as_str().unwrap()),
        "{text:?}"
    );
}

#[test]
fn answers_follow_a_json_schema_greedy_and_sampled() {
    let question = "Describe a person who lives in a capital city, as JSON.";
    let mut complete = 0;
    for model in [SMOLLM2, GEMMA3] {
        for (temperature, seed) in [(0.0, 0), (1.0, 1), (1.0, 2), (1.0, 3)] {
            let p = params(Grammar::JsonSchema(person_schema()), temperature, seed);
            let (text, stop) = answer(model, question, &p);
            // A sampled name may run to the token limit; a finished answer must be valid.
            if stop == StopReason::MaxTokens {
                continue;
            }
            assert!(
                matches!(
                    stop,
                    StopReason::EndOfGeneration(_) | StopReason::GrammarComplete
                ),
                "{model} t={temperature}: {stop:?} {text:?}"
            );
            check_person(&text);
            complete += 1;
        }
    }
    assert!(complete >= 6, "only {complete} of 8 answers finished");
}

#[test]
fn answers_follow_a_regex_and_a_lark_grammar() {
    let p = params(Grammar::Regex("[0-9]{3}-[0-9]{4}".into()), 1.0, 7);
    let (text, stop) = answer(SMOLLM2, "Give me a phone number.", &p);
    assert_eq!(stop, StopReason::GrammarComplete, "{text:?}");
    assert_eq!(text.len(), 8, "{text:?}");
    assert!(text.chars().enumerate().all(|(i, c)| if i == 3 {
        c == '-'
    } else {
        c.is_ascii_digit()
    }));

    let lark = r#"start: "The answer is " ANSWER "."
ANSWER: "yes" | "no""#;
    let p = params(Grammar::Lark(lark.into()), 0.0, 0);
    let (text, _) = answer(SMOLLM2, "Is Paris in France?", &p);
    assert!(
        ["The answer is yes.", "The answer is no."].contains(&text.as_str()),
        "{text:?}"
    );
}

#[test]
fn grammars_that_cannot_compile_are_refused_by_name() {
    let model = load_model(SMOLLM2);
    let mut ctx = context(&model, 64, 64, 1);
    let prompt = model.tokenizer().encode("Hi", true, false);
    let mut refuse = |grammar: Grammar| -> String {
        let p = params(grammar, 0.0, 0);
        match generate(&mut ctx, &prompt, &p, &NoClock, &mut |_| true) {
            Err(GenerateError::Grammar(e)) => e.to_string(),
            other => panic!("{other:?}"),
        }
    };
    let unsupported = json!({"type": "object", "dependentRequired": {"a": ["b"]}});
    assert!(refuse(Grammar::JsonSchema(unsupported)).contains("dependentRequired"));
    assert!(refuse(Grammar::JsonSchema(
        json!({"type": "string", "format": "ipv9"})
    ))
    .contains("ipv9"));
    assert!(!refuse(Grammar::Lark("start: (".into())).is_empty());
    assert!(!refuse(Grammar::Regex("[a-".into())).is_empty());
}

#[test]
fn answers_follow_llama_cpp_gbnf_grammars() {
    let gbnf = |name: &str| {
        let path = format!("{}/tests/data/gbnf/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(path).unwrap();
        Grammar::Lark(gbnf_to_lark(&text).unwrap())
    };
    let question = "Describe a person who lives in a capital city, as JSON.";
    let mut complete = 0;
    for model in [SMOLLM2, GEMMA3] {
        for (temperature, seed) in [(0.0, 0), (1.0, 1)] {
            let p = params(gbnf("json.gbnf"), temperature, seed);
            let (text, stop) = answer(model, question, &p);
            if stop == StopReason::MaxTokens {
                continue;
            }
            let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text:?}"));
            assert!(v.is_object(), "{model}: {text:?}");
            complete += 1;
        }
    }
    // Small models ramble on in JSON; SmolLM2's greedy answer closes its object.
    assert!(complete >= 1, "none of 4 answers finished");

    let yes_no = r#"root ::= answer "."
answer ::= "yes" | "no""#;
    let p = params(Grammar::Lark(gbnf_to_lark(yes_no).unwrap()), 0.0, 0);
    let (text, stop) = answer(SMOLLM2, "Is Paris in France?", &p);
    assert!(["yes.", "no."].contains(&text.as_str()), "{text:?}");
    assert_eq!(stop, StopReason::GrammarComplete);

    let p = params(gbnf("list.gbnf"), 1.0, 5);
    let (text, _) = answer(GEMMA3, "List three fruits.", &p);
    assert!(text.starts_with("- "), "{text:?}");
}

/// llama.cpp's JSON-schema cases (its tests/test-json-schema-to-grammar.cpp, as data): each
/// schema compiles, or is refused with a message naming what is not supported, as recorded
/// (the cases where llguidance and llama.cpp differ say why in the data).
#[test]
fn llama_cpp_schema_cases_are_accepted_or_refused_as_recorded() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/json_schema_peer_cases.json"
    );
    let data: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let model = load_model(SMOLLM2);
    let env = GrammarEnv::for_model(&model).unwrap();
    let cases = data["cases"].as_array().unwrap();
    assert!(cases.len() >= 80, "{} cases", cases.len());
    let mut wrong = Vec::new();
    for case in cases {
        let line = &case["line"];
        let got = Constraint::new(&env, &Grammar::JsonSchema(case["schema"].clone()));
        let want = case["llguidance"].as_str().unwrap();
        match (&got, want) {
            (Ok(_), "accepted") => {}
            (Err(e), w) if w.starts_with("refused") => {
                let names = case["refusal_names"].as_str().unwrap_or("");
                if !e.0.contains(names) {
                    wrong.push(format!("line {line}: {e} does not name {names:?}"));
                }
            }
            (got, want) => wrong.push(format!(
                "line {line}: got {:?}, recorded {want}",
                got.as_ref().err()
            )),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A lazy grammar leaves the text free until the answer writes its trigger, and constrains
/// what follows it, including the part of the trigger's token past the trigger.
#[test]
fn a_lazy_grammar_starts_at_its_trigger() {
    let model = load_model(SMOLLM2);
    let tok = model.tokenizer();
    let grammar = Grammar::Lazy {
        trigger: "<tool_call>".into(),
        then: Box::new(Grammar::Lark(r#"start: "{\"a\": 1}""#.into())),
    };
    let mut guide = Guide::new(GrammarEnv::for_model(&model).unwrap(), &grammar).unwrap();
    for t in tok.encode("Let me check. <tool_call", false, false) {
        assert!(guide.allowed().unwrap().is_none());
        guide.commit(t, tok).unwrap();
    }
    for t in tok.encode(">{\"", false, false) {
        guide.commit(t, tok).unwrap();
    }
    let mask = guide.allowed().unwrap().expect("the grammar started");
    let allowed = |text: &str| {
        let id = tok.encode(text, false, false)[0];
        mask[id as usize / 32] >> (id % 32) & 1 == 1
    };
    assert!(allowed("a") && !allowed("Hello") && !allowed("b"));
}

/// A model whose template writes Hermes-style calls (Qwen 2.5's template, on SmolLM2's
/// vocabulary): with a call required, the answer is only calls, in the template's syntax, with
/// arguments that follow the tool's schema, and it reads back as the call.
#[cfg(feature = "serde")]
#[test]
fn required_calls_in_the_hermes_syntax() {
    use tessera_runtime::chat_output::whole;
    use tessera_runtime::request::{prepare_chat, Options};
    use tessera_tokenizer::chat_template::ChatTemplate;

    let model = load_model(SMOLLM2);
    let source =
        std::fs::read_to_string(models_dir().join("templates/Qwen-Qwen2.5-7B-Instruct.jinja"))
            .unwrap();
    let template = ChatTemplate::new(&source, "", "<|im_end|>").unwrap();
    let options: Options = serde_json::from_value(json!({
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
            "required": ["city"], "additionalProperties": false}}}],
        "tool_choice": "required",
    }))
    .unwrap();
    let messages = vec![ChatMessage::new("user", "What is the weather in Paris?")];
    let prepared = prepare_chat(&options, model.tokenizer(), &template, messages).unwrap();
    let grammar = prepared.grammar.expect("a required call has a grammar");
    let mut ctx = context(&model, 1024, 512, 2);
    let mut text = String::new();
    let p = GenerateParams {
        max_tokens: Some(96),
        grammar: Some(grammar),
        ..params(Grammar::Regex(String::new()), 0.0, 0)
    };
    generate(&mut ctx, &prepared.prompt, &p, &NoClock, &mut |t| {
        text.push_str(t);
        true
    })
    .unwrap();
    assert!(
        text.starts_with("<tool_call>") && text.trim_end().ends_with("</tool_call>"),
        "{text:?}"
    );
    let (format, parse) = prepared.output.expect("tools are read back");
    let out = whole(&format, &parse, &text, |i| format!("call_{i}"));
    assert_eq!(out.tool_calls.len(), 1, "{out:?}");
    assert_eq!(out.tool_calls[0].name, "get_weather");
    let args: Value = serde_json::from_str(&out.tool_calls[0].arguments).unwrap();
    assert!(args["city"].is_string(), "{args}");
}
