//! Tiled AVX2 matmul kernels: several weight rows × several activation rows per pass.
//!
//! A tile unpacks R weight blocks once and multiplies them with C activation blocks (each
//! activation block is loaded and its scale converted once for the R rows), so a batch of tokens
//! decodes each weight block once per C tokens and each activation block once per R rows.
//!
//! Every output keeps its own accumulator and goes through exactly the float operations of the
//! single-row kernel in `avx2.rs` (same exact i32 lane sums, one fused multiply-add per block in
//! block order, the same finishing sums), so each result is bit-identical to `vec_dot` for that
//! pair, whatever the tile shape or the batch: tests/vec_dot_gemm.rs checks it.

use super::*;

/// A legacy weight block prepared for a tile: `ax` = the bytes to feed `maddubs` as unsigned
/// (|q| for the signed types, q for the ones with a min), `sx` = the signs to apply to the
/// activations (signed types), `d` the scale, `m` the min.
#[derive(Clone, Copy)]
struct LegacyTW {
    ax: __m256i,
    sx: __m256i,
    /// The scale broadcast to 8 lanes (d_w * d_a is then one vector multiply per pair).
    d: __m256,
    m: f32,
}

/// An activation block loaded once per tile column: quants, scale d (broadcast, converted to f32
/// once per gemm call) and (Q8_1) sum s.
#[derive(Clone, Copy)]
struct LegacyA {
    q: __m256i,
    d: __m256,
    s: f32,
}

#[inline(always)]
unsafe fn signed_tw(w: LegacyW) -> LegacyTW {
    LegacyTW {
        ax: _mm256_sign_epi8(w.q, w.q),
        sx: w.q,
        d: _mm256_broadcastss_ps(w.dm),
        m: 0.0,
    }
}

#[inline(always)]
unsafe fn unsigned_tw(w: LegacyW) -> LegacyTW {
    LegacyTW {
        ax: w.q,
        sx: w.q,
        d: _mm256_broadcastss_ps(w.dm),
        m: _mm_cvtss_f32(_mm_movehdup_ps(w.dm)),
    }
}

#[inline(always)]
unsafe fn tprep_q4_0(x: &BlockQ4_0) -> LegacyTW {
    signed_tw(prep_q4_0(x))
}
#[inline(always)]
unsafe fn tprep_q5_0(x: &BlockQ5_0) -> LegacyTW {
    signed_tw(prep_q5_0(x))
}
#[inline(always)]
unsafe fn tprep_q8_0(x: &BlockQ8_0) -> LegacyTW {
    signed_tw(prep_q8_0(x))
}
#[inline(always)]
unsafe fn tprep_q4_1(x: &BlockQ4_1) -> LegacyTW {
    unsigned_tw(prep_q4_1(x))
}
#[inline(always)]
unsafe fn tprep_q5_1(x: &BlockQ5_1) -> LegacyTW {
    unsigned_tw(prep_q5_1(x))
}

/// The f32 scale (and Q8_1 sum) of an activation block, converted once per gemm call.
#[inline(always)]
unsafe fn scales_q8_0(y: &BlockQ8_0) -> [f32; 2] {
    [f16_to_f32(y.d), 0.0]
}

#[inline(always)]
unsafe fn scales_q8_1(y: &BlockQ8_1) -> [f32; 2] {
    let ds = f16_pair(y);
    [_mm_cvtss_f32(ds), _mm_cvtss_f32(_mm_movehdup_ps(ds))]
}

#[inline(always)]
unsafe fn scales_k(_y: &BlockQ8K) -> [f32; 2] {
    [0.0; 2]
}

#[inline(always)]
unsafe fn load_legacy<B>(y: &B, qs: *const i8, sc: &[f32; 2]) -> LegacyA {
    let _ = y;
    LegacyA {
        q: load256(qs as *const u8),
        d: _mm256_broadcast_ss(&sc[0]),
        s: sc[1],
    }
}

#[inline(always)]
unsafe fn load_q8_0<'a>(y: &'a BlockQ8_0, sc: &[f32; 2]) -> LegacyA {
    load_legacy(y, y.qs.as_ptr(), sc)
}

#[inline(always)]
unsafe fn load_q8_1<'a>(y: &'a BlockQ8_1, sc: &[f32; 2]) -> LegacyA {
    load_legacy(y, y.qs.as_ptr(), sc)
}

/// `acc = fma(d_w * d_a, float(sums), acc)` with the product formed in all 8 lanes at once
/// (the same single rounding as the scalar product `Acc::fma` broadcasts).
#[inline(always)]
unsafe fn fma_dd(w: &LegacyTW, y: &LegacyA, sums: __m256i, acc: &mut Acc) {
    let dd = _mm256_mul_ps(w.d, y.d);
    acc.main = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(sums), acc.main);
}

/// `step_signed_q8_0` with the activation pre-loaded: `mul_sum_i8(q, y)` is
/// `mul_sum_us8(|q|, sign(y, q))`, the same exact lane sums.
#[inline(always)]
unsafe fn tstep_signed(w: &LegacyTW, y: &LegacyA, acc: &mut Acc) {
    fma_dd(w, y, mul_sum_us8(w.ax, _mm256_sign_epi8(y.q, w.sx)), acc);
}

/// `step_unsigned_q8_1` with the activation pre-loaded.
#[inline(always)]
unsafe fn tstep_unsigned(w: &LegacyTW, y: &LegacyA, acc: &mut Acc) {
    acc.summs = w.m.mul_add(y.s, acc.summs);
    fma_dd(w, y, mul_sum_us8(w.ax, y.q), acc);
}

/// K-quant activations need no pre-loading (step_k reads the groups it needs).
#[inline(always)]
unsafe fn load_k<'a>(y: &'a BlockQ8K, _sc: &[f32; 2]) -> &'a BlockQ8K {
    y
}

#[inline(always)]
unsafe fn tstep_k(w: &KW, y: &&BlockQ8K, acc: &mut Acc) {
    step_k(w, y, acc)
}

/// Generates `$name(n, w, n_rows, a, n_acts, out)`: `out[t * n_rows + r]` = the single-row
/// kernel's result for weight row r and activation row t. Rows are walked in blocks of
/// `ROW_BLOCK` (kept in L1 while all activations pass), tiles of `$R` rows × `$C` activations.
macro_rules! gemm_kernel {
    ($name:ident, $W:ty, $A:ty, $qk:expr, $prep:ident, $P:ty, $scales:ident, $load:ident, $step:ident, $finish:ident,
     $R:literal, $C:literal) => {
        /// # Safety
        /// The CPU must support AVX2, FMA and F16C.
        #[target_feature(enable = "avx2,fma,f16c")]
        pub unsafe fn $name(
            n: usize,
            w: &[$W],
            n_rows: usize,
            a: &[$A],
            n_acts: usize,
            out: &mut [f32],
        ) {
            #[inline(always)]
            unsafe fn tile<const R: usize, const C: usize>(
                nb: usize,
                w: &[$W],
                a: &[$A],
                sc: &[[f32; 2]],
                r0: usize,
                t0: usize,
                n_rows: usize,
                out: &mut [f32],
            ) {
                let mut acc = [[Acc::new(); C]; R];
                let wrow = |r: usize| &w[(r0 + r) * nb..(r0 + r + 1) * nb];
                let arow = |c: usize| &a[(t0 + c) * nb..(t0 + c + 1) * nb];
                let ws: [&[$W]; R] = core::array::from_fn(wrow);
                let as_: [&[$A]; C] = core::array::from_fn(arow);
                // SAFETY (get_unchecked): every row slice above holds exactly nb blocks, i < nb.
                for i in 0..nb {
                    // Built in place: a K-quant block is ~800 bytes of registers.
                    let mut wp = core::mem::MaybeUninit::<[$P; R]>::uninit();
                    let wpp = wp.as_mut_ptr() as *mut $P;
                    for r in 0..R {
                        // SAFETY: r < R, inside the array; every element is written once here.
                        wpp.add(r).write($prep(ws[r].get_unchecked(i)));
                    }
                    // SAFETY: all R elements were written above.
                    let wp: [$P; R] = wp.assume_init();
                    for c in 0..C {
                        let y = $load(as_[c].get_unchecked(i), sc.get_unchecked((t0 + c) * nb + i));
                        for r in 0..R {
                            $step(&wp[r], &y, &mut acc[r][c]);
                        }
                    }
                }
                for r in 0..R {
                    for c in 0..C {
                        out[(t0 + c) * n_rows + r0 + r] = acc[r][c].$finish();
                    }
                }
            }

            const { assert!($C == 8, "the column dispatch below handles up to 8") };
            let nb = n / $qk;
            assert!(
                n % $qk == 0
                    && w.len() >= nb * n_rows
                    && a.len() >= nb * n_acts
                    && out.len() >= n_rows * n_acts,
                "gemm: rows shorter than {n} elements or output too small"
            );
            const ROW_BLOCK: usize = 16;
            let mut sc = ACT_SCALES.with(|s| s.take());
            sc.clear();
            sc.extend(a[..nb * n_acts].iter().map(|y| $scales(y)));
            let mut rb = 0;
            while rb < n_rows {
                let re = (rb + ROW_BLOCK).min(n_rows);
                let mut t0 = 0;
                while t0 < n_acts {
                    let c = (n_acts - t0).min($C);
                    let mut r0 = rb;
                    while r0 < re {
                        let r = (re - r0).min($R);
                        macro_rules! go {
                            ($rr:expr, $cc:literal) => {
                                tile::<$rr, $cc>(nb, w, a, &sc, r0, t0, n_rows, out)
                            };
                        }
                        macro_rules! cols {
                            ($rr:expr) => {
                                match c {
                                    1 => go!($rr, 1),
                                    2 => go!($rr, 2),
                                    3 => go!($rr, 3),
                                    4 => go!($rr, 4),
                                    5 => go!($rr, 5),
                                    6 => go!($rr, 6),
                                    7 => go!($rr, 7),
                                    _ => go!($rr, 8),
                                }
                            };
                        }
                        // Full tiles of R rows, then the last rows one at a time.
                        let r = if r == $R {
                            cols!($R);
                            $R
                        } else {
                            cols!(1);
                            1
                        };
                        r0 += r;
                    }
                    t0 += c;
                }
                rb = re;
            }
            ACT_SCALES.with(|s| s.replace(sc));
        }
    };
}

thread_local! {
    /// Per-thread buffer of the activation blocks' f32 scales (reused between calls).
    static ACT_SCALES: core::cell::Cell<Vec<[f32; 2]>> = const { core::cell::Cell::new(Vec::new()) };
}

gemm_kernel!(
    gemm_q4_0_q8_0,
    BlockQ4_0,
    BlockQ8_0,
    QK,
    tprep_q4_0,
    LegacyTW,
    scales_q8_0,
    load_q8_0,
    tstep_signed,
    finish_plain,
    1,
    8
);
gemm_kernel!(
    gemm_q5_0_q8_0,
    BlockQ5_0,
    BlockQ8_0,
    QK,
    tprep_q5_0,
    LegacyTW,
    scales_q8_0,
    load_q8_0,
    tstep_signed,
    finish_plain,
    1,
    8
);
gemm_kernel!(
    gemm_q8_0_q8_0,
    BlockQ8_0,
    BlockQ8_0,
    QK,
    tprep_q8_0,
    LegacyTW,
    scales_q8_0,
    load_q8_0,
    tstep_signed,
    finish_plain,
    1,
    8
);
gemm_kernel!(
    gemm_q4_1_q8_1,
    BlockQ4_1,
    BlockQ8_1,
    QK,
    tprep_q4_1,
    LegacyTW,
    scales_q8_1,
    load_q8_1,
    tstep_unsigned,
    finish_summs,
    1,
    8
);
gemm_kernel!(
    gemm_q5_1_q8_1,
    BlockQ5_1,
    BlockQ8_1,
    QK,
    tprep_q5_1,
    LegacyTW,
    scales_q8_1,
    load_q8_1,
    tstep_unsigned,
    finish_summs,
    1,
    8
);
gemm_kernel!(
    gemm_q2_k_q8_k,
    BlockQ2K,
    BlockQ8K,
    QK_K,
    prep_q2_k,
    KW,
    scales_k,
    load_k,
    tstep_k,
    finish_plain,
    1,
    8
);
gemm_kernel!(
    gemm_q3_k_q8_k,
    BlockQ3K,
    BlockQ8K,
    QK_K,
    prep_q3_k,
    KW,
    scales_k,
    load_k,
    tstep_k,
    finish_plain,
    1,
    8
);
gemm_kernel!(
    gemm_q4_k_q8_k,
    BlockQ4K,
    BlockQ8K,
    QK_K,
    prep_q4_k,
    KW,
    scales_k,
    load_k,
    tstep_k,
    finish_m4,
    1,
    8
);
gemm_kernel!(
    gemm_q5_k_q8_k,
    BlockQ5K,
    BlockQ8K,
    QK_K,
    prep_q5_k,
    KW,
    scales_k,
    load_k,
    tstep_k,
    finish_summs,
    1,
    8
);
gemm_kernel!(
    gemm_q6_k_q8_k,
    BlockQ6K,
    BlockQ8K,
    QK_K,
    prep_q6_k,
    KW,
    scales_k,
    load_k,
    tstep_k,
    finish_plain,
    1,
    8
);
