//! The scalar "leftovers" loop of ggml's `ggml_vec_dot_f16` (the elements after its whole
//! 128-element f16 steps): each exact f32 product of two f16 added to an f64 sum, in element
//! order. For heads shorter than 128 (SmolLM2's 64) that loop is the whole score.

use tessera_quant::isa::Simd;

/// The loop itself: `sum` plus each product `k[i] * q[i]` (exact in f32) in f64, in order.
#[inline]
pub fn head_plus_leftovers(mut sum: f64, k: &[f32], q: &[f32]) -> f32 {
    for (a, b) in k.iter().zip(q) {
        sum += (a * b) as f64;
    }
    sum as f32
}

/// `head_plus_leftovers(0.0, k, q)` computed out of order, vector by vector, when that is
/// provably the same value; `None` otherwise (then the caller runs the sequential loop).
/// `k.len()` is a multiple of `S::LANES`; `k` and `q` hold f16-exact values.
///
/// Why any order gives the same bits: each product `a·b` of two f16 is `ma·mb·2^e` with
/// `ma·mb < 2^22`, so it is a multiple of a power of two greater than `|a·b| / 2^22`. All the
/// products, and so every partial sum in any order, are multiples of the smallest of those
/// powers, `G > pmin / 2^22` (`pmin`: the smallest non-zero `|a·b|`). A multiple of `G` whose
/// magnitude is under `2^53·G` is an f64, so when `Σ|a·b| < 2^31·pmin` every addition is exact
/// and the sum is the exact one whatever the order. The check uses `2^30` to leave room for
/// the rounding of the computed `Σ|a·b|`, which is summed in f32 (a relative error under
/// `n·2^-24`, far below the factor of 2 left; no overflow: an f16 product is below 2^32).
/// Products of non-finite or huge values fail the check.
#[inline(always)]
pub fn exact_dot_f64<S: Simd>(s: S, k: &[f32], q: &[f32]) -> Option<f32> {
    exact_dot_f64_x4(s, [k; 4], q)[0]
}

/// [`exact_dot_f64`] of four keys against one query, their loops interleaved so that the four
/// chains of f64 additions overlap.
#[inline(always)]
pub fn exact_dot_f64_x4<S: Simd>(s: S, k: [&[f32]; 4], q: &[f32]) -> [Option<f32>; 4] {
    let n = q.len();
    debug_assert!(n.is_multiple_of(S::LANES) && k.iter().all(|k| k.len() >= n));
    let (inf, zero) = (s.splat(f32::INFINITY), s.splat(0.0));
    let mut sum = [s.wide_zero(); 4];
    let mut abs_sum = [zero; 4];
    let mut pmin = [inf; 4];
    let mut i = 0;
    while i + S::LANES <= n {
        let qv = s.load(&q[i..]);
        for b in 0..4 {
            let p = s.mul(s.load(&k[b][i..]), qv); // exact
            let a = s.abs(p);
            // Zero products do not bound G (`a <= 0` is `a == 0` here, and false for NaN).
            pmin[b] = s.min(pmin[b], s.select(s.le(a, zero), inf, a));
            sum[b] = s.wide_add(sum[b], p);
            abs_sum[b] = s.add(abs_sum[b], a);
        }
        i += S::LANES;
    }
    // First the bound for the four keys at once (their Σ|a·b| together against the smallest
    // of their products: it implies each key's bound, with the same room for rounding), which
    // ordinary rows pass; where it fails, each key's own bound.
    let joint_abs = s.lane_sum(s.add(s.add(abs_sum[0], abs_sum[1]), s.add(abs_sum[2], abs_sum[3])));
    let joint_min = s.lane_min(s.min(s.min(pmin[0], pmin[1]), s.min(pmin[2], pmin[3])));
    let joint = within_bound(joint_abs as f64, joint_min as f64);
    // Loops, not closures: a closure would not inline the ISA's intrinsics here.
    let mut out = [None; 4];
    for b in 0..4 {
        out[b] = if joint {
            Some(s.wide_total(sum[b]) as f32)
        } else {
            checked_total(s, sum[b], abs_sum[b], pmin[b])
        };
    }
    out
}

/// `abs_sum < pmin · 2^30` (false for NaN and infinities: a NaN or infinite product makes
/// `abs_sum` one, whatever the fold made of `pmin`). Only zero products leave `pmin` infinite,
/// and then `abs_sum` is 0 and so is every partial sum.
#[inline(always)]
fn within_bound(abs_sum: f64, pmin: f64) -> bool {
    abs_sum.partial_cmp(&(pmin * (1u64 << 30) as f64)) == Some(core::cmp::Ordering::Less)
}

/// The sum, if the bound above proves it exact.
#[inline(always)]
fn checked_total<S: Simd>(s: S, sum: S::WideSum, abs_sum: S::F32, pmin: S::F32) -> Option<f32> {
    let (pmin, abs_sum) = (s.lane_min(pmin) as f64, s.lane_sum(abs_sum) as f64);
    if abs_sum == 0.0 {
        return Some(0.0); // every product is zero: the sequential sum is +0
    }
    if !within_bound(abs_sum, pmin) {
        return None;
    }
    Some(s.wide_total(sum) as f32)
}
