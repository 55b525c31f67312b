//! Causal grouped-query attention over the f16 KV cache, computed like ggml's CPU flash
//! attention (llama.cpp's default): per query row, q is rounded to f16, each score is an
//! f16·f16 dot product (in the reference build's summation order, see [`dot_f16`]), and an
//! online softmax accumulates V into an f16 accumulator (rounded after every key), divided by
//! the f32 running sum at the end. Masked keys are skipped.
//!
//! Each (token, head) row is computed alone, in key order, so results do not depend on the
//! batch or the thread split.

use half::f16;

use super::f16_arith;

use crate::cpu::kv_cache::LayerKv;
use crate::cpu::parallel::{for_each_chunk, SharedOut};
use crate::graph::AttentionParams;
use crate::threading::ThreadPool;

/// Largest head dimension the stack scratch holds.
pub const MAX_HEAD_DIM: usize = 512;

/// Elements of a head that the reference build's `ggml_vec_dot_f16` handles in its SIMD loop:
/// whole steps of 128 (an AVX512-FP16 build: 4 registers of 32 halves). The rest of the row is
/// its scalar "leftovers" loop, summed in f64.
pub const DOT_F16_STEP: usize = f16_arith::STEP;

/// q·k as ggml's `ggml_vec_dot_f16` computes it in the build the reference outputs come from.
///
/// That build steps through the row 128 elements at a time in f16 arithmetic
/// ([`dot_f16_steps`]) and adds the remaining `n % 128` products one by one in f64
/// (`sumf += (ggml_float)(x[i]*y[i])`). For a head of 64 (SmolLM2) there is no full step, so
/// the whole score is that sequential f64 sum: this reproduces llama.cpp's SmolLM2 reference
/// logits to the last printed digit, where the 16-lane order of an AVX-512F build (or the
/// 8-lane order of an AVX2 build) moves the top-10 logprobs by up to 0.3.
#[inline]
pub fn dot_f16(k: &[f16], q: &[f16]) -> f32 {
    let np = k.len() / DOT_F16_STEP * DOT_F16_STEP;
    let head = if np > 0 {
        dot_f16_steps(&k[..np], &q[..np]) as f64
    } else {
        0.0
    };
    head_plus_leftovers(head, &k[np..], &q[np..np + (k.len() - np)])
}

/// The scalar tail of ggml's `ggml_vec_dot_f16`: each exact f32 product added in f64.
#[inline]
pub fn head_plus_leftovers(mut sum: f64, k: &[f16], q: &[f16]) -> f32 {
    for (a, b) in k.iter().zip(q) {
        sum += (a.to_f32() * b.to_f32()) as f64;
    }
    sum as f32
}

/// Whole steps (`k.len()` a multiple of 128) in the f16 arithmetic of an AVX512-FP16 build:
/// 4 × 32 f16 accumulators, each fused multiply-add rounded once to f16, reduced in f16
/// ([`f16_arith::dot_steps`]). Used for heads of 128 and more (Gemma 3: 256).
#[inline]
pub fn dot_f16_steps(k: &[f16], q: &[f16]) -> f32 {
    f16_arith::dot_steps(k, q)
}

/// One query row against keys `lo ..= hi` of one KV head; writes `out` (head_dim_v floats).
#[allow(clippy::too_many_arguments)]
pub fn attend_row(
    q: &[f32],
    kv: &LayerKv,
    kv_head: usize,
    lo: usize,
    hi: usize,
    scale: f32,
    softcap: Option<f32>,
    out: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    let simd = kv.layout.head_dim_v % 8 == 0 && super::attention_avx2::available();
    #[cfg(not(target_arch = "x86_64"))]
    let simd = false;
    attend_row_impl(q, kv, kv_head, lo, hi, scale, softcap, out, simd);
}

/// The row kernel; `simd` picks the AVX2 inner loops (bit-identical to the scalar ones).
#[allow(clippy::too_many_arguments)]
fn attend_row_impl(
    q: &[f32],
    kv: &LayerKv,
    kv_head: usize,
    lo: usize,
    hi: usize,
    scale: f32,
    softcap: Option<f32>,
    out: &mut [f32],
    simd: bool,
) {
    let hd = kv.layout.head_dim_k;
    let dv = kv.layout.head_dim_v;
    let (ks, vs) = (kv.k_stride(), kv.v_stride());
    let mut q16 = [f16::ZERO; MAX_HEAD_DIM];
    for (d, &s) in q16.iter_mut().zip(q) {
        *d = f16::from_f32(s);
    }
    // The f16 accumulator, held as f32 values that are always exactly representable in f16.
    let mut acc = [0.0f32; MAX_HEAD_DIM];
    let acc = &mut acc[..dv];
    let mut sum = 0.0f32;
    let mut max = f32::NEG_INFINITY;
    for j in lo..=hi {
        let k = &kv.k[j * ks + kv_head * hd..j * ks + (kv_head + 1) * hd];
        let v = &kv.v[j * vs + kv_head * dv..j * vs + (kv_head + 1) * dv];
        let dot = if simd {
            #[cfg(target_arch = "x86_64")]
            let np = hd / DOT_F16_STEP * DOT_F16_STEP;
            #[cfg(target_arch = "x86_64")]
            if np == 0 && hd % 8 == 0 {
                // SAFETY: `simd` is only set when the CPU has AVX2/FMA/F16C; hd % 8 == 0.
                let exact = unsafe { super::attention_avx2::dot_f16_exact_f64(k, &q16[..hd]) };
                if let Some(d) = exact {
                    d
                } else {
                    head_plus_leftovers(0.0, k, &q16[..hd])
                }
            } else {
                dot_f16_simd_steps(k, &q16[..hd], np)
            }
            #[cfg(not(target_arch = "x86_64"))]
            unreachable!()
        } else {
            dot_f16(k, &q16[..hd])
        };
        let mut s = dot * scale;
        if let Some(cap) = softcap {
            s = cap * (s / cap).tanh();
        }
        let mut ms = 1.0f32;
        let mut vscale = 1.0f32;
        if s > max {
            let old = max;
            max = s;
            ms = (old - max).exp();
            scale_acc(acc, ms, simd);
        } else {
            vscale = (s - max).exp();
        }
        mad_acc(acc, v, vscale, simd);
        // ggml's `S = S*ms + vs`, which GCC contracts into one fused multiply-add.
        sum = sum.mul_add(ms, vscale);
    }
    let inv = if sum == 0.0 { 0.0 } else { 1.0 / sum };
    for (o, &a) in out.iter_mut().zip(acc.iter()) {
        *o = a * inv;
    }
}

/// [`dot_f16`] with its whole steps (`np` elements, `np > 0`) on AVX2.
#[cfg(target_arch = "x86_64")]
#[inline]
fn dot_f16_simd_steps(k: &[f16], q: &[f16], np: usize) -> f32 {
    // SAFETY: only called with `simd` set (AVX2/FMA/F16C present); np % 128 == 0.
    let head = unsafe { super::attention_avx2::dot_f16_steps(&k[..np], &q[..np]) } as f64;
    head_plus_leftovers(head, &k[np..], &q[np..k.len()])
}

/// ggml_vec_scale_f16: whole steps of 128 in f16 arithmetic (`acc = f16(acc * f16(ms))`,
/// [`f16_arith::scale_steps`]), the rest as its scalar loop: `acc = f16(acc * ms)` in f32.
#[inline]
fn scale_acc(acc: &mut [f32], ms: f32, simd: bool) {
    let np = acc.len() / DOT_F16_STEP * DOT_F16_STEP;
    let (steps, acc) = acc.split_at_mut(np);
    if np > 0 {
        #[cfg(target_arch = "x86_64")]
        if simd {
            // SAFETY: `simd` is only set when the CPU has AVX2/FMA/F16C; np % 128 == 0.
            unsafe { super::attention_avx2::scale_f16_steps(steps, ms) }
        } else {
            f16_arith::scale_steps(steps, ms);
        }
        #[cfg(not(target_arch = "x86_64"))]
        f16_arith::scale_steps(steps, ms);
    }
    if simd {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: see `attend_row_impl`; dv % 8 == 0 was checked with `simd`.
        unsafe {
            super::attention_avx2::scale_f16(acc, ms)
        }
    } else {
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        let acc = {
            let done = super::attention_simd128::scale_f16(acc, ms);
            &mut acc[done..]
        };
        for a in acc.iter_mut() {
            *a = f16::from_f32(*a * ms).to_f32();
        }
    }
}

/// ggml_vec_mad_f16: whole steps of 128 in f16 arithmetic (`acc = f16(v * f16(vs) + acc)`, one
/// rounding, [`f16_arith::mad_steps`]), the rest as its scalar loop: one fused multiply-add in
/// f32, rounded to f16.
#[inline]
fn mad_acc(acc: &mut [f32], v: &[f16], vs: f32, simd: bool) {
    let np = acc.len() / DOT_F16_STEP * DOT_F16_STEP;
    let (steps, acc) = acc.split_at_mut(np);
    if np > 0 {
        #[cfg(target_arch = "x86_64")]
        if simd {
            // SAFETY: as in `scale_acc`; v.len() >= np.
            unsafe { super::attention_avx2::mad_f16_steps(steps, &v[..np], vs) }
        } else {
            f16_arith::mad_steps(steps, &v[..np], vs);
        }
        #[cfg(not(target_arch = "x86_64"))]
        f16_arith::mad_steps(steps, &v[..np], vs);
    }
    let v = &v[np..];
    if simd {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: see `attend_row_impl`.
        unsafe {
            super::attention_avx2::mad_f16(acc, v, vs)
        }
    } else {
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        let (acc, v) = {
            let done = super::attention_simd128::mad_f16(acc, v, vs);
            (&mut acc[done..], &v[done..])
        };
        for (a, &x) in acc.iter_mut().zip(v) {
            *a = f16::from_f32(x.to_f32().mul_add(vs, *a)).to_f32();
        }
    }
}

/// Attention for `T` query tokens at positions `pos0 ..` (their keys and values already in
/// `kv`): q `[head_dim, n_head, T]` → out `[head_dim_v * n_head, T]`.
pub fn attention(
    pool: &dyn ThreadPool,
    q: &[f32],
    kv: &LayerKv,
    pos0: usize,
    p: &AttentionParams,
    out: &mut [f32],
) {
    let hd = p.head_dim;
    let dv = kv.layout.head_dim_v;
    let n_rows = q.len() / hd; // T * n_head
    let group = p.n_head / p.n_head_kv;
    let shared = SharedOut::new(out);
    for_each_chunk(pool, n_rows, pool.n_threads() * 2, 1, &|rows| {
        for row in rows {
            let (t, h) = (row / p.n_head, row % p.n_head);
            let pos = pos0 + t;
            let lo = match p.window {
                Some(w) => (pos + 1).saturating_sub(w),
                None => 0,
            };
            let o = shared.slice(row * dv, dv);
            attend_row(
                &q[row * hd..(row + 1) * hd],
                kv,
                h / group,
                lo,
                pos,
                p.scale,
                p.softcap,
                o,
            );
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::KvLayerLayout;
    use crate::graph::{RopeMode, RopeParams};
    use crate::threading::SequentialPool;

    fn layer(n_ctx: usize, n_head_kv: usize, hd: usize) -> LayerKv {
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

    /// Plain softmax attention in f64 over the same f16 keys and values.
    fn reference(
        q: &[f32],
        kv: &LayerKv,
        head: usize,
        lo: usize,
        hi: usize,
        scale: f32,
    ) -> Vec<f64> {
        let hd = kv.layout.head_dim_k;
        let s = kv.k_stride();
        let scores: Vec<f64> = (lo..=hi)
            .map(|j| {
                (0..hd)
                    .map(|d| kv.k[j * s + head * hd + d].to_f64() * f16::from_f32(q[d]).to_f64())
                    .sum::<f64>()
                    * scale as f64
            })
            .collect();
        let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let w: Vec<f64> = scores.iter().map(|x| (x - m).exp()).collect();
        let z: f64 = w.iter().sum();
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

    #[test]
    fn matches_plain_softmax_attention_with_gqa_and_windows() {
        let (hd, n_head, n_head_kv, n_ctx) = (64, 4, 2, 40);
        let kv = layer(n_ctx, n_head_kv, hd);
        let t = 5;
        let pos0 = 30;
        let q: Vec<f32> = (0..hd * n_head * t)
            .map(|i| ((i * 31 % 97) as f32 / 48.0) - 1.0)
            .collect();
        for window in [None, Some(8)] {
            let p = AttentionParams {
                layer: 0,
                n_head,
                n_head_kv,
                head_dim: hd,
                scale: 0.125,
                window,
                softcap: None,
            };
            let mut out = vec![0.0; hd * n_head * t];
            attention(&SequentialPool, &q, &kv, pos0, &p, &mut out);
            for ti in 0..t {
                for h in 0..n_head {
                    let pos = pos0 + ti;
                    let lo = window.map_or(0, |w| pos + 1 - w);
                    let row = ti * n_head + h;
                    let want = reference(&q[row * hd..(row + 1) * hd], &kv, h / 2, lo, pos, 0.125);
                    for d in 0..hd {
                        // The f16 accumulator limits agreement to f16 precision.
                        let got = out[row * hd + d] as f64;
                        assert!(
                            (got - want[d]).abs() < 4e-3,
                            "{window:?} t{ti} h{h} d{d}: {got} vs {}",
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
            assert_eq!(dot_f16(&k, &q), want as f32, "n = {n}");
        }
        // Whole steps keep their SIMD order; the rest is added to them in f64.
        let k: Vec<f16> = (0..192).map(|i| f16::from_f32(i as f32 * 0.01)).collect();
        let q: Vec<f16> = (0..192)
            .map(|i| f16::from_f32(1.0 - i as f32 * 0.003))
            .collect();
        let head = dot_f16_steps(&k[..128], &q[..128]) as f64;
        assert_eq!(
            dot_f16(&k, &q),
            head_plus_leftovers(head, &k[128..], &q[128..])
        );
    }

    #[test]
    fn simd_rows_are_bit_identical_to_scalar_rows() {
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::ops::attention_avx2::available() {
            for hd in [64, 192, 256] {
                let kv = layer(24, 2, hd);
                let q: Vec<f32> = (0..hd)
                    .map(|i| ((i * 29 % 83) as f32 / 20.0) - 2.0)
                    .collect();
                for (lo, hi) in [(0, 0), (0, 23), (5, 17)] {
                    let mut a = vec![0.0; hd];
                    let mut b = vec![0.0; hd];
                    attend_row_impl(&q, &kv, 1, lo, hi, 0.1, None, &mut a, false);
                    attend_row_impl(&q, &kv, 1, lo, hi, 0.1, None, &mut b, true);
                    assert_eq!(a, b, "hd {hd} keys {lo}..={hi}");
                }
            }
        }
    }

    #[test]
    fn exact_f64_fast_path_equals_the_sequential_sum() {
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::ops::attention_avx2::available() {
            use crate::cpu::ops::attention_avx2::dot_f16_exact_f64;
            // Random f16 bit patterns cover tiny, subnormal, huge, infinite and NaN values;
            // the scaled normals are what attention sees. Either the fast path declines or it
            // returns the sequential sum's bits.
            let mut state = 0x9e37_79b9_7f4a_7c15u64;
            let mut next = || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state
            };
            let (mut taken, mut declined) = (0, 0);
            for case in 0..20_000 {
                let n = [8, 64, 96, 120][case % 4];
                let mut gen = |_| {
                    let r = next();
                    match case % 3 {
                        0 => f16::from_bits(r as u16),
                        1 => f16::from_f32(
                            ((r >> 11) as f64 / (1u64 << 53) as f64 * 8.0 - 4.0) as f32,
                        ),
                        // Mostly ordinary values with an occasional tiny one.
                        _ if r % 50 == 0 => f16::from_bits((r >> 16) as u16 & 0x83ff),
                        _ => f16::from_f32(
                            ((r >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32,
                        ),
                    }
                };
                let k: Vec<f16> = (0..n).map(&mut gen).collect();
                let q: Vec<f16> = (0..n).map(&mut gen).collect();
                let want = head_plus_leftovers(0.0, &k, &q);
                // SAFETY: checked `available()` above; n % 8 == 0.
                match unsafe { dot_f16_exact_f64(&k, &q) } {
                    Some(got) => {
                        taken += 1;
                        assert_eq!(
                            got.to_bits(),
                            want.to_bits(),
                            "case {case}: {got} vs {want}"
                        );
                    }
                    None => declined += 1,
                }
            }
            // A row whose sequential sum rounds: 2^30 + 2^-28 is 2^30 in f64, so the sequential
            // sum ends at 0 while summing the lanes apart would give 2^-28.
            let mut k = vec![f16::ZERO; 8];
            let mut q = vec![f16::ZERO; 8];
            (k[0], q[0]) = (f16::from_f32(32768.0), f16::from_f32(32768.0));
            (k[1], q[1]) = (f16::from_f32(2f32.powi(-14)), f16::from_f32(2f32.powi(-14)));
            (k[4], q[4]) = (f16::from_f32(-32768.0), f16::from_f32(32768.0));
            assert_eq!(head_plus_leftovers(0.0, &k, &q), 0.0);
            // SAFETY: as above.
            assert_eq!(unsafe { dot_f16_exact_f64(&k, &q) }, None);
            // The check must let ordinary rows through, and must decline some hostile ones.
            assert!(
                taken > 10_000 && declined > 100,
                "taken {taken}, declined {declined}"
            );
        }
    }

    #[test]
    fn a_row_does_not_depend_on_the_batch() {
        let (hd, n_head, n_head_kv) = (64, 2, 1);
        let kv = layer(16, n_head_kv, hd);
        let p = AttentionParams {
            layer: 0,
            n_head,
            n_head_kv,
            head_dim: hd,
            scale: 0.125,
            window: None,
            softcap: Some(20.0),
        };
        let q: Vec<f32> = (0..hd * n_head * 4)
            .map(|i| ((i * 13 % 37) as f32 / 18.0) - 1.0)
            .collect();
        let mut batch = vec![0.0; q.len()];
        attention(&SequentialPool, &q, &kv, 6, &p, &mut batch);
        for t in 0..4 {
            let n = hd * n_head;
            let mut alone = vec![0.0; n];
            attention(
                &SequentialPool,
                &q[t * n..(t + 1) * n],
                &kv,
                6 + t,
                &p,
                &mut alone,
            );
            assert_eq!(alone, batch[t * n..(t + 1) * n]);
        }
    }
}
