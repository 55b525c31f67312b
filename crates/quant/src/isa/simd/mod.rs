//! [`Simd`]: the float primitives kernels written once are generic over, one implementation per
//! instruction set ([`Scalar`], [`Avx2`], [`Avx512`], [`Simd128`]).
//!
//! Every primitive rounds exactly as its scalar counterpart in [`Scalar`] does, lane by lane, so
//! a kernel gives bit-identical results on every implementation (checked by this module's tests
//! and those of each kernel). A value of an implementing type is the proof that the CPU runs its
//! instructions: the constructors check [`super::detected`], so the methods are safe to call.
//! Kernels take the token by value and are `#[inline(always)]`; each ISA's entry point is a
//! small `#[target_feature]` function calling the generic kernel, so the primitives inline
//! into code compiled for that ISA.

use super::Level;
use half::f16;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod scalar;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd128;
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

    /// Every lane `x`.
    fn splat(self, x: f32) -> Self::F32;
    /// The first `LANES` elements of `src` (panics if it is shorter).
    fn load(self, src: &[f32]) -> Self::F32;
    /// Writes the lanes to the first `LANES` elements of `dst` (panics if it is shorter).
    fn store(self, dst: &mut [f32], v: Self::F32);
    /// The first `LANES` f16 of `src` widened (exactly) to f32 (panics if it is shorter).
    fn load_f16(self, src: &[f16]) -> Self::F32;

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

    /// `j · 2^h · 2^(n - h)` with `h = trunc(n / 2)`, the two products rounded in that order
    /// (exact unless the result is subnormal, then rounded once), for lanes where `n` is an
    /// integer in [-192, 192]; other lanes are unspecified (callers replace them).
    fn scale_by_pow2(self, j: Self::F32, n: Self::F32) -> Self::F32;
    /// Each lane rounded to the nearest f16 value (ties to even, f16 subnormals, overflow to
    /// infinity), as f32: `f16::from_f32(x).to_f32()`.
    fn round_f16(self, x: Self::F32) -> Self::F32;
}
