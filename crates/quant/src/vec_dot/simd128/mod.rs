//! wasm32 SIMD128 vec-dot kernels, bit-identical to the portable ggml-x86-order kernels
//! (`ggml_order.rs`), so the browser build computes exactly what the native build (AVX2) and
//! llama.cpp compute, and produces the same tokens.
//!
//! - Integer parts are exact however they are formed: products of bytes are widened to i16
//!   (`extmul`), summed in pairs into i32 (`extadd_pairwise`, or `dot` with the K-quants' i16
//!   sub-block scales), and pairs of pairs are added at the end of a block to give ggml's 8 lanes
//!   (lane l = bytes 4l..4l+4 of every 32-byte group).
//! - ggml's 8-lane f32 accumulator is two f32x4. wasm has no FMA instruction (`f32::mul_add` is
//!   a slow software `fmaf`), so each per-block `fmaf(d, f32(lane), acc)` is computed in f64x2
//!   lanes: the product is exact in f64 and one f64 add rounds once; rounding that to f32 is
//!   `fmaf`'s result except when the f64 sum sits exactly on an f32 midpoint (then TwoSum's
//!   error term says which way to round, in f64x2 lanes too) or outside the normal f32 range
//!   (rare: those lanes call `mul_add`). `fma_f64.rs` states the method in scalar code, with its
//!   proof tests. The once-per-block scalar FMAs of the min terms call `mul_add` (the software
//!   `fmaf` already works in f64 and is cheaper than the scalar emulation there).
//! - Reductions are ggml's `hsum_float_8` order; the min terms are kept as ggml keeps them.
//!
//! As in `avx2.rs`, each legacy kernel is a per-block `prep` (unpack a weight block) and `step`
//! (multiply one activation block into an accumulator); the `_x4` kernels run one prep and four
//! steps, so each of their results is bit-identical to the single-row kernel's. The K-quant
//! single-row kernels unpack each 16-element chunk where they multiply it (a whole unpacked
//! super-block does not stay in registers); their x4 kernels unpack once for four rows.
//!
//! Built only with `target_feature = "simd128"` enabled at compile time (`.cargo/config.toml`),
//! so the intrinsics are safe to call; only the unaligned loads are `unsafe`.
//!
//! With `target_feature = "relaxed-simd"` as well (the browser package's `-relaxed` builds), the
//! FMAs are `f32x4.relaxed_madd` and the byte dot products of 7-bit weights (Q4_1, Q5_1, Q2_K,
//! Q4_K, Q5_K) `i32x4.relaxed_dot_i8x16_i7x16_add_s`: the same bits wherever relaxed_madd is fused
//! and relaxed_dot exact, which [`relaxed_simd_is_exact`] checks at load (the loader falls back
//! to the plain SIMD128 build elsewhere).

use super::fma_f64::{BELOW_F32_MANTISSA, F32_MIDPOINT_BITS, F32_MIN_NORMAL};
use crate::blocks::*;
use core::arch::wasm32::*;

mod fma;
mod k_quants;
mod legacy;
mod legacy4;

pub use fma::fma_f32x4;
#[cfg(target_feature = "relaxed-simd")]
pub use fma::relaxed_simd_is_exact;
use fma::*;
pub use k_quants::*;
pub use legacy::*;

fn block_count(n: usize, qk: usize, w_len: usize, a_len: usize) -> usize {
    debug_assert_eq!(n % qk, 0, "row length {n} is not a multiple of {qk}");
    debug_assert!(
        w_len >= n / qk && a_len >= n / qk,
        "rows shorter than {n} elements"
    );
    (n / qk).min(w_len).min(a_len)
}

// ---------------------------------------------------------------------------------------------
// Loads and integer helpers

/// 16 bytes of `bytes` from `offset` (bounds-checked; the offsets are constants per block).
#[inline(always)]
fn load16(bytes: &[u8], offset: usize) -> v128 {
    let chunk = &bytes[offset..offset + 16];
    // SAFETY: `chunk` is 16 readable bytes, and v128_load has no alignment requirement.
    unsafe { v128_load(chunk.as_ptr() as *const v128) }
}

#[inline(always)]
fn i8_bytes(v: &[i8]) -> &[u8] {
    bytemuck::cast_slice(v)
}

/// Pair sums of 16 signed byte products, as i32: (bytes 0..8, bytes 8..16).
#[inline(always)]
fn pair_sums_i8(w: v128, a: v128) -> (v128, v128) {
    (
        i32x4_extadd_pairwise_i16x8(i16x8_extmul_low_i8x16(w, a)),
        i32x4_extadd_pairwise_i16x8(i16x8_extmul_high_i8x16(w, a)),
    )
}

/// Four of ggml's lanes from eight pair sums: lane l = pair 2l + pair 2l+1.
#[inline(always)]
fn quads(pairs_lo: v128, pairs_hi: v128) -> v128 {
    i32x4_add(
        i32x4_shuffle::<0, 2, 4, 6>(pairs_lo, pairs_hi),
        i32x4_shuffle::<1, 3, 5, 7>(pairs_lo, pairs_hi),
    )
}

/// ggml's four lanes of 16 signed byte products (lane l = bytes 4l..4l+4).
#[inline(always)]
fn quad_sums_i8(w: v128, a: v128) -> v128 {
    let (lo, hi) = pair_sums_i8(w, a);
    quads(lo, hi)
}

/// Byte j is 0xFF where bit j of `bits` is set, else 0 (bytes 0..16, bytes 16..32).
#[inline(always)]
fn bits_to_bytes_32(bits: u32) -> [v128; 2] {
    let v = u32x4_splat(bits);
    let select = u8x16(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
    let lo = i8x16_shuffle::<0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1>(v, v);
    let hi = i8x16_shuffle::<2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3>(v, v);
    [
        i8x16_eq(v128_and(lo, select), select),
        i8x16_eq(v128_and(hi, select), select),
    ]
}
