//! Perplexity on /usr/share/common-licenses/GPL-3 with llama-perplexity's method, within 0.5 % of
//! llama.cpp's figures in the fixtures README (-c 128 here; -c 512 in the ignored tests).

use tessera_testkit::*;

use tessera_runtime::perplexity::{perplexity, tokenize_for_perplexity};

const GPL3: &str = "/usr/share/common-licenses/GPL-3";

fn check(model_file: &str, n_ctx: usize, want: f64) {
    let text = std::fs::read_to_string(GPL3).unwrap_or_else(|e| panic!("{GPL3}: {e}"));
    let model = load_model(model_file);
    let tokens = tokenize_for_perplexity(model.tokenizer(), &text);
    let mut ctx = context(&model, n_ctx, n_ctx.min(512), 2);
    let r = perplexity(&mut ctx, &tokens, None, &mut |_, _, _| {}).expect("perplexity");
    let rel = (r.ppl - want).abs() / want;
    eprintln!(
        "{model_file} -c {n_ctx}: {} tokens, {} chunks, PPL = {:.4} +/- {:.5} (llama.cpp {want}, {:+.3} %)",
        r.n_tokens,
        r.n_chunks,
        r.ppl,
        r.uncertainty.unwrap_or(f64::NAN),
        100.0 * (r.ppl - want) / want
    );
    assert_eq!(r.acc.count, r.n_chunks * (n_ctx - n_ctx / 2 - 1));
    assert!(
        rel < 0.005,
        "{model_file} -c {n_ctx}: PPL {:.4} is {:.2} % from llama.cpp's {want}",
        r.ppl,
        100.0 * rel
    );
    let u = r.uncertainty.expect("positive variance");
    assert!(u > 0.0 && u < r.ppl / 5.0, "uncertainty {u}");
}

#[test]
fn smollm2_gpl3_c128() {
    check(SMOLLM2, 128, 24.2765);
}

#[test]
fn gemma3_gpl3_c128() {
    check(GEMMA3, 128, 18.4277);
}

#[test]
#[ignore = "slow: run with --ignored"]
fn smollm2_gpl3_c512() {
    check(SMOLLM2, 512, 18.3914);
}

#[test]
#[ignore = "slow: run with --ignored"]
fn gemma3_gpl3_c512() {
    check(GEMMA3, 512, 13.8920);
}

#[test]
fn too_short_text_is_a_typed_error() {
    let model = load_model(SMOLLM2);
    let tokens = tokenize_for_perplexity(model.tokenizer(), "far too short");
    let mut ctx = context(&model, 128, 128, 1);
    let err = perplexity(&mut ctx, &tokens, None, &mut |_, _, _| {}).unwrap_err();
    assert!(
        matches!(
            err,
            tessera_runtime::perplexity::PerplexityError::TooFewTokens { n_ctx: 128, .. }
        ),
        "{err}"
    );
}
