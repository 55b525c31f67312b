//! [`Simd`] with one lane: plain Rust, the reference the other implementations match.

use super::Simd;
use crate::isa::Level;
use half::f16;

/// The portable implementation; runs everywhere.
#[derive(Clone, Copy, Debug, Default)]
pub struct Scalar;

impl Simd for Scalar {
    const LANES: usize = 1;
    const LEVEL: Level = Level::Scalar;
    type F32 = f32;
    type Mask = bool;
    type X32 = [f32; 32];
    type WideSum = f64;

    #[inline(always)]
    fn splat(self, x: f32) -> f32 {
        x
    }
    #[inline(always)]
    fn load(self, src: &[f32]) -> f32 {
        src[0]
    }
    #[inline(always)]
    fn store(self, dst: &mut [f32], v: f32) {
        dst[0] = v;
    }
    #[inline(always)]
    fn load_f16(self, src: &[f16]) -> f32 {
        src[0].to_f32()
    }
    #[inline(always)]
    fn add(self, a: f32, b: f32) -> f32 {
        a + b
    }
    #[inline(always)]
    fn sub(self, a: f32, b: f32) -> f32 {
        a - b
    }
    #[inline(always)]
    fn mul(self, a: f32, b: f32) -> f32 {
        a * b
    }
    #[inline(always)]
    fn div(self, a: f32, b: f32) -> f32 {
        a / b
    }
    #[inline(always)]
    fn neg(self, a: f32) -> f32 {
        -a
    }
    #[inline(always)]
    fn abs(self, a: f32) -> f32 {
        a.abs()
    }
    #[inline(always)]
    fn mul_add(self, a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }
    #[inline(always)]
    fn neg_mul_add(self, a: f32, b: f32, c: f32) -> f32 {
        (-a).mul_add(b, c)
    }
    #[inline(always)]
    fn gt(self, a: f32, b: f32) -> bool {
        a > b
    }
    #[inline(always)]
    fn le(self, a: f32, b: f32) -> bool {
        a <= b
    }
    #[inline(always)]
    fn select(self, mask: bool, if_true: f32, if_false: f32) -> f32 {
        if mask {
            if_true
        } else {
            if_false
        }
    }
    #[inline(always)]
    fn scale_by_pow2(self, j: f32, n: f32) -> f32 {
        let n = n as i32;
        let half = n / 2;
        let p1 = f32::from_bits((half.wrapping_add(127) as u32) << 23);
        let p2 = f32::from_bits((n.wrapping_sub(half).wrapping_add(127) as u32) << 23);
        (j * p1) * p2
    }
    #[inline(always)]
    fn round_f16(self, x: f32) -> f32 {
        f16::from_f32(x).to_f32()
    }
    #[inline(always)]
    fn or_mask(self, a: bool, b: bool) -> bool {
        a | b
    }
    #[inline(always)]
    fn any(self, mask: bool) -> bool {
        mask
    }
    #[inline(always)]
    fn lane_min(self, x: f32) -> f32 {
        x
    }
    #[inline(always)]
    fn lane_sum(self, x: f32) -> f32 {
        x
    }
    #[inline(always)]
    fn min(self, a: f32, b: f32) -> f32 {
        if a < b {
            a
        } else {
            b
        }
    }
    #[inline(always)]
    fn low12_mantissa_zero(self, x: f32) -> bool {
        x.to_bits() & 0xfff == 0
    }
    #[inline(always)]
    fn round_to_odd(self, s: f32, e: f32) -> f32 {
        if e != 0.0 && s.is_finite() && s.to_bits() & 1 == 0 {
            // Sign bits, not `> 0`: the same lanes as the vector versions for any operands.
            let away = s.is_sign_negative() == e.is_sign_negative();
            f32::from_bits(if away {
                s.to_bits().wrapping_add(1)
            } else {
                s.to_bits().wrapping_sub(1)
            })
        } else {
            s
        }
    }
    #[inline(always)]
    fn sum_halves_f16(self, x: f32) -> f32 {
        x
    }
    #[inline(always)]
    fn x32_splat(self, x: f32) -> [f32; 32] {
        [self.splat(x); 32]
    }
    #[inline(always)]
    fn wide_zero(self) -> f64 {
        0.0
    }
    #[inline(always)]
    fn wide_add(self, acc: f64, x: f32) -> f64 {
        acc + x as f64
    }
    #[inline(always)]
    fn wide_total(self, acc: f64) -> f64 {
        acc
    }
}
