//! [`Simd`]: the float primitives kernels written once are generic over, one implementation per
//! instruction set ([`Scalar`], [`Avx2`], [`Avx512`], `Simd128` (wasm32)).
//!
//! Every primitive rounds exactly as its scalar counterpart in [`Scalar`] does, lane by lane, so
//! a kernel gives bit-identical results on every implementation (checked by this module's tests
//! and those of each kernel). A value of an implementing type is the proof that the CPU runs its
//! instructions: the constructors check [`super::detected`], so the methods are safe to call.
//! Kernels take the token by value and are `#[inline(always)]`; each ISA's entry point is a
//! small `#[target_feature]` function calling the generic kernel, so the primitives inline
//! into code compiled for that ISA. Kernels call primitives in plain loops, never inside
//! closures (`array::from_fn`, `map`, `fold`): a closure's body is compiled without the entry
//! point's target features, so the primitives in it stay out-of-line calls (several times
//! slower).

use super::Level;
use half::f16;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod scalar;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub(crate) mod simd128;
#[cfg(test)]
mod tests;

#[cfg(target_arch = "x86_64")]
pub use avx2::Avx2;
#[cfg(target_arch = "x86_64")]
pub use avx512::Avx512;
pub use scalar::Scalar;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub use simd128::Simd128;

/// f32 vectors of [`Simd::LANES`] lanes and the operations the CPU kernels need.
pub trait Simd: Copy {
    /// f32 lanes per vector.
    const LANES: usize;
    /// The kernel family this implementation belongs to (kernels that keep per-ISA code paths
    /// branch on it at compile time).
    const LEVEL: Level;
    /// A vector of `LANES` f32.
    type F32: Copy;
    /// The result of a lane-wise comparison.
    type Mask: Copy;
    /// 32 f32 lanes as `32 / LANES` vectors: one register of 32 halves of the AVX512-FP16
    /// arithmetic the attention kernels emulate.
    type X32: Copy + AsRef<[Self::F32]> + AsMut<[Self::F32]>;
    /// Per-lane f64 sums of f32 lanes ([`Simd::wide_add`]).
    type WideSum: Copy;

    /// Every lane `x`.
    fn splat(self, x: f32) -> Self::F32;
    /// The first `LANES` elements of `src` (panics if it is shorter).
    fn load(self, src: &[f32]) -> Self::F32;
    /// Writes the lanes to the first `LANES` elements of `dst` (panics if it is shorter).
    fn store(self, dst: &mut [f32], v: Self::F32);
    /// The first `LANES` f16 of `src` widened (exactly) to f32 (panics if it is shorter).
    fn load_f16(self, src: &[f16]) -> Self::F32;
    /// `dst[i] = src[i]` widened as [`Simd::load_f16`] does, for the whole vectors of the
    /// shorter slice; returns how many elements that was (the rest is the caller's). An
    /// implementation may take several vectors at once (SIMD128: 8 values, checked together).
    #[inline(always)]
    fn widen_f16(self, src: &[f16], dst: &mut [f32]) -> usize {
        let n = src.len().min(dst.len()) / Self::LANES * Self::LANES;
        let mut i = 0;
        while i < n {
            self.store(&mut dst[i..], self.load_f16(&src[i..]));
            i += Self::LANES;
        }
        n
    }

    fn add(self, a: Self::F32, b: Self::F32) -> Self::F32;
    fn sub(self, a: Self::F32, b: Self::F32) -> Self::F32;
    fn mul(self, a: Self::F32, b: Self::F32) -> Self::F32;
    fn div(self, a: Self::F32, b: Self::F32) -> Self::F32;
    fn neg(self, a: Self::F32) -> Self::F32;
    fn abs(self, a: Self::F32) -> Self::F32;
    /// `a * b + c` rounded once (`f32::mul_add`).
    fn mul_add(self, a: Self::F32, b: Self::F32, c: Self::F32) -> Self::F32;
    /// `c - a * b` rounded once (`(-a).mul_add(b, c)`).
    fn neg_mul_add(self, a: Self::F32, b: Self::F32, c: Self::F32) -> Self::F32;

    /// `a > b` (false where either is NaN).
    fn gt(self, a: Self::F32, b: Self::F32) -> Self::Mask;
    /// `a <= b` (false where either is NaN).
    fn le(self, a: Self::F32, b: Self::F32) -> Self::Mask;
    /// `if_true` where `mask` is set, else `if_false`.
    fn select(self, mask: Self::Mask, if_true: Self::F32, if_false: Self::F32) -> Self::F32;
    /// Lanes set in `a` or in `b`.
    fn or_mask(self, a: Self::Mask, b: Self::Mask) -> Self::Mask;
    /// Whether some lane of `mask` is set.
    fn any(self, mask: Self::Mask) -> bool;
    /// `if a < b { a } else { b }` per lane. Where either is NaN the lane is one of the two:
    /// relaxed-SIMD wasm builds may lower it to `f32x4.relaxed_min`, whose NaN choice is the
    /// engine's (kernels must not depend on it).
    fn min(self, a: Self::F32, b: Self::F32) -> Self::F32;

    /// Lanes whose low 12 mantissa bits are zero. Every f16 midpoint (at most 12 significant
    /// bits) is such a lane, so where none is set, f32 values rounded to f16 are not ties.
    fn low12_mantissa_zero(self, x: Self::F32) -> Self::Mask;
    /// `s` rounded to odd, given `e`, the exact error of the rounded sum `s`: where `e != 0`,
    /// `s` is finite and its last mantissa bit is 0, the neighbour of `s` on `e`'s side (away
    /// from zero when `e` has the sign of `s`); elsewhere `s`.
    fn round_to_odd(self, s: Self::F32, e: Self::F32) -> Self::F32;
    /// The lanes added in f16 arithmetic (each sum of f16-exact lanes rounded to f16) by
    /// halving: lane `i` plus lane `i + w` for `w = LANES / 2, ..., 1`; the result of lane 0.
    fn sum_halves_f16(self, x: Self::F32) -> f32;
    /// The smallest lane (where a lane is NaN, any lane: callers must not depend on it).
    fn lane_min(self, x: Self::F32) -> f32;
    /// The lanes added together in f32, in an order of the implementation's choosing (callers
    /// use it where the order does not matter, as for a bound with room for rounding).
    fn lane_sum(self, x: Self::F32) -> f32;

    /// `32 / LANES` vectors, every lane `x`.
    fn x32_splat(self, x: f32) -> Self::X32;
    /// All f64 sums zero.
    fn wide_zero(self) -> Self::WideSum;
    /// Each lane of `x` widened to f64 and added to its own sum.
    fn wide_add(self, acc: Self::WideSum, x: Self::F32) -> Self::WideSum;
    /// The lane sums added together (in an order of the implementation's choosing: callers use
    /// it where every order gives the same value).
    fn wide_total(self, acc: Self::WideSum) -> f64;

    /// `j · 2^h · 2^(n - h)` with `h = trunc(n / 2)`, the two products rounded in that order
    /// (exact unless the result is subnormal, then rounded once), for lanes where `n` is an
    /// integer in [-192, 192]; other lanes are unspecified (callers replace them).
    fn scale_by_pow2(self, j: Self::F32, n: Self::F32) -> Self::F32;
    /// Each lane rounded to the nearest f16 value (ties to even, f16 subnormals, overflow to
    /// infinity), as f32: `f16::from_f32(x).to_f32()`.
    fn round_f16(self, x: Self::F32) -> Self::F32;
    /// [`Simd::round_f16`] of each of `N` vectors, the same bits; an implementation may share
    /// work across the vectors (SIMD128, which has no f16 conversion, checks their range once).
    #[inline(always)]
    fn round_f16_n<const N: usize>(self, x: [Self::F32; N]) -> [Self::F32; N] {
        // A loop, not `x.map`: a closure's body would lose the caller's target features.
        let mut r = x;
        for v in &mut r {
            *v = self.round_f16(*v);
        }
        r
    }
}
