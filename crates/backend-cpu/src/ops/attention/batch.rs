//! The attention op over a batch: its (token, head) rows cut into work items (tokens × heads
//! of one KV head) that the thread pool's tasks take, each walked by [`attend_rows`].

use super::{attend_rows, AttentionKernel, QueryRow, RowGroup, MAX_ROWS};
use crate::kv_cache::LayerKv;
use crate::parallel::SharedOut;
use tessera_core::graph::AttentionParams;
use tessera_core::threading::ThreadPool;

/// Consecutive tokens whose rows walk the keys together (their causal ranges differ by at
/// most this many keys, the only keys computed for nothing).
const TOKEN_BLOCK: usize = 4;

/// Attention for `T` query tokens at positions `pos0 ..` (their keys and values already in
/// `kv`): q `[head_dim, n_head, T]` → out `[head_dim_v * n_head, T]`; `sinks` are the
/// `n_head` sink logits of `p.sinks`.
#[allow(clippy::too_many_arguments)] // the op's operands, parameters and kernel choice
pub fn attention(
    pool: &dyn ThreadPool,
    q: &[f32],
    kv: &LayerKv,
    pos0: usize,
    p: &AttentionParams,
    sinks: Option<&[f32]>,
    kernel: AttentionKernel,
    out: &mut [f32],
) {
    let n_tokens = q.len() / (p.head_dim * p.n_head);
    let segment = AttentionSegment {
        kv,
        row0: 0,
        n_tokens,
        pos0,
    };
    attention_segments(pool, q, &[segment], p, sinks, kernel, out);
}

/// One sequence's query tokens in a batch of several: `n_tokens` tokens from token `row0`
/// on, at positions `pos0 ..`, attending over that sequence's cache `kv`.
#[derive(Clone, Copy)]
pub struct AttentionSegment<'a> {
    pub kv: &'a LayerKv,
    pub row0: usize,
    pub n_tokens: usize,
    pub pos0: usize,
}

/// [`attention`] for a batch of several sequences' tokens (q and out hold all of them, in
/// segment order), in one pass over the thread pool. Every (token, head) row is computed alone
/// against its own sequence's keys, so each row is what [`attention`] gives its sequence alone.
pub fn attention_segments(
    pool: &dyn ThreadPool,
    q: &[f32],
    segments: &[AttentionSegment],
    p: &AttentionParams,
    sinks: Option<&[f32]>,
    kernel: AttentionKernel,
    out: &mut [f32],
) {
    let group = p.n_head / p.n_head_kv;
    let (tokens, heads) = item_shape(segments, group, p.n_head_kv, pool.n_threads());
    let chunks = group.div_ceil(heads);
    let per_block = p.n_head_kv * chunks;
    let n_items = item_count(segments, tokens, per_block);
    let shared = SharedOut::new(out);
    // One task per item, the last tokens (the most keys) first, so that the threads finish
    // together.
    pool.run(n_items, &|task| {
        let mut item = n_items - 1 - task;
        let mut seg = &segments[0];
        for s in segments {
            seg = s;
            let n = s.n_tokens.div_ceil(tokens) * per_block;
            if item < n {
                break;
            }
            item -= n;
        }
        let (t0, rest) = ((item / per_block) * tokens, item % per_block);
        let (kv_head, chunk) = (rest / chunks, rest % chunks);
        let h0 = kv_head * group + chunk * heads;
        let h1 = (h0 + heads).min((kv_head + 1) * group);
        let mut rows = [QueryRow::default(); MAX_ROWS];
        let mut n = 0;
        for t in t0..(t0 + tokens).min(seg.n_tokens) {
            let pos = seg.pos0 + t;
            let lo = match p.window {
                Some(w) => (pos + 1).saturating_sub(w),
                None => 0,
            };
            for h in h0..h1 {
                rows[n] = QueryRow {
                    row: (seg.row0 + t) * p.n_head + h,
                    lo,
                    hi: pos,
                    sink: sinks.map(|s| s[h]),
                };
                n += 1;
            }
        }
        attend_rows(&RowGroup {
            q,
            rows: &rows[..n],
            kv: seg.kv,
            kv_head,
            scale: p.scale,
            softcap: p.softcap,
            out: &shared,
            kernel,
        });
    });
}

/// The work item of [`attention_segments`]: `tokens` consecutive tokens (of one segment) ×
/// `heads` heads of one KV head, at most [`MAX_ROWS`] rows. The largest items run the most
/// rows per pass over the keys, which is cheapest per row (each key's steps are a serial chain
/// that several rows overlap); where that leaves too few items to keep every thread busy
/// (decoding, speculative verify batches), smaller ones are tried, halving tokens then heads,
/// and the shape whose estimated finishing time ([`makespan`]) is least is taken.
fn item_shape(
    segments: &[AttentionSegment],
    group: usize,
    n_head_kv: usize,
    n_threads: usize,
) -> (usize, usize) {
    let n_tokens: usize = segments.iter().map(|s| s.n_tokens).sum();
    let mut heads = group.min(MAX_ROWS);
    let mut tokens = (MAX_ROWS / heads).min(TOKEN_BLOCK).min(n_tokens).max(1);
    // Each item's rows: per segment, its token chunks × each KV head's head chunks.
    let item_rows = |tokens: usize, heads: usize| {
        let mut rows = Vec::new();
        for s in segments {
            for t0 in (0..s.n_tokens).step_by(tokens) {
                let nt = tokens.min(s.n_tokens - t0);
                for h0 in (0..group).step_by(heads) {
                    let nh = heads.min(group - h0);
                    rows.extend(std::iter::repeat_n(nt * nh, n_head_kv));
                }
            }
        }
        rows
    };
    let few = |n_items: usize| n_items < 4 * n_threads;
    if !few(item_count(
        segments,
        tokens,
        n_head_kv * group.div_ceil(heads),
    )) {
        return (tokens, heads);
    }
    let mut rows = item_rows(tokens, heads);
    let mut best = ((tokens, heads), makespan(&rows, n_threads));
    while few(rows.len()) && tokens * heads > 1 {
        if tokens > 1 {
            tokens = tokens.div_ceil(2);
        } else {
            heads = heads.div_ceil(2);
        }
        rows = item_rows(tokens, heads);
        let time = makespan(&rows, n_threads);
        if time < best.1 {
            best = ((tokens, heads), time);
        }
    }
    best.0
}

/// Items of `tokens` tokens, `per_block` of them per token chunk.
fn item_count(segments: &[AttentionSegment], tokens: usize, per_block: usize) -> usize {
    segments
        .iter()
        .map(|s| s.n_tokens.div_ceil(tokens))
        .sum::<usize>()
        * per_block
}

/// Estimated time for items of `rows` query rows each on `n_threads` threads, modelled as each
/// thread taking the largest item left when it frees (the pool's threads claim the next item
/// as they free; a decode step's items differ only in rows). An item's cost per key is
/// `1 + rows` units: a fixed part (one row's serial chain) and a part per row. Measured per key
/// (`attention_cpu_time`, ggml's kernel): SmolLM2's heads of 64, 1/2/3 rows 32/46/74 ns;
/// Gemma 3's heads of 256, 1/2/4 rows 103/189/273 ns.
fn makespan(rows: &[usize], n_threads: usize) -> usize {
    let mut costs: Vec<usize> = rows.iter().map(|r| 1 + r).collect();
    costs.sort_unstable_by(|a, b| b.cmp(a));
    let mut load = vec![0usize; n_threads.max(1)];
    for c in costs {
        let least = load.iter_mut().min().expect("one thread at least");
        *least += c;
    }
    load.into_iter().max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::attention::tests::layer;
    // In Node, under wasm-bindgen-test (`cargo test --target wasm32-unknown-unknown`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// Decode's items as the cost estimate orders them, and prompts at the largest shape.
    #[test]
    fn item_shapes_follow_the_cost_estimate() {
        let kv = layer(8, 1, 64);
        let seg = |n_tokens| AttentionSegment {
            kv: &kv,
            row0: 0,
            n_tokens,
            pos0: 0,
        };
        // SmolLM2 (3 KV heads of 3): whole groups (pairs and singles tie on 2 threads, and the
        // larger items are kept), and on 1 thread.
        assert_eq!(item_shape(&[seg(1)], 3, 3, 2), (1, 3));
        assert_eq!(item_shape(&[seg(1)], 3, 3, 1), (1, 3));
        // Still whole groups on 4 threads (3 items), one head per item on 16 (9 items).
        assert_eq!(item_shape(&[seg(1)], 3, 3, 4), (1, 3));
        assert_eq!(item_shape(&[seg(1)], 3, 3, 16), (1, 1));
        // Gemma 3 (1 KV head of 4): 2 heads per item on 2 threads, all 4 on 1.
        assert_eq!(item_shape(&[seg(1)], 4, 1, 2), (1, 2));
        assert_eq!(item_shape(&[seg(1)], 4, 1, 1), (1, 4));
        // A prompt has items enough at the largest shape.
        assert_eq!(item_shape(&[seg(512)], 3, 3, 2), (4, 3));
        // Largest first onto the least loaded thread.
        assert_eq!(makespan(&[3, 1, 3, 1, 3, 1], 2), 4 + 4 + 2);
        assert_eq!(makespan(&[4], 3), 5);
    }
}
