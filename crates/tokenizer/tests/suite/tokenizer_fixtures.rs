//! Tokenization identical to llama.cpp on every fixture line, for both test models.

use tessera_testkit::*;

fn check(model: &str, fixture: &str) {
    let tok = tokenizer(model);
    let cases = tokenize_cases(fixture);
    assert!(
        cases.len() >= 20,
        "{fixture} has only {} lines",
        cases.len()
    );
    let mut failures = Vec::new();
    for c in &cases {
        let got = tok.encode(&c.text, true, true);
        if got != c.ids {
            failures.push(format!(
                "{:?} (parse_special):\n  want {:?}\n  got  {:?}",
                c.text, c.ids, got
            ));
        }
        let got = tok.encode(&c.text, true, false);
        if got != c.ids_no_parse_special {
            failures.push(format!(
                "{:?} (no parse_special):\n  want {:?}\n  got  {:?}",
                c.text, c.ids_no_parse_special, got
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn smollm2_matches_llama_cpp() {
    check(SMOLLM2, "tokenize_smollm2.jsonl");
}

#[test]
fn gemma3_matches_llama_cpp() {
    check(GEMMA3, "tokenize_gemma3.jsonl");
}
