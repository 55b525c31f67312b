//! Block layouts, byte-for-byte those of ggml (`ggml-common.h`).
//!
//! Each block is `#[repr(C)]` and `Pod`, so a row of GGUF tensor bytes can be viewed as a slice
//! of blocks without copying (the GGUF data section is aligned, see `gguf`).

use bytemuck::{Pod, Zeroable};
use half::f16;
use std::borrow::Cow;
use std::mem::size_of;

/// Elements per super-block of the K-quants.
pub const QK_K: usize = 256;
/// Elements per block of the legacy quants.
pub const QK: usize = 32;

/// 4-bit, scale only: x = d * (q - 8).
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ4_0 {
    pub d: f16,
    /// Element j in the low nibble of `qs[j]`, element j+16 in the high nibble.
    pub qs: [u8; QK / 2],
}

/// 4-bit with minimum: x = d * q + m.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ4_1 {
    pub d: f16,
    pub m: f16,
    pub qs: [u8; QK / 2],
}

/// 5-bit, scale only: x = d * (q - 16); the 5th bits are in qh (bit j = element j).
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ5_0 {
    pub d: f16,
    pub qh: [u8; 4],
    pub qs: [u8; QK / 2],
}

/// 5-bit with minimum: x = d * q + m.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ5_1 {
    pub d: f16,
    pub m: f16,
    pub qh: [u8; 4],
    pub qs: [u8; QK / 2],
}

/// 8-bit, scale only: x = d * q.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ8_0 {
    pub d: f16,
    pub qs: [i8; QK],
}

/// 8-bit activations for the "_1" weight types: s = d * sum(qs).
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ8_1 {
    pub d: f16,
    pub s: f16,
    pub qs: [i8; QK],
}

/// MXFP4 (OCP microscaling FP4): 32 E2M1 values sharing one E8M0 power-of-two scale;
/// x = 2^(e-127) * fp4(q). Element j in the low nibble of `qs[j]`, element j+16 in the high
/// nibble, as in the other 4-bit formats.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockMxfp4 {
    pub e: u8,
    pub qs: [u8; QK / 2],
}

/// The E2M1 values doubled (ggml's `kvalues_mxfp4`), indexed by the 4-bit code: sign in bit 3.
/// The block scale is then [`e8m0_to_f32_half`], so that the products stay integers.
pub const KVALUES_MXFP4: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// Half the E8M0 scale `e`: 2^(e-128), built from its bits as ggml's
/// `ggml_e8m0_to_fp32_half` does (e = 0 and 1 give the subnormals 2^-128 and 2^-127; e = 255
/// gives 2^127, ggml ignores E8M0's NaN encoding).
#[inline]
pub fn e8m0_to_f32_half(e: u8) -> f32 {
    let bits = if e < 2 {
        0x0020_0000u32 << e
    } else {
        (e as u32 - 1) << 23
    };
    f32::from_bits(bits)
}

/// 2-bit K-quant: 16 sub-blocks of 16, 4-bit scale and min per sub-block.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ2K {
    pub scales: [u8; QK_K / 16],
    pub qs: [u8; QK_K / 4],
    pub d: f16,
    pub dmin: f16,
}

/// 3-bit K-quant: 16 sub-blocks of 16, 6-bit scales packed in 12 bytes, high bit in hmask.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ3K {
    pub hmask: [u8; QK_K / 8],
    pub qs: [u8; QK_K / 4],
    pub scales: [u8; 12],
    pub d: f16,
}

/// 4-bit K-quant: 8 sub-blocks of 32, 6-bit scales and mins packed in 12 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ4K {
    pub d: f16,
    pub dmin: f16,
    pub scales: [u8; 12],
    pub qs: [u8; QK_K / 2],
}

/// 5-bit K-quant: as Q4_K plus the 5th bits in qh.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ5K {
    pub d: f16,
    pub dmin: f16,
    pub scales: [u8; 12],
    pub qh: [u8; QK_K / 8],
    pub qs: [u8; QK_K / 2],
}

/// 6-bit K-quant: 16 sub-blocks of 16 with signed 8-bit scales; x = d * scale * (q - 32).
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ6K {
    pub ql: [u8; QK_K / 2],
    pub qh: [u8; QK_K / 4],
    pub scales: [i8; QK_K / 16],
    pub d: f16,
}

/// 8-bit activations for the K-quants, with per-16 sums for the min terms.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ8K {
    pub d: f32,
    pub qs: [i8; QK_K],
    pub bsums: [i16; QK_K / 16],
}

/// The 6-bit scale and min of sub-block `j` (0..8) of a Q4_K / Q5_K super-block: sub-blocks
/// 0..4 use the low 6 bits of bytes j and j+4; 4..8 take their low 4 bits from byte j+4 and the
/// top 2 from the spare high bits of bytes j-4 (scale) and j (min).
#[inline]
pub fn k4_scale_min(scales: &[u8; 12], j: usize) -> (u8, u8) {
    if j < 4 {
        (scales[j] & 63, scales[j + 4] & 63)
    } else {
        (
            (scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4),
            (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4),
        )
    }
}

/// The 16 signed 6-bit scales of a Q3_K super-block (stored biased by 32): low nibbles in
/// bytes 0..8 (sub-blocks 0..8 low, 8..16 high nibble), top 2 bits in bytes 8..12.
#[inline]
pub fn q3k_scales(scales: &[u8; 12]) -> [i8; 16] {
    let mut out = [0i8; 16];
    for (j, s) in out.iter_mut().enumerate() {
        let low = if j < 8 {
            scales[j] & 0x0F
        } else {
            scales[j - 8] >> 4
        };
        let high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
        *s = (low | (high << 4)) as i8 - 32;
    }
    out
}

/// Views `bytes` as a slice of blocks `B`, copying only when `bytes` is not aligned for `B`
/// (GGUF data is aligned, but callers may hand us any slice). `bytes.len()` must be a
/// multiple of `size_of::<B>()`; a trailing partial block is ignored.
pub fn blocks_from_bytes<B: Pod>(bytes: &[u8]) -> Cow<'_, [B]> {
    let size = size_of::<B>();
    let whole = bytes.len() / size * size;
    match bytemuck::try_cast_slice(&bytes[..whole]) {
        Ok(blocks) => Cow::Borrowed(blocks),
        Err(_) => Cow::Owned(
            bytes[..whole]
                .chunks_exact(size)
                .map(bytemuck::pod_read_unaligned)
                .collect(),
        ),
    }
}

/// Runs `f` on `bytes` viewed as mutable blocks `B`; when `bytes` is misaligned for `B`, `f`
/// writes into an aligned scratch copy that is then copied back.
pub fn with_blocks_mut<B: Pod, R>(bytes: &mut [u8], f: impl FnOnce(&mut [B]) -> R) -> R {
    let size = size_of::<B>();
    let whole = bytes.len() / size * size;
    let bytes = &mut bytes[..whole];
    if let Ok(blocks) = bytemuck::try_cast_slice_mut(bytes) {
        return f(blocks);
    }
    let mut scratch: Vec<B> = bytes
        .chunks_exact(size)
        .map(bytemuck::pod_read_unaligned)
        .collect();
    let r = f(&mut scratch);
    bytes.copy_from_slice(bytemuck::cast_slice(&scratch));
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_gguf::GgmlType;

    #[test]
    fn block_sizes_match_the_type_table() {
        let sizes = [
            (GgmlType::Q4_0, size_of::<BlockQ4_0>()),
            (GgmlType::Q4_1, size_of::<BlockQ4_1>()),
            (GgmlType::Q5_0, size_of::<BlockQ5_0>()),
            (GgmlType::Q5_1, size_of::<BlockQ5_1>()),
            (GgmlType::Q8_0, size_of::<BlockQ8_0>()),
            (GgmlType::Q8_1, size_of::<BlockQ8_1>()),
            (GgmlType::Q2_K, size_of::<BlockQ2K>()),
            (GgmlType::Q3_K, size_of::<BlockQ3K>()),
            (GgmlType::Q4_K, size_of::<BlockQ4K>()),
            (GgmlType::Q5_K, size_of::<BlockQ5K>()),
            (GgmlType::Q6_K, size_of::<BlockQ6K>()),
            (GgmlType::Q8_K, size_of::<BlockQ8K>()),
            (GgmlType::MXFP4, size_of::<BlockMxfp4>()),
        ];
        for (t, s) in sizes {
            assert_eq!(t.type_size() as usize, s, "{t}");
        }
    }

    #[test]
    fn e8m0_half_is_two_to_the_e_minus_128() {
        for e in 0..=255u8 {
            assert_eq!(
                e8m0_to_f32_half(e) as f64,
                2f64.powi(e as i32 - 128),
                "e = {e}"
            );
        }
        assert_eq!(e8m0_to_f32_half(0).to_bits(), 0x0020_0000);
        assert_eq!(e8m0_to_f32_half(128), 1.0);
    }
}
