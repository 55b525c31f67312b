//! Several sequences decoded together in one batch (continuous batching) must each get,
//! bit for bit, the logits they get decoded alone: prompts of different lengths, prefill
//! slices beside single decode tokens, parts straddling micro-batches, and a sliding-window
//! model. Also: the other sequences' caches are untouched by one's truncation, and bad
//! requests are refused before anything is decoded.

use tessera_core::{EngineError, SeqTokens};
use tessera_testkit::*;

/// Every position's logits of `tokens` decoded alone (one sequence, one batch).
fn alone(model: &std::sync::Arc<tessera_core::Model>, tokens: &[u32]) -> Vec<Vec<f32>> {
    let mut ctx = context(model, 128, 512, 2);
    ctx.decode(tokens, true).unwrap();
    let n_vocab = model.n_vocab();
    ctx.all_logits()
        .chunks_exact(n_vocab)
        .map(<[f32]>::to_vec)
        .collect()
}

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// Three sequences (token lists of different lengths), decoded in rounds: each round every
/// unfinished sequence appends its next chunk (`chunk(seq, round)` tokens), all in one call.
fn check(model_file: &str, n_batch: usize) {
    let model = load_model(model_file);
    let tok = model.tokenizer();
    let texts = [
        "The quick brown fox jumps over the lazy dog, and then",
        "Once upon a time",
        "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18",
    ];
    let seqs: Vec<Vec<u32>> = texts.iter().map(|t| tok.encode(t, true, true)).collect();
    let reference: Vec<_> = seqs.iter().map(|s| alone(&model, s)).collect();
    // Sequence 0 prefills whole then decodes one token a round, 1 goes 3 at a time, and 2
    // joins at round 2 with slices of 7: prefill slices beside decode tokens.
    let chunk = |seq: usize, round: usize| match (seq, round) {
        (0, 0) => 12,
        (0, _) => 1,
        (1, _) => 3,
        (2, 0 | 1) => 0,
        (2, _) => 7,
        _ => unreachable!(),
    };
    let mut ctx = multi_context(&model, 128, n_batch, 2, 3);
    let mut done = [0usize; 3];
    for round in 0.. {
        let spans: Vec<(usize, std::ops::Range<usize>)> = (0..3)
            .filter_map(|s| {
                let to = (done[s] + chunk(s, round)).min(seqs[s].len());
                (to > done[s]).then(|| (s, done[s]..to))
            })
            .collect();
        if spans.is_empty() {
            break;
        }
        let parts: Vec<SeqTokens> = spans
            .iter()
            .map(|(s, r)| SeqTokens {
                seq: *s,
                tokens: &seqs[*s][r.clone()],
                logits: true,
            })
            .collect();
        ctx.decode_together(&parts).unwrap();
        for (s, r) in &spans {
            assert!(
                same_bits(ctx.seq_logits(*s), &reference[*s][r.end - 1]),
                "{model_file} (n_batch {n_batch}): sequence {s} at position {} differs \
                 from the sequence alone",
                r.end - 1
            );
            done[*s] = r.end;
        }
    }
    for (s, tokens) in seqs.iter().enumerate() {
        assert_eq!(ctx.seq_tokens(s), &tokens[..]);
    }
    // Truncating one sequence and decoding its tail again (alone, through the
    // single-sequence calls) gives its logits again and leaves the others' caches intact.
    ctx.select(1).unwrap();
    ctx.truncate(2);
    ctx.decode(&seqs[1][2..], false).unwrap();
    assert!(same_bits(ctx.logits(), reference[1].last().unwrap()));
    ctx.select(0).unwrap();
    ctx.truncate(seqs[0].len() - 1);
    let parts = [
        SeqTokens {
            seq: 0,
            tokens: &seqs[0][seqs[0].len() - 1..],
            logits: true,
        },
        SeqTokens {
            seq: 1,
            tokens: &[42],
            logits: true,
        },
    ];
    ctx.decode_together(&parts).unwrap();
    assert!(same_bits(ctx.logits(), reference[0].last().unwrap()));
    let mut extended = seqs[1].clone();
    extended.push(42);
    assert!(same_bits(
        ctx.seq_logits(1),
        alone(&model, &extended).last().unwrap()
    ));
}

#[test]
fn sequences_together_get_their_logits_alone_smollm2() {
    check(SMOLLM2, 512);
    // Micro-batches of 5: parts straddle them, some micro-batches want no logits.
    check(SMOLLM2, 5);
}

#[test]
fn sequences_together_get_their_logits_alone_gemma3() {
    // Gemma 3: sliding-window layers beside global ones, its own rope per layer kind.
    check(GEMMA3, 512);
}

#[test]
fn bad_parts_are_refused_before_decoding() {
    let model = load_model(SMOLLM2);
    let mut ctx = multi_context(&model, 16, 512, 1, 2);
    let part = |seq, tokens| SeqTokens {
        seq,
        tokens,
        logits: true,
    };
    let cases: [&[SeqTokens]; 5] = [
        &[],
        &[part(0, &[1]), part(0, &[2])],
        &[part(0, &[1]), part(2, &[2])],
        &[part(0, &[1]), part(1, &[])],
        &[part(0, &[1]), part(1, &[7; 17])],
    ];
    for parts in cases {
        let err = ctx.decode_together(parts).unwrap_err();
        assert!(
            matches!(
                err,
                EngineError::InvalidArgument(_) | EngineError::ContextFull { .. }
            ),
            "{err}"
        );
    }
    let bad = [part(0, &[1]), part(1, &[u32::MAX])];
    assert!(matches!(
        ctx.decode_together(&bad),
        Err(EngineError::BadToken { .. })
    ));
    assert!(ctx.seq_tokens(0).is_empty() && ctx.seq_tokens(1).is_empty());
    assert!(ctx.select(2).is_err());
}
