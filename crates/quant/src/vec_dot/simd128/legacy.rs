//! The legacy quants (32-element blocks): per-block `prep` (unpack a weight block) and `step`
//! (multiply one activation block into an accumulator), and the kernels built from them.

use super::*;
use crate::isa::simd::simd128::{konst, splat_u8};

/// An unpacked legacy weight block: the 32 quants as signed bytes (elements 0..16, 16..32),
/// the scale and (the "_1" types) the min.
pub(super) struct LegacyW {
    pub(super) q: [v128; 2],
    pub(super) d: f32,
    pub(super) m: f32,
}

/// Bits `shift..` of every byte of `v`, masked by `mask`, which must fit in `8 - shift` bits: a
/// 16-bit shift and an and. (wasm's `u8x16_shr` is that too on x86, but with a mask V8 builds
/// anew at every use; this mask is a constant it keeps in a register.)
#[inline(always)]
pub(super) fn byte_bits(v: v128, shift: u32, mask: u8) -> v128 {
    debug_assert!(shift < 8 && (mask as u32) < 1 << (8 - shift));
    v128_and(u16x8_shr(v, shift), u8x16_splat(mask))
}

/// The 32 nibbles of a 4-bit block: low nibbles are elements 0..16, high nibbles 16..32.
#[inline(always)]
pub(super) fn nibbles_32(qs: &[u8; QK / 2]) -> [v128; 2] {
    static LOW_NIBBLES: v128 = splat_u8(0x0f);
    let raw = load16(qs, 0);
    let mask = konst(&LOW_NIBBLES);
    [v128_and(raw, mask), v128_and(u16x8_shr(raw, 4), mask)]
}

/// Nibbles with the 5th bit (from `qh`) as 16.
#[inline(always)]
pub(super) fn q5_quants(qs: &[u8; QK / 2], qh: [u8; 4]) -> [v128; 2] {
    let nib = nibbles_32(qs);
    let high = bits_to_bytes_32(u32::from_le_bytes(qh));
    let sixteen = u8x16_splat(16);
    [
        v128_or(nib[0], v128_and(high[0], sixteen)),
        v128_or(nib[1], v128_and(high[1], sixteen)),
    ]
}

#[inline(always)]
pub(super) fn prep_q4_0(x: &BlockQ4_0) -> LegacyW {
    let [lo, hi] = nibbles_32(&x.qs);
    let eight = i8x16_splat(8);
    LegacyW {
        q: [i8x16_sub(lo, eight), i8x16_sub(hi, eight)],
        d: x.d.to_f32(),
        m: 0.0,
    }
}

#[inline(always)]
pub(super) fn prep_q4_1(x: &BlockQ4_1) -> LegacyW {
    LegacyW {
        q: nibbles_32(&x.qs),
        d: x.d.to_f32(),
        m: x.m.to_f32(),
    }
}

#[inline(always)]
pub(super) fn prep_q5_0(x: &BlockQ5_0) -> LegacyW {
    let [lo, hi] = q5_quants(&x.qs, x.qh);
    let sixteen = i8x16_splat(16);
    LegacyW {
        q: [i8x16_sub(lo, sixteen), i8x16_sub(hi, sixteen)],
        d: x.d.to_f32(),
        m: 0.0,
    }
}

#[inline(always)]
pub(super) fn prep_q5_1(x: &BlockQ5_1) -> LegacyW {
    LegacyW {
        q: q5_quants(&x.qs, x.qh),
        d: x.d.to_f32(),
        m: x.m.to_f32(),
    }
}

#[inline(always)]
pub(super) fn prep_q8_0(x: &BlockQ8_0) -> LegacyW {
    let qs = i8_bytes(&x.qs);
    LegacyW {
        q: [load16(qs, 0), load16(qs, 16)],
        d: x.d.to_f32(),
        m: 0.0,
    }
}

/// The 8 lanes of a legacy block's integer dot product.
#[inline(always)]
pub(super) fn legacy_lanes(w: &LegacyW, a: &[i8; QK]) -> [v128; 2] {
    let a = i8_bytes(a);
    [
        quad_sums_i8(w.q[0], load16(a, 0)),
        quad_sums_i8(w.q[1], load16(a, 16)),
    ]
}

/// ggml's four lanes of 16 byte products (lane l = bytes 4l..4l+4) where the weights `w` lie in
/// 0..=127 (Q4_1, Q5_1, and the K-quants' unsigned quants). The relaxed-SIMD build forms the i16
/// pair sums in one `i16x8.relaxed_dot_i8x16_i7x16_s` (`pmaddubsw`), exact (deterministic) for
/// 7-bit `w`: they are at most 2 · 128 · 127 in magnitude and cannot saturate; then pairs of
/// pairs (`pmaddwd` by ones). That is the i32x4 form without its add of a zero accumulator,
/// which is what engines without a fused 4-byte dot product build it from; `FUSED_DOT` (where
/// they have one, `isa::CpuFeatures::fused_dot`) takes the i32x4 form: one instruction.
#[inline(always)]
pub(super) fn quad_sums_u7<const FUSED_DOT: bool>(w: v128, a: v128) -> v128 {
    #[cfg(target_feature = "relaxed-simd")]
    {
        if FUSED_DOT {
            i32x4_relaxed_dot_i8x16_i7x16_add(a, w, i32x4_splat(0))
        } else {
            i32x4_extadd_pairwise_i16x8(i16x8_relaxed_dot_i8x16_i7x16(a, w))
        }
    }
    #[cfg(not(target_feature = "relaxed-simd"))]
    quad_sums_i8(w, a)
}

/// [`legacy_lanes`] for weights in 0..=127 (Q4_1, Q5_1).
#[inline(always)]
pub(super) fn legacy_lanes_u7(w: &LegacyW, a: &[i8; QK]) -> [v128; 2] {
    let a = i8_bytes(a);
    [
        quad_sums_u7::<false>(w.q[0], load16(a, 0)),
        quad_sums_u7::<false>(w.q[1], load16(a, 16)),
    ]
}

/// Signed weights (Q4_0, Q5_0, Q8_0) × Q8_0.
#[inline(always)]
pub(super) fn step_q8_0(w: &LegacyW, y: &BlockQ8_0, acc: &mut Acc) {
    acc.fma(w.d * y.d.to_f32(), legacy_lanes(w, &y.qs));
}

/// Unsigned weights with a min (Q4_1, Q5_1) × Q8_1: summs += m_w * s_a, then the lanes.
#[inline(always)]
pub(super) fn step_q8_1(w: &LegacyW, y: &BlockQ8_1, acc: &mut Acc) {
    acc.summs = fma_scalar(w.m, y.s.to_f32(), acc.summs);
    acc.fma(w.d * y.d.to_f32(), legacy_lanes_u7(w, &y.qs));
}

/// A legacy type's kernels: the single-row one from `prep` and `step`, and from `legacy4` the
/// four-activation-rows one (`_x4`) and the gemm (four weight rows per pass for decode).
macro_rules! legacy_kernels {
    ($single:ident, $x4:ident, $gemm:ident, $T:ident, $W:ty, $A:ty, $prep:ident, $step:ident, $finish:ident) => {
        pub fn $single(n: usize, x: &[$W], y: &[$A]) -> f32 {
            let nb = block_count(n, QK, x.len(), y.len());
            let mut acc = Acc::new();
            for (x, y) in x[..nb].iter().zip(&y[..nb]) {
                $step(&$prep(x), y, &mut acc);
            }
            acc.$finish()
        }

        /// One weight row against four activation rows; each result is bit-identical to the
        /// single-row kernel's.
        pub fn $x4(n: usize, x: &[$W], ys: [&[$A]; 4]) -> [f32; 4] {
            legacy4::x4::<legacy4::$T>(n, x, ys)
        }

        /// `n_rows` weight rows × `n_acts` activation rows (see `legacy4::gemm`); each result
        /// is bit-identical to the single-row kernel's.
        pub fn $gemm(n: usize, w: &[$W], n_rows: usize, a: &[$A], n_acts: usize, out: &mut [f32]) {
            legacy4::gemm::<legacy4::$T>($single, n, w, n_rows, a, n_acts, out)
        }
    };
}

legacy_kernels!(
    vec_dot_q4_0_q8_0,
    vec_dot_q4_0_q8_0_x4,
    gemm_q4_0_q8_0,
    Q4_0,
    BlockQ4_0,
    BlockQ8_0,
    prep_q4_0,
    step_q8_0,
    finish_plain
);
legacy_kernels!(
    vec_dot_q4_1_q8_1,
    vec_dot_q4_1_q8_1_x4,
    gemm_q4_1_q8_1,
    Q4_1,
    BlockQ4_1,
    BlockQ8_1,
    prep_q4_1,
    step_q8_1,
    finish_summs
);
legacy_kernels!(
    vec_dot_q5_0_q8_0,
    vec_dot_q5_0_q8_0_x4,
    gemm_q5_0_q8_0,
    Q5_0,
    BlockQ5_0,
    BlockQ8_0,
    prep_q5_0,
    step_q8_0,
    finish_plain
);
legacy_kernels!(
    vec_dot_q5_1_q8_1,
    vec_dot_q5_1_q8_1_x4,
    gemm_q5_1_q8_1,
    Q5_1,
    BlockQ5_1,
    BlockQ8_1,
    prep_q5_1,
    step_q8_1,
    finish_summs
);
legacy_kernels!(
    vec_dot_q8_0_q8_0,
    vec_dot_q8_0_q8_0_x4,
    gemm_q8_0_q8_0,
    Q8_0,
    BlockQ8_0,
    BlockQ8_0,
    prep_q8_0,
    step_q8_0,
    finish_plain
);
