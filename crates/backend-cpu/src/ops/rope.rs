//! Rotary position embedding, computed like ggml: for each position the angles are built
//! cumulatively in f32 (`theta *= theta_scale` per pair, `theta_scale = base^(-2/n_dims)`), so
//! the cos/sin match llama.cpp's bit for bit.

use tessera_core::graph::{RopeMode, RopeParams};
#[cfg(target_arch = "x86_64")]
use tessera_quant::isa::{self, Avx2};

/// Fills `cache` (length `n_dims`) with interleaved (cos, sin) per rotated pair at position `pos`.
/// `factors` (one per pair) divide the angles, as ggml's `freq_factors`; a pair without one
/// divides by 1, which changes no bit.
pub fn rope_cache(pos: f32, p: &RopeParams, factors: Option<&[f32]>, cache: &mut [f32]) {
    let theta_scale = p.theta_scale();
    let mut theta = pos;
    let mscale = p.mscale();
    for (i, pair) in cache[..p.n_dims].chunks_exact_mut(2).enumerate() {
        let t = p.angle(theta, factors.map_or(1.0, |f| f[i]), i);
        pair[0] = t.cos() * mscale;
        pair[1] = t.sin() * mscale;
        theta *= theta_scale;
    }
}

/// Rotates one head (length ≥ n_dims) in place with a cache from [`rope_cache`]. The products
/// are fused the way GCC contracts ggml's `x0*cos - x1*sin` on FMA machines, so rotated values
/// match llama.cpp's to the bit.
pub fn rotate_head(head: &mut [f32], cache: &[f32], p: &RopeParams) {
    rotate(head, cache, p)
}

/// [`rotate_head`]'s body, inlined into each build of it ([`rotate_heads_avx2`]).
#[inline(always)]
fn rotate(head: &mut [f32], cache: &[f32], p: &RopeParams) {
    match p.mode {
        RopeMode::Normal => {
            for (x, cs) in head[..p.n_dims]
                .chunks_exact_mut(2)
                .zip(cache.chunks_exact(2))
            {
                let (x0, x1) = (x[0], x[1]);
                let (c, s) = (cs[0], cs[1]);
                x[0] = x0.mul_add(c, -(x1 * s));
                x[1] = x0.mul_add(s, x1 * c);
            }
        }
        RopeMode::Neox => {
            let half = p.n_dims / 2;
            for (i, cs) in cache[..p.n_dims].chunks_exact(2).enumerate() {
                let (x0, x1) = (head[i], head[i + half]);
                let (c, s) = (cs[0], cs[1]);
                head[i] = x0.mul_add(c, -(x1 * s));
                head[i + half] = x0.mul_add(s, x1 * c);
            }
        }
    }
}

/// Rotates `x` viewed as `[head_dim, n_heads, n_tokens]`; token `t` is at position `pos0 + t`.
/// `factors` as in [`rope_cache`].
pub fn rope(
    x: &[f32],
    out: &mut [f32],
    head_dim: usize,
    n_heads: usize,
    pos0: usize,
    p: &RopeParams,
    factors: Option<&[f32]>,
) {
    out.copy_from_slice(x);
    let mut cache = CACHE.take();
    cache.resize(p.n_dims, 0.0);
    for (t, tok) in out.chunks_exact_mut(head_dim * n_heads).enumerate() {
        rope_cache((pos0 + t) as f32, p, factors, &mut cache);
        rotate_heads(tok, head_dim, &cache, p);
    }
    CACHE.set(cache);
}

/// [`rotate_head`] on each head of one token. `mul_add` is a call to the software `fmaf`
/// unless the code is compiled for FMA (the native build targets baseline x86-64), so at the
/// AVX2 dispatch level (which includes FMA) a copy compiled for it runs: the same values
/// (`fmaf` is exact either way), without two calls per rotated pair (most of a decode step's
/// rope node's time went to them).
fn rotate_heads(tok: &mut [f32], head_dim: usize, cache: &[f32], p: &RopeParams) {
    #[cfg(target_arch = "x86_64")]
    if isa::level().has_avx2() {
        if let Some(s) = Avx2::new() {
            // SAFETY: the token proves the features.
            return unsafe { rotate_heads_avx2(s, tok, head_dim, cache, p) };
        }
    }
    for head in tok.chunks_exact_mut(head_dim) {
        rotate(head, cache, p);
    }
}

/// [`rotate_heads`] compiled for AVX2 and FMA.
///
/// # Safety
/// None beyond the token's existence (it proves the CPU runs AVX2, FMA and F16C).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rotate_heads_avx2(
    _: Avx2,
    tok: &mut [f32],
    head_dim: usize,
    cache: &[f32],
    p: &RopeParams,
) {
    for head in tok.chunks_exact_mut(head_dim) {
        rotate(head, cache, p);
    }
}

thread_local! {
    /// Each thread's angle table for [`rope`] (reused: decode steps allocate nothing).
    static CACHE: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(mode: RopeMode) -> RopeParams {
        RopeParams {
            n_dims: 8,
            mode,
            freq_base: 10000.0,
            freq_scale: 1.0,
            freq_factors: None,
            attn_factor: 1.0,
            yarn: None,
        }
    }

    /// Direct formula in f64 with the pair frequencies base^(-2i/n).
    fn reference(x: &[f32], pos: f64, p: &RopeParams) -> Vec<f64> {
        let mut y: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let half = p.n_dims / 2;
        for i in 0..half {
            let th = pos * (p.freq_base as f64).powf(-2.0 * i as f64 / p.n_dims as f64);
            let (a, b) = match p.mode {
                RopeMode::Normal => (2 * i, 2 * i + 1),
                RopeMode::Neox => (i, i + half),
            };
            let (x0, x1) = (x[a] as f64, x[b] as f64);
            y[a] = x0 * th.cos() - x1 * th.sin();
            y[b] = x0 * th.sin() + x1 * th.cos();
        }
        y
    }

    #[test]
    fn matches_the_formula_for_both_modes_and_keeps_the_tail() {
        for mode in [RopeMode::Normal, RopeMode::Neox] {
            let p = params(mode);
            // head_dim 10: the last 2 dims are not rotated.
            let x: Vec<f32> = (0..20).map(|i| (i as f32 * 0.31).sin()).collect();
            let mut y = vec![0.0; 20];
            rope(&x, &mut y, 10, 1, 7, &p, None);
            for t in 0..2 {
                let r = reference(&x[t * 10..t * 10 + 10], (7 + t) as f64, &p);
                for i in 0..10 {
                    assert!(
                        (y[t * 10 + i] as f64 - r[i]).abs() < 1e-4,
                        "{mode:?} t{t} i{i}"
                    );
                }
                assert_eq!(&y[t * 10 + 8..t * 10 + 10], &x[t * 10 + 8..t * 10 + 10]);
            }
        }
    }

    #[test]
    fn position_zero_is_identity_and_rotation_composes() {
        let p = params(RopeMode::Neox);
        let x: Vec<f32> = (0..8).map(|i| i as f32 - 3.0).collect();
        let mut y = vec![0.0; 8];
        rope(&x, &mut y, 8, 1, 0, &p, None);
        assert_eq!(x, y);
        // rotating by 3 then by 4 ≈ rotating by 7
        let mut a = vec![0.0; 8];
        let mut b = vec![0.0; 8];
        rope(&x, &mut a, 8, 1, 3, &p, None);
        rope(&a, &mut b, 8, 1, 4, &p, None);
        rope(&x, &mut y, 8, 1, 7, &p, None);
        for (u, v) in b.iter().zip(&y) {
            assert!((u - v).abs() < 1e-5);
        }
    }

    #[test]
    fn frequency_factors_divide_the_angles() {
        // A factor of 2 on every pair halves every angle, as a frequency scale of 0.5 does
        // (both are exact scalings by a power of two).
        let p = params(RopeMode::Neox);
        let halved = RopeParams {
            freq_scale: 0.5,
            ..p
        };
        let x: Vec<f32> = (0..8).map(|i| 0.3 * i as f32 - 1.0).collect();
        let (mut a, mut b) = (vec![0.0; 8], vec![0.0; 8]);
        rope(&x, &mut a, 8, 1, 5, &p, Some(&[2.0; 4]));
        rope(&x, &mut b, 8, 1, 5, &halved, None);
        assert_eq!(a, b);
        rope(&x, &mut b, 8, 1, 5, &p, None);
        assert_ne!(a, b);
    }
}
