//! x86-64 AVX2 (+FMA, F16C) vec-dot kernels, after ggml's AVX2 kernels (maddubs/madd).
//!
//! Every kernel is split into a per-block `prep` (unpack the weight block into registers) and a
//! per-block `step` (multiply one activation block into an accumulator). The single-row kernel
//! runs prep+step per block; the `_x4` kernel runs one prep and four steps, so each of its four
//! results goes through exactly the same float operations in the same order as the single-row
//! kernel: the results are bit-identical, which the engine relies on for batch-size-independent
//! numerics. Each kernel computes, bit for bit, what ggml's x86 AVX2 kernel computes, as defined
//! portably in `ggml_order.rs`: the same exact i32 lane sums (lane l = bytes 4l..4l+4 of each
//! 32-byte group), one fused multiply-add per block into a single 8-lane register, blocks in
//! order, ggml's horizontal sums and min terms.
//!
//! Precondition shared with ggml: Q8_0/Q8_1 activations lie in [-127, 127] (what their quantizer
//! produces); the sign trick of `mul_sum_i8` cannot represent -(-128). Q8_K activations may hold
//! -128 (all K-quant weights enter as unsigned bytes).
//!
//! All functions require AVX2, FMA and F16C; the dispatcher in `mod.rs` checks once. Only the
//! public kernels carry `#[target_feature]`; the helpers are `#[inline(always)]` without it, so
//! they always inline into a kernel and their intrinsics compile with the kernel's features (a
//! helper with its own `#[target_feature]` may stay an out-of-line call, with a `vzeroupper`).

use crate::blocks::*;
use core::arch::x86_64::*;
use half::f16;

mod float;
mod mxfp4;
mod tile;
pub use float::*;
pub use mxfp4::*;
pub use tile::*;

fn block_count(n: usize, qk: usize, w_len: usize, a_len: usize) -> usize {
    debug_assert_eq!(n % qk, 0, "row length {n} is not a multiple of {qk}");
    debug_assert!(
        w_len >= n / qk && a_len >= n / qk,
        "rows shorter than {n} elements"
    );
    (n / qk).min(w_len).min(a_len)
}

// ---------------------------------------------------------------------------------------------
// Helpers

#[inline(always)]
unsafe fn f16_to_f32(h: f16) -> f32 {
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h.to_bits() as i32)))
}

#[inline(always)]
unsafe fn hsum_ps(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

#[inline(always)]
unsafe fn load256(p: *const u8) -> __m256i {
    _mm256_loadu_si256(p as *const __m256i)
}

/// 16 packed bytes → 32 nibbles: low nibbles in bytes 0..16, high nibbles in bytes 16..32
/// (the legacy-quant element order).
#[inline(always)]
unsafe fn nibbles_32(qs: &[u8; 16]) -> __m256i {
    // The 16 bytes in both halves (a load, no shuffle), the upper half shifted by 4: one
    // variable shift instead of a shift and an insert.
    let t = _mm256_broadcastsi128_si256(_mm_loadu_si128(qs.as_ptr() as *const __m128i));
    let both = _mm256_srlv_epi64(t, _mm256_set_epi64x(4, 4, 0, 0));
    _mm256_and_si256(both, _mm256_set1_epi8(0x0F))
}

/// Byte j is 0xFF where bit j of `bits` is set, else 0.
#[inline(always)]
unsafe fn bits_to_bytes_32(bits: u32) -> __m256i {
    // Byte j takes byte j/8 of `bits`; OR-ing every bit but j%8 leaves all-ones iff bit j is set.
    let spread = _mm256_set_epi64x(
        0x0303030303030303,
        0x0202020202020202,
        0x0101010101010101,
        0,
    );
    let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(bits as i32), spread);
    let others = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
    _mm256_cmpeq_epi8(_mm256_or_si256(bytes, others), _mm256_set1_epi64x(-1))
}

/// Unsigned × signed bytes, summed in groups of 4 into 8 exact i32 lanes.
#[inline(always)]
unsafe fn mul_sum_us8(ux: __m256i, sy: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(ux, sy), _mm256_set1_epi16(1))
}

/// [`mul_sum_us8`] with AVX-512 VNNI's `vpdpbusd` for `maddubs` + `madd`: the same exact lane
/// sums (for the unsigned 4- and 5-bit weights no 16-bit saturation is there to mimic), so the
/// same bits. Only for kernels compiled with AVX-512 VNNI.
#[inline(always)]
unsafe fn mul_sum_us8_vnni(ux: __m256i, sy: __m256i) -> __m256i {
    _mm256_dpbusd_epi32(_mm256_setzero_si256(), ux, sy)
}

/// Signed × signed bytes (|y| ≤ 127), summed in groups of 4 into 8 exact i32 lanes.
#[inline(always)]
unsafe fn mul_sum_i8(x: __m256i, y: __m256i) -> __m256i {
    mul_sum_us8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x))
}

/// i16 lanes 0..8 = `lo`, lanes 8..16 = `hi` (scales of two 16-element sub-blocks).
#[inline(always)]
unsafe fn scale_pair(lo: i16, hi: i16) -> __m256i {
    _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo))
}

/// The accumulators of one output, as ggml's AVX2 kernels keep them: one 8-lane register fed
/// by one fused multiply-add per block, Q4_K's 4-lane `acc_m`, and the scalar `summs` of the
/// types with a min (Q4_1, Q5_1, Q5_K), whose `summs += a * b` the C compiler contracts into an
/// FMA. Blocks are accumulated strictly in order: see `ggml_order.rs` for why.
#[derive(Clone, Copy)]
struct Acc {
    main: __m256,
    m4: __m128,
    summs: f32,
}

impl Acc {
    #[inline(always)]
    unsafe fn new() -> Self {
        Acc {
            main: _mm256_setzero_ps(),
            m4: _mm_setzero_ps(),
            summs: 0.0,
        }
    }

    /// `acc = fma(set1(d), cvtepi32_ps(sums), acc)`.
    #[inline(always)]
    unsafe fn fma(&mut self, d: f32, sums: __m256i) {
        self.main = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sums), self.main);
    }

    /// `hsum_float_8(main)`.
    #[inline(always)]
    unsafe fn finish_plain(self) -> f32 {
        hsum_ps(self.main)
    }

    /// `hsum_float_8(main) + summs`.
    #[inline(always)]
    unsafe fn finish_summs(self) -> f32 {
        hsum_ps(self.main) + self.summs
    }

    /// `hsum_float_8(main) + (m4[0] + m4[2]) + (m4[1] + m4[3])` (Q4_K).
    #[inline(always)]
    unsafe fn finish_m4(self) -> f32 {
        let m = _mm_add_ps(self.m4, _mm_movehl_ps(self.m4, self.m4));
        let m = _mm_add_ss(m, _mm_movehdup_ps(m));
        hsum_ps(self.main) + _mm_cvtss_f32(m)
    }
}

/// Generates the single-row and 4-activation-row kernels from a `prep` and a `step`; the x4
/// kernel runs, per activation row, exactly the single-row kernel's float operations.
macro_rules! kernels {
    ($single:ident, $x4:ident, $W:ty, $A:ty, $qk:expr, $prep:ident, $step:ident, $finish:ident) => {
        /// # Safety
        /// The CPU must support AVX2, FMA and F16C.
        #[target_feature(enable = "avx2,fma,f16c")]
        pub unsafe fn $single(n: usize, x: &[$W], y: &[$A]) -> f32 {
            let nb = block_count(n, $qk, x.len(), y.len());
            let mut acc = Acc::new();
            for (x, y) in x[..nb].iter().zip(&y[..nb]) {
                $step(&$prep(x), y, &mut acc);
            }
            acc.$finish()
        }

        /// One weight row against four activation rows; each result is bit-identical to the
        /// single-row kernel's.
        ///
        /// # Safety
        /// The CPU must support AVX2, FMA and F16C.
        #[target_feature(enable = "avx2,fma,f16c")]
        #[allow(dead_code)]
        pub unsafe fn $x4(n: usize, x: &[$W], ys: [&[$A]; 4]) -> [f32; 4] {
            let min_act = ys.iter().map(|y| y.len()).min().unwrap_or(0);
            let nb = block_count(n, $qk, x.len(), min_act);
            let mut acc = [Acc::new(); 4];
            for i in 0..nb {
                let w = $prep(&x[i]);
                for r in 0..4 {
                    $step(&w, &ys[r][i], &mut acc[r]);
                }
            }
            acc.map(|a| a.$finish())
        }
    };
}

/// Generates a kernel of four weight rows against one activation row (decode's matrix-vector
/// product): the rows advance block by block together, each with its own accumulator, so the
/// four dependency chains overlap and each activation block is loaded once for the four rows.
/// Each result goes through exactly the single-row kernel's float operations in the same order:
/// it is bit-identical to the single-row kernel on that row.
macro_rules! rows4 {
    ($r4:ident, $W:ty, $A:ty, $qk:expr, $prep:ident, $step:ident, $finish:ident) => {
        rows4!(@features "avx2,fma,f16c", $r4, $W, $A, $qk, $prep, $step, $finish);
    };
    (@features $features:literal, $r4:ident, $W:ty, $A:ty, $qk:expr, $prep:ident, $step:ident, $finish:ident) => {
        /// Four weight rows against one activation row; result r is bit-identical to the
        /// single-row kernel on `xs[r]`.
        ///
        /// # Safety
        /// The CPU must support `$features` (AVX2, FMA and F16C at least).
        #[target_feature(enable = $features)]
        pub unsafe fn $r4(n: usize, xs: [&[$W]; 4], y: &[$A]) -> [f32; 4] {
            let min_w = xs.iter().map(|x| x.len()).min().unwrap_or(0);
            let nb = block_count(n, $qk, min_w, y.len());
            let (x0, x1, x2, x3) = (&xs[0][..nb], &xs[1][..nb], &xs[2][..nb], &xs[3][..nb]);
            let y = &y[..nb];
            let mut acc = [Acc::new(); 4];
            let group_bytes = 4 * nb * std::mem::size_of::<$W>();
            let ahead = group_bytes * crate::isa::PREFETCH_BYTES.div_ceil(group_bytes.max(1));
            for i in 0..nb {
                let yi = &y[i];
                // Prefetch hints only (no effect on results; any address is allowed): the rows
                // of a gemv are contiguous, so read on linearly whole groups of four rows and
                // at least `PREFETCH_BYTES` ahead (one group of short rows is too close to hide
                // the memory's latency), at the pace this loop consumes bytes.
                let p = (x0.as_ptr() as *const i8)
                    .wrapping_add(ahead)
                    .wrapping_add(4 * i * std::mem::size_of::<$W>());
                _mm_prefetch::<_MM_HINT_T0>(p);
                _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(64));
                _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(128));
                $step(&$prep(&x0[i]), yi, &mut acc[0]);
                $step(&$prep(&x1[i]), yi, &mut acc[1]);
                $step(&$prep(&x2[i]), yi, &mut acc[2]);
                $step(&$prep(&x3[i]), yi, &mut acc[3]);
            }
            acc.map(|a| a.$finish())
        }
    };
}

// ---------------------------------------------------------------------------------------------
// Legacy quants (32-element blocks)

/// An unpacked legacy weight block: 32 quants as bytes; lane 0 of `dm` the scale, lane 1 the
/// min (the "_1" types).
#[derive(Clone, Copy)]
struct LegacyW {
    q: __m256i,
    dm: __m128,
}

/// Two adjacent f16 (a block's d and m, or d and s) → lanes 0 and 1, with one conversion.
#[inline(always)]
unsafe fn f16_pair(block: &impl bytemuck::Pod) -> __m128 {
    let b = bytemuck::bytes_of(block);
    let bits = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    _mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32))
}

#[inline(always)]
unsafe fn prep_q4_0(x: &BlockQ4_0) -> LegacyW {
    LegacyW {
        q: _mm256_sub_epi8(nibbles_32(&x.qs), _mm256_set1_epi8(8)),
        dm: _mm_set_ss(f16_to_f32(x.d)),
    }
}

#[inline(always)]
unsafe fn prep_q4_1(x: &BlockQ4_1) -> LegacyW {
    LegacyW {
        q: nibbles_32(&x.qs),
        dm: f16_pair(x),
    }
}

#[inline(always)]
unsafe fn prep_q5_0(x: &BlockQ5_0) -> LegacyW {
    // q - 16 as a signed byte: set the high nibble to 0xF where the 5th bit is clear.
    let clear = _mm256_andnot_si256(
        bits_to_bytes_32(u32::from_le_bytes(x.qh)),
        _mm256_set1_epi8(0xF0u8 as i8),
    );
    LegacyW {
        q: _mm256_or_si256(nibbles_32(&x.qs), clear),
        dm: _mm_set_ss(f16_to_f32(x.d)),
    }
}

#[inline(always)]
unsafe fn prep_q5_1(x: &BlockQ5_1) -> LegacyW {
    let high = _mm256_and_si256(
        bits_to_bytes_32(u32::from_le_bytes(x.qh)),
        _mm256_set1_epi8(0x10),
    );
    LegacyW {
        q: _mm256_or_si256(nibbles_32(&x.qs), high),
        dm: f16_pair(x),
    }
}

#[inline(always)]
unsafe fn prep_q8_0(x: &BlockQ8_0) -> LegacyW {
    LegacyW {
        q: load256(x.qs.as_ptr() as *const u8),
        dm: _mm_set_ss(f16_to_f32(x.d)),
    }
}

/// Signed weights (Q4_0, Q5_0, Q8_0) × Q8_0.
#[inline(always)]
unsafe fn step_signed_q8_0(w: &LegacyW, y: &BlockQ8_0, acc: &mut Acc) {
    let dd = _mm_cvtss_f32(w.dm) * f16_to_f32(y.d);
    acc.fma(dd, mul_sum_i8(w.q, load256(y.qs.as_ptr() as *const u8)));
}

/// Unsigned weights with a min (Q4_1, Q5_1) × Q8_1: lanes of d_w*d_a*isum, summs += m_w*s_a;
/// the exact i32 lane sums `isum` from [`mul_sum_us8`], or its VNNI twin where `VNNI`.
#[inline(always)]
unsafe fn step_unsigned_q8_1_with<const VNNI: bool>(w: &LegacyW, y: &BlockQ8_1, acc: &mut Acc) {
    // Lanes 0, 1: [d_a, s_a] (converted together); the products are single f32 roundings.
    let ds = f16_pair(y);
    let m_w = _mm_cvtss_f32(_mm_movehdup_ps(w.dm));
    let s_a = _mm_cvtss_f32(_mm_movehdup_ps(ds));
    acc.summs = m_w.mul_add(s_a, acc.summs);
    let dd = _mm_cvtss_f32(w.dm) * _mm_cvtss_f32(ds);
    let q = load256(y.qs.as_ptr() as *const u8);
    acc.fma(
        dd,
        if VNNI {
            mul_sum_us8_vnni(w.q, q)
        } else {
            mul_sum_us8(w.q, q)
        },
    );
}

#[inline(always)]
unsafe fn step_unsigned_q8_1(w: &LegacyW, y: &BlockQ8_1, acc: &mut Acc) {
    step_unsigned_q8_1_with::<false>(w, y, acc)
}

#[inline(always)]
unsafe fn step_unsigned_q8_1_vnni(w: &LegacyW, y: &BlockQ8_1, acc: &mut Acc) {
    step_unsigned_q8_1_with::<true>(w, y, acc)
}

rows4!(
    @features "avx2,fma,f16c,avx512f,avx512vl,avx512vnni",
    vec_dot_q4_1_q8_1_r4_vnni,
    BlockQ4_1,
    BlockQ8_1,
    QK,
    prep_q4_1,
    step_unsigned_q8_1_vnni,
    finish_summs
);
rows4!(
    @features "avx2,fma,f16c,avx512f,avx512vl,avx512vnni",
    vec_dot_q5_1_q8_1_r4_vnni,
    BlockQ5_1,
    BlockQ8_1,
    QK,
    prep_q5_1,
    step_unsigned_q8_1_vnni,
    finish_summs
);

kernels!(
    vec_dot_q4_0_q8_0,
    vec_dot_q4_0_q8_0_x4,
    BlockQ4_0,
    BlockQ8_0,
    QK,
    prep_q4_0,
    step_signed_q8_0,
    finish_plain
);
kernels!(
    vec_dot_q4_1_q8_1,
    vec_dot_q4_1_q8_1_x4,
    BlockQ4_1,
    BlockQ8_1,
    QK,
    prep_q4_1,
    step_unsigned_q8_1,
    finish_summs
);
kernels!(
    vec_dot_q5_0_q8_0,
    vec_dot_q5_0_q8_0_x4,
    BlockQ5_0,
    BlockQ8_0,
    QK,
    prep_q5_0,
    step_signed_q8_0,
    finish_plain
);
kernels!(
    vec_dot_q5_1_q8_1,
    vec_dot_q5_1_q8_1_x4,
    BlockQ5_1,
    BlockQ8_1,
    QK,
    prep_q5_1,
    step_unsigned_q8_1,
    finish_summs
);
kernels!(
    vec_dot_q8_0_q8_0,
    vec_dot_q8_0_q8_0_x4,
    BlockQ8_0,
    BlockQ8_0,
    QK,
    prep_q8_0,
    step_signed_q8_0,
    finish_plain
);

rows4!(
    vec_dot_q4_0_q8_0_r4,
    BlockQ4_0,
    BlockQ8_0,
    QK,
    prep_q4_0,
    step_signed_q8_0,
    finish_plain
);
rows4!(
    vec_dot_q4_1_q8_1_r4,
    BlockQ4_1,
    BlockQ8_1,
    QK,
    prep_q4_1,
    step_unsigned_q8_1,
    finish_summs
);
rows4!(
    vec_dot_q5_0_q8_0_r4,
    BlockQ5_0,
    BlockQ8_0,
    QK,
    prep_q5_0,
    step_signed_q8_0,
    finish_plain
);
rows4!(
    vec_dot_q5_1_q8_1_r4,
    BlockQ5_1,
    BlockQ8_1,
    QK,
    prep_q5_1,
    step_unsigned_q8_1,
    finish_summs
);
rows4!(
    vec_dot_q8_0_q8_0_r4,
    BlockQ8_0,
    BlockQ8_0,
    QK,
    prep_q8_0,
    step_signed_q8_0,
    finish_plain
);

// ---------------------------------------------------------------------------------------------
// K-quants (256-element super-blocks) × Q8_K

/// The per-type parts of ggml's K-quant kernels that are not the main scaled dot product.
#[derive(Clone, Copy)]
enum KExtra {
    /// Nothing more.
    None,
    /// Q2_K: acc += dmin * madd(mins16, bsums), 8 lanes, before the main term.
    Q2Mins(__m256i, f32),
    /// Q4_K: acc_m += dmin * madd(mins8, hadd(bsums)), 4 lanes.
    Q4Mins(__m128i, f32),
    /// Q5_K: summs += dmin * hsum(madd(mins8, hadd(bsums))), scalar.
    Q5Mins(__m128i, f32),
}

/// An unpacked K-quant super-block: 8 groups of 32 unsigned quants with their i16 scales.
#[derive(Clone, Copy)]
struct KW {
    q: [__m256i; 8],
    scales: [__m256i; 8],
    d: f32,
    /// Offsets subtracted per byte as ggml does, in i16 before the scales: `maddubs(sub, q8)`
    /// (Q3_K: 4 where the high bit is clear; Q6_K: 32). None for the types with mins.
    sub: Option<[__m256i; 8]>,
    extra: KExtra,
    /// Q6_K: the 16 scales as i16; `32 · madd(bsums, scales)` is subtracted from the i32 lanes
    /// at the end (ggml's `q8sclsub`), which puts the -32 offset in other lanes than a per-byte
    /// subtraction would.
    bsum_scales: Option<__m256i>,
}

/// `madd_epi16(mins8, hadd_epi16(bsums[0..8], bsums[8..16]))`: Q4_K / Q5_K's 4 min lanes.
#[inline(always)]
unsafe fn k4_min_prod(mins8: __m128i, y: &BlockQ8K) -> __m128i {
    let bsums = load256(y.bsums.as_ptr() as *const u8);
    let pairs = _mm_hadd_epi16(
        _mm256_castsi256_si128(bsums),
        _mm256_extracti128_si256::<1>(bsums),
    );
    _mm_madd_epi16(mins8, pairs)
}

#[inline(always)]
unsafe fn step_k(w: &KW, y: &BlockQ8K, acc: &mut Acc) {
    let mut sumi = _mm256_setzero_si256();
    for g in 0..8 {
        let q8 = load256(y.qs.as_ptr().add(32 * g) as *const u8);
        let mut p16 = _mm256_maddubs_epi16(w.q[g], q8);
        if let Some(sub) = &w.sub {
            p16 = _mm256_sub_epi16(p16, _mm256_maddubs_epi16(sub[g], q8));
        }
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(w.scales[g], p16));
    }
    if let Some(sc) = w.bsum_scales {
        let bsums = load256(y.bsums.as_ptr() as *const u8);
        sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32::<5>(_mm256_madd_epi16(bsums, sc)));
    }
    match w.extra {
        KExtra::None => {}
        KExtra::Q2Mins(mins, dmin) => {
            let bsums = load256(y.bsums.as_ptr() as *const u8);
            acc.fma(-y.d * dmin, _mm256_madd_epi16(mins, bsums));
        }
        KExtra::Q4Mins(mins, dmin) => {
            let prod = _mm_cvtepi32_ps(k4_min_prod(mins, y));
            acc.m4 = _mm_fmadd_ps(_mm_set1_ps(-y.d * dmin), prod, acc.m4);
        }
        KExtra::Q5Mins(mins, dmin) => {
            let p = k4_min_prod(mins, y);
            let p = _mm_add_epi32(p, _mm_unpackhi_epi64(p, p));
            let isum = _mm_cvtsi128_si32(_mm_add_epi32(p, _mm_shuffle_epi32::<0b01>(p)));
            acc.summs = (-y.d * dmin).mul_add(isum as f32, acc.summs);
        }
    }
    acc.fma(y.d * w.d, sumi);
}

/// The four 2-bit fields of a 32-byte vector, as bytes 0..3.
#[inline(always)]
unsafe fn crumbs(bits: __m256i) -> [__m256i; 4] {
    let m3 = _mm256_set1_epi8(3);
    [
        _mm256_and_si256(bits, m3),
        _mm256_and_si256(_mm256_srli_epi16::<2>(bits), m3),
        _mm256_and_si256(_mm256_srli_epi16::<4>(bits), m3),
        _mm256_and_si256(_mm256_srli_epi16::<6>(bits), m3),
    ]
}

#[inline(always)]
unsafe fn prep_q2_k(x: &BlockQ2K) -> KW {
    let mut q = [_mm256_setzero_si256(); 8];
    for half in 0..2 {
        let fields = crumbs(load256(x.qs.as_ptr().add(32 * half)));
        q[4 * half..4 * half + 4].copy_from_slice(&fields);
    }
    let mut scales = [_mm256_setzero_si256(); 8];
    for (g, s) in scales.iter_mut().enumerate() {
        *s = scale_pair(
            (x.scales[2 * g] & 0x0F) as i16,
            (x.scales[2 * g + 1] & 0x0F) as i16,
        );
    }
    let packed = _mm_loadu_si128(x.scales.as_ptr() as *const __m128i);
    let mins = _mm_and_si128(_mm_srli_epi16::<4>(packed), _mm_set1_epi8(0x0F));
    KW {
        q,
        scales,
        d: f16_to_f32(x.d),
        sub: None,
        extra: KExtra::Q2Mins(_mm256_cvtepu8_epi16(mins), f16_to_f32(x.dmin)),
        bsum_scales: None,
    }
}

#[inline(always)]
unsafe fn prep_q3_k(x: &BlockQ3K) -> KW {
    // Quants 0..3 here; the -4 where the high bit is clear is subtracted per byte in step_k.
    let hmask = load256(x.hmask.as_ptr());
    let mut q = [_mm256_setzero_si256(); 8];
    let mut high = [_mm256_setzero_si256(); 8];
    for half in 0..2 {
        let fields = crumbs(load256(x.qs.as_ptr().add(32 * half)));
        for (f, field) in fields.into_iter().enumerate() {
            let g = 4 * half + f;
            let bit = _mm256_set1_epi8((1u8 << g) as i8);
            let set = _mm256_cmpeq_epi8(_mm256_and_si256(hmask, bit), bit);
            q[g] = field;
            high[g] = _mm256_andnot_si256(set, _mm256_set1_epi8(4));
        }
    }
    let s = super::scalar::unpack_scales_q3k(&x.scales);
    let mut scales = [_mm256_setzero_si256(); 8];
    for (g, v) in scales.iter_mut().enumerate() {
        *v = scale_pair(s[2 * g] as i16, s[2 * g + 1] as i16);
    }
    KW {
        q,
        scales,
        d: f16_to_f32(x.d),
        sub: Some(high),
        extra: KExtra::None,
        bsum_scales: None,
    }
}

/// Scales (broadcast per 32-group) and the 8 mins as i16 for Q4_K and Q5_K.
#[inline(always)]
unsafe fn k4_scales(packed: &[u8; 12]) -> ([__m256i; 8], __m128i) {
    let (sc, mn) = super::scalar::unpack_scales_mins_k4(packed);
    let mut scales = [_mm256_setzero_si256(); 8];
    for (v, &s) in scales.iter_mut().zip(&sc) {
        *v = _mm256_set1_epi16(s as i16);
    }
    let mins8 = _mm_loadl_epi64(mn.as_ptr() as *const __m128i);
    (scales, _mm_cvtepu8_epi16(mins8))
}

#[inline(always)]
unsafe fn prep_q4_k(x: &BlockQ4K) -> KW {
    let m4 = _mm256_set1_epi8(0x0F);
    let mut q = [_mm256_setzero_si256(); 8];
    for c in 0..4 {
        let bits = load256(x.qs.as_ptr().add(32 * c));
        q[2 * c] = _mm256_and_si256(bits, m4);
        q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16::<4>(bits), m4);
    }
    let (scales, mins) = k4_scales(&x.scales);
    KW {
        q,
        scales,
        d: f16_to_f32(x.d),
        sub: None,
        extra: KExtra::Q4Mins(mins, f16_to_f32(x.dmin)),
        bsum_scales: None,
    }
}

#[inline(always)]
unsafe fn prep_q5_k(x: &BlockQ5K) -> KW {
    let m4 = _mm256_set1_epi8(0x0F);
    let hbits = load256(x.qh.as_ptr());
    let mut q = [_mm256_setzero_si256(); 8];
    for c in 0..4 {
        let bits = load256(x.qs.as_ptr().add(32 * c));
        let nibbles = [
            _mm256_and_si256(bits, m4),
            _mm256_and_si256(_mm256_srli_epi16::<4>(bits), m4),
        ];
        for (k, nib) in nibbles.into_iter().enumerate() {
            let g = 2 * c + k;
            let bit = _mm256_set1_epi8((1u8 << g) as i8);
            let set = _mm256_cmpeq_epi8(_mm256_and_si256(hbits, bit), bit);
            q[g] = _mm256_or_si256(nib, _mm256_and_si256(set, _mm256_set1_epi8(16)));
        }
    }
    let (scales, mins) = k4_scales(&x.scales);
    KW {
        q,
        scales,
        d: f16_to_f32(x.d),
        sub: None,
        extra: KExtra::Q5Mins(mins, f16_to_f32(x.dmin)),
        bsum_scales: None,
    }
}

/// The 2 low bits of each byte of `v`, moved to bits 4..6.
#[inline(always)]
unsafe fn q6_high(v: __m256i, m2: __m256i) -> __m256i {
    _mm256_slli_epi16::<4>(_mm256_and_si256(v, m2))
}

#[inline(always)]
unsafe fn prep_q6_k(x: &BlockQ6K) -> KW {
    // Unsigned 6-bit quants in 0..64; the -32 is applied per lane from the bsums in step_k.
    let m4 = _mm256_set1_epi8(0x0F);
    let m2 = _mm256_set1_epi8(3);
    let mut q = [_mm256_setzero_si256(); 8];
    for h in 0..2 {
        let ql0 = load256(x.ql.as_ptr().add(64 * h));
        let ql1 = load256(x.ql.as_ptr().add(64 * h + 32));
        let qh = load256(x.qh.as_ptr().add(32 * h));
        q[4 * h] = _mm256_or_si256(_mm256_and_si256(ql0, m4), q6_high(qh, m2));
        q[4 * h + 1] = _mm256_or_si256(
            _mm256_and_si256(ql1, m4),
            q6_high(_mm256_srli_epi16::<2>(qh), m2),
        );
        q[4 * h + 2] = _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), m4),
            q6_high(_mm256_srli_epi16::<4>(qh), m2),
        );
        q[4 * h + 3] = _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), m4),
            q6_high(_mm256_srli_epi16::<6>(qh), m2),
        );
    }
    let mut scales = [_mm256_setzero_si256(); 8];
    for (g, v) in scales.iter_mut().enumerate() {
        *v = scale_pair(x.scales[2 * g] as i16, x.scales[2 * g + 1] as i16);
    }
    KW {
        q,
        scales,
        d: f16_to_f32(x.d),
        sub: None,
        extra: KExtra::None,
        bsum_scales: Some(_mm256_cvtepi8_epi16(_mm_loadu_si128(
            x.scales.as_ptr() as *const __m128i
        ))),
    }
}

kernels!(
    vec_dot_q2_k_q8_k,
    vec_dot_q2_k_q8_k_x4,
    BlockQ2K,
    BlockQ8K,
    QK_K,
    prep_q2_k,
    step_k,
    finish_plain
);
kernels!(
    vec_dot_q3_k_q8_k,
    vec_dot_q3_k_q8_k_x4,
    BlockQ3K,
    BlockQ8K,
    QK_K,
    prep_q3_k,
    step_k,
    finish_plain
);
kernels!(
    vec_dot_q4_k_q8_k,
    vec_dot_q4_k_q8_k_x4,
    BlockQ4K,
    BlockQ8K,
    QK_K,
    prep_q4_k,
    step_k,
    finish_m4
);
kernels!(
    vec_dot_q5_k_q8_k,
    vec_dot_q5_k_q8_k_x4,
    BlockQ5K,
    BlockQ8K,
    QK_K,
    prep_q5_k,
    step_k,
    finish_summs
);
kernels!(
    vec_dot_q6_k_q8_k,
    vec_dot_q6_k_q8_k_x4,
    BlockQ6K,
    BlockQ8K,
    QK_K,
    prep_q6_k,
    step_k,
    finish_plain
);
