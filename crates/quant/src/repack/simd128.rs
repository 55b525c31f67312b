//! The wasm32 SIMD128 build of the repacked kernels ([`super::tiles`]). `simd128` is enabled at
//! compile time (`.cargo/config.toml`), so the intrinsics are safe; only loads and stores take
//! pointers.
//!
//! A 32-byte `B` is two vectors (rows 0-1's chunks, rows 2-3's). Bytes are widened to i16 and
//! multiplied in pairs (`i32x4.dot_i16x8`), each row's products summed in its own vector of an
//! `I`; `per_row` adds each vector's four lanes. The relaxed-SIMD build multiplies the 4-, 5-
//! and 6-bit weights with one `i16x8.relaxed_dot_i8x16_i7x16` per 16 bytes instead, keeps those
//! i16 pair sums over each run that one scale multiplies, and multiplies them by the scales
//! with `i32x4.dot_i16x8` (as the x86 AVX2 build does with `maddubs` and `madd`).
//!
//! The float steps are plain multiplies and adds (the reference's, which has no fused step:
//! wasm has no FMA instruction), so this build needs no emulation to give the reference's bits.

use crate::blocks::*;
use crate::isa::simd::simd128::f16x8_to_f32;
use crate::isa::Simd128;
use crate::repack::layout::*;
use core::arch::wasm32::*;
use half::f16;

/// 32 bytes: rows 0-1's 8-byte chunks, rows 2-3's (or one chunk repeated).
type B = [v128; 2];
/// Integer sums of one register's 4 rows: in the plain SIMD128 build four i32 partial sums
/// per row, one vector per row; in the relaxed-SIMD build two lanes per row in the first two
/// vectors (i16 pairs, four lanes per row, while `dot_sub` runs; see `sub_sums`).
type I = [v128; 4];
/// One i32 lane per row: rows 0-3, rows 4-7.
type R = [v128; 2];
/// One f32 lane per row: rows 0-3, rows 4-7.
type F = [v128; 2];

/// No prefetch instruction in wasm.
#[inline(always)]
unsafe fn prefetch(_: *const u8) {}

#[inline(always)]
unsafe fn load(p: *const u8) -> B {
    [
        v128_load(p as *const v128),
        v128_load(p.add(16) as *const v128),
    ]
}

/// 8 activation bytes, repeated for 4 rows.
#[inline(always)]
unsafe fn bcast8(p: *const i8) -> B {
    let x = i64x2_splat((p as *const i64).read_unaligned());
    [x, x]
}

/// 8 f16 as f32, converted in SIMD lanes (wasm has no conversion instruction; half's software
/// one, once per value, cost as much as a Q8_0 block's multiplies), bit-identical to half's.
///
/// Decode's tiles (`N` = 1) spend a larger share of their operations here, and take the
/// finite-only conversion where no lane is infinite or NaN (no real scale is), half the
/// general conversion's operations. The 4-row tiles keep the general conversion: the fast
/// path's branch made the Q5_0 one slower (V8 kept fewer values in registers).
#[inline(always)]
unsafe fn f16x8<const N: usize>(p: *const f16) -> F {
    let h = v128_load(p as *const v128);
    if N > 1 {
        let (lo, hi) = (u32x4_extend_low_u16x8(h), u32x4_extend_high_u16x8(h));
        return [Simd128.f16_bits_to_f32(lo), Simd128.f16_bits_to_f32(hi)];
    }
    f16x8_to_f32(h)
}

/// One f16 as f32, bit-identical to half's conversion: finite values (every real scale) in a
/// few integer steps and one exact multiply by 2^112 (subnormals included: wasm keeps f32
/// subnormals), infinities and NaNs through half.
#[inline(always)]
fn f16_to_f32(h: f16) -> f32 {
    let bits = h.to_bits() as u32;
    if bits & 0x7c00 == 0x7c00 {
        return h.to_f32();
    }
    let magnitude = f32::from_bits((bits & 0x7fff) << 13) * f32::from_bits((127 + 112) << 23);
    f32::from_bits(magnitude.to_bits() | (bits & 0x8000) << 16)
}

/// 8 bytes widened to 8 lanes (signed or unsigned per `signed`).
#[inline(always)]
unsafe fn widen8(p: *const u8, signed: bool) -> R {
    let x = v128_load64_zero(p as *const u64);
    if signed {
        let w = i16x8_extend_low_i8x16(x);
        [i32x4_extend_low_i16x8(w), i32x4_extend_high_i16x8(w)]
    } else {
        let w = u16x8_extend_low_u8x16(x);
        [u32x4_extend_low_u16x8(w), u32x4_extend_high_u16x8(w)]
    }
}

/// Unsigned `u` (under 128) × signed `s` bytes, added into each row's vector of `acc` (the
/// plain build; the relaxed one forms these sums in `dot_sub`).
#[cfg(not(target_feature = "relaxed-simd"))]
#[inline(always)]
unsafe fn dot(acc: I, u: B, s: B) -> I {
    let mut r = acc;
    for k in 0..2 {
        let lo = i32x4_dot_i16x8(u16x8_extend_low_u8x16(u[k]), i16x8_extend_low_i8x16(s[k]));
        let hi = i32x4_dot_i16x8(u16x8_extend_high_u8x16(u[k]), i16x8_extend_high_i8x16(s[k]));
        r[2 * k] = i32x4_add(r[2 * k], lo);
        r[2 * k + 1] = i32x4_add(r[2 * k + 1], hi);
    }
    r
}

/// Q8_0's operands: signed weights and activations as they are (`dot_q8` widens both signed),
/// except in the relaxed-SIMD build's decode tiles (`N` = 1), which split the activation chunk
/// (`a`, one chunk repeated) into its positive part `p = max(a, 0)` and negative part
/// `n = p - a`, both 7-bit, so that `relaxed_dot` can take them: `a = p - n`. Like every
/// build's Q8_0 tiles (the x86 sign trick too), this needs activation quants in -127..=127, the
/// quantizer's range except for a NaN, an infinity or a subnormal block maximum.
#[inline(always)]
unsafe fn q8_operands<const N: usize>(w: B, a: B) -> (B, B) {
    if cfg!(target_feature = "relaxed-simd") && N == 1 {
        let p = i8x16_max(a[0], i8x16_splat(0));
        return (w, [p, i8x16_sub(p, a[0])]);
    }
    (w, a)
}

/// Signed × signed bytes (Q8_0's full range has no 7-bit side), into `dot`'s lanes, in the
/// relaxed-SIMD build; `s` is [`q8_operands`]' form of one activation chunk.
///
/// Decode (`N` = 1): each weight vector against `p` and against `n`, whose difference is `w · a`.
/// With `FUSED_DOT` (the engine's one-instruction `i32x4.relaxed_dot_i8x16_i7x16_add`, see
/// `isa::CpuFeatures::fused_dot`), two of them per 16 bytes into i32 lanes, those of `n` in
/// `acc[2..4]` until [`q8_sums`] takes them off. Otherwise as i16 pair sums
/// (`i16x8.relaxed_dot_i8x16_i7x16`, x86's `pmaddubsw`), whose difference is exact (at most
/// 2 · 128 · 127 in magnitude) and which `extadd` makes the 4-byte sums of rows 2k (lanes 0-1)
/// and 2k+1 (lanes 2-3), `dot`'s lanes as they are: five instructions per 16 bytes.
///
/// Batches widen the even and the odd bytes of both sides to i16 (a shift pair or one
/// arithmetic shift, no shuffles) instead: seven instructions, but the split's two vectors per
/// activation row made the 4-row tile, short of registers, slower.
#[cfg(target_feature = "relaxed-simd")]
#[inline(always)]
unsafe fn dot_q8<const N: usize, const FUSED_DOT: bool>(acc: I, w: B, s: B) -> I {
    let mut r = acc;
    if N == 1 {
        let [p, n] = s;
        for k in 0..2 {
            if FUSED_DOT {
                r[k] = i32x4_relaxed_dot_i8x16_i7x16_add(w[k], p, r[k]);
                r[k + 2] = i32x4_relaxed_dot_i8x16_i7x16_add(w[k], n, r[k + 2]);
            } else {
                let pairs = i16x8_sub(
                    i16x8_relaxed_dot_i8x16_i7x16(w[k], p),
                    i16x8_relaxed_dot_i8x16_i7x16(w[k], n),
                );
                r[k] = i32x4_add(r[k], i32x4_extadd_pairwise_i16x8(pairs));
            }
        }
        return r;
    }
    let even = |v: v128| i16x8_shr(i16x8_shl(v, 8), 8);
    let odd = |v: v128| i16x8_shr(v, 8);
    let (s_even, s_odd) = (even(s[0]), odd(s[0]));
    for k in 0..2 {
        r[k] = i32x4_add(r[k], i32x4_dot_i16x8(even(w[k]), s_even));
        r[k] = i32x4_add(r[k], i32x4_dot_i16x8(odd(w[k]), s_odd));
    }
    r
}

/// [`dot_q8`]'s sums as `per_row` takes them: in the fused decode form, the products with `p`
/// less those with `n`.
#[inline(always)]
unsafe fn q8_sums<const N: usize, const FUSED_DOT: bool>(a: I) -> I {
    if cfg!(target_feature = "relaxed-simd") && N == 1 && FUSED_DOT {
        let z = i32x4_splat(0);
        return [i32x4_sub(a[0], a[2]), i32x4_sub(a[1], a[3]), z, z];
    }
    a
}

/// The plain build: each row's 8 bytes widened (`s`'s low half serves both rows) and multiplied
/// in pairs into that row's vector.
#[cfg(not(target_feature = "relaxed-simd"))]
#[inline(always)]
unsafe fn dot_q8<const N: usize, const FUSED_DOT: bool>(acc: I, w: B, s: B) -> I {
    let s16 = i16x8_extend_low_i8x16(s[0]);
    let mut r = acc;
    for k in 0..2 {
        let lo = i32x4_dot_i16x8(i16x8_extend_low_i8x16(w[k]), s16);
        let hi = i32x4_dot_i16x8(i16x8_extend_high_i8x16(w[k]), s16);
        r[2 * k] = i32x4_add(r[2 * k], lo);
        r[2 * k + 1] = i32x4_add(r[2 * k + 1], hi);
    }
    r
}

/// The four rows' totals of `a`: in the relaxed-SIMD build, lanes 0-1 and 2-3 of `a[0]` (rows
/// 0, 1) and `a[1]` (rows 2, 3) added.
#[cfg(target_feature = "relaxed-simd")]
#[inline(always)]
fn row_totals(a: I) -> v128 {
    i32x4_add(
        i32x4_shuffle::<0, 2, 4, 6>(a[0], a[1]),
        i32x4_shuffle::<1, 3, 5, 7>(a[0], a[1]),
    )
}

/// The four rows' totals of `a` (lane r = the sum of `a[r]`'s lanes).
#[cfg(not(target_feature = "relaxed-simd"))]
#[inline(always)]
fn row_totals(a: I) -> v128 {
    let s01 = i32x4_add(
        i32x4_shuffle::<0, 4, 2, 6>(a[0], a[1]),
        i32x4_shuffle::<1, 5, 3, 7>(a[0], a[1]),
    );
    let s23 = i32x4_add(
        i32x4_shuffle::<0, 4, 2, 6>(a[2], a[3]),
        i32x4_shuffle::<1, 5, 3, 7>(a[2], a[3]),
    );
    i32x4_add(
        i32x4_shuffle::<0, 1, 4, 5>(s01, s23),
        i32x4_shuffle::<2, 3, 6, 7>(s01, s23),
    )
}

/// Rows 0-3 (`a`) and rows 4-7 (`b`) → one lane per row, in order.
#[inline(always)]
unsafe fn per_row(a: I, b: I) -> R {
    [row_totals(a), row_totals(b)]
}

/// `dot` for the runs of products one scale multiplies. The relaxed-SIMD build keeps i16 pair
/// sums over the run (`i16x8.relaxed_dot_i8x16_i7x16`, x86's `pmaddubsw`, exact for 7-bit `u`
/// as the loader checks), row 2k's in lanes 0-3 of `acc[k]`, row 2k+1's in lanes 4-7: at most
/// 4 products of weights under 32 or 2 under 64 per run (`tiles`), so they cannot overflow.
///
/// The fused 4-byte dot product ([`dot_q8`]'s `FUSED_DOT`) would take one instruction per 16
/// bytes here too, but Gemma 3's decode (Q4_K, Q5_0, Q6_K tiles) ran slower with it in
/// Chromium, though the tiles alone ran faster in `tools/wasm-kernel-ab`.
#[cfg(target_feature = "relaxed-simd")]
#[inline(always)]
unsafe fn dot_sub(acc: I, u: B, s: B) -> I {
    [
        i16x8_add(acc[0], i16x8_relaxed_dot_i8x16_i7x16(s[0], u[0])),
        i16x8_add(acc[1], i16x8_relaxed_dot_i8x16_i7x16(s[1], u[1])),
        acc[2],
        acc[3],
    ]
}

/// The plain build has no cheaper form than `dot`.
#[cfg(not(target_feature = "relaxed-simd"))]
#[inline(always)]
unsafe fn dot_sub(acc: I, u: B, s: B) -> I {
    dot(acc, u, s)
}

/// [`dot_sub`] sums as `dot` leaves them: the relaxed build's i16 pairs added into i32 lanes.
#[cfg(target_feature = "relaxed-simd")]
#[inline(always)]
unsafe fn sub_sums(p: I) -> I {
    [
        i32x4_extadd_pairwise_i16x8(p[0]),
        i32x4_extadd_pairwise_i16x8(p[1]),
        p[2],
        p[3],
    ]
}

#[cfg(not(target_feature = "relaxed-simd"))]
#[inline(always)]
unsafe fn sub_sums(p: I) -> I {
    p
}

/// [`dot_sub`] sums of rows 0-3 and 4-7, less `off` per row, times each row's scale (the 8
/// bytes at `scales`). The relaxed build multiplies its i16 sums by the scales and pairs them
/// with one `i32x4.dot_i16x8` per two rows (`pmaddwd`).
#[cfg(target_feature = "relaxed-simd")]
#[inline(always)]
unsafe fn scaled_rows(p: [I; 2], off: R, scales: *const u8, signed: bool) -> R {
    let x = v128_load64_zero(scales as *const u64);
    let x16 = if signed {
        i16x8_extend_low_i8x16(x)
    } else {
        u16x8_extend_low_u8x16(x)
    };
    // Rows 2k and 2k+1's scales, each in the 4 i16 lanes of its sums.
    let rows = [
        i16x8_shuffle::<0, 0, 0, 0, 1, 1, 1, 1>(x16, x16),
        i16x8_shuffle::<2, 2, 2, 2, 3, 3, 3, 3>(x16, x16),
        i16x8_shuffle::<4, 4, 4, 4, 5, 5, 5, 5>(x16, x16),
        i16x8_shuffle::<6, 6, 6, 6, 7, 7, 7, 7>(x16, x16),
    ];
    let scaled = |h: usize| {
        let (a, b) = (p[h][0], p[h][1]);
        [
            i32x4_dot_i16x8(a, rows[2 * h]),
            i32x4_dot_i16x8(b, rows[2 * h + 1]),
            p[h][2],
            p[h][3],
        ]
    };
    sub_r(
        per_row(scaled(0), scaled(1)),
        mul_r(off, widen8(scales, signed)),
    )
}

#[cfg(not(target_feature = "relaxed-simd"))]
#[inline(always)]
unsafe fn scaled_rows(p: [I; 2], off: R, scales: *const u8, signed: bool) -> R {
    mul_r(sub_r(per_row(p[0], p[1]), off), widen8(scales, signed))
}

/// Σ_j m_j Σa per row (`tiles`' `k4_msum`), one sub-block at a time.
#[inline(always)]
unsafe fn k4_msum(mins: &[u8; 64], bsums: &[i16; 16]) -> R {
    let mut m = zero_r();
    for j in 0..8 {
        let bs = bsums[2 * j] as i32 + bsums[2 * j + 1] as i32;
        m = add_r(
            m,
            mul_r(widen8(mins.as_ptr().add(8 * j), false), splat_r(bs)),
        );
    }
    m
}

/// `acc + isum * scale`, unfused like the reference.
#[inline(always)]
unsafe fn add_scaled(acc: F, isum: R, scale: F) -> F {
    add_f(acc, mul_f(to_f(isum), scale))
}

/// Each byte of `x` shifted as 16-bit lanes by `n` (left when positive) and masked: the same
/// bits as the x86 builds' 16-bit shifts.
///
/// Written out for both vectors: through `array::map` LLVM left a call per use, with the
/// vectors and the shift count passed through memory.
#[inline(always)]
fn shift_mask(x: B, n: i32, mask: i8) -> B {
    #[inline(always)]
    fn one(v: v128, n: i32, m: v128) -> v128 {
        let s = if n >= 0 {
            i16x8_shl(v, n as u32)
        } else {
            u16x8_shr(v, (-n) as u32)
        };
        v128_and(s, m)
    }
    let m = i8x16_splat(mask);
    [one(x[0], n, m), one(x[1], n, m)]
}

/// Nibbles: `part` 0 the low ones, 1 the high ones.
#[inline(always)]
unsafe fn nibbles(q: B, part: usize) -> B {
    shift_mask(q, -4 * part as i32, 15)
}

/// A spread 5th bit at bit 4 (see the x86 build's `fifth_bit`).
#[inline(always)]
unsafe fn fifth_bit(hb: B, k: usize, part: usize) -> B {
    shift_mask(hb, 4 - (2 * (k % 4) + part) as i32, 0x10)
}

/// Q6_K's two high bits at `shift` (0, 2, 4, 6) moved to bits 4-5.
#[inline(always)]
unsafe fn q6_high(qh: B, shift: usize) -> B {
    shift_mask(qh, 4 - shift as i32, 0x30)
}

#[inline(always)]
unsafe fn or_b(a: B, b: B) -> B {
    [v128_or(a[0], b[0]), v128_or(a[1], b[1])]
}

#[inline(always)]
unsafe fn zero_i() -> I {
    [i32x4_splat(0); 4]
}
#[inline(always)]
unsafe fn zero_r() -> R {
    [i32x4_splat(0); 2]
}
#[inline(always)]
unsafe fn zero_f() -> F {
    [f32x4_splat(0.0); 2]
}
#[inline(always)]
unsafe fn add_r(a: R, b: R) -> R {
    [i32x4_add(a[0], b[0]), i32x4_add(a[1], b[1])]
}
#[inline(always)]
unsafe fn sub_r(a: R, b: R) -> R {
    [i32x4_sub(a[0], b[0]), i32x4_sub(a[1], b[1])]
}
#[inline(always)]
unsafe fn mul_r(a: R, b: R) -> R {
    [i32x4_mul(a[0], b[0]), i32x4_mul(a[1], b[1])]
}
#[inline(always)]
unsafe fn splat_r(x: i32) -> R {
    [i32x4_splat(x); 2]
}
#[inline(always)]
unsafe fn add_f(a: F, b: F) -> F {
    [f32x4_add(a[0], b[0]), f32x4_add(a[1], b[1])]
}
#[inline(always)]
unsafe fn sub_f(a: F, b: F) -> F {
    [f32x4_sub(a[0], b[0]), f32x4_sub(a[1], b[1])]
}
#[inline(always)]
unsafe fn mul_f(a: F, b: F) -> F {
    [f32x4_mul(a[0], b[0]), f32x4_mul(a[1], b[1])]
}
#[inline(always)]
unsafe fn splat_f(x: f32) -> F {
    [f32x4_splat(x); 2]
}
#[inline(always)]
unsafe fn to_f(x: R) -> F {
    [f32x4_convert_i32x4(x[0]), f32x4_convert_i32x4(x[1])]
}
#[inline(always)]
unsafe fn store_f(p: *mut f32, x: F) {
    v128_store(p as *mut v128, x[0]);
    v128_store(p.add(4) as *mut v128, x[1]);
}

super::tiles::repack_tiles!();

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// Every f16 (infinities, NaNs and subnormals among them) converts to half's bits, one at a
    /// time and eight at a time.
    #[test]
    fn f16_conversions_match_half() {
        let all: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
        for eight in all.chunks_exact(8) {
            // SAFETY: `eight` holds 8 f16 (16 bytes).
            let decode = unsafe { f16x8::<1>(eight.as_ptr()) };
            // SAFETY: as above.
            let batch = unsafe { f16x8::<4>(eight.as_ptr()) };
            let (mut got, mut got4) = ([0f32; 8], [0f32; 8]);
            // SAFETY: `got` and `got4` hold 8 f32 each.
            unsafe { store_f(got.as_mut_ptr(), decode) };
            unsafe { store_f(got4.as_mut_ptr(), batch) };
            for ((h, g), g4) in eight.iter().zip(got).zip(got4) {
                let want = h.to_f32().to_bits();
                assert_eq!(g.to_bits(), want, "f16x8::<1> of {:#06x}", h.to_bits());
                assert_eq!(g4.to_bits(), want, "f16x8::<4> of {:#06x}", h.to_bits());
                assert_eq!(
                    f16_to_f32(*h).to_bits(),
                    want,
                    "f16_to_f32 of {:#06x}",
                    h.to_bits()
                );
            }
        }
    }
}
