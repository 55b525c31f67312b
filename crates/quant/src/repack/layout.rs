//! The repacked block layouts: one block position of 8 weight rows ("a group block"), built
//! from the 8 rows' ggml blocks at that position.
//!
//! Every layout stores the rows' quant bytes in ggml's own order, 8-byte chunks of the 8 rows
//! alternating ([`interleave8`]): a 256-bit register then holds the same 8 bytes of 4 rows, so
//! one broadcast of 8 activation bytes meets 4 rows at once and the integer sums land per row
//! (two 32-bit lanes a row) with no horizontal work. Scales are gathered per row (`d[r]`), and
//! K-quant sub-block scales are unpacked to one byte per sub-block and row (`[sub-block][row]`).
//!
//! 5th / high bits of Q5_0 and Q5_K are pre-spread ([`spread_q5_0`], [`spread_q5_k`]): each
//! byte of the spread plane holds, for every 32-byte register of quant bytes, the high bits of
//! the two elements (low and high nibble) that byte position holds, so a kernel gets them with
//! one shift and one mask.

use crate::blocks::*;
use bytemuck::{Pod, Zeroable};
use half::f16;

/// Rows per group.
pub const ROWS: usize = 8;

/// `dst[(c * 8 + r) * 8 + i] = rows[r][8 * c + i]`: chunk c of every row, rows in order.
// `%` rather than `is_multiple_of`, which is newer than the workspace's rust-version.
#[allow(clippy::manual_is_multiple_of)]
pub fn interleave8(rows: [&[u8]; ROWS], dst: &mut [u8]) {
    let len = rows[0].len();
    debug_assert!(len % 8 == 0 && dst.len() == len * ROWS);
    for c in 0..len / 8 {
        for (r, row) in rows.iter().enumerate() {
            dst[(c * ROWS + r) * 8..][..8].copy_from_slice(&row[8 * c..8 * c + 8]);
        }
    }
}

/// Q4_0 × 8 rows: x = d * (q - 8).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct Q4_0x8 {
    pub d: [f16; ROWS],
    pub qs: [u8; 16 * ROWS],
}

/// Q4_1 × 8 rows: x = d * q + m.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct Q4_1x8 {
    pub d: [f16; ROWS],
    pub m: [f16; ROWS],
    pub qs: [u8; 16 * ROWS],
}

/// Q5_0 × 8 rows: x = d * (q - 16), the 5th bits spread by [`spread_q5_0`].
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct Q5_0x8 {
    pub d: [f16; ROWS],
    pub qh: [u8; 32],
    pub qs: [u8; 16 * ROWS],
}

/// Q8_0 × 8 rows: x = d * q.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct Q8_0x8 {
    pub d: [f16; ROWS],
    pub qs: [i8; 32 * ROWS],
}

/// Q4_K × 8 rows: x = d * sc[j] * q - dmin * m[j] for sub-block j.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct Q4Kx8 {
    pub d: [f16; ROWS],
    pub dmin: [f16; ROWS],
    /// `scales[j * 8 + r]`: sub-block j's 6-bit scale of row r.
    pub scales: [u8; 8 * ROWS],
    pub mins: [u8; 8 * ROWS],
    pub qs: [u8; 128 * ROWS],
}

/// Q5_K × 8 rows: Q4_K plus a 5th bit, spread by [`spread_q5_k`].
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct Q5Kx8 {
    pub d: [f16; ROWS],
    pub dmin: [f16; ROWS],
    pub scales: [u8; 8 * ROWS],
    pub mins: [u8; 8 * ROWS],
    pub qh: [u8; 32 * ROWS],
    pub qs: [u8; 128 * ROWS],
}

/// Q6_K × 8 rows, the seed's 8x8 layout: 8 f16 scales, 16×8 int8 sub-block scales, 8×128
/// bytes of low bits and 8×64 bytes of high bits, each in 8-byte chunks of the rows.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct Q6Kx8 {
    pub d: [f16; ROWS],
    /// `scales[j * 8 + r]`: sub-block j's scale of row r.
    pub scales: [i8; 16 * ROWS],
    pub ql: [u8; 128 * ROWS],
    pub qh: [u8; 64 * ROWS],
}

/// The bit in a spread byte for register `k`'s low-nibble element (`+1`: high nibble).
fn spread_bit(k: usize) -> usize {
    2 * (k % 4)
}

/// Q5_0's 5th bits: register k (0..4) of `qs` is chunk `k / 2` of rows `4 * (k % 2)..`;
/// byte p of it holds row `4 * (k % 2) + p / 8`, elements `e = 8 * (k / 2) + p % 8` (low
/// nibble) and `e + 16` (high). Bits 2k and 2k+1 of `qh[p]` are their 5th bits.
pub fn spread_q5_0(qh: [u32; ROWS]) -> [u8; 32] {
    let mut out = [0u8; 32];
    for k in 0..4 {
        for (p, o) in out.iter_mut().enumerate() {
            let r = 4 * (k % 2) + p / 8;
            let e = 8 * (k / 2) + p % 8;
            let lo = (qh[r] >> e) & 1;
            let hi = (qh[r] >> (e + 16)) & 1;
            *o |= ((lo | hi << 1) as u8) << spread_bit(k);
        }
    }
    out
}

/// Q5_K's 5th bits, per 64-element chunk j2 (0..4; 8 registers of `qs`, k = 2 * cl + h for
/// 8-byte chunk cl of the 32 bytes and row half h): plane `k / 4` of chunk j2's 64 bytes,
/// bits 2(k%4), 2(k%4)+1 of byte p: element `l = 8 * cl + p % 8` of sub-block 2·j2 and of
/// sub-block 2·j2+1 (ggml: bits 2·j2 and 2·j2+1 of `qh[l]`), row `4h + p / 8`.
pub fn spread_q5_k(qh: [&[u8; 32]; ROWS]) -> [u8; 32 * ROWS] {
    let mut out = [0u8; 32 * ROWS];
    for j2 in 0..4 {
        for k in 0..8 {
            let (cl, h) = (k / 2, k % 2);
            for p in 0..32 {
                let r = 4 * h + p / 8;
                let l = 8 * cl + p % 8;
                let lo = (qh[r][l] >> (2 * j2)) & 1;
                let hi = (qh[r][l] >> (2 * j2 + 1)) & 1;
                out[j2 * 64 + (k / 4) * 32 + p] |= (lo | hi << 1) << spread_bit(k);
            }
        }
    }
    out
}

pub fn pack_q4_0(b: [&BlockQ4_0; ROWS]) -> Q4_0x8 {
    let mut g = Q4_0x8::zeroed();
    g.d = b.map(|b| b.d);
    interleave8(b.map(|b| &b.qs[..]), &mut g.qs);
    g
}

pub fn pack_q4_1(b: [&BlockQ4_1; ROWS]) -> Q4_1x8 {
    let mut g = Q4_1x8::zeroed();
    g.d = b.map(|b| b.d);
    g.m = b.map(|b| b.m);
    interleave8(b.map(|b| &b.qs[..]), &mut g.qs);
    g
}

pub fn pack_q5_0(b: [&BlockQ5_0; ROWS]) -> Q5_0x8 {
    let mut g = Q5_0x8::zeroed();
    g.d = b.map(|b| b.d);
    g.qh = spread_q5_0(b.map(|b| u32::from_le_bytes(b.qh)));
    interleave8(b.map(|b| &b.qs[..]), &mut g.qs);
    g
}

pub fn pack_q8_0(b: [&BlockQ8_0; ROWS]) -> Q8_0x8 {
    let mut g = Q8_0x8::zeroed();
    g.d = b.map(|b| b.d);
    let qs = b.map(|b| bytemuck::cast_slice::<i8, u8>(&b.qs));
    interleave8(qs, bytemuck::cast_slice_mut(&mut g.qs));
    g
}

/// The unpacked 6-bit scales and mins of 8 Q4_K/Q5_K rows, `[j * 8 + r]`.
fn k4_scales_mins(scales: [&[u8; 12]; ROWS]) -> ([u8; 64], [u8; 64]) {
    let (mut sc, mut mn) = ([0u8; 64], [0u8; 64]);
    for (r, s) in scales.iter().enumerate() {
        for j in 0..8 {
            (sc[j * ROWS + r], mn[j * ROWS + r]) = k4_scale_min(s, j);
        }
    }
    (sc, mn)
}

pub fn pack_q4_k(b: [&BlockQ4K; ROWS]) -> Q4Kx8 {
    let mut g = Q4Kx8::zeroed();
    g.d = b.map(|b| b.d);
    g.dmin = b.map(|b| b.dmin);
    (g.scales, g.mins) = k4_scales_mins(b.map(|b| &b.scales));
    interleave8(b.map(|b| &b.qs[..]), &mut g.qs);
    g
}

pub fn pack_q5_k(b: [&BlockQ5K; ROWS]) -> Q5Kx8 {
    let mut g = Q5Kx8::zeroed();
    g.d = b.map(|b| b.d);
    g.dmin = b.map(|b| b.dmin);
    (g.scales, g.mins) = k4_scales_mins(b.map(|b| &b.scales));
    g.qh = spread_q5_k(b.map(|b| &b.qh));
    interleave8(b.map(|b| &b.qs[..]), &mut g.qs);
    g
}

pub fn pack_q6_k(b: [&BlockQ6K; ROWS]) -> Q6Kx8 {
    let mut g = Q6Kx8::zeroed();
    g.d = b.map(|b| b.d);
    for (r, b) in b.iter().enumerate() {
        for j in 0..16 {
            g.scales[j * ROWS + r] = b.scales[j];
        }
    }
    interleave8(b.map(|b| &b.ql[..]), &mut g.ql);
    interleave8(b.map(|b| &b.qh[..]), &mut g.qh);
    g
}
