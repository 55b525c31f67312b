//! AVX2 + FMA + F16C versions of the attention inner loops, bit-identical to the scalar ones in
//! `attention.rs` (same operations in the same order; checked by the tests there). Every
//! `unsafe fn` here needs AVX2, FMA and F16C: its callers hold a `tessera_quant::isa::Avx2`.

#![cfg(target_arch = "x86_64")]

#[cfg(test)]
use half::f16;
use std::arch::x86_64::*;

/// Rounds 8 floats to f16 precision (round to nearest even) and back.
#[inline(always)]
unsafe fn round_f16(x: __m256) -> __m256 {
    _mm256_cvtph_ps(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x))
}

/// 8 lanes of [`f16_arith::fma_f16`]: `f16(a*b + c)` rounded once, a, b, c f16-exact —
/// unless a lane of the returned mark is zero: such lanes must be redone with
/// [`fma_f16x8_exact`]. Marks of several calls combine with [`combine_marks`] and are tested
/// with [`any_marked`].
///
/// Fast path: `s = f32(a*b + c)` (one hardware FMA; `a*b` is exact) rounded to f16 is already
/// the once-rounded result unless `s` is an f16 midpoint. Why: if the exact sum and `s`
/// rounded to different f16 values, an f16 midpoint `m` would lie between them (inclusive);
/// `m` is an f32, and `s` is the f32 nearest the exact sum, so `m` can only be `s` itself.
/// A midpoint has at most 12 significant bits: its low 12 f32 mantissa bits are zero. The
/// mark is those 12 bits (shifted to the top), so it is zero for every midpoint, and also
/// for (harmless) lanes where `s` is an f16 already; a NaN or an f16 overflow comes out the
/// same on either path.
#[inline(always)]
unsafe fn fma_f16x8_fast(a: __m256, b: __m256, c: __m256) -> (__m256, __m256i) {
    let s = _mm256_fmadd_ps(a, b, c);
    (
        round_f16(s),
        _mm256_slli_epi32::<20>(_mm256_castps_si256(s)),
    )
}

/// The marks of no call yet.
#[inline(always)]
unsafe fn no_marks() -> __m256i {
    _mm256_set1_epi32(-1)
}

/// Two marks of [`fma_f16x8_fast`] combined: a lane is zero where either is.
#[inline(always)]
unsafe fn combine_marks(a: __m256i, b: __m256i) -> __m256i {
    _mm256_min_epu32(a, b)
}

/// Whether combined marks ask for the exact path in some lane.
#[inline(always)]
unsafe fn any_marked(marks: __m256i) -> bool {
    let zero = _mm256_cmpeq_epi32(marks, _mm256_setzero_si256());
    _mm256_testz_si256(zero, zero) == 0
}

/// `round_f16` of one value, with F16C.
#[inline(always)]
unsafe fn round_f16_1(x: f32) -> f32 {
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(
        _mm_set_ss(x),
    )))
}

/// [`fma_f16x8`] for any lanes: the same TwoSum, rounding to odd and conversion as the scalar
/// emulation, lane-wise.
#[inline(always)]
unsafe fn fma_f16x8_exact(a: __m256, b: __m256, c: __m256) -> __m256 {
    let p = _mm256_mul_ps(a, b); // exact
    let s = _mm256_add_ps(p, c);
    let bb = _mm256_sub_ps(s, p);
    let e = _mm256_add_ps(_mm256_sub_ps(p, _mm256_sub_ps(s, bb)), _mm256_sub_ps(c, bb));
    // Round to odd: where inexact, finite and even, step one ulp towards e.
    let si = _mm256_castps_si256(s);
    let one = _mm256_set1_epi32(1);
    let inexact = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_NEQ_OQ>(e, _mm256_setzero_ps()));
    let even = _mm256_cmpeq_epi32(_mm256_and_si256(si, one), _mm256_setzero_si256());
    let abs = _mm256_and_si256(si, _mm256_set1_epi32(0x7fff_ffff));
    let finite = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x7f80_0000), abs);
    let mask = _mm256_and_si256(inexact, _mm256_and_si256(even, finite));
    // +1 (away from zero) when e has the sign of s, else -1.
    let step = _mm256_or_si256(
        _mm256_srai_epi32::<31>(_mm256_xor_si256(si, _mm256_castps_si256(e))),
        one,
    );
    let odd = _mm256_add_epi32(si, _mm256_and_si256(step, mask));
    round_f16(_mm256_castsi256_ps(odd))
}

/// `f16(a + b)` for f16-exact lanes, rounded once: the f32 sum rounded to f16 is always that.
/// Why: where the f32 sum is exact, this is one rounding. It is inexact only when the smaller
/// operand `b` lies below the f32 ulp of the larger `a` (exponent `E`): f16 `b` is a multiple
/// of its own ulp `2^(Eb-10)`, so `Eb < E - 13` and `|b| < 2^(E-13)`, under half the distance
/// from `a` to its nearest f16 midpoint (`2^(E-11)`, or `2^(E-12)` where `a` is a power of two
/// and the sum falls into the binade below). The exact sum and its f32 rounding then both lie
/// strictly between `a` and that midpoint and round to `a`. (Two f16 subnormals add exactly in f32;
/// an f16 overflow rounds to infinity either way.)
#[inline(always)]
unsafe fn add_f16x8(a: __m256, b: __m256) -> __m256 {
    round_f16(_mm256_add_ps(a, b))
}

/// [`f16_arith::dot_steps`](super::f16_arith::dot_steps) (the f16 arithmetic of an
/// AVX512-FP16 build), bit for bit, for four keys against one query: `k[b]` and `q` hold
/// f16-exact values, all of one length, a multiple of 128. Four independent dot products keep
/// the CPU busy through the rounding latencies, and their last reduction steps share registers.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (see [`available`]).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_f16_steps_x4(k: [&[f32]; 4], q: &[f32]) -> [f32; 4] {
    let n = q.len();
    debug_assert!(n % 128 == 0 && n > 0 && k.iter().all(|k| k.len() == n));
    let (kp, qp) = (k.map(|k| k.as_ptr()), q.as_ptr());
    // acc[b][r]: lanes 8r..8r+8 of key b's 128 (the 4 registers of 32 halves are
    // acc[b][4R..4R+4]).
    let mut acc = [[_mm256_setzero_ps(); 16]; 4];
    // SAFETY (every load below): i + 8r + 8 <= n, the length of q and of each k[b].
    // The first step adds to +0 (a -0 product gives +0, as there): the product is exact in
    // f32, so one rounding.
    for r in 0..16 {
        let qv = _mm256_loadu_ps(qp.add(8 * r));
        for b in 0..4 {
            let kv = _mm256_loadu_ps(kp[b].add(8 * r));
            acc[b][r] = round_f16(_mm256_fmadd_ps(kv, qv, _mm256_setzero_ps()));
        }
    }
    for i in (128..n).step_by(128) {
        for r in 0..16 {
            let qv = _mm256_loadu_ps(qp.add(i + 8 * r));
            let kv: [__m256; 4] = std::array::from_fn(|b| _mm256_loadu_ps(kp[b].add(i + 8 * r)));
            let fast: [(__m256, __m256i); 4] =
                std::array::from_fn(|b| fma_f16x8_fast(kv[b], qv, acc[b][r]));
            let marks = combine_marks(
                combine_marks(fast[0].1, fast[1].1),
                combine_marks(fast[2].1, fast[3].1),
            );
            let exact = any_marked(marks);
            for b in 0..4 {
                acc[b][r] = if exact {
                    fma_f16x8_exact(kv[b], qv, acc[b][r])
                } else {
                    fast[b].0
                };
            }
        }
    }
    // Per key down to 8 lanes.
    let z = [
        reduce_to_8_lanes(&acc[0]),
        reduce_to_8_lanes(&acc[1]),
        reduce_to_8_lanes(&acc[2]),
        reduce_to_8_lanes(&acc[3]),
    ];
    // Then lanes i + i+4, i + i+2, i + i+1 of each key, two or four keys per register:
    // [z0 lo | z1 lo] + [z0 hi | z1 hi] = [a0..a3 | b0..b3] (a, b: the 4-lane sums of keys 0, 1).
    let ab = add_f16x8(
        _mm256_permute2f128_ps::<0x20>(z[0], z[1]),
        _mm256_permute2f128_ps::<0x31>(z[0], z[1]),
    );
    let cd = add_f16x8(
        _mm256_permute2f128_ps::<0x20>(z[2], z[3]),
        _mm256_permute2f128_ps::<0x31>(z[2], z[3]),
    );
    // [a0 a1 c0 c1 | b0 b1 d0 d1] + [a2 a3 c2 c3 | b2 b3 d2 d3]
    let w = add_f16x8(
        _mm256_shuffle_ps::<0b01_00_01_00>(ab, cd),
        _mm256_shuffle_ps::<0b11_10_11_10>(ab, cd),
    );
    // Pairs (0,1), (2,3), ... swapped and added: lanes 0, 2, 4, 6 hold keys 0, 2, 1, 3.
    let t = add_f16x8(w, _mm256_permute_ps::<0b10_11_00_01>(w));
    let mut lanes = [0.0f32; 8];
    _mm256_storeu_ps(lanes.as_mut_ptr(), t);
    [lanes[0], lanes[4], lanes[2], lanes[6]]
}

/// One key's 16 accumulator registers summed (in f16) down to 8 lanes: x0 += x2, x1 += x3,
/// x0 += x1 over registers of 32 lanes, then `_mm512_reduce_add_ph`'s lanes i + i+16 and
/// i + i+8.
#[inline(always)]
unsafe fn reduce_to_8_lanes(a: &[__m256; 16]) -> __m256 {
    let x0 = add_f16x8(add_f16x8(a[0], a[8]), add_f16x8(a[4], a[12]));
    let x1 = add_f16x8(add_f16x8(a[1], a[9]), add_f16x8(a[5], a[13]));
    let x2 = add_f16x8(add_f16x8(a[2], a[10]), add_f16x8(a[6], a[14]));
    let x3 = add_f16x8(add_f16x8(a[3], a[11]), add_f16x8(a[7], a[15]));
    add_f16x8(add_f16x8(x0, x2), add_f16x8(x1, x3))
}

/// [`f16_arith::mad_steps`](super::f16_arith::mad_steps) for `N` heads that share one V row:
/// `y[h] = f16(x·f16(v[h]) + y[h])`; every `y[h].len() % 64 == 0` and `<= x.len()`, `x`
/// f16-exact. The heads' accumulators are independent streams the CPU can overlap.
///
/// # Safety
/// As [`dot_f16_steps_x4`].
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn mad_f16_steps<const N: usize>(y: [&mut [f32]; N], x: &[f32], v: [f32; N]) {
    let n = x.len().min(y.iter().map(|y| y.len()).min().unwrap_or(0));
    debug_assert!(n % 64 == 0);
    let v = v.map(|v| round_f16_1(v));
    // A factor of 1 (each new running maximum) or 0 (an underflowed weight) makes the f32 sum
    // exact, so no lane needs the exact path there (the mark would fire on about half the lanes
    // for a factor of 1).
    let check = v.map(|v| v != 1.0 && v != 0.0);
    let vv = v.map(|v| _mm256_set1_ps(v));
    let yp = y.map(|y| y.as_mut_ptr());
    let xp = x.as_ptr();
    for i in (0..n).step_by(64) {
        // SAFETY (all loads and stores): i + 8r + 8 <= n, within x and every y[h].
        let xv: [__m256; 8] = std::array::from_fn(|r| _mm256_loadu_ps(xp.add(i + 8 * r)));
        for h in 0..N {
            let mut out = [_mm256_setzero_ps(); 8];
            let mut marks = no_marks();
            for r in 0..8 {
                let a = _mm256_loadu_ps(yp[h].add(i + 8 * r));
                let (o, m) = fma_f16x8_fast(xv[r], vv[h], a);
                out[r] = o;
                marks = combine_marks(marks, m);
            }
            if check[h] && any_marked(marks) {
                for (r, o) in out.iter_mut().enumerate() {
                    let a = _mm256_loadu_ps(yp[h].add(i + 8 * r));
                    *o = fma_f16x8_exact(_mm256_loadu_ps(xp.add(i + 8 * r)), vv[h], a);
                }
            }
            for (r, o) in out.iter().enumerate() {
                _mm256_storeu_ps(yp[h].add(i + 8 * r), *o);
            }
        }
    }
}

/// `attention::head_plus_leftovers(0.0, k, q)` — the sequential f64 sum of the exact f16
/// products — computed out of order when that is provably the same value; `None` otherwise
/// (then the caller runs the sequential loop). `k.len() % 8 == 0`.
///
/// Why any order gives the same bits: each product `a·b` of two f16 is `ma·mb·2^e` with
/// `ma·mb < 2^22`, so it is a multiple of a power of two greater than `|a·b| / 2^22`. All the
/// products, and so every partial sum in any order, are multiples of the smallest of those
/// powers, `G > pmin / 2^22` (`pmin`: the smallest non-zero `|a·b|`). A multiple of `G` whose
/// magnitude is under `2^53·G` is an f64, so when `Σ|a·b| < 2^31·pmin` every addition is exact
/// and the sum is the exact one whatever the order. The check uses `2^30` to leave room for
/// the rounding of the computed `Σ|a·b|`. Products of non-finite or huge values fail the check.
///
/// # Safety
/// As [`dot_f16_steps_x4`].
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_f16_exact_f64(k: &[f32], q: &[f32]) -> Option<f32> {
    debug_assert!(k.len() % 8 == 0 && q.len() >= k.len());
    let (kp, qp) = (k.as_ptr(), q.as_ptr());
    let abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
    let inf = _mm256_set1_ps(f32::INFINITY);
    let (mut sum_lo, mut sum_hi) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    let (mut abs_lo, mut abs_hi) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    let mut pmin = inf;
    for i in (0..k.len()).step_by(8) {
        // SAFETY: i + 8 <= k.len() <= q.len().
        let p = _mm256_mul_ps(_mm256_loadu_ps(kp.add(i)), _mm256_loadu_ps(qp.add(i))); // exact
        let a = _mm256_and_ps(p, abs_mask);
        let zero = _mm256_cmp_ps::<_CMP_EQ_OQ>(a, _mm256_setzero_ps());
        pmin = _mm256_min_ps(pmin, _mm256_blendv_ps(a, inf, zero));
        sum_lo = _mm256_add_pd(sum_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
        sum_hi = _mm256_add_pd(sum_hi, _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(p)));
        abs_lo = _mm256_add_pd(abs_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(a)));
        abs_hi = _mm256_add_pd(abs_hi, _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(a)));
    }
    let mut lanes = [0.0f64; 4];
    _mm256_storeu_pd(lanes.as_mut_ptr(), _mm256_add_pd(abs_lo, abs_hi));
    let abs_sum: f64 = lanes.iter().sum();
    let mut mins = [0.0f32; 8];
    _mm256_storeu_ps(mins.as_mut_ptr(), pmin);
    let pmin = mins.iter().fold(f32::INFINITY, |m, &x| m.min(x)) as f64;
    if pmin == f64::INFINITY {
        return Some(0.0); // every product is zero
    }
    // `abs_sum < pmin * 2^30`, false for NaN and infinities.
    if !(abs_sum < pmin * (1u64 << 30) as f64) {
        return None;
    }
    _mm256_storeu_pd(lanes.as_mut_ptr(), _mm256_add_pd(sum_lo, sum_hi));
    Some(((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) as f32)
}

/// `acc = f16(fma(v, vs, acc))`; `acc.len() % 8 == 0`, `v.len() >= acc.len()`.
///
/// # Safety
/// As [`dot_f16_steps_x4`].
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn mad_f16(acc: &mut [f32], v: &[f32], vs: f32) {
    debug_assert!(v.len() >= acc.len());
    let s = _mm256_set1_ps(vs);
    for (i, c) in acc.chunks_exact_mut(8).enumerate() {
        let a = _mm256_loadu_ps(c.as_ptr());
        // SAFETY: 8i + 8 <= acc.len() <= v.len().
        let x = _mm256_loadu_ps(v.as_ptr().add(8 * i));
        _mm256_storeu_ps(c.as_mut_ptr(), round_f16(_mm256_fmadd_ps(x, s, a)));
    }
}

#[cfg(test)]
mod tests {
    use super::super::f16_arith;
    use super::super::f16_arith::tests::Rng;
    use super::*;

    /// One fused multiply-add as the kernels do it: the fast path, redone exactly if marked.
    unsafe fn fma_f16x8(a: __m256, b: __m256, c: __m256) -> __m256 {
        let (r, marks) = fma_f16x8_fast(a, b, c);
        if any_marked(marks) {
            fma_f16x8_exact(a, b, c)
        } else {
            r
        }
    }

    #[test]
    fn fma_lanes_equal_the_scalar_emulation() {
        if tessera_quant::isa::Avx2::new().is_none() {
            return;
        }
        let mut rng = Rng(0xdead_beef_1234_5678);
        for _ in 0..200_000 {
            let v: [[f32; 8]; 3] =
                std::array::from_fn(|_| std::array::from_fn(|_| rng.f16().to_f32()));
            let mut got = [0.0f32; 8];
            // SAFETY: checked the CPU runs AVX2/FMA/F16C.
            unsafe {
                let r = fma_f16x8(
                    _mm256_loadu_ps(v[0].as_ptr()),
                    _mm256_loadu_ps(v[1].as_ptr()),
                    _mm256_loadu_ps(v[2].as_ptr()),
                );
                _mm256_storeu_ps(got.as_mut_ptr(), r);
            }
            for l in 0..8 {
                let want = f16_arith::fma_f16(v[0][l], v[1][l], v[2][l]);
                assert_eq!(
                    got[l].to_bits(),
                    want.to_bits(),
                    "{} {} {}",
                    v[0][l],
                    v[1][l],
                    v[2][l]
                );
            }
        }
    }

    /// The plain f32 sum rounded once, against the f64 sum rounded once, on f16 pairs of every
    /// exponent (random bit patterns, NaN and infinities included) and on near-equal pairs.
    #[test]
    fn add_lanes_equal_the_scalar_emulation() {
        if tessera_quant::isa::Avx2::new().is_none() {
            return;
        }
        let mut rng = Rng(0x5eed_0add);
        for case in 0..250_000 {
            let a: [f32; 8] = std::array::from_fn(|_| rng.f16().to_f32());
            let b: [f32; 8] = std::array::from_fn(|l| match case % 2 {
                0 => rng.f16().to_f32(),
                // Same binade, opposite sign or not: the sums that cancel or need 12 bits.
                _ => f16::from_bits(
                    rng.f16().to_bits() & 0x83ff | f16::from_f32(a[l]).to_bits() & 0x7c00,
                )
                .to_f32(),
            });
            let mut got = [0.0f32; 8];
            // SAFETY: checked the CPU runs AVX2/FMA/F16C.
            unsafe {
                let r = add_f16x8(_mm256_loadu_ps(a.as_ptr()), _mm256_loadu_ps(b.as_ptr()));
                _mm256_storeu_ps(got.as_mut_ptr(), r);
            }
            for l in 0..8 {
                let want = f16_arith::add_f16(a[l], b[l]);
                assert!(
                    got[l].to_bits() == want.to_bits() || (got[l].is_nan() && want.is_nan()),
                    "{} + {}: {} vs {want}",
                    a[l],
                    b[l],
                    got[l]
                );
            }
        }
    }

    /// The fast path's blind spot: `a*b + c` whose f32 rounding lands exactly on an f16
    /// midpoint. (1 + 2^-10)(1 - 2^-10) + 2050 = 2051 - 2^-20 rounds in f32 to 2051, the midpoint
    /// of 2050 and 2052; ties-to-even of that would give 2052, the exact sum rounds to 2050.
    #[test]
    fn an_f32_sum_on_an_f16_midpoint_is_rounded_from_the_exact_sum() {
        if tessera_quant::isa::Avx2::new().is_none() {
            return;
        }
        let (a, b) = (1.0 + 2f32.powi(-10), 1.0 - 2f32.powi(-10));
        for (c, want) in [
            (2050.0f32, 2050.0f32),
            (-2050.0, -2050.0),
            (2048.0, 2048.0),
            (2047.0, 2048.0),
        ] {
            assert_eq!(f16_arith::fma_f16(a, b, c), want, "scalar, c = {c}");
            let mut got = [0.0f32; 8];
            // SAFETY: checked the CPU runs AVX2/FMA/F16C.
            unsafe {
                let r = fma_f16x8(_mm256_set1_ps(a), _mm256_set1_ps(b), _mm256_set1_ps(c));
                _mm256_storeu_ps(got.as_mut_ptr(), r);
            }
            assert_eq!(got, [want; 8], "c = {c}");
        }
    }

    /// The midpoint case of the test above inside a dot product (key 2, lane 37 of step 2).
    #[test]
    fn a_dot_with_an_f32_midpoint_takes_the_exact_path() {
        if tessera_quant::isa::Avx2::new().is_none() {
            return;
        }
        let mut keys = vec![vec![0.0f32; 256]; 4];
        let mut q = vec![0.0f32; 256];
        (keys[2][37], q[37]) = (2050.0, 1.0);
        (keys[2][128 + 37], q[128 + 37]) = (1.0 + 2f32.powi(-10), 1.0 - 2f32.powi(-10));
        keys[1][5] = 3.0; // q[5] = 0: the other keys stay at zero
                          // SAFETY: checked the CPU runs AVX2/FMA/F16C.
        let got = unsafe { dot_f16_steps_x4(std::array::from_fn(|b| &keys[b][..]), &q) };
        assert_eq!(got, [0.0, 0.0, 2050.0, 0.0]);
        assert_eq!(f16_arith::dot_steps(&keys[2], &q), 2050.0);
    }

    #[test]
    fn steps_equal_the_scalar_emulation() {
        if tessera_quant::isa::Avx2::new().is_none() {
            return;
        }
        let mut rng = Rng(42);
        for case in 0..2000 {
            let n = 128 * (1 + case % 3);
            // Moderate magnitudes (as attention sees) with some tiny and some random values.
            let mut gen = |_| {
                let x = rng.f16().to_f32();
                f16_arith::round_f16(if case % 2 == 0 { x.clamp(-4.0, 4.0) } else { x })
            };
            let keys: Vec<Vec<f32>> = (0..4).map(|_| (0..n).map(&mut gen).collect()).collect();
            let q: Vec<f32> = (0..n).map(&mut gen).collect();
            // SAFETY: checked `available()`; n % 128 == 0.
            let got = unsafe { dot_f16_steps_x4(std::array::from_fn(|b| &keys[b][..]), &q) };
            for (b, k) in keys.iter().enumerate() {
                let want = f16_arith::dot_steps(k, &q);
                assert!(
                    got[b].to_bits() == want.to_bits() || (got[b].is_nan() && want.is_nan()),
                    "dot case {case} key {b}: {} vs {want}",
                    got[b]
                );
            }
            let y0 = keys[0].clone();
            // Factors as the softmax gives them, and 1 (each new running maximum).
            // Factors as the softmax gives them, 1 (each new running maximum) and 0.
            let mut factor = || match rng.next() % 5 {
                3 => 1.0,
                4 => 0.0,
                _ => (rng.next() % 1000) as f32 / 997.0,
            };
            let vs = factor();
            let (mut a, mut b) = (y0.clone(), y0.clone());
            f16_arith::mad_steps(&mut a, &q, vs);
            // SAFETY: as above.
            unsafe { mad_f16_steps([&mut b[..]], &q, [vs]) };
            assert_eq!(a, b, "mad case {case}");
            // Three heads over the same V row, each with its own factor and accumulator.
            let factors = [factor(), factor(), factor()];
            let mut want: Vec<Vec<f32>> = keys[1..].to_vec();
            let mut got = want.clone();
            for (w, &f) in want.iter_mut().zip(&factors) {
                f16_arith::mad_steps(w, &q, f);
            }
            let [g0, g1, g2] = &mut got[..] else {
                unreachable!()
            };
            // SAFETY: as above.
            unsafe { mad_f16_steps([&mut g0[..], &mut g1[..], &mut g2[..]], &q, factors) };
            assert_eq!(want, got, "3-head mad case {case}, factors {factors:?}");
            let (mut a, mut b) = (y0.clone(), y0);
            f16_arith::scale_steps(&mut a, vs);
            // SAFETY: as above.
            crate::ops::attention::scale_f16(
                tessera_quant::isa::Avx2::new().unwrap(),
                &mut b,
                f16_arith::round_f16(vs),
            );
            assert_eq!(a, b, "scale case {case}");
        }
    }
}
