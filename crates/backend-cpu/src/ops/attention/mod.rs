//! Causal grouped-query attention over the f16 KV cache, computed like ggml's CPU flash
//! attention (llama.cpp's default): per query row, q is rounded to f16, each score is an
//! f16·f16 dot product (in the reference build's summation order, see [`dot_f16`]), and an
//! online softmax accumulates V into an f16 accumulator (rounded after every key), divided by
//! the f32 running sum at the end. Masked keys are skipped.
//!
//! Each (token, head) row is computed alone, in key order, so results do not depend on the
//! batch or the thread split. The heads of one GQA group are walked together only so that each
//! K/V row is widened to f32 once for all of them; every head keeps its own state.
//!
//! The kernel is written once over [`Simd`] (the f16 arithmetic in [`f16_arith`], the f64 sums
//! in [`f64_sum`]); [`attend_rows`] picks the instruction set. Rows of f16 values (q, K, V) are
//! handled as f32 slices holding f16-exact values.

mod batch;

// Used by wasm32 builds only; tested natively against the C library.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
mod expf;
pub mod f16_arith;
pub mod f64_sum;
#[cfg(test)]
mod isa_tests;
pub mod tiled;

pub use batch::{attention, attention_segments, AttentionSegment};
pub use f64_sum::head_plus_leftovers;

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
use tessera_quant::isa::Simd128;
use tessera_quant::isa::{self, Scalar, Simd};
#[cfg(target_arch = "x86_64")]
use tessera_quant::isa::{Avx2, Avx512};

use crate::kv_cache::LayerKv;
use crate::parallel::SharedOut;

/// The arithmetic of an attention row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionKernel {
    /// ggml's f16 flash attention bit for bit (this module): what llama.cpp computes for
    /// batches under 64 queries, in the reference build.
    Ggml,
    /// f32 in tiles of keys ([`tiled`]): llama.cpp's arithmetic for larger batches, several
    /// times faster than emulating f16 on CPUs without f16 arithmetic.
    F32Tiled,
}

/// Largest head dimension the stack scratch holds.
pub use tessera_core::backend::MAX_HEAD_DIM;

/// Most query rows (tokens × heads of one KV head) one walk over the keys serves.
pub const MAX_ROWS: usize = 16;

/// Keys whose scores are computed together before the softmax consumes them (the dot kernel
/// takes four keys).
const KEY_BLOCK: usize = 4;

/// Elements of a head that the reference build's `ggml_vec_dot_f16` handles in its SIMD loop:
/// whole steps of 128 (an AVX512-FP16 build: 4 registers of 32 halves). The rest of the row is
/// its scalar "leftovers" loop, summed in f64.
pub const DOT_F16_STEP: usize = f16_arith::STEP;

/// q·k as ggml's `ggml_vec_dot_f16` computes it in the build the reference outputs come from
/// (the scalar reference of [`attend_rows`]'s scores).
///
/// That build steps through the row 128 elements at a time in f16 arithmetic
/// ([`f16_arith::dot_steps`]) and adds the remaining `n % 128` products one by one in f64
/// (`sumf += (ggml_float)(x[i]*y[i])`). For a head of 64 (SmolLM2) there is no full step, so
/// the whole score is that sequential f64 sum: this reproduces llama.cpp's SmolLM2 reference
/// logits to the last printed digit, where the 16-lane order of an AVX-512F build (or the
/// 8-lane order of an AVX2 build) moves the top-10 logprobs by up to 0.3.
pub fn dot_f16(k: &[f32], q: &[f32]) -> f32 {
    let np = k.len() / DOT_F16_STEP * DOT_F16_STEP;
    let head = if np > 0 {
        f16_arith::dot_steps(&k[..np], &q[..np]) as f64
    } else {
        0.0
    };
    head_plus_leftovers(head, &k[np..], &q[np..k.len()])
}

/// One query row of [`attend_rows`]: row `row` of the q matrix (head_dim values from
/// `row * head_dim`, and of the output from `row * head_dim_v`), seeing keys `lo ..= hi`,
/// with its head's attention sink logit where the model has sinks.
#[derive(Clone, Copy, Debug, Default)]
pub struct QueryRow {
    pub row: usize,
    pub lo: usize,
    pub hi: usize,
    pub sink: Option<f32>,
}

/// Query rows (at most [`MAX_ROWS`]) that share KV head `kv_head` — a GQA group's heads, of
/// one or several tokens — each against its own keys, walked together so that every K/V row
/// is loaded and widened once for all of them. Each row's result is what it gets alone, on
/// every instruction set.
pub struct RowGroup<'a> {
    /// The q matrix (`head_dim` values per row).
    pub q: &'a [f32],
    pub rows: &'a [QueryRow],
    pub kv: &'a LayerKv,
    pub kv_head: usize,
    pub scale: f32,
    pub softcap: Option<f32>,
    /// The output matrix (`head_dim_v` values per row).
    pub out: &'a SharedOut<f32>,
    pub kernel: AttentionKernel,
}

impl RowGroup<'_> {
    /// What q·k is multiplied by before the cap: ggml folds the cap into the scale,
    /// `cap * tanh(q·k * (scale / cap))`.
    fn score_scale(&self) -> f32 {
        self.softcap.map_or(self.scale, |cap| self.scale / cap)
    }

    /// The first and last key any row sees (`None` for no rows).
    fn keys(&self) -> Option<(usize, usize)> {
        let lo = self.rows.iter().map(|r| r.lo).min()?;
        let hi = self.rows.iter().map(|r| r.hi).max()?;
        Some((lo, hi))
    }
}

/// Attends `group` with its kernel on the widest instruction set the CPU runs (or the one
/// forced).
pub fn attend_rows(group: &RowGroup) {
    match group.kernel {
        AttentionKernel::Ggml => on_widest_isa::<GgmlRows>(group),
        AttentionKernel::F32Tiled => on_widest_isa::<tiled::TiledRows>(group),
    }
}

/// An attention kernel written once over [`Simd`] (bit-identical on every instruction set).
pub(crate) trait RowKernel {
    fn attend<S: Simd>(s: S, group: &RowGroup);
}

/// ggml's f16 arithmetic ([`attend_rows_on`]).
struct GgmlRows;

impl RowKernel for GgmlRows {
    #[inline(always)]
    fn attend<S: Simd>(s: S, group: &RowGroup) {
        attend_rows_on(s, group);
    }
}

/// Runs `K` on the widest instruction set the dispatch level allows.
fn on_widest_isa<K: RowKernel>(group: &RowGroup) {
    match isa::level() {
        #[cfg(target_arch = "x86_64")]
        isa::Level::Avx512 => {
            if let Some(s) = Avx512::new() {
                // SAFETY: the token proves the CPU runs AVX-512 F/BW/DQ/VL (and AVX2/FMA/F16C).
                return unsafe { on_avx512::<K>(s, group) };
            }
        }
        #[cfg(target_arch = "x86_64")]
        isa::Level::Avx2 => {
            if let Some(s) = Avx2::new() {
                // SAFETY: the token proves the CPU runs AVX2, FMA and F16C.
                return unsafe { on_avx2::<K>(s, group) };
            }
        }
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        isa::Level::Simd128 => return K::attend(Simd128, group),
        _ => {}
    }
    K::attend(Scalar, group);
}

/// `K` compiled for AVX2 (so that the generic kernel inlines the primitives and uses the
/// hardware FMA).
///
/// # Safety
/// None beyond the token's existence (it proves the CPU runs AVX2, FMA and F16C).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn on_avx2<K: RowKernel>(s: Avx2, group: &RowGroup) {
    K::attend(s, group);
}

/// `K` compiled for AVX-512.
///
/// # Safety
/// None beyond the token's existence (it proves the CPU runs AVX-512 F/BW/DQ/VL).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
unsafe fn on_avx512<K: RowKernel>(s: Avx512, group: &RowGroup) {
    K::attend(s, group);
}

/// The kernel on the vectors of `s` (bit-identical on every instruction set).
#[inline(always)]
pub(crate) fn attend_rows_on<S: Simd>(s: S, group: &RowGroup) {
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
    assert!(n <= MAX_ROWS && hd <= MAX_HEAD_DIM && dv <= MAX_HEAD_DIM);
    let Some((lo, hi)) = group.keys() else {
        return;
    };
    // Scratch sized to this group, kept per thread: only the accumulators need zeros (q,
    // keys and values are written before they are read), and a decode step calls this a few
    // hundred times.
    let mut scratch = SCRATCH.take();
    scratch.clear();
    scratch.resize(n * hd + KEY_BLOCK * (hd + dv) + n * dv, 0.0);
    let (q16, rest) = scratch.split_at_mut(n * hd);
    let (k, rest) = rest.split_at_mut(KEY_BLOCK * hd);
    let (v, acc) = rest.split_at_mut(KEY_BLOCK * dv);
    for (d, r) in q16.chunks_exact_mut(hd).zip(rows) {
        f16_arith::round_row(s, &q[r.row * hd..(r.row + 1) * hd], d);
    }
    // Heads under one f16 step whose length is whole vectors take the out-of-order f64 sums,
    // whose exactness bound needs the magnitudes of each row and key.
    let f64_lanes = hd < DOT_F16_STEP && hd.is_multiple_of(S::LANES);
    let mut q_mag = [None; MAX_ROWS];
    if f64_lanes {
        for (m, q) in q_mag.iter_mut().zip(q16.chunks_exact(hd)) {
            *m = Some(f64_sum::QueryMagnitudes::of(q));
        }
    }
    // The f16 accumulators, held as f32 values that are always exactly representable in f16.
    let mut sum = [0.0f32; MAX_ROWS];
    let mut max = [f32::NEG_INFINITY; MAX_ROWS];
    // Keys go in blocks: all the scores of a block first (independent dot products the CPU
    // can overlap), then each row's softmax updates in key order.
    let mut scores = [[0.0f32; KEY_BLOCK]; MAX_ROWS];
    for j0 in (lo..=hi).step_by(KEY_BLOCK) {
        let nb = KEY_BLOCK.min(hi + 1 - j0);
        let mut k_mag = [None; KEY_BLOCK];
        for b in 0..nb {
            let j = j0 + b;
            f16_arith::widen(
                s,
                &kv.k[j * ks + kv_head * hd..][..hd],
                &mut k[b * hd..][..hd],
            );
            if f64_lanes {
                k_mag[b] = Some(f64_sum::KeyMagnitudes::of(s, &k[b * hd..][..hd]));
            }
            f16_arith::widen(
                s,
                &kv.v[j * vs + kv_head * dv..][..dv],
                &mut v[b * dv..][..dv],
            );
        }
        for g in 0..n {
            let scores = &mut scores[g];
            *scores = dot_block(s, k, nb, &q16[g * hd..(g + 1) * hd], &k_mag, q_mag[g]);
            for score in &mut scores[..nb] {
                // As ggml: with a cap, `scale` already holds scale / cap.
                *score *= scale;
                if let Some(cap) = softcap {
                    *score = cap * score.tanh();
                }
            }
        }
        for (b, v) in v.chunks_exact(dv).take(nb).enumerate() {
            let j = j0 + b;
            let mut vscale = [1.0f32; MAX_ROWS];
            let mut all_rows = true;
            for (g, r) in rows.iter().enumerate() {
                if j < r.lo || j > r.hi {
                    all_rows = false;
                    continue;
                }
                let score = scores[g][b];
                let mut ms = 1.0f32;
                if score > max[g] {
                    let old = max[g];
                    max[g] = score;
                    ms = expf(old - score);
                    scale_acc(s, &mut acc[g * dv..(g + 1) * dv], ms);
                } else {
                    vscale[g] = expf(score - max[g]);
                }
                // ggml's `S = S*ms + vs`, which GCC contracts into one fused multiply-add.
                sum[g] = sum[g].mul_add(ms, vscale[g]);
            }
            if all_rows {
                mad_rows(s, acc, &v[..dv], &vscale[..n]);
            } else {
                // Rows whose keys end before or start after this one (ends of a token block).
                for (g, r) in rows.iter().enumerate() {
                    if (r.lo..=r.hi).contains(&j) {
                        mad_rows(
                            s,
                            &mut acc[g * dv..(g + 1) * dv],
                            &v[..dv],
                            &vscale[g..g + 1],
                        );
                    }
                }
            }
        }
    }
    for (g, r) in rows.iter().enumerate() {
        // A sink joins the softmax as one more score without a value, after the keys (as
        // ggml: the rescale of the f32 output by `ms`, then the sum's fused update).
        let mut ms = 1.0f32;
        if let Some(sink) = r.sink {
            let mut vs = 1.0f32;
            if sink > max[g] {
                ms = expf(max[g] - sink);
            } else {
                vs = expf(sink - max[g]);
            }
            sum[g] = sum[g].mul_add(ms, vs);
        }
        let inv = if sum[g] == 0.0 { 0.0 } else { 1.0 / sum[g] };
        let o = out.slice(r.row * dv, dv);
        for (o, &a) in o.iter_mut().zip(&acc[g * dv..(g + 1) * dv]) {
            *o = (a * ms) * inv;
        }
    }
    SCRATCH.set(scratch);
}

thread_local! {
    /// [`attend_rows_on`]'s q rows, widened keys and values, and accumulators (kept between
    /// calls).
    static SCRATCH: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}

/// `expf` as the reference build's C library computes it (llama.cpp's softmax calls `expf`):
/// natively Rust's `f32::exp` is that function (glibc's); wasm32 has no C library, and its
/// `f32::exp` is another algorithm, so it runs glibc's ([`expf::expf`]).
#[inline(always)]
fn expf(x: f32) -> f32 {
    #[cfg(target_arch = "wasm32")]
    {
        expf::expf(x)
    }
    #[cfg(not(target_arch = "wasm32"))]
    x.exp()
}

/// [`dot_f16`] of the first `nb` keys of a block against `q` (head_dim long): the whole steps
/// four keys at a time, the leftovers out of order where [`f64_sum::bound_holds`] proves that
/// the same (given the keys' and the row's magnitudes, where the caller took them), else in
/// order.
#[inline(always)]
fn dot_block<S: Simd>(
    s: S,
    k: &[f32],
    nb: usize,
    q: &[f32],
    k_mag: &[Option<f64_sum::KeyMagnitudes>; KEY_BLOCK],
    q_mag: Option<f64_sum::QueryMagnitudes>,
) -> [f32; KEY_BLOCK] {
    let hd = q.len();
    let k: [&[f32]; KEY_BLOCK] = core::array::from_fn(|b| &k[b * hd..(b + 1) * hd]);
    let np = hd / DOT_F16_STEP * DOT_F16_STEP;
    let mut out = [0.0f32; KEY_BLOCK];
    if np > 0 {
        // Slots past `nb` repeat the last key (their scores are not used).
        let rows: [&[f32]; KEY_BLOCK] = core::array::from_fn(|b| &k[b.min(nb - 1)][..np]);
        let heads = f16_arith::dot_steps_x4(s, rows, &q[..np]);
        for b in 0..nb {
            out[b] = head_plus_leftovers(heads[b] as f64, &k[b][np..hd], &q[np..]);
        }
        return out;
    }
    let mut exact = [None; KEY_BLOCK];
    if let Some(q_mag) = q_mag {
        let mut holds = [false; KEY_BLOCK];
        for b in 0..nb {
            holds[b] = k_mag[b].is_some_and(|m| f64_sum::bound_holds(m, q_mag));
        }
        let rows: [&[f32]; KEY_BLOCK] = core::array::from_fn(|b| &k[b.min(nb - 1)][..hd]);
        exact = f64_sum::exact_dot_f64_x4(s, rows, q, holds);
    }
    for b in 0..nb {
        out[b] = exact[b].unwrap_or_else(|| head_plus_leftovers(0.0, &k[b][..hd], q));
    }
    out
}

/// ggml_vec_scale_f16: whole steps of 128 in f16 arithmetic (`acc = f16(acc * f16(ms))`), the
/// rest as its scalar loop: `acc = f16(acc * ms)` in f32.
#[inline(always)]
fn scale_acc<S: Simd>(s: S, acc: &mut [f32], ms: f32) {
    let np = acc.len() / DOT_F16_STEP * DOT_F16_STEP;
    let (steps, rest) = acc.split_at_mut(np);
    f16_arith::scale(s, steps, f16_arith::round_f16(ms));
    f16_arith::scale(s, rest, ms);
}

/// Runs `$call` — an expression of `$rows` and `$factors`, arrays of 1 to 4 — over the step
/// parts (`..$np`) of the accumulator rows (`$acc`: rows of `$dv`) four rows at a time, with
/// their factors (`$vs`): the multi-row `mad_steps` kernel takes arrays of fixed length.
macro_rules! by_four_rows {
    ($acc:expr, $dv:expr, $np:expr, $vs:expr, |$rows:ident, $factors:ident| $call:expr) => {
        for (acc, vs) in $acc.chunks_mut(4 * $dv).zip($vs.chunks(4)) {
            let mut r = acc.chunks_exact_mut($dv).map(|a| &mut a[..$np]);
            match (r.next(), r.next(), r.next(), r.next()) {
                (Some(a), None, _, _) => {
                    let ($rows, $factors) = ([a], [vs[0]]);
                    $call
                }
                (Some(a), Some(b), None, _) => {
                    let ($rows, $factors) = ([a, b], [vs[0], vs[1]]);
                    $call
                }
                (Some(a), Some(b), Some(c), None) => {
                    let ($rows, $factors) = ([a, b, c], [vs[0], vs[1], vs[2]]);
                    $call
                }
                (Some(a), Some(b), Some(c), Some(d)) => {
                    let ($rows, $factors) = ([a, b, c, d], [vs[0], vs[1], vs[2], vs[3]]);
                    $call
                }
                _ => unreachable!("a chunk holds 1 to 4 rows"),
            }
        }
    };
}

/// ggml_vec_mad_f16 for each row's accumulator (`acc`: rows of `v.len()`, contiguous) with
/// its own factor `vs[r]`, over one V row: whole steps of 128 in f16 arithmetic (`acc =
/// f16(v * f16(vs) + acc)`, one rounding, [`f16_arith::mad_steps`]), the rest as its scalar
/// loop ([`f16_arith::mad_tail`]).
#[inline(always)]
fn mad_rows<S: Simd>(s: S, acc: &mut [f32], v: &[f32], vs: &[f32]) {
    let dv = v.len();
    let np = dv / DOT_F16_STEP * DOT_F16_STEP;
    let (v_steps, v_rest) = v.split_at(np);
    if np > 0 {
        by_four_rows!(acc, dv, np, vs, |rows, factors| {
            f16_arith::mad_steps(s, rows, v_steps, factors)
        });
    }
    if np < dv {
        for (g, &vs) in vs.iter().enumerate() {
            f16_arith::mad_tail(s, &mut acc[g * dv + np..(g + 1) * dv], v_rest, vs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use f16_arith::tests::widen;
    use half::f16;
    use tessera_core::backend::KvLayerLayout;
    use tessera_core::graph::{AttentionParams, RopeMode, RopeParams};
    use tessera_core::threading::SequentialPool;
    // In Node, under wasm-bindgen-test (`cargo test --target wasm32-unknown-unknown`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    pub(super) fn layer(n_ctx: usize, n_head_kv: usize, hd: usize) -> LayerKv {
        LayerKv {
            layout: KvLayerLayout {
                n_head_kv,
                head_dim_k: hd,
                head_dim_v: hd,
                rope: RopeParams {
                    n_dims: hd,
                    mode: RopeMode::Normal,
                    freq_base: 10000.0,
                    freq_scale: 1.0,
                    freq_factors: None,
                    attn_factor: 1.0,
                    yarn: None,
                },
            },
            k: (0..n_ctx * n_head_kv * hd)
                .map(|i| f16::from_f32(((i * 7919 % 613) as f32 / 306.0) - 1.0))
                .collect(),
            v: (0..n_ctx * n_head_kv * hd)
                .map(|i| f16::from_f32(((i * 104729 % 389) as f32 / 194.0) - 1.0))
                .collect(),
        }
    }

    /// Plain softmax attention in f64 over the same f16 keys and values, with a sink logit
    /// in the denominator where given.
    fn reference(
        q: &[f32],
        kv: &LayerKv,
        head: usize,
        (lo, hi): (usize, usize),
        scale: f32,
        sink: Option<f32>,
        q_in_f16: bool,
    ) -> Vec<f64> {
        let hd = kv.layout.head_dim_k;
        let s = kv.k_stride();
        let q_d = |d: usize| match q_in_f16 {
            true => f16::from_f32(q[d]).to_f64(),
            false => q[d] as f64,
        };
        let scores: Vec<f64> = (lo..=hi)
            .map(|j| {
                (0..hd)
                    .map(|d| kv.k[j * s + head * hd + d].to_f64() * q_d(d))
                    .sum::<f64>()
                    * scale as f64
            })
            .collect();
        let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let w: Vec<f64> = scores.iter().map(|x| (x - m).exp()).collect();
        let z: f64 = w.iter().sum::<f64>() + sink.map_or(0.0, |s| (s as f64 - m).exp());
        (0..hd)
            .map(|d| {
                (lo..=hi)
                    .zip(&w)
                    .map(|(j, wj)| wj * kv.v[j * s + head * hd + d].to_f64())
                    .sum::<f64>()
                    / z
            })
            .collect()
    }

    const KERNELS: [AttentionKernel; 2] = [AttentionKernel::Ggml, AttentionKernel::F32Tiled];

    #[test]
    fn matches_plain_softmax_attention_with_gqa_windows_and_sinks() {
        for kernel in KERNELS {
            matches_plain_softmax(kernel);
        }
    }

    /// Keys across three tiles of the tiled kernel, windows across a tile boundary.
    fn matches_plain_softmax(kernel: AttentionKernel) {
        let (hd, n_head, n_head_kv, n_ctx) = (64, 4, 2, 160);
        let kv = layer(n_ctx, n_head_kv, hd);
        let t = 5;
        let pos0 = 130;
        let q: Vec<f32> = (0..hd * n_head * t)
            .map(|i| ((i * 31 % 97) as f32 / 48.0) - 1.0)
            .collect();
        // Sinks below and above every score (both of ggml's branches).
        let sink_values = [-2.0f32, 0.5, 3.0, 12.0];
        for (window, sinks) in [
            (None, None),
            (Some(8), None),
            (None, Some(&sink_values[..])),
            (Some(8), Some(&sink_values[..])),
        ] {
            let p = AttentionParams {
                layer: 0,
                n_head,
                n_head_kv,
                head_dim: hd,
                scale: 0.125,
                window,
                softcap: None,
                sinks: None,
            };
            let mut out = vec![0.0; hd * n_head * t];
            attention(&SequentialPool, &q, &kv, pos0, &p, sinks, kernel, &mut out);
            for ti in 0..t {
                for h in 0..n_head {
                    let pos = pos0 + ti;
                    let lo = window.map_or(0, |w| pos + 1 - w);
                    let row = ti * n_head + h;
                    let sink = sinks.map(|s| s[h]);
                    let q_row = &q[row * hd..(row + 1) * hd];
                    let ggml = kernel == AttentionKernel::Ggml;
                    let want = reference(q_row, &kv, h / 2, (lo, pos), 0.125, sink, ggml);
                    // ggml's f16 accumulator limits agreement to f16 precision.
                    let tolerance = if ggml { 4e-3 } else { 1e-5 };
                    for d in 0..hd {
                        let got = out[row * hd + d] as f64;
                        assert!(
                            (got - want[d]).abs() < tolerance,
                            "{kernel:?} {window:?} {sink:?} t{ti} h{h} d{d}: {got} vs {}",
                            want[d]
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn short_heads_are_one_sequential_f64_sum() {
        // Below one step of 128 the reference build adds every product in f64, in order.
        for n in [64, 96, 127] {
            let k: Vec<f16> = (0..n)
                .map(|i| f16::from_f32(((i * 7919 % 613) as f32 / 30.0) - 10.0))
                .collect();
            let q: Vec<f16> = (0..n)
                .map(|i| f16::from_f32(((i * 104729 % 389) as f32 / 19.0) - 10.0))
                .collect();
            let mut want = 0.0f64;
            for i in 0..n {
                want += (k[i].to_f32() * q[i].to_f32()) as f64;
            }
            assert_eq!(dot_f16(&widen(&k), &widen(&q)), want as f32, "n = {n}");
        }
        // Whole steps keep their SIMD order; the rest is added to them in f64.
        let k: Vec<f32> = (0..192)
            .map(|i| f16_arith::round_f16(i as f32 * 0.01))
            .collect();
        let q: Vec<f32> = (0..192)
            .map(|i| f16_arith::round_f16(1.0 - i as f32 * 0.003))
            .collect();
        let head = f16_arith::dot_steps(&k[..128], &q[..128]) as f64;
        assert_eq!(
            dot_f16(&k, &q),
            head_plus_leftovers(head, &k[128..], &q[128..])
        );
    }

    /// `rows` of `q` against KV head 1, with a scale and a soft cap.
    fn test_group<'a>(
        q: &'a [f32],
        rows: &'a [QueryRow],
        kv: &'a LayerKv,
        out: &'a SharedOut<f32>,
        kernel: AttentionKernel,
    ) -> RowGroup<'a> {
        RowGroup {
            q,
            rows,
            kv,
            kv_head: 1,
            scale: 0.1,
            softcap: Some(3.0),
            out,
            kernel,
        }
    }

    /// `rows` of `q` attended together by `attend(group)`; the output rows in the order of
    /// `rows`.
    fn run_rows_with(
        attend: impl Fn(&RowGroup),
        kernel: AttentionKernel,
        q: &[f32],
        rows: &[QueryRow],
        kv: &LayerKv,
    ) -> Vec<Vec<f32>> {
        let dv = kv.layout.head_dim_v;
        let mut out = vec![f32::NAN; (rows.iter().map(|r| r.row).max().unwrap() + 1) * dv];
        let shared = SharedOut::new(&mut out);
        attend(&test_group(q, rows, kv, &shared, kernel));
        rows.iter()
            .map(|r| out[r.row * dv..(r.row + 1) * dv].to_vec())
            .collect()
    }

    /// [`run_rows_with`] the kernel's generic code on the vectors of `s`.
    fn run_rows_on<S: Simd>(
        s: S,
        kernel: AttentionKernel,
        q: &[f32],
        rows: &[QueryRow],
        kv: &LayerKv,
    ) -> Vec<Vec<f32>> {
        let attend = |g: &RowGroup| match kernel {
            AttentionKernel::Ggml => attend_rows_on(s, g),
            AttentionKernel::F32Tiled => tiled::attend_rows_tiled_on(s, g),
        };
        run_rows_with(attend, kernel, q, rows, kv)
    }

    /// [`run_rows_with`] [`attend_rows`]'s dispatch.
    fn run_rows(
        kernel: AttentionKernel,
        q: &[f32],
        rows: &[QueryRow],
        kv: &LayerKv,
    ) -> Vec<Vec<f32>> {
        run_rows_with(attend_rows, kernel, q, rows, kv)
    }

    /// Rows of a token block: 4 tokens at positions 62..66 (causal, across the tiled kernel's
    /// tile boundary at 64), 3 heads each, the first tokens' keys ending before the block's
    /// last keys, and windows of 6 keys; the second head with a small attention sink, the
    /// third with a large one.
    fn block_rows(window: bool) -> Vec<QueryRow> {
        let mut rows = Vec::new();
        for t in 0..4 {
            let hi = 62 + t;
            let lo = if window { hi - 5 } else { 0 };
            for h in 0..3 {
                rows.push(QueryRow {
                    row: t * 3 + h,
                    lo,
                    hi,
                    sink: [None, Some(-1.5), Some(40.0)][h],
                });
            }
        }
        rows
    }

    /// Every instruction set's rows against the scalar ones, and the dispatched rows too.
    fn rows_match_scalar_on<S: Simd>(s: S) {
        // 66, 130, 132: leftovers that are not whole vectors, after no step or one, or that are.
        for hd in [64, 66, 96, 130, 132, 192, 256] {
            let kv = layer(72, 2, hd);
            let q: Vec<f32> = (0..12 * hd)
                .map(|i| ((i * 29 % 83) as f32 / 20.0) - 2.0)
                .collect();
            for kernel in KERNELS {
                for window in [false, true] {
                    let rows = block_rows(window);
                    let want = run_rows_on(Scalar, kernel, &q, &rows, &kv);
                    assert_eq!(
                        want,
                        run_rows_on(s, kernel, &q, &rows, &kv),
                        "{kernel:?} hd {hd} window {window}"
                    );
                    let dispatched = run_rows(kernel, &q, &rows, &kv);
                    assert_eq!(want, dispatched, "{kernel:?} dispatched, hd {hd}");
                }
            }
        }
    }

    #[test]
    fn rows_are_bit_identical_on_every_instruction_set() {
        rows_match_scalar_on(Scalar);
        #[cfg(target_arch = "x86_64")]
        if let Some(s) = Avx2::new() {
            rows_match_scalar_on(s);
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(s) = Avx512::new() {
            rows_match_scalar_on(s);
        }
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        rows_match_scalar_on(Simd128);
    }

    #[test]
    fn rows_walked_together_equal_rows_alone() {
        for (hd, kernel) in [64, 256]
            .into_iter()
            .flat_map(|hd| KERNELS.map(|k| (hd, k)))
        {
            let kv = layer(72, 2, hd);
            let q: Vec<f32> = (0..12 * hd)
                .map(|i| ((i * 37 % 101) as f32 / 25.0) - 2.0)
                .collect();
            for window in [false, true] {
                let rows = block_rows(window);
                let together = run_rows(kernel, &q, &rows, &kv);
                for (r, want) in rows.iter().zip(&together) {
                    let alone = run_rows(kernel, &q, &[*r], &kv);
                    let what = format!("{kernel:?} hd {hd} window {window} row {}", r.row);
                    assert_eq!(&alone[0], want, "{what}");
                }
            }
        }
    }

    #[test]
    fn a_row_does_not_depend_on_the_batch() {
        for kernel in KERNELS {
            row_independent_of_batch(kernel);
        }
    }

    /// Tokens at positions 62..66: the tiled kernel's boundary at 64 inside the batch.
    fn row_independent_of_batch(kernel: AttentionKernel) {
        let (hd, n_head, n_head_kv, pos0) = (64, 2, 1, 62);
        let kv = layer(72, n_head_kv, hd);
        let p = AttentionParams {
            layer: 0,
            n_head,
            n_head_kv,
            head_dim: hd,
            scale: 0.125,
            window: None,
            softcap: Some(20.0),
            sinks: None,
        };
        let q: Vec<f32> = (0..hd * n_head * 4)
            .map(|i| ((i * 13 % 37) as f32 / 18.0) - 1.0)
            .collect();
        let sinks = [0.25f32, 3.0];
        let mut batch = vec![0.0; q.len()];
        attention(
            &SequentialPool,
            &q,
            &kv,
            pos0,
            &p,
            Some(&sinks),
            kernel,
            &mut batch,
        );
        for t in 0..4 {
            let n = hd * n_head;
            let mut alone = vec![0.0; n];
            attention(
                &SequentialPool,
                &q[t * n..(t + 1) * n],
                &kv,
                pos0 + t,
                &p,
                Some(&sinks),
                kernel,
                &mut alone,
            );
            assert_eq!(alone, batch[t * n..(t + 1) * n], "{kernel:?} token {t}");
        }
    }
}
