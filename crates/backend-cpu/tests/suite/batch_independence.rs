//! A token's logits must be bit-identical whether it is decoded alone, inside a batch, split
//! into micro-batches of any size, or on any number of threads (speculative decoding relies
//! on it). Checked on both test models.

use tessera_testkit::*;

fn check(model_file: &str, prompt: &[u32]) {
    let model = load_model(model_file);
    let n_vocab = model.n_vocab();
    // Reference: one token at a time, one thread.
    let mut one = context(&model, 64, 512, 1);
    let mut stepwise = Vec::new();
    for &t in prompt {
        one.decode(&[t], false).unwrap();
        stepwise.extend_from_slice(one.logits());
    }
    for (n_batch, threads) in [(512, 2), (3, 2), (5, 1)] {
        let mut ctx = context(&model, 64, n_batch, threads);
        ctx.decode(prompt, true).unwrap();
        let all = ctx.all_logits();
        assert_eq!(all.len(), prompt.len() * n_vocab);
        for i in 0..prompt.len() {
            let (a, b) = (
                &all[i * n_vocab..(i + 1) * n_vocab],
                &stepwise[i * n_vocab..(i + 1) * n_vocab],
            );
            let same = a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
            assert!(
                same,
                "{model_file}: position {i} differs (n_batch {n_batch}, {threads} threads)"
            );
        }
        assert_eq!(ctx.logits(), &stepwise[(prompt.len() - 1) * n_vocab..]);
        // Keeping the last rows only (perplexity's scored half): the same rows, bit for bit,
        // also when they start inside a micro-batch.
        let n_kept = 4;
        ctx.clear();
        ctx.decode_keeping_last(prompt, n_kept).unwrap();
        let kept = &stepwise[(prompt.len() - n_kept) * n_vocab..];
        assert!(
            ctx.all_logits()
                .iter()
                .zip(kept)
                .all(|(x, y)| x.to_bits() == y.to_bits())
                && ctx.all_logits().len() == kept.len(),
            "{model_file}: the last {n_kept} rows differ (n_batch {n_batch})"
        );
        assert_eq!(ctx.logits(), &stepwise[(prompt.len() - 1) * n_vocab..]);
    }
    // Keeping no rows, or more rows than tokens, is refused.
    let mut ctx = context(&model, 64, 512, 2);
    for n_kept in [0, prompt.len() + 1] {
        assert!(matches!(
            ctx.decode_keeping_last(prompt, n_kept),
            Err(tessera_core::EngineError::InvalidArgument(_))
        ));
    }
    assert_eq!(ctx.n_past(), 0);
    // Truncation and re-decoding reproduce the same logits.
    let mut ctx = context(&model, 64, 512, 2);
    ctx.decode(prompt, false).unwrap();
    ctx.truncate(3);
    assert_eq!(ctx.n_past(), 3);
    ctx.decode(&prompt[3..], false).unwrap();
    assert_eq!(ctx.logits(), &stepwise[(prompt.len() - 1) * n_vocab..]);
}

#[test]
fn smollm2_logits_do_not_depend_on_batching() {
    check(SMOLLM2, &[504, 3575, 282, 4649, 314, 7042, 30, 198, 504]);
}

#[test]
fn gemma3_logits_do_not_depend_on_batching() {
    check(GEMMA3, &[2, 818, 5279, 529, 7001, 563, 9079, 236761, 108]);
}

/// A context reused after `clear` gives the logits of a fresh one.
#[test]
fn cleared_context_matches_a_fresh_one() {
    let model = load_model(SMOLLM2);
    let a: &[u32] = &[1604, 3987, 46477, 24, 94, 727, 198, 198, 1604];
    let b: &[u32] = &[504, 3575, 282, 4649, 314];
    let mut fresh = context(&model, 64, 512, 2);
    fresh.decode(b, false).unwrap();
    let mut reused = context(&model, 64, 512, 2);
    reused.decode(a, false).unwrap();
    reused.decode(&[7042], false).unwrap();
    reused.clear();
    reused.decode(b, false).unwrap();
    assert_eq!(fresh.logits(), reused.logits());
    assert_eq!(reused.tokens(), b);
}
