//! f32 attention in tiles of keys ([`AttentionKernel::F32Tiled`](super::AttentionKernel)): the
//! arithmetic of llama.cpp's CPU path for prompt batches (`flash_attn_ext_tiled`, taken there
//! from 64 queries on): q stays f32, K and V are widened from the f16 cache, and the scores,
//! the online softmax and the V accumulator are f32.
//!
//! The softmax state moves once per tile of [`KV_TILE`] keys, the tiles at fixed positions of
//! the cache (`0..64`, `64..128`, ...), and inside a tile each row takes only its own keys, in
//! key order; a score is [`LANE_SUMS`] chains of fused multiply-adds over the head's elements
//! added in a fixed order, an accumulator element one chain over the keys. So a row gets the
//! same bits alone, in any row group or batch, and on every instruction set. (llama.cpp switches between this and
//! its f16 path by batch size; here the choice is per model, see `CpuBackend`.)
//!
//! A row group shares each tile's keys and values, widened to f32 once. The score's lanes are
//! one 512-bit register's worth, whatever the vector width.

use std::cell::Cell;

use super::{expf, RowGroup, MAX_ROWS};
use tessera_quant::isa::Simd;

/// Keys per tile: the softmax state is rescaled at most once per tile.
pub const KV_TILE: usize = 64;

/// Accumulator vectors per row updated together by the V pass (a column block).
const V_VECS: usize = 4;

/// Keys widened together for the scores: 16 keys of a 256-wide head are 16 KiB, in L1.
const K_CHUNK: usize = 16;

thread_local! {
    /// The widened K and V tiles of the current row group (kept between calls).
    static SCRATCH: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
}

/// The f32 tiled kernel, dispatched by [`super::attend_rows`].
pub(crate) struct TiledRows;

impl super::RowKernel for TiledRows {
    #[inline(always)]
    fn attend<S: Simd>(s: S, group: &RowGroup) {
        attend_rows_tiled_on(s, group);
    }
}

/// The kernel on the vectors of `s` (bit-identical on every instruction set).
#[inline(always)]
pub(crate) fn attend_rows_tiled_on<S: Simd>(s: S, group: &RowGroup) {
    let RowGroup {
        q,
        rows,
        kv,
        kv_head,
        softcap,
        out,
        ..
    } = *group;
    let scale = group.score_scale();
    let hd = kv.layout.head_dim_k;
    let dv = kv.layout.head_dim_v;
    let (ks, vs) = (kv.k_stride(), kv.v_stride());
    let n = rows.len();
    assert!(n <= MAX_ROWS);
    let Some((lo, hi)) = group.keys() else {
        return;
    };
    let mut scratch = SCRATCH.take();
    // Only the accumulators need zeros: keys and values are written before use.
    scratch.resize(K_CHUNK * hd + KV_TILE * dv + n * dv, 0.0);
    let (kw, rest) = scratch.split_at_mut(K_CHUNK * hd);
    let (vt, acc) = rest.split_at_mut(KV_TILE * dv);
    let acc = &mut acc[..n * dv];
    acc.fill(0.0);
    let mut sum = [0.0f32; MAX_ROWS];
    let mut max = [f32::NEG_INFINITY; MAX_ROWS];
    let mut p = [[0.0f32; KV_TILE]; MAX_ROWS];
    // Each row's keys in the current tile, relative to the tile's start.
    let mut keys: [std::ops::Range<usize>; MAX_ROWS] = std::array::from_fn(|_| 0..0);
    let mut t0 = lo / KV_TILE * KV_TILE;
    while t0 <= hi {
        // The group's keys in this tile.
        let (j0, j1) = (t0.max(lo), (t0 + KV_TILE).min(hi + 1));
        for j in j0..j1 {
            let v = &kv.v[j * vs + kv_head * dv..];
            let t = j - t0;
            super::f16_arith::widen(s, &v[..dv], &mut vt[t * dv..(t + 1) * dv]);
        }
        // Scores, K_CHUNK keys at a time (widened once for all rows, and small enough to stay
        // in L1 while they pass), two rows at a time (each key loaded once for both), over
        // the keys of either.
        let mut c0 = j0;
        while c0 < j1 {
            let c1 = (c0 + K_CHUNK).min(j1);
            for j in c0..c1 {
                let k = &kv.k[j * ks + kv_head * hd..];
                let t = j - c0;
                super::f16_arith::widen(s, &k[..hd], &mut kw[t * hd..(t + 1) * hd]);
            }
            let mut g = 0;
            while g < n {
                let pair = (g + 1 < n) as usize;
                let (r0, r1) = (&rows[g], &rows[g + pair]);
                let (a, b) = (c0.max(r0.lo.min(r1.lo)), c1.min(r0.hi.max(r1.hi) + 1));
                if a < b {
                    let q0 = &q[r0.row * hd..(r0.row + 1) * hd];
                    let q1 = &q[r1.row * hd..(r1.row + 1) * hd];
                    let (first, second) = p.split_at_mut(g + 1);
                    let mut spare = [0.0f32; KV_TILE];
                    let p1 = if pair == 1 {
                        &mut second[0]
                    } else {
                        &mut spare
                    };
                    let at = c0 - t0;
                    let (p0, p1) = (&mut first[g][at..], &mut p1[at..]);
                    scores_pair(s, kw, a - c0..b - c0, q0, q1, p0, p1);
                }
                g += 1 + pair;
            }
            c0 = c1;
        }
        for (g, r) in rows.iter().enumerate() {
            let (a, b) = (j0.max(r.lo), j1.min(r.hi + 1));
            keys[g] = 0..0;
            if a >= b {
                continue;
            }
            keys[g] = a - t0..b - t0;
            let p = &mut p[g][a - t0..b - t0];
            let mut tile_max = f32::NEG_INFINITY;
            for x in p.iter_mut() {
                *x *= scale;
                if let Some(cap) = softcap {
                    *x = cap * x.tanh();
                }
                tile_max = tile_max.max(*x);
            }
            if tile_max > max[g] {
                let ms = expf(max[g] - tile_max);
                scale_row(s, &mut acc[g * dv..(g + 1) * dv], ms);
                sum[g] *= ms;
                max[g] = tile_max;
            }
            for x in p.iter_mut() {
                *x = expf(*x - max[g]);
                sum[g] += *x;
            }
        }
        accumulate_tile(s, acc, vt, &p, &keys[..n]);
        t0 += KV_TILE;
    }
    for (g, r) in rows.iter().enumerate() {
        let row_acc = &mut acc[g * dv..(g + 1) * dv];
        // A sink joins the softmax as one more score without a value, after the keys.
        if let Some(sink) = r.sink {
            let (mut ms, mut vs) = (1.0f32, 1.0f32);
            if sink > max[g] {
                ms = expf(max[g] - sink);
                scale_row(s, row_acc, ms);
            } else {
                vs = expf(sink - max[g]);
            }
            sum[g] = sum[g] * ms + vs;
        }
        let inv = if sum[g] == 0.0 { 0.0 } else { 1.0 / sum[g] };
        scale_row(s, row_acc, inv);
        out.slice(r.row * dv, dv).copy_from_slice(row_acc);
    }
    SCRATCH.set(scratch);
}

/// Elements summed in separate lanes by a score: lane `l` adds `q[d] · k[d]` for `d ≡ l` (mod
/// 16) in order, then the lanes are halved (`x[l] += x[l + w]` for w = 8, 4, 2, 1), as one
/// 512-bit register would; the `head_dim % 16` last products are added one by one after.
const LANE_SUMS: usize = 16;

/// Keys whose scores are computed together (with two rows: 8 independent sums).
const SCORE_KEYS: usize = 4;

/// `p0[t] = q0 · k_t` and `p1[t] = q1 · k_t` for the keys `keys` of `kw` (widened keys, `hd`
/// each), in [`LANE_SUMS`] lanes.
#[inline(always)]
fn scores_pair<S: Simd>(
    s: S,
    kw: &[f32],
    keys: std::ops::Range<usize>,
    q0: &[f32],
    q1: &[f32],
    p0: &mut [f32],
    p1: &mut [f32],
) {
    let hd = q0.len();
    let steps = hd / LANE_SUMS * LANE_SUMS;
    let per_sum = LANE_SUMS / S::LANES;
    let mut t = keys.start;
    while t < keys.end {
        // Slots past the last key repeat it (their sums are not stored).
        let last = keys.end - 1;
        let key = |i: usize| &kw[(t + i).min(last) * hd..][..hd];
        let (k0, k1, k2, k3) = (key(0), key(1), key(2), key(3));
        // Lane sums of each key with either row. One vector of lanes at a time, so the
        // accumulators stay in registers (an array of every vector would spill to memory and
        // be cleared per call); each lane adds the same products in the same order either way.
        let mut l0 = [[0.0f32; LANE_SUMS]; SCORE_KEYS];
        let mut l1 = [[0.0f32; LANE_SUMS]; SCORE_KEYS];
        // Whole blocks of LANE_SUMS elements, cut to one length so the loads need no checks.
        let (x0s, x1s) = (&q0[..steps], &q1[..steps]);
        let ks = [&k0[..steps], &k1[..steps], &k2[..steps], &k3[..steps]];
        for v in 0..per_sum {
            let mut a0 = [s.splat(0.0); SCORE_KEYS];
            let mut a1 = [s.splat(0.0); SCORE_KEYS];
            for e in (0..steps).step_by(LANE_SUMS) {
                let at = e + v * S::LANES;
                let (x0, x1) = (s.load(&x0s[at..]), s.load(&x1s[at..]));
                for i in 0..SCORE_KEYS {
                    let k = s.load(&ks[i][at..]);
                    a0[i] = s.mul_add(x0, k, a0[i]);
                    a1[i] = s.mul_add(x1, k, a1[i]);
                }
            }
            for i in 0..SCORE_KEYS {
                s.store(&mut l0[i][v * S::LANES..], a0[i]);
                s.store(&mut l1[i][v * S::LANES..], a1[i]);
            }
        }
        let kr = [k0, k1, k2, k3];
        for i in 0..SCORE_KEYS.min(keys.end - t) {
            let k = &kr[i][steps..];
            p0[t + i] = finish_score(l0[i], &q0[steps..], k);
            p1[t + i] = finish_score(l1[i], &q1[steps..], k);
        }
        t += SCORE_KEYS;
    }
}

/// A score from its lane sums and the leftover elements.
#[inline(always)]
fn finish_score(mut x: [f32; LANE_SUMS], q_rest: &[f32], k_rest: &[f32]) -> f32 {
    let mut w = LANE_SUMS / 2;
    while w >= 1 {
        for l in 0..w {
            x[l] += x[l + w];
        }
        w /= 2;
    }
    let mut score = x[0];
    for (&q, &k) in q_rest.iter().zip(k_rest) {
        score = q.mul_add(k, score);
    }
    score
}

/// `acc[g] += Σ_t p[g][t] · v_t` over row `g`'s keys `keys[g]` of the tile (`vt`: the tile's
/// widened values), each accumulator element one chain of fused multiply-adds in key order.
/// Column blocks are the outer loop, so a block of the tile's values stays in L1 while every
/// row passes; two rows with the same keys (heads of one token) share each load.
#[inline(always)]
fn accumulate_tile<S: Simd>(
    s: S,
    acc: &mut [f32],
    vt: &[f32],
    p: &[[f32; KV_TILE]; MAX_ROWS],
    keys: &[std::ops::Range<usize>],
) {
    let n = keys.len();
    let dv = acc.len() / n;
    let block = V_VECS * S::LANES;
    let mut d0 = 0;
    while d0 < dv {
        let d1 = (d0 + block).min(dv);
        let mut g = 0;
        while g < n {
            let k = keys[g].clone();
            let v = &vt[k.start * dv + d0..];
            if g + 1 < n && keys[g + 1] == k && !k.is_empty() {
                let (r0, r1) = acc[g * dv..(g + 2) * dv].split_at_mut(dv);
                let ps = [&p[g][k.clone()], &p[g + 1][k]];
                accumulate_block(s, [&mut r0[d0..d1], &mut r1[d0..d1]], ps, v, dv);
                g += 2;
            } else {
                let ps = [&p[g][k]];
                accumulate_block(s, [&mut acc[g * dv + d0..g * dv + d1]], ps, v, dv);
                g += 1;
            }
        }
        d0 = d1;
    }
}

/// `acc[r] += Σ_t ps[r][t] · v_t` for one column block (`v`: the first key's block, rows `dv`
/// apart) of `R` rows with the same keys.
#[inline(always)]
fn accumulate_block<S: Simd, const R: usize>(
    s: S,
    acc: [&mut [f32]; R],
    ps: [&[f32]; R],
    v: &[f32],
    dv: usize,
) {
    let (w, n_keys) = (acc[0].len(), ps[0].len());
    if w == V_VECS * S::LANES {
        let mut a = [[s.splat(0.0); V_VECS]; R];
        for r in 0..R {
            for i in 0..V_VECS {
                a[r][i] = s.load(&acc[r][i * S::LANES..]);
            }
        }
        for t in 0..n_keys {
            let row = &v[t * dv..];
            // A loop, not `array::from_fn`, whose closure calls the wasm build left out of line.
            let mut pt = [s.splat(0.0); R];
            for r in 0..R {
                pt[r] = s.splat(ps[r][t]);
            }
            for i in 0..V_VECS {
                let x = s.load(&row[i * S::LANES..]);
                for r in 0..R {
                    a[r][i] = s.mul_add(pt[r], x, a[r][i]);
                }
            }
        }
        for r in 0..R {
            for i in 0..V_VECS {
                s.store(&mut acc[r][i * S::LANES..], a[r][i]);
            }
        }
        return;
    }
    // A narrower last block: vector by vector, then element by element.
    let vecs = w / S::LANES * S::LANES;
    for r in 0..R {
        let (acc, p) = (&mut *acc[r], ps[r]);
        let mut d = 0;
        while d < vecs {
            let mut a = s.load(&acc[d..]);
            for (t, &pt) in p.iter().enumerate() {
                a = s.mul_add(s.splat(pt), s.load(&v[t * dv + d..]), a);
            }
            s.store(&mut acc[d..], a);
            d += S::LANES;
        }
        for d in vecs..w {
            let mut a = acc[d];
            for (t, &pt) in p.iter().enumerate() {
                a = pt.mul_add(v[t * dv + d], a);
            }
            acc[d] = a;
        }
    }
}

/// `x *= f`, element by element.
#[inline(always)]
fn scale_row<S: Simd>(s: S, x: &mut [f32], f: f32) {
    let vecs = x.len() / S::LANES * S::LANES;
    let (head, tail) = x.split_at_mut(vecs);
    let fv = s.splat(f);
    for c in head.chunks_exact_mut(S::LANES) {
        s.store(c, s.mul(s.load(c), fv));
    }
    for x in tail {
        *x *= f;
    }
}
