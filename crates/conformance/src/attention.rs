//! Conformance cases of attention: windows, soft-capping, sinks, head sizes, a context shift,
//! against the CPU backend over several steps.

use std::collections::HashMap;

use tessera_core::backend::{KvLayerLayout, KvLayout};
use tessera_core::graph::{AttentionParams, GraphBuilder, RopeMode, RopeParams};
use tessera_core::weights::WeightId;

use crate::data::TABLE_ROWS;
use crate::harness::{check, step, w, Case};
use crate::UnderTest;

/// One attention case: head size, query and KV heads, and the options.
#[derive(Clone, Copy, Default)]
struct AttentionCase {
    hd: usize,
    n_head: usize,
    n_kv: usize,
    window: Option<usize>,
    softcap: Option<f32>,
    /// (after step, keep, discard): a context shift after the 40-token prefill.
    shift: Option<(usize, usize, usize)>,
    /// Rope frequency factors.
    factors: bool,
    /// Attention sinks (`sinks{n_head}`).
    sinks: bool,
}

fn heads(hd: usize, n_head: usize, n_kv: usize) -> AttentionCase {
    AttentionCase {
        hd,
        n_head,
        n_kv,
        ..AttentionCase::default()
    }
}

/// Attention over several steps (a prefill longer than one key tile, a decode step, a small
/// batch), with rope on q and k as the models do.
async fn attention_steps<U: UnderTest>(under_test: &U, c: AttentionCase) {
    let AttentionCase {
        hd,
        n_head,
        n_kv,
        window,
        softcap,
        shift,
        factors,
        sinks,
    } = c;
    let mut weights = vec![
        w(&format!("inp{}", hd * n_head), &[hd * n_head, TABLE_ROWS]),
        w(&format!("inp{}", hd * n_kv), &[hd * n_kv, TABLE_ROWS]),
        w(&format!("inp{}b", hd * n_kv), &[hd * n_kv, TABLE_ROWS]),
    ];
    weights.dedup();
    if factors {
        weights.push(w(&format!("factors{}", hd / 2), &[hd / 2]));
    }
    if sinks {
        weights.push(w(&format!("sinks{n_head}"), &[n_head]));
    }
    // `check` registers the weights in order: the sinks are the last, the factors before.
    let last = WeightId(weights.len() as u32 - 1);
    let rope = RopeParams {
        n_dims: hd,
        mode: RopeMode::Neox,
        freq_base: 10000.0,
        freq_scale: 1.0,
        freq_factors: factors.then(|| WeightId(last.0 - sinks as u32)),
        attn_factor: 1.0,
        yarn: None,
    };
    let params = AttentionParams {
        layer: 0,
        n_head,
        n_head_kv: n_kv,
        head_dim: hd,
        scale: 1.0 / (hd as f32).sqrt(),
        window,
        softcap,
        sinks: sinks.then_some(last),
    };
    let (qn, kn, vn) = (
        format!("inp{}", hd * n_head),
        format!("inp{}", hd * n_kv),
        format!("inp{}b", hd * n_kv),
    );
    let (q2, k2, v2) = (qn.clone(), kn.clone(), vn.clone());
    let build = move |b: &mut GraphBuilder, ids: &HashMap<String, WeightId>| {
        let t = b.n_tokens;
        let q = b.get_rows(ids[&q2]);
        let q = b.reshape(q, [hd, n_head, t, 1])?;
        let q = b.rope(q, rope)?;
        let k = b.get_rows(ids[&k2]);
        let k = b.reshape(k, [hd, n_kv, t, 1])?;
        let k = b.rope(k, rope)?;
        let v = b.get_rows(ids[&v2]);
        let v = b.reshape(v, [hd, n_kv, t, 1])?;
        b.attention(q, k, v, params)
    };
    let kv = KvLayout {
        n_ctx: 96,
        n_seq: 1,
        layers: vec![KvLayerLayout {
            n_head_kv: n_kv,
            head_dim_k: hd,
            head_dim_v: hd,
            rope,
        }],
    };
    let prefill: Vec<u32> = (0..70u32)
        .map(|i| (i * 13 + 5) % TABLE_ROWS as u32)
        .collect();
    let steps = match shift {
        None => vec![step(&prefill, 0), step(&[11], 70), step(&[3, 8, 60], 71)],
        // The shift comes after the 40-token prefill.
        Some((_, _, discard)) => vec![
            step(&prefill[..40], 0),
            step(&[11, 12], 40 - discard),
            step(&[9], 42 - discard),
        ],
    };
    check(under_test, Case {
        name: format!("attention hd{hd} h{n_head}/{n_kv} window {window:?} softcap {softcap:?} shift {shift:?} factors {factors} sinks {sinks}"),
        weights,
        kv: Some(kv),
        steps,
        shift,
        limit: 1e-5,
        build: &build,
    }).await;
}

pub async fn attention<U: UnderTest>(under_test: &U) {
    attention_steps(under_test, heads(64, 4, 2)).await;
    attention_steps(under_test, heads(64, 2, 2)).await;
}

pub async fn attention_sliding_window_and_softcap<U: UnderTest>(under_test: &U) {
    attention_steps(
        under_test,
        AttentionCase {
            window: Some(5),
            ..heads(64, 4, 1)
        },
    )
    .await;
    attention_steps(
        under_test,
        AttentionCase {
            window: Some(100),
            softcap: Some(4.0),
            ..heads(64, 4, 1)
        },
    )
    .await;
}

/// gpt-oss's sinks, alone and with a sliding window.
pub async fn attention_sinks<U: UnderTest>(under_test: &U) {
    attention_steps(
        under_test,
        AttentionCase {
            sinks: true,
            ..heads(64, 4, 2)
        },
    )
    .await;
    attention_steps(
        under_test,
        AttentionCase {
            sinks: true,
            window: Some(5),
            ..heads(64, 4, 1)
        },
    )
    .await;
}

pub async fn attention_head_dim_256<U: UnderTest>(under_test: &U) {
    attention_steps(under_test, heads(256, 2, 1)).await;
}

pub async fn attention_after_context_shift<U: UnderTest>(under_test: &U) {
    // After the 40-token prefill: keep 4, discard 10, then continue at position 30.
    let shifted = AttentionCase {
        shift: Some((0, 4, 10)),
        ..heads(64, 4, 2)
    };
    attention_steps(under_test, shifted).await;
    // Rope frequency factors (Llama 3) in the keys' re-rotation too.
    attention_steps(
        under_test,
        AttentionCase {
            factors: true,
            ..shifted
        },
    )
    .await;
}
