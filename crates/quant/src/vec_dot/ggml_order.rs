//! Portable vec-dot kernels with the float arithmetic of ggml's x86 AVX2 kernels, operation for
//! operation (`ggml-cpu/arch/x86/quants.c`, the `__AVX2__` branches, which an AVX-512/VNNI
//! `-march=native` build also takes: VNNI only changes how the exact integer lane sums are
//! formed).
//!
//! ggml's kernels split each block's integer dot product into 8 i32 lanes (lane `l` holds the
//! products of bytes `4l..4l+4` of every 32-byte group), convert the lanes to f32, and
//! accumulate them into one 8-lane f32 register with a fused multiply-add per block; the result
//! is `hsum_float_8` of that register (high half + low half, then lanes 0+2 / 1+3, then 0+1),
//! plus, for the types with a min, a scalar sum (whose `a += b * c` the compiler contracts into
//! an FMA) or a 4-lane register. Integer lane sums are exact whatever instructions compute
//! them, so emulating the lanes and the float steps reproduces ggml's result bit for bit; the
//! AVX2 kernels in `avx2.rs` are tested against these functions bit for bit.
//!
//! This matters because activations are quantized: a last-bit difference in a matmul output can
//! move a quant of the next layer's input by a whole step, and after a few layers logits differ
//! visibly from llama.cpp's.
//!
//! Activations must be what the quantizers produce (Q8_0/Q8_1 quants in [-127, 127]); as in
//! ggml, -128 in a Q8_0/Q8_1 activation is outside the kernels' domain.

use super::scalar::{unpack_scales_mins_k4, unpack_scales_q3k};
use crate::blocks::*;

/// Number of blocks to process: `n / qk`, clipped to what both slices hold.
fn block_count(n: usize, qk: usize, w_len: usize, a_len: usize) -> usize {
    debug_assert_eq!(n % qk, 0, "row length {n} is not a multiple of {qk}");
    debug_assert!(
        w_len >= n / qk && a_len >= n / qk,
        "rows shorter than {n} elements"
    );
    (n / qk).min(w_len).min(a_len)
}

/// ggml's `__m256` accumulator and the extra terms some kernels keep beside it.
#[derive(Clone, Copy, Default)]
struct Acc {
    lanes: [f32; 8],
    /// Q4_K's 4-lane `acc_m`.
    m4: [f32; 4],
    /// The scalar `summs` of Q4_1 / Q5_1 / Q5_K.
    summs: f32,
}

/// ggml's `hsum_float_8` of 8 lanes: the high half onto the low one, then lanes 0+2 / 1+3
/// (`movehl`), then 0+1 (`movehdup`). Also the repacked Q4_1 kernels' final step.
#[inline]
pub(crate) fn hsum_float_8(v: &[f32; 8]) -> f32 {
    let q: [f32; 4] = std::array::from_fn(|l| v[4 + l] + v[l]);
    let h = [q[0] + q[2], q[1] + q[3]];
    h[0] + h[1]
}

impl Acc {
    /// `acc = _mm256_fmadd_ps(set1(d), cvtepi32_ps(sums), acc)`.
    #[inline]
    fn fma(&mut self, d: f32, sums: [i32; 8]) {
        for (a, s) in self.lanes.iter_mut().zip(sums) {
            *a = d.mul_add(s as f32, *a);
        }
    }

    /// `hsum_float_8(acc)`.
    fn hsum8(&self) -> f32 {
        hsum_float_8(&self.lanes)
    }

    /// Q4_K's reduction of `acc_m`: lanes 0+2 / 1+3 (`movehl`), then 0+1 (`movehdup`).
    fn hsum4(&self) -> f32 {
        let m = &self.m4;
        (m[0] + m[2]) + (m[1] + m[3])
    }
}

// ---------------------------------------------------------------------------------------------
// Legacy quants: 32-element blocks, one 32-byte vector per block.

/// Lane sums of one block: `w(b) * a[b]` for bytes b = 4l..4l+4 in lane l.
#[inline]
fn legacy_lanes(w: impl Fn(usize) -> i32, a: &[i8; QK]) -> [i32; 8] {
    let mut lanes = [0i32; 8];
    for (b, &y) in a.iter().enumerate() {
        lanes[b / 4] += w(b) * y as i32;
    }
    lanes
}

/// Element b of a 4-bit block: low nibbles are elements 0..16, high nibbles 16..32.
#[inline]
fn nibble(qs: &[u8; QK / 2], b: usize) -> i32 {
    (if b < QK / 2 {
        qs[b] & 0x0F
    } else {
        qs[b - QK / 2] >> 4
    }) as i32
}

/// The 5th bit of element b of a Q5 block, as 16 or 0.
#[inline]
fn q5_high(qh: [u8; 4], b: usize) -> i32 {
    (((u32::from_le_bytes(qh) >> b) & 1) * 16) as i32
}

pub fn vec_dot_q4_0_q8_0(n: usize, x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    let nb = block_count(n, QK, x.len(), y.len());
    let mut acc = Acc::default();
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        let lanes = legacy_lanes(|b| nibble(&x.qs, b) - 8, &y.qs);
        acc.fma(x.d.to_f32() * y.d.to_f32(), lanes);
    }
    acc.hsum8()
}

pub fn vec_dot_q4_1_q8_1(n: usize, x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
    let nb = block_count(n, QK, x.len(), y.len());
    let mut acc = Acc::default();
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        acc.summs = x.m.to_f32().mul_add(y.s.to_f32(), acc.summs);
        let lanes = legacy_lanes(|b| nibble(&x.qs, b), &y.qs);
        acc.fma(x.d.to_f32() * y.d.to_f32(), lanes);
    }
    acc.hsum8() + acc.summs
}

pub fn vec_dot_q5_0_q8_0(n: usize, x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    let nb = block_count(n, QK, x.len(), y.len());
    let mut acc = Acc::default();
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        let lanes = legacy_lanes(|b| (nibble(&x.qs, b) | q5_high(x.qh, b)) - 16, &y.qs);
        acc.fma(x.d.to_f32() * y.d.to_f32(), lanes);
    }
    acc.hsum8()
}

pub fn vec_dot_q5_1_q8_1(n: usize, x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
    let nb = block_count(n, QK, x.len(), y.len());
    let mut acc = Acc::default();
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        acc.summs = x.m.to_f32().mul_add(y.s.to_f32(), acc.summs);
        let lanes = legacy_lanes(|b| nibble(&x.qs, b) | q5_high(x.qh, b), &y.qs);
        acc.fma(x.d.to_f32() * y.d.to_f32(), lanes);
    }
    acc.hsum8() + acc.summs
}

pub fn vec_dot_q8_0_q8_0(n: usize, x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    let nb = block_count(n, QK, x.len(), y.len());
    let mut acc = Acc::default();
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        let lanes = legacy_lanes(|b| x.qs[b] as i32, &y.qs);
        acc.fma(x.d.to_f32() * y.d.to_f32(), lanes);
    }
    acc.hsum8()
}

/// MXFP4 × Q8_0 as ggml's AVX2 kernel does it: blocks in pairs, even blocks into one 8-lane
/// register and odd blocks into a second (each one FMA per block with d = d_a * 2^(e-128)),
/// the two registers added lane by lane before `hsum_float_8`; an odd last block is then
/// added by the scalar tail loop, `sumf += d * sumi` (contracted into an FMA).
pub fn vec_dot_mxfp4_q8_0(n: usize, x: &[BlockMxfp4], y: &[BlockQ8_0]) -> f32 {
    let nb = block_count(n, QK, x.len(), y.len());
    let (x, y) = (&x[..nb], &y[..nb]);
    let scale = |x: &BlockMxfp4, y: &BlockQ8_0| y.d.to_f32() * e8m0_to_f32_half(x.e);
    let lanes = |x: &BlockMxfp4, y: &BlockQ8_0| {
        legacy_lanes(|b| KVALUES_MXFP4[nibble(&x.qs, b) as usize] as i32, &y.qs)
    };
    let (mut even, mut odd) = (Acc::default(), Acc::default());
    let mut ib = 0;
    while ib + 1 < nb {
        even.fma(scale(&x[ib], &y[ib]), lanes(&x[ib], &y[ib]));
        odd.fma(scale(&x[ib + 1], &y[ib + 1]), lanes(&x[ib + 1], &y[ib + 1]));
        ib += 2;
    }
    for (e, o) in even.lanes.iter_mut().zip(odd.lanes) {
        *e += o;
    }
    let mut sumf = even.hsum8();
    if ib < nb {
        let sumi: i32 = lanes(&x[ib], &y[ib]).iter().sum();
        sumf = scale(&x[ib], &y[ib]).mul_add(sumi as f32, sumf);
    }
    sumf
}

// ---------------------------------------------------------------------------------------------
// K-quants: 256-element super-blocks; lane l gathers bytes 4l..4l+4 of all eight 32-groups.

/// Lane sums of one super-block: `w(i) * a[i]`, where `w` includes the sub-block scale.
#[inline]
fn k_lanes(w: impl Fn(usize) -> i32, a: &[i8; QK_K]) -> [i32; 8] {
    let mut lanes = [0i32; 8];
    for (i, &y) in a.iter().enumerate() {
        lanes[(i % 32) / 4] += w(i) * y as i32;
    }
    lanes
}

/// Q4_K / Q5_K's min term: `madd_epi16(mins, hadd_epi16(bsums))`, i16 and i32 arithmetic as
/// the instructions do it (wrapping), 4 lanes.
fn k4_min_lanes(mins: &[u8; 8], bsums: &[i16; 16]) -> [i32; 4] {
    let pair = |m: usize| bsums[2 * m].wrapping_add(bsums[2 * m + 1]) as i32;
    std::array::from_fn(|k| {
        (mins[2 * k] as i32 * pair(2 * k)).wrapping_add(mins[2 * k + 1] as i32 * pair(2 * k + 1))
    })
}

pub fn vec_dot_q2_k_q8_k(n: usize, x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
    let nb = block_count(n, QK_K, x.len(), y.len());
    let mut acc = Acc::default();
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        let d = y.d * x.d.to_f32();
        let dmin = -y.d * x.dmin.to_f32();
        // The min term goes into the same register, first, in 8 lanes of bsum pairs.
        let mins: [i32; 8] = std::array::from_fn(|k| {
            let m = |s: usize| (x.scales[s] >> 4) as i32 * y.bsums[s] as i32;
            m(2 * k) + m(2 * k + 1)
        });
        acc.fma(dmin, mins);
        let lanes = k_lanes(
            |i| {
                let (j, g, b) = (i / 128, (i % 128) / 32, i % 32);
                let q = (x.qs[32 * j + b] >> (2 * g)) & 3;
                (x.scales[i / 16] & 0x0F) as i32 * q as i32
            },
            &y.qs,
        );
        acc.fma(d, lanes);
    }
    acc.hsum8()
}

pub fn vec_dot_q3_k_q8_k(n: usize, x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
    let nb = block_count(n, QK_K, x.len(), y.len());
    let mut acc = Acc::default();
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        let d = y.d * x.d.to_f32();
        let scales = unpack_scales_q3k(&x.scales);
        let lanes = k_lanes(
            |i| {
                let (g, b) = (i / 32, i % 32);
                let low = ((x.qs[(g / 4) * 32 + b] >> (2 * (g % 4))) & 3) as i32;
                let high_clear = x.hmask[b] & (1 << g) == 0;
                scales[i / 16] as i32 * (low - if high_clear { 4 } else { 0 })
            },
            &y.qs,
        );
        acc.fma(d, lanes);
    }
    acc.hsum8()
}

/// The 4-bit quant of element i of a Q4_K / Q5_K super-block.
#[inline]
fn k4_nibble(qs: &[u8; QK_K / 2], i: usize) -> i32 {
    let (c, within) = (i / 64, i % 64);
    let byte = qs[c * 32 + within % 32];
    (if within < 32 { byte & 0x0F } else { byte >> 4 }) as i32
}

pub fn vec_dot_q4_k_q8_k(n: usize, x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    let nb = block_count(n, QK_K, x.len(), y.len());
    let mut acc = Acc::default();
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        let d = y.d * x.d.to_f32();
        let dmin = -y.d * x.dmin.to_f32();
        let (scales, mins) = unpack_scales_mins_k4(&x.scales);
        for (m, p) in acc.m4.iter_mut().zip(k4_min_lanes(&mins, &y.bsums)) {
            *m = dmin.mul_add(p as f32, *m);
        }
        let lanes = k_lanes(|i| scales[i / 32] as i32 * k4_nibble(&x.qs, i), &y.qs);
        acc.fma(d, lanes);
    }
    acc.hsum8() + acc.hsum4()
}

pub fn vec_dot_q5_k_q8_k(n: usize, x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    let nb = block_count(n, QK_K, x.len(), y.len());
    let mut acc = Acc::default();
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        let d = y.d * x.d.to_f32();
        let dmin = -y.d * x.dmin.to_f32();
        let (scales, mins) = unpack_scales_mins_k4(&x.scales);
        let p = k4_min_lanes(&mins, &y.bsums);
        let isum = (p[0].wrapping_add(p[1])).wrapping_add(p[2].wrapping_add(p[3]));
        acc.summs = dmin.mul_add(isum as f32, acc.summs);
        let lanes = k_lanes(
            |i| {
                let high = ((x.qh[i % 32] >> (i / 32)) & 1) as i32;
                scales[i / 32] as i32 * (k4_nibble(&x.qs, i) | (high << 4))
            },
            &y.qs,
        );
        acc.fma(d, lanes);
    }
    acc.hsum8() + acc.summs
}

pub fn vec_dot_q6_k_q8_k(n: usize, x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    let nb = block_count(n, QK_K, x.len(), y.len());
    let mut acc = Acc::default();
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        let d = y.d * x.d.to_f32();
        // The unsigned 6-bit quants (0..64) in the product lanes; the -32 offset is subtracted
        // afterwards per lane from the bsums: lane l -= 32·(bsums[2l]·sc[2l] + bsums[2l+1]·
        // sc[2l+1]), as ggml's AVX2 kernel does (`q8sclsub`). The lanes (and so the float
        // result) differ from subtracting 32 per byte; llama.cpp's reference outputs need this.
        let mut lanes = k_lanes(
            |i| {
                let (h, g, l) = (i / 128, (i % 128) / 32, i % 32);
                let ql = x.ql[64 * h + 32 * (g % 2) + l];
                let low = if g < 2 { ql & 0x0F } else { ql >> 4 };
                let high = (x.qh[32 * h + l] >> (2 * g)) & 3;
                x.scales[i / 16] as i32 * (low | (high << 4)) as i32
            },
            &y.qs,
        );
        for (l, lane) in lanes.iter_mut().enumerate() {
            let off = y.bsums[2 * l] as i32 * x.scales[2 * l] as i32
                + y.bsums[2 * l + 1] as i32 * x.scales[2 * l + 1] as i32;
            *lane = lane.wrapping_sub(off << 5);
        }
        acc.fma(d, lanes);
    }
    acc.hsum8()
}
