//! The K-quants (256-element super-blocks) × Q8_K: per-type unpacking ([`KQuant`]) and the
//! single-row, x4 and gemm kernels over it.

use super::*;

/// The per-type terms of ggml's K-quant kernels beside the main scaled dot product.
#[derive(Clone, Copy)]
pub(super) enum KExtra {
    None,
    /// Q2_K: acc += dmin · (mins · bsums, in 8 lanes of pairs), before the main term.
    Q2Mins {
        mins: [v128; 2],
        dmin: f32,
    },
    /// Q4_K: acc_m += dmin · (4 lanes of `madd(mins, hadd(bsums))`).
    Q4Mins {
        mins: v128,
        dmin: f32,
    },
    /// Q5_K: summs += dmin · (the sum of those 4 lanes).
    Q5Mins {
        mins: v128,
        dmin: f32,
    },
    /// Q6_K: lane l -= 32 · (bsums[2l]·sc[2l] + bsums[2l+1]·sc[2l+1]) (the scales as i16x8,
    /// 0..8 and 8..16), as ggml's `q8sclsub`; the quants stay unsigned.
    Q6Offset {
        scales: [v128; 2],
    },
}

/// What a K-quant super-block needs besides its quants: the 16 per-chunk (16-element) scales,
/// `d`, and the min terms.
pub(super) struct KHeader {
    pub(super) scales: [i16; 16],
    pub(super) d: f32,
    pub(super) extra: KExtra,
}

/// The unpacking of one K-quant type. `chunk(c)` is the 16 signed quants of elements
/// 16c..16c+16. The single-row kernels unpack each chunk right where it is multiplied; the x4
/// kernels unpack a super-block once for four activation rows. Both run the same operations.
pub(super) trait KQuant {
    /// Whether `chunk`'s quants all lie in 0..=127 (the relaxed build's `relaxed_dot` applies).
    const U7: bool;
    fn header(&self) -> KHeader;
    fn chunk(&self, c: usize) -> v128;
    /// How ggml combines the accumulators at the end (see `Acc`).
    fn finish(acc: Acc) -> f32 {
        acc.finish_plain()
    }
}

/// Q4_K / Q5_K's 4 min lanes: `madd_epi16(mins, hadd_epi16(bsums))`, with wrapping i16 pair sums
/// as the instructions do them.
#[inline(always)]
pub(super) fn k4_min_lanes(mins: v128, y: &BlockQ8K) -> v128 {
    let b = bytemuck::cast_slice::<i16, u8>(&y.bsums);
    let (lo, hi) = (load16(b, 0), load16(b, 16));
    let pairs = i16x8_add(
        i16x8_shuffle::<0, 2, 4, 6, 8, 10, 12, 14>(lo, hi),
        i16x8_shuffle::<1, 3, 5, 7, 9, 11, 13, 15>(lo, hi),
    );
    i32x4_dot_i16x8(mins, pairs)
}

/// The 8 lanes of a super-block's scaled integer dot product (lane l of half j: the bytes
/// 4l..4l+4 of every 32-group's j-th 16 bytes, times their chunk's scale). Exact integers, so
/// any grouping gives the same lanes; `chunk(c)` gives chunk c's quants and its scale in all
/// eight i16 lanes.
#[inline(always)]
pub(super) fn k_lanes<const U7: bool>(
    chunk: impl Fn(usize) -> (v128, v128),
    a: &[u8],
) -> [v128; 2] {
    #[cfg(target_feature = "relaxed-simd")]
    if U7 {
        // ggml's own order of work: the i16 pair sums of each chunk in one relaxed_dot
        // (`pmaddubsw`; exact for 7-bit quants: |pair| ≤ 2 · 128 · 127 cannot saturate), then
        // pairs × scale summed into i32 quads (`pmaddwd`).
        // Chunks two at a time into named accumulators (even chunks: half 0, odd: half 1):
        // indexing an array by `c % 2` made LLVM keep it in memory, a load and a store per chunk.
        let (mut even, mut odd) = (i32x4_splat(0), i32x4_splat(0));
        for c in (0..16).step_by(2) {
            let scaled = |c: usize| {
                let (q, scale) = chunk(c);
                let pairs = i16x8_relaxed_dot_i8x16_i7x16(load16(a, 16 * c), q);
                i32x4_dot_i16x8(pairs, scale)
            };
            even = i32x4_add(even, scaled(c));
            odd = i32x4_add(odd, scaled(c + 1));
        }
        return [even, odd];
    }
    // Pair sums of bytes 0..8, 8..16 (even chunks), 16..24, 24..32 (odd chunks) of every
    // 32-group, in named accumulators (see above).
    let zero = i32x4_splat(0);
    let (mut p0, mut p1, mut p2, mut p3) = (zero, zero, zero, zero);
    for c in (0..16).step_by(2) {
        let scaled = |c: usize| {
            let (q, scale) = chunk(c);
            let av = load16(a, 16 * c);
            (
                i32x4_dot_i16x8(i16x8_extmul_low_i8x16(q, av), scale),
                i32x4_dot_i16x8(i16x8_extmul_high_i8x16(q, av), scale),
            )
        };
        let (lo, hi) = scaled(c);
        p0 = i32x4_add(p0, lo);
        p1 = i32x4_add(p1, hi);
        let (lo, hi) = scaled(c + 1);
        p2 = i32x4_add(p2, lo);
        p3 = i32x4_add(p3, hi);
    }
    [quads(p0, p1), quads(p2, p3)]
}

/// One super-block times one Q8_K block into `acc`; `chunk(c)` gives chunk c's quants and its
/// scale (in all eight i16 lanes).
#[inline(always)]
pub(super) fn step_k<const U7: bool>(
    chunk: impl Fn(usize) -> (v128, v128),
    h: &KHeader,
    y: &BlockQ8K,
    acc: &mut Acc,
) {
    let mut lanes = k_lanes::<U7>(chunk, i8_bytes(&y.qs));
    match h.extra {
        KExtra::None | KExtra::Q6Offset { .. } => {}
        KExtra::Q2Mins { mins, dmin } => {
            let b = bytemuck::cast_slice::<i16, u8>(&y.bsums);
            let lanes = [
                i32x4_dot_i16x8(mins[0], load16(b, 0)),
                i32x4_dot_i16x8(mins[1], load16(b, 16)),
            ];
            acc.fma(-y.d * dmin, lanes);
        }
        KExtra::Q4Mins { mins, dmin } => {
            acc.m4 = fma4(-y.d * dmin, k4_min_lanes(mins, y), acc.m4);
        }
        KExtra::Q5Mins { mins, dmin } => {
            let p = k4_min_lanes(mins, y);
            let p = i32x4_add(p, u64x2_shuffle::<1, 1>(p, p));
            let isum = i32x4_extract_lane::<0>(p).wrapping_add(i32x4_extract_lane::<1>(p));
            acc.summs = fma_scalar(-y.d * dmin, isum as f32, acc.summs);
        }
    }
    if let KExtra::Q6Offset { scales } = h.extra {
        let b = bytemuck::cast_slice::<i16, u8>(&y.bsums);
        for (k, lane) in lanes.iter_mut().enumerate() {
            let off = i32x4_dot_i16x8(load16(b, 16 * k), scales[k]);
            *lane = i32x4_sub(*lane, i32x4_shl(off, 5));
        }
    }
    acc.fma(y.d * h.d, lanes);
}

/// A super-block decoded once for all the activation rows it meets: its chunks' quants, their
/// scales in all eight i16 lanes, and its header.
pub(super) struct KDecoded {
    pub(super) q: [v128; 16],
    pub(super) scales: [v128; 16],
    pub(super) h: KHeader,
}

#[inline(always)]
pub(super) fn decode_k<W: KQuant>(x: &W) -> KDecoded {
    let h = x.header();
    KDecoded {
        q: std::array::from_fn(|c| x.chunk(c)),
        scales: std::array::from_fn(|c| i16x8_splat(h.scales[c])),
        h,
    }
}

/// A gemm's weight blocks decoded once for the whole call (`nb` per row, row after row) when
/// at least two groups of four activation rows follow, each reading them again; `None` for
/// fewer, where a decoded copy of every row (up to 256 per call for small verify batches) would
/// only be written and read back once, so the caller decodes as it goes.
pub(super) fn decode_rows_once<B, D>(
    w: &[B],
    n_rows: usize,
    nb: usize,
    n_acts: usize,
    decode: impl Fn(&B) -> D,
) -> Option<Vec<D>> {
    if n_acts < 8 {
        return None;
    }
    let wb = w.len() / n_rows;
    // Row by row into one buffer: a `flat_map` over the rows cost a few percent of a prompt's
    // time in the browser (its per-item state machine, not the decoding).
    let mut out = Vec::with_capacity(n_rows * nb);
    for r in 0..n_rows {
        out.extend(w[r * wb..r * wb + nb].iter().map(&decode));
    }
    Some(out)
}

/// A K-quant's x4 kernel: one weight row against four activation rows.
type KX4<W> = fn(usize, &[W], [&[BlockQ8K]; 4]) -> [f32; 4];

/// Weight rows × activation rows (`out[t * n_rows + r]`, each bit-identical to `single`),
/// each weight row against four activation rows per pass (`x4`), the rows left over through
/// `single`. With at least two passes per weight row, every super-block is decoded once per
/// call instead ([`decode_rows_once`], [`KDecoded`]: unpacking the quants and the scales costs
/// about as much as its multiply-adds with four activation rows).
#[allow(clippy::too_many_arguments)]
pub(super) fn gemm_k<W: KQuant, const U7: bool>(
    single: fn(usize, &[W], &[BlockQ8K]) -> f32,
    x4: KX4<W>,
    n: usize,
    w: &[W],
    n_rows: usize,
    a: &[BlockQ8K],
    n_acts: usize,
    out: &mut [f32],
) {
    if n_rows == 0 || n_acts == 0 {
        return;
    }
    let (wb, ab) = (w.len() / n_rows, a.len() / n_acts);
    let row = |r: usize| &w[r * wb..(r + 1) * wb];
    let act = |t: usize| &a[t * ab..(t + 1) * ab];
    let nb = block_count(n, QK_K, wb, ab);
    let full = n_acts / 4 * 4;
    let decoded = decode_rows_once(w, n_rows, nb, n_acts, decode_k::<W>);
    for t in (0..full).step_by(4) {
        let ys = [act(t), act(t + 1), act(t + 2), act(t + 3)];
        for r in 0..n_rows {
            let Some(decoded) = &decoded else {
                for (j, v) in x4(n, row(r), ys).into_iter().enumerate() {
                    out[(t + j) * n_rows + r] = v;
                }
                continue;
            };
            let mut acc = [Acc::new(); 4];
            for (i, d) in decoded[r * nb..(r + 1) * nb].iter().enumerate() {
                for (j, acc) in acc.iter_mut().enumerate() {
                    step_k::<U7>(|c| (d.q[c], d.scales[c]), &d.h, &ys[j][i], acc);
                }
            }
            for (j, acc) in acc.into_iter().enumerate() {
                out[(t + j) * n_rows + r] = W::finish(acc);
            }
        }
    }
    for t in full..n_acts {
        for r in 0..n_rows {
            out[t * n_rows + r] = single(n, row(r), act(t));
        }
    }
}

/// Generates a K-quant's single-row kernel (unpacking as it multiplies), x4 kernel (unpacking
/// once per super-block) and gemm ([`gemm_k`]); the float operations per row are the same.
macro_rules! k_kernels {
    ($single:ident, $x4:ident, $gemm:ident, $W:ty) => {
        pub fn $single(n: usize, x: &[$W], y: &[BlockQ8K]) -> f32 {
            let nb = block_count(n, QK_K, x.len(), y.len());
            let mut acc = Acc::new();
            for (x, y) in x[..nb].iter().zip(&y[..nb]) {
                let h = x.header();
                let chunk = |c: usize| (x.chunk(c), i16x8_splat(h.scales[c]));
                step_k::<{ <$W as KQuant>::U7 }>(chunk, &h, y, &mut acc);
            }
            <$W as KQuant>::finish(acc)
        }

        /// One weight row against four activation rows; each result is bit-identical to the
        /// single-row kernel's.
        pub fn $x4(n: usize, x: &[$W], ys: [&[BlockQ8K]; 4]) -> [f32; 4] {
            let min_act = ys.iter().map(|y| y.len()).min().unwrap_or(0);
            let nb = block_count(n, QK_K, x.len(), min_act);
            let mut acc = [Acc::new(); 4];
            for i in 0..nb {
                let d = decode_k(&x[i]);
                for r in 0..4 {
                    step_k::<{ <$W as KQuant>::U7 }>(
                        |c| (d.q[c], d.scales[c]),
                        &d.h,
                        &ys[r][i],
                        &mut acc[r],
                    );
                }
            }
            acc.map(<$W as KQuant>::finish)
        }

        /// `n_rows` weight rows × `n_acts` activation rows ([`gemm_k`]).
        pub fn $gemm(
            n: usize,
            w: &[$W],
            n_rows: usize,
            a: &[BlockQ8K],
            n_acts: usize,
            out: &mut [f32],
        ) {
            gemm_k::<$W, { <$W as KQuant>::U7 }>($single, $x4, n, w, n_rows, a, n_acts, out)
        }
    };
}

impl KQuant for BlockQ2K {
    const U7: bool = true;
    fn header(&self) -> KHeader {
        let mins = byte_bits(load16(&self.scales, 0), 4, 0x0F);
        KHeader {
            scales: std::array::from_fn(|c| (self.scales[c] & 0x0F) as i16),
            d: self.d.to_f32(),
            extra: KExtra::Q2Mins {
                mins: [u16x8_extend_low_u8x16(mins), u16x8_extend_high_u8x16(mins)],
                dmin: self.dmin.to_f32(),
            },
        }
    }

    /// Element i = 128j + 32g + b: bits 2g..2g+2 of qs[32j + b]; chunk c = 8j + 2g + b/16.
    #[inline(always)]
    fn chunk(&self, c: usize) -> v128 {
        let (j, g, b0) = (c / 8, (c % 8) / 2, 16 * (c % 2));
        let raw = load16(&self.qs, 32 * j + b0);
        byte_bits(raw, 2 * g as u32, 3)
    }
}

impl KQuant for BlockQ3K {
    const U7: bool = false;
    fn header(&self) -> KHeader {
        let s = crate::vec_dot::scalar::unpack_scales_q3k(&self.scales);
        KHeader {
            scales: s.map(|v| v as i16),
            d: self.d.to_f32(),
            extra: KExtra::None,
        }
    }

    /// Element i = 32g + b: bits 2(g%4).. of qs[32(g/4) + b], minus 4 where bit g of hmask[b]
    /// is clear.
    #[inline(always)]
    fn chunk(&self, c: usize) -> v128 {
        let (g, b0) = (c / 2, 16 * (c % 2));
        let raw = load16(&self.qs, 32 * (g / 4) + b0);
        let low = byte_bits(raw, 2 * (g % 4) as u32, 3);
        let high = byte_bits(load16(&self.hmask, b0), g as u32, 1);
        let minus4 = i8x16_shl(v128_xor(high, u8x16_splat(1)), 2);
        i8x16_sub(low, minus4)
    }
}

/// Q4_K / Q5_K header: scales per 32 elements, the 8 mins as i16x8.
#[inline(always)]
pub(super) fn k4_header(packed: &[u8; 12], d: f32, dmin: f32, q5: bool) -> KHeader {
    let (sc, mn) = crate::vec_dot::scalar::unpack_scales_mins_k4(packed);
    let mins = u16x8(
        mn[0] as u16,
        mn[1] as u16,
        mn[2] as u16,
        mn[3] as u16,
        mn[4] as u16,
        mn[5] as u16,
        mn[6] as u16,
        mn[7] as u16,
    );
    KHeader {
        scales: std::array::from_fn(|c| sc[c / 2] as i16),
        d,
        extra: if q5 {
            KExtra::Q5Mins { mins, dmin }
        } else {
            KExtra::Q4Mins { mins, dmin }
        },
    }
}

/// Q4_K / Q5_K nibbles of chunk c: element i = 64cc + 32k + b is nibble k of qs[32cc + b].
#[inline(always)]
pub(super) fn k4_nibbles(qs: &[u8; QK_K / 2], c: usize) -> v128 {
    let g = c / 2;
    let raw = load16(qs, 32 * (g / 2) + 16 * (c % 2));
    if g & 1 == 0 {
        v128_and(raw, u8x16_splat(0x0F))
    } else {
        byte_bits(raw, 4, 0x0F)
    }
}

impl KQuant for BlockQ4K {
    const U7: bool = true;
    fn header(&self) -> KHeader {
        k4_header(&self.scales, self.d.to_f32(), self.dmin.to_f32(), false)
    }

    #[inline(always)]
    fn chunk(&self, c: usize) -> v128 {
        k4_nibbles(&self.qs, c)
    }

    fn finish(acc: Acc) -> f32 {
        acc.finish_m4()
    }
}

impl KQuant for BlockQ5K {
    const U7: bool = true;
    fn header(&self) -> KHeader {
        k4_header(&self.scales, self.d.to_f32(), self.dmin.to_f32(), true)
    }

    /// The nibble plus the 5th bit: bit g of qh[b] for element 32g + b.
    #[inline(always)]
    fn chunk(&self, c: usize) -> v128 {
        let qh = load16(&self.qh, 16 * (c % 2));
        let bit = byte_bits(qh, (c / 2) as u32, 1);
        v128_or(k4_nibbles(&self.qs, c), i8x16_shl(bit, 4))
    }

    fn finish(acc: Acc) -> f32 {
        acc.finish_summs()
    }
}

impl KQuant for BlockQ6K {
    // The quants stay unsigned (0..64; the -32 comes from the bsums), so 7-bit.
    const U7: bool = true;
    fn header(&self) -> KHeader {
        let sc = load16(bytemuck::cast_slice::<i8, u8>(&self.scales), 0);
        KHeader {
            scales: self.scales.map(|v| v as i16),
            d: self.d.to_f32(),
            extra: KExtra::Q6Offset {
                scales: [i16x8_extend_low_i8x16(sc), i16x8_extend_high_i8x16(sc)],
            },
        }
    }

    /// Element i = 128h + 32g + l: nibble g/2 of ql[64h + 32(g%2) + l], bits 2g..2g+2 of
    /// qh[32h + l] above it (unsigned, 0..64: the -32 comes from the bsums in `step_k`);
    /// chunk c = 8h + 2g + l/16.
    #[inline(always)]
    fn chunk(&self, c: usize) -> v128 {
        let (h, g, l0) = (c / 8, (c % 8) / 2, 16 * (c % 2));
        let ql = load16(&self.ql, 64 * h + 32 * (g % 2) + l0);
        let low = if g < 2 {
            v128_and(ql, u8x16_splat(0x0F))
        } else {
            byte_bits(ql, 4, 0x0F)
        };
        let qh = load16(&self.qh, 32 * h + l0);
        let high = byte_bits(qh, 2 * g as u32, 3);
        v128_or(low, i8x16_shl(high, 4))
    }
}

k_kernels!(
    vec_dot_q2_k_q8_k,
    vec_dot_q2_k_q8_k_x4,
    gemm_q2_k_q8_k,
    BlockQ2K
);
k_kernels!(
    vec_dot_q3_k_q8_k,
    vec_dot_q3_k_q8_k_x4,
    gemm_q3_k_q8_k,
    BlockQ3K
);
k_kernels!(
    vec_dot_q4_k_q8_k,
    vec_dot_q4_k_q8_k_x4,
    gemm_q4_k_q8_k,
    BlockQ4K
);
k_kernels!(
    vec_dot_q5_k_q8_k,
    vec_dot_q5_k_q8_k_x4,
    gemm_q5_k_q8_k,
    BlockQ5K
);
k_kernels!(
    vec_dot_q6_k_q8_k,
    vec_dot_q6_k_q8_k_x4,
    gemm_q6_k_q8_k,
    BlockQ6K
);
