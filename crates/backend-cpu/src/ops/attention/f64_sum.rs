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
#[inline(always)]
pub fn exact_dot_f64<S: Simd>(s: S, k: &[f32], q: &[f32]) -> Option<f32> {
    let holds = bound_holds(KeyMagnitudes::of(s, k), QueryMagnitudes::of(q));
    exact_dot_f64_x4(s, [k; 4], q, [holds; 4])[0]
}

/// What the exactness bound needs of a key row: `Σ|k|` (summed in f32) and the exponent of the
/// smallest f16 ulp among its non-zero values. Computed once per key for all the query rows
/// that meet it.
#[derive(Clone, Copy, Debug)]
pub struct KeyMagnitudes {
    abs_sum: f32,
    ulp_exp: i32,
}

impl KeyMagnitudes {
    /// Of a row of f16-exact values, a multiple of `S::LANES` long.
    #[inline(always)]
    pub fn of<S: Simd>(s: S, k: &[f32]) -> KeyMagnitudes {
        let (inf, zero) = (s.splat(f32::INFINITY), s.splat(0.0));
        let (mut abs_sum, mut min) = (zero, inf);
        let mut i = 0;
        while i + S::LANES <= k.len() {
            let a = s.abs(s.load(&k[i..]));
            abs_sum = s.add(abs_sum, a);
            // Zeros do not bound the ulp (`a <= 0` is `a == 0` here, and false for NaN).
            min = s.min(min, s.select(s.le(a, zero), inf, a));
            i += S::LANES;
        }
        KeyMagnitudes {
            abs_sum: s.lane_sum(abs_sum),
            ulp_exp: f16_ulp_exp(s.lane_min(min)),
        }
    }
}

/// What the exactness bound needs of a query row: `max|q|` and the exponent of the smallest
/// f16 ulp among its non-zero values.
#[derive(Clone, Copy, Debug)]
pub struct QueryMagnitudes {
    max_abs: f32,
    ulp_exp: i32,
}

impl QueryMagnitudes {
    /// Of a row of f16-exact values (once per row: a plain loop).
    pub fn of(q: &[f32]) -> QueryMagnitudes {
        let (mut max, mut min, mut finite) = (0.0f32, f32::INFINITY, true);
        for &x in q {
            let a = x.abs();
            finite &= a.is_finite();
            max = max.max(a);
            if a > 0.0 && a < min {
                min = a;
            }
        }
        QueryMagnitudes {
            // An infinite or NaN value fails every key's bound (see `bound_holds`).
            max_abs: if finite { max } else { f32::INFINITY },
            ulp_exp: f16_ulp_exp(min),
        }
    }
}

/// The exponent of an f16 value's ulp, for the smallest non-zero magnitude of a row: `2^(e-10)`
/// for values in `[2^e, 2^(e+1))`, `2^-24` for f16 subnormals. A row with no non-zero finite
/// value gives f16's largest ulp exponent, 5 (its products are all zero, or the bound fails on
/// a non-finite sum).
fn f16_ulp_exp(min_nonzero: f32) -> i32 {
    if !min_nonzero.is_finite() {
        return 5;
    }
    let e = ((min_nonzero.to_bits() >> 23) & 0xff) as i32 - 127;
    (e.max(-14) - 10).min(5)
}

/// Whether every order of adding up the products `k[i]·q[i]` in f64 gives the exact sum.
///
/// Why: the product of two f16 `a = ma·ua`, `b = mb·ub` (integer `ma`, `mb`; `ua`, `ub` their
/// ulps) is a multiple of `ua·ub`, so every product, and every partial sum in any order, is a
/// multiple of `G = uk·uq`, the smallest ulps of the two rows' non-zero values (zero products
/// are multiples of anything). A multiple of `G` under `2^53·G` in magnitude is an f64, so
/// when `Σ|k[i]·q[i]| < 2^53·G` every addition is exact and the sum is the exact one whatever
/// the order. `Σ|k|·max|q|` bounds that sum; it is checked against `2^51·G`, which leaves
/// room for the rounding of `Σ|k|` in f32 (relative error under `n·2^-24`; the product of two
/// f32 is exact in f64). An f16 product is below 2^32, so nothing overflows; an infinite or
/// NaN value makes the left side infinite or NaN (or `0·inf`, NaN), and the check fails.
#[inline(always)]
pub fn bound_holds(k: KeyMagnitudes, q: QueryMagnitudes) -> bool {
    let lhs = k.abs_sum as f64 * q.max_abs as f64;
    // `G·2^51`: exponents from -48 + 51 up to 10 + 51, a normal f64.
    let rhs = f64::from_bits(((1023 + 51 + k.ulp_exp + q.ulp_exp) as u64) << 52);
    lhs < rhs
}

/// The sums of four keys' products with one query in f64 lanes (their loops interleaved so
/// that the four chains of f64 additions overlap): `Some` where `holds` (from
/// [`bound_holds`]) says that is the sequential sum's value, else `None`.
#[inline(always)]
pub fn exact_dot_f64_x4<S: Simd>(
    s: S,
    k: [&[f32]; 4],
    q: &[f32],
    holds: [bool; 4],
) -> [Option<f32>; 4] {
    let n = q.len();
    debug_assert!(n.is_multiple_of(S::LANES) && k.iter().all(|k| k.len() >= n));
    let mut sum = [s.wide_zero(); 4];
    let mut i = 0;
    while i + S::LANES <= n {
        let qv = s.load(&q[i..]);
        for b in 0..4 {
            sum[b] = s.wide_add(sum[b], s.mul(s.load(&k[b][i..]), qv)); // exact products
        }
        i += S::LANES;
    }
    // Loops, not closures: a closure would not inline the ISA's intrinsics here.
    let mut out = [None; 4];
    for b in 0..4 {
        if holds[b] {
            out[b] = Some(s.wide_total(sum[b]) as f32);
        }
    }
    out
}
