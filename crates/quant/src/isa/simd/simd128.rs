//! [`Simd`] on 4 lanes of wasm SIMD128, with software f16 conversion and rounding (wasm has no
//! f16 instructions) and the exact fused multiply-add of `vec_dot::fma_f32x4` (plain SIMD128
//! has no FMA instruction; the relaxed-SIMD build uses its fused `relaxed_madd`).

use super::Simd;
use crate::isa::Level;
use crate::vec_dot::fma_f32x4;
use core::arch::wasm32::*;
use half::f16;

/// A constant vector read from memory. LLVM puts a `v128.const` at each of its uses, hot
/// loops included, and V8 (Chromium's and Node's wasm engine) builds each one from immediates
/// in three or four instructions every time; a load from a static is one instruction. The read
/// is volatile so that LLVM cannot fold it back into a `v128.const`. Only for loops with
/// registers to spare (decode's matrix-vector products): V8 can rebuild a constant instead of
/// spilling it, not a loaded value, and where registers were short (the 4-row Q5_0 tile) the
/// loads made the loop slower.
#[inline(always)]
pub(crate) fn konst(k: &'static v128) -> v128 {
    // SAFETY: a reference to a static is valid and aligned for reads.
    unsafe { core::ptr::read_volatile(k) }
}

/// `x` in every u32 lane (for [`konst`] statics).
pub(crate) const fn splat_u32(x: u32) -> v128 {
    u32x4(x, x, x, x)
}

/// `x` in every u16 lane (for [`konst`] statics).
pub(crate) const fn splat_u16(x: u16) -> v128 {
    u16x8(x, x, x, x, x, x, x, x)
}

/// `x` in every byte (for [`konst`] statics).
pub(crate) const fn splat_u8(x: u8) -> v128 {
    u8x16(x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x)
}

/// The exponent field of f16 lanes (u16): all ones for infinities and NaNs.
static F16_EXPONENT: v128 = splat_u16(0x7c00);
/// The constants of f16 → f32 conversions (u32 lanes).
static F16_MAGNITUDE: v128 = splat_u32(0x7fff);
static F16_SIGN: v128 = splat_u32(0x8000);
/// 2^112: an f16's exponent and mantissa, shifted into an f32's place, times this is its value.
pub(crate) static F16_SCALE: v128 = splat_u32((127 + 112) << 23);

/// Whether any of the 8 f16 in `h` (u16 lanes) is infinite or NaN (exponent 31), which no
/// real quantization scale is: where none is, [`finite_f16_bits_to_f32`] converts them.
#[inline(always)]
pub(crate) fn any_f16_nonfinite(h: v128) -> bool {
    let exponent = konst(&F16_EXPONENT);
    v128_any_true(i16x8_eq(v128_and(h, exponent), exponent))
}

/// [`Simd128::f16_bits_to_f32`] for f16 that are not infinite or NaN (the low 16 bits of each
/// u32 lane, the high bits zero), in half its operations: each one's exponent and mantissa
/// shifted into an f32's place and scaled by 2^112 is its value, subnormals included (wasm
/// keeps f32 subnormals), and the sign goes on top.
#[inline(always)]
fn finite_f16_bits_to_f32(x: v128) -> v128 {
    let magnitude = v128_and(x, konst(&F16_MAGNITUDE));
    let value = f32x4_mul(i32x4_shl(magnitude, 13), konst(&F16_SCALE));
    v128_or(value, i32x4_shl(v128_and(x, konst(&F16_SIGN)), 16))
}

/// 8 f16 (u16 lanes of `h`) widened exactly to f32, low four first: the finite-only
/// conversion where none is infinite or NaN, else the general one.
#[inline(always)]
pub(crate) fn f16x8_to_f32(h: v128) -> [v128; 2] {
    let (lo, hi) = (u32x4_extend_low_u16x8(h), u32x4_extend_high_u16x8(h));
    if any_f16_nonfinite(h) {
        [Simd128.f16_bits_to_f32(lo), Simd128.f16_bits_to_f32(hi)]
    } else {
        [finite_f16_bits_to_f32(lo), finite_f16_bits_to_f32(hi)]
    }
}

/// SIMD128 is enabled at compile time, so the token always exists in this build.
#[derive(Clone, Copy, Debug, Default)]
pub struct Simd128;

impl Simd128 {
    /// Four f16 values, the low 16 bits of each u32 lane, widened exactly to f32, as
    /// `half::f16::to_f32` does (NaNs quieted, payload kept).
    #[inline(always)]
    pub fn f16_bits_to_f32(self, h: v128) -> v128 {
        let m = v128_and(h, u32x4_splat(0x7fff));
        let shifted = i32x4_shl(m, 13);
        // Normal and subnormal f16: the bits shifted into place are the value times 2^-112, and
        // the scaling by a power of two is exact (wasm keeps f32 subnormals). Infinities and NaNs
        // (exponent 31) come out as 65536 or more, above every finite f16 (65504), which is how
        // they are told apart without integer compares (two instructions each on x86).
        let finite = f32x4_mul(shifted, f32x4_splat(f32::from_bits((127 + 112) << 23)));
        let two16 = f32x4_splat(65536.0);
        let quiet = v128_and(f32x4_gt(finite, two16), u32x4_splat(0x0040_0000));
        let special = v128_or(v128_or(shifted, u32x4_splat(0x7f80_0000)), quiet);
        let value = v128_bitselect(special, finite, f32x4_ge(finite, two16));
        v128_or(i32x4_shl(v128_and(h, u32x4_splat(0x8000)), 16), value)
    }
}

impl Simd for Simd128 {
    const LANES: usize = 4;
    const LEVEL: Level = Level::Simd128;
    type F32 = v128;
    type Mask = v128;
    type X32 = [v128; 8];
    type WideSum = (v128, v128);

    #[inline(always)]
    fn splat(self, x: f32) -> v128 {
        f32x4_splat(x)
    }
    #[inline(always)]
    fn load(self, src: &[f32]) -> v128 {
        // SAFETY: the slice holds 4 f32; unaligned loads are allowed.
        unsafe { v128_load(src[..4].as_ptr() as *const v128) }
    }
    #[inline(always)]
    fn store(self, dst: &mut [f32], v: v128) {
        // SAFETY: the slice holds 4 f32; unaligned stores are allowed.
        unsafe { v128_store(dst[..4].as_mut_ptr() as *mut v128, v) }
    }
    #[inline(always)]
    fn load_f16(self, src: &[f16]) -> v128 {
        // SAFETY: the slice holds 4 f16 = 8 bytes; unaligned loads are allowed.
        let h = unsafe { v128_load64_zero(src[..4].as_ptr() as *const u64) };
        self.f16_bits_to_f32(u32x4_extend_low_u16x8(h))
    }
    /// Eight values at a time: where none is infinite or NaN (in real K/V rows, always), both
    /// halves take the finite-only conversion, half the operations of `load_f16`'s.
    #[inline(always)]
    fn widen_f16(self, src: &[f16], dst: &mut [f32]) -> usize {
        let n = src.len().min(dst.len()) / 4 * 4;
        let (src, dst) = (&src[..n], &mut dst[..n]);
        let mut i = 0;
        while i + 8 <= n {
            // SAFETY: `src[i..i + 8]` is 16 bytes; unaligned loads are allowed.
            let h = unsafe { v128_load(src[i..i + 8].as_ptr() as *const v128) };
            let [lo, hi] = f16x8_to_f32(h);
            self.store(&mut dst[i..], lo);
            self.store(&mut dst[i + 4..], hi);
            i += 8;
        }
        if i < n {
            self.store(&mut dst[i..], self.load_f16(&src[i..]));
        }
        n
    }
    #[inline(always)]
    fn add(self, a: v128, b: v128) -> v128 {
        f32x4_add(a, b)
    }
    #[inline(always)]
    fn sub(self, a: v128, b: v128) -> v128 {
        f32x4_sub(a, b)
    }
    #[inline(always)]
    fn mul(self, a: v128, b: v128) -> v128 {
        f32x4_mul(a, b)
    }
    #[inline(always)]
    fn div(self, a: v128, b: v128) -> v128 {
        f32x4_div(a, b)
    }
    #[inline(always)]
    fn neg(self, a: v128) -> v128 {
        f32x4_neg(a)
    }
    #[inline(always)]
    fn abs(self, a: v128) -> v128 {
        f32x4_abs(a)
    }
    #[inline(always)]
    fn mul_add(self, a: v128, b: v128, c: v128) -> v128 {
        fma_f32x4(a, b, c)
    }
    #[inline(always)]
    fn neg_mul_add(self, a: v128, b: v128, c: v128) -> v128 {
        fma_f32x4(f32x4_neg(a), b, c)
    }
    #[inline(always)]
    fn gt(self, a: v128, b: v128) -> v128 {
        f32x4_gt(a, b)
    }
    #[inline(always)]
    fn le(self, a: v128, b: v128) -> v128 {
        f32x4_le(a, b)
    }
    #[inline(always)]
    fn select(self, mask: v128, if_true: v128, if_false: v128) -> v128 {
        v128_bitselect(if_true, if_false, mask)
    }
    #[inline(always)]
    fn scale_by_pow2(self, j: v128, n: v128) -> v128 {
        // `as` saturates like trunc_sat; `n / 2` truncates towards zero, so add the sign bit
        // before the arithmetic shift.
        let ni = i32x4_trunc_sat_f32x4(n);
        let half = i32x4_shr(i32x4_add(ni, u32x4_shr(ni, 31)), 1);
        let bias = i32x4_splat(127);
        let p1 = i32x4_shl(i32x4_add(half, bias), 23);
        let p2 = i32x4_shl(i32x4_add(i32x4_sub(ni, half), bias), 23);
        f32x4_mul(f32x4_mul(j, p1), p2)
    }
    /// Without a branch: `x` with exponent `e` is rounded to a multiple of its f16 quantum,
    /// `2^(e-10)` (f16 subnormals: `2^-24`), by adding and subtracting
    /// `c = 1.5 · 2^(min(max(e, -14), 16) + 13)`: for `|x| < 2^(e+1)` the sum lies in
    /// `[2^(e+13), 2^(e+14))`, where the f32 quantum is exactly that, so the one f32 rounding of
    /// the sum is the f16 rounding, ties to even (`c` is an even multiple of the quantum), and
    /// the subtraction is exact (Sterbenz). The sign needs no separate handling, but for zeros:
    /// `-0` and small negatives come out `+0`, so `x`'s sign bit is put back. Magnitudes from
    /// 65520 round to 65536 or more (up from 2^16 the clamped `c` keeps them there); scaling by
    /// 2^112 and back is exact below 2^16 and overflows to infinity from it. NaN goes through as
    /// a NaN; clearing the low 13 mantissa bits (zero in every f16 value) then gives `half`'s
    /// NaN (quieted, payload truncated to 10 bits). Checked against `half` on all 2^32 inputs.
    #[inline(always)]
    fn round_f16(self, x: v128) -> v128 {
        let e = u32x4_min(
            i32x4_max(
                v128_and(x, u32x4_splat(0x7f80_0000)),
                u32x4_splat(f16::MIN_POSITIVE.to_f32().to_bits()),
            ),
            u32x4_splat(65536f32.to_bits()),
        );
        let c = i32x4_add(e, u32x4_splat((13 << 23) | (1 << 22)));
        let r = f32x4_sub(f32x4_add(x, c), c);
        let r = f32x4_mul(
            f32x4_mul(r, f32x4_splat(2f32.powi(112))),
            f32x4_splat(2f32.powi(-112)),
        );
        v128_and(
            v128_or(r, v128_and(x, u32x4_splat(0x8000_0000))),
            u32x4_splat(!0x1fff),
        )
    }
    /// Where every lane of the `N` vectors is a normal f16 magnitude below 2^15 (exponent
    /// field in [-14, 14]), [`Simd::round_f16`]'s add-and-subtract alone is the rounding: its
    /// clamps, the overflow scaling and the sign and NaN fix-ups change nothing there (the
    /// result is a nonzero finite f16 with `x`'s sign). That range is checked once for all
    /// the vectors, from the smallest and largest exponent field (both non-negative as i32);
    /// otherwise every vector takes `round_f16`. Half the operations per vector and a quarter
    /// of the constants, which V8 rebuilds at each use.
    #[inline(always)]
    fn round_f16_n<const N: usize>(self, x: [v128; N]) -> [v128; N] {
        if N == 0 {
            return x;
        }
        let exp_field = u32x4_splat(0x7f80_0000);
        let mut r = x;
        let (mut lo, mut hi) = (v128_and(x[0], exp_field), v128_and(x[0], exp_field));
        // Index loops: an iterator adaptor here can stay an out-of-line call in a large kernel.
        for i in 0..N {
            let e = v128_and(x[i], exp_field);
            lo = i32x4_min(lo, e);
            hi = i32x4_max(hi, e);
            let c = i32x4_add(e, u32x4_splat((13 << 23) | (1 << 22)));
            r[i] = f32x4_sub(f32x4_add(x[i], c), c);
        }
        let out_of_range = v128_or(
            i32x4_lt(lo, u32x4_splat(f16::MIN_POSITIVE.to_f32().to_bits())),
            i32x4_gt(hi, u32x4_splat(16384f32.to_bits())),
        );
        if v128_any_true(out_of_range) {
            for i in 0..N {
                r[i] = self.round_f16(x[i]);
            }
        }
        r
    }
    #[inline(always)]
    fn or_mask(self, a: v128, b: v128) -> v128 {
        v128_or(a, b)
    }
    #[inline(always)]
    fn any(self, mask: v128) -> bool {
        v128_any_true(mask)
    }
    #[inline(always)]
    fn min(self, a: v128, b: v128) -> v128 {
        // pmin(b, a) is `a < b ? a : b`.
        f32x4_pmin(b, a)
    }
    #[inline(always)]
    fn lane_min(self, x: v128) -> f32 {
        let m = f32x4_pmin(x, i32x4_shuffle::<2, 3, 0, 1>(x, x));
        f32x4_extract_lane::<0>(f32x4_pmin(m, i32x4_shuffle::<1, 0, 3, 2>(m, m)))
    }
    #[inline(always)]
    fn lane_sum(self, x: v128) -> f32 {
        let m = f32x4_add(x, i32x4_shuffle::<2, 3, 0, 1>(x, x));
        f32x4_extract_lane::<0>(f32x4_add(m, i32x4_shuffle::<1, 0, 3, 2>(m, m)))
    }
    #[inline(always)]
    fn low12_mantissa_zero(self, x: v128) -> v128 {
        i32x4_eq(v128_and(x, u32x4_splat(0xfff)), u32x4_splat(0))
    }
    #[inline(always)]
    fn round_to_odd(self, s: v128, e: v128) -> v128 {
        let one = u32x4_splat(1);
        let inexact = f32x4_ne(e, f32x4_splat(0.0));
        let even = i32x4_eq(v128_and(s, one), u32x4_splat(0));
        let finite = f32x4_lt(f32x4_abs(s), f32x4_splat(f32::INFINITY));
        let mask = v128_and(inexact, v128_and(even, finite));
        // +1 (away from zero) where e has the sign of s, else -1.
        let step = v128_or(i32x4_shr(v128_xor(s, e), 31), one);
        i32x4_add(s, v128_and(step, mask))
    }
    #[inline(always)]
    fn sum_halves_f16(self, x: v128) -> f32 {
        let x = self.round_f16(f32x4_add(x, i32x4_shuffle::<2, 3, 2, 3>(x, x)));
        let x = self.round_f16(f32x4_add(x, i32x4_shuffle::<1, 1, 1, 1>(x, x)));
        f32x4_extract_lane::<0>(x)
    }
    #[inline(always)]
    fn x32_splat(self, x: f32) -> [v128; 8] {
        [self.splat(x); 8]
    }
    #[inline(always)]
    fn wide_zero(self) -> (v128, v128) {
        (f64x2_splat(0.0), f64x2_splat(0.0))
    }
    #[inline(always)]
    fn wide_add(self, acc: (v128, v128), x: v128) -> (v128, v128) {
        (
            f64x2_add(acc.0, f64x2_promote_low_f32x4(x)),
            f64x2_add(acc.1, f64x2_promote_low_f32x4(u64x2_shuffle::<1, 1>(x, x))),
        )
    }
    #[inline(always)]
    fn wide_total(self, acc: (v128, v128)) -> f64 {
        let t = f64x2_add(acc.0, acc.1);
        f64x2_extract_lane::<0>(t) + f64x2_extract_lane::<1>(t)
    }
}
