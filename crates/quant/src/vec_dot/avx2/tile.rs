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
unsafe fn load_q8_0(y: &BlockQ8_0, sc: &[f32; 2]) -> LegacyA {
    load_legacy(y, y.qs.as_ptr(), sc)
}

#[inline(always)]
unsafe fn load_q8_1(y: &BlockQ8_1, sc: &[f32; 2]) -> LegacyA {
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

/// `step_unsigned_q8_1` with the activation pre-loaded (the lane sums by VNNI where `VNNI`).
#[inline(always)]
unsafe fn tstep_unsigned_with<const VNNI: bool>(w: &LegacyTW, y: &LegacyA, acc: &mut Acc) {
    acc.summs = w.m.mul_add(y.s, acc.summs);
    let sums = if VNNI {
        mul_sum_us8_vnni(w.ax, y.q)
    } else {
        mul_sum_us8(w.ax, y.q)
    };
    fma_dd(w, y, sums, acc);
}

#[inline(always)]
unsafe fn tstep_unsigned(w: &LegacyTW, y: &LegacyA, acc: &mut Acc) {
    tstep_unsigned_with::<false>(w, y, acc)
}

#[inline(always)]
unsafe fn tstep_unsigned_vnni(w: &LegacyTW, y: &LegacyA, acc: &mut Acc) {
    tstep_unsigned_with::<true>(w, y, acc)
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
        gemm_kernel!(@features "avx2,fma,f16c", $name, $W, $A, $qk, $prep, $P, $scales, $load, $step, $finish, $R, $C);
    };
    (@features $features:literal, $name:ident, $W:ty, $A:ty, $qk:expr, $prep:ident, $P:ty, $scales:ident,
     $load:ident, $step:ident, $finish:ident, $R:literal, $C:literal) => {
        /// # Safety
        /// The CPU must support `$features` (AVX2, FMA and F16C at least).
        #[target_feature(enable = $features)]
        pub unsafe fn $name(
            n: usize,
            w: &[$W],
            n_rows: usize,
            a: &[$A],
            n_acts: usize,
            out: &mut [f32],
        ) {
            // The tile's operands and its place in the output, one argument each.
            #[allow(clippy::too_many_arguments)]
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
                    // Balanced groups of at most $C (9 = 5 + 4, not 8 + 1: a lone activation
                    // would pay a whole pass over the rows for one pair per block).
                    let left = n_acts - t0;
                    let c = left.div_ceil(left.div_ceil($C));
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

/// Generates the signed legacy-quant `$name(n, w, n_rows, a, n_acts, out)` (same contract as
/// [`gemm_kernel`]), shaped for both prompt batches and the small batches of speculative
/// verification, where the weights stream from memory once and the per-pair compute must hide
/// under that stream:
///
/// * the products `d_w * d_a` of a tile are formed up front, eight activations per vector
///   multiply, into a table the pair loop reads with broadcast loads (one multiply per eight
///   pairs instead of a scalar multiply and a broadcast per pair; each product is the same single
///   f32 rounding as the single-row kernel's `d_w * d_a`);
/// * a pair is then one activation load, `sign`, `maddubs`, `madd`, `cvt` and the
///   FMA, into its own accumulator, blocks in order: the single-row kernel's float operations;
/// * one or two activations take tiles of 4 weight rows, so 4 or 8 independent FMA chains hide
///   the FMA latency; more take tiles of 1 row × up to 8 activations.
///
/// Used for Q8_0 (Gemma's 262144-row output matrix), where it costs less CPU than
/// [`gemm_kernel`] for 2..16 tokens (`benches/gemm_small_batch_cpu_time.rs`). Q5_0 and Q4_1,
/// whose weight unpacking costs more than Q8_0's, keep `gemm_kernel`: this tile is slower for them.
macro_rules! gemm_legacy {
    ($name:ident, $W:ty, $A:ty, $prep:ident, $scales:ident) => {
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
            /// `R` rows × `C` activations from (r0, t0). `d` holds the activation scales
            /// block-major (`d[i * stride + t]`), `dd` is scratch of `R * nb * 8` floats.
            #[inline(always)]
            #[allow(clippy::too_many_arguments)]
            unsafe fn tile<const R: usize, const C: usize>(
                nb: usize,
                w: &[$W],
                d: &[f32],
                stride: usize,
                qt: &[__m256i],
                n_acts: usize,
                dd: &mut [f32],
                r0: usize,
                t0: usize,
                n_rows: usize,
                out: &mut [f32],
            ) {
                let wp = w.as_ptr().add(r0 * nb);
                // SAFETY (pointer reads below): rows r0..r0+R and activations t0..t0+C exist
                // (checked by the caller), each of nb blocks; d has stride >= t0 + 8 per block;
                // dd has R * nb * 8 floats.
                let ddp = dd.as_mut_ptr();
                for r in 0..R {
                    for i in 0..nb {
                        // The weight scale alone (every legacy block starts with `d: f16`):
                        // the same exact f16 -> f32 value the prep broadcasts.
                        let wd = _mm256_set1_ps(f16_to_f32((*wp.add(r * nb + i)).d));
                        let dv = _mm256_loadu_ps(d.as_ptr().add(i * stride + t0));
                        _mm256_storeu_ps(ddp.add((r * nb + i) * 8), _mm256_mul_ps(wd, dv));
                    }
                }
                let mut acc = [[Acc::new(); C]; R];
                for i in 0..nb {
                    let qp = qt.as_ptr().add(i * n_acts + t0);
                    for r in 0..R {
                        let x = $prep(&*wp.add(r * nb + i));
                        for c in 0..C {
                            let q = *qp.add(c);
                            let sums = mul_sum_us8(x.ax, _mm256_sign_epi8(q, x.sx));
                            let ddv = _mm256_broadcast_ss(&*ddp.add((r * nb + i) * 8 + c));
                            acc[r][c].main =
                                _mm256_fmadd_ps(ddv, _mm256_cvtepi32_ps(sums), acc[r][c].main);
                        }
                    }
                }
                for r in 0..R {
                    for c in 0..C {
                        out[(t0 + c) * n_rows + r0 + r] = acc[r][c].finish_plain();
                    }
                }
            }

            let nb = n / QK;
            assert!(
                n % QK == 0
                    && w.len() >= nb * n_rows
                    && a.len() >= nb * n_acts
                    && out.len() >= n_rows * n_acts,
                "gemm: rows shorter than {n} elements or output too small"
            );
            if n_rows == 0 || n_acts == 0 {
                return;
            }
            const ROW_BLOCK: usize = 16;
            const R_SMALL: usize = 4;
            let stride = n_acts + 8;
            let mut bufs = LEGACY_SCRATCH.with(|s| s.take());
            let [d, dd] = &mut bufs;
            d.clear();
            d.resize(nb * stride, 0.0);
            dd.clear();
            dd.resize(R_SMALL * nb * 8, 0.0);
            // The activations' quants, block-major and 32-byte aligned: a tile reads each block's
            // activations as consecutive aligned vectors (the 34/36-byte blocks would split
            // about half of their loads across cache lines).
            let mut qt = LEGACY_QUANTS.with(|q| q.take());
            qt.clear();
            qt.resize(nb * n_acts, _mm256_setzero_si256());
            for t in 0..n_acts {
                for i in 0..nb {
                    qt[i * n_acts + t] = load256(a[t * nb + i].qs.as_ptr() as *const u8);
                    d[i * stride + t] = $scales(&a[t * nb + i])[0];
                }
            }
            macro_rules! go {
                ($rr:expr, $cc:literal, $r0:expr, $t0:expr) => {
                    tile::<$rr, $cc>(nb, w, d, stride, &qt, n_acts, dd, $r0, $t0, n_rows, out)
                };
            }
            macro_rules! cols {
                ($rr:expr, $c:expr, $r0:expr, $t0:expr) => {
                    match $c {
                        1 => go!($rr, 1, $r0, $t0),
                        2 => go!($rr, 2, $r0, $t0),
                        3 => go!($rr, 3, $r0, $t0),
                        4 => go!($rr, 4, $r0, $t0),
                        5 => go!($rr, 5, $r0, $t0),
                        6 => go!($rr, 6, $r0, $t0),
                        7 => go!($rr, 7, $r0, $t0),
                        _ => go!($rr, 8, $r0, $t0),
                    }
                };
            }
            if n_acts <= 2 {
                // One or two activations: 4 rows per tile (4 or 8 FMA chains instead of 1 or 2).
                let mut r0 = 0;
                while r0 + R_SMALL <= n_rows {
                    match n_acts {
                        1 => go!(R_SMALL, 1, r0, 0),
                        _ => go!(R_SMALL, 2, r0, 0),
                    }
                    r0 += R_SMALL;
                }
                while r0 < n_rows {
                    cols!(1, n_acts, r0, 0);
                    r0 += 1;
                }
            } else if n_acts <= 4 {
                // Three or four activations: 2 rows per tile (6 or 8 FMA chains).
                let mut r0 = 0;
                while r0 + 2 <= n_rows {
                    match n_acts {
                        3 => go!(2, 3, r0, 0),
                        _ => go!(2, 4, r0, 0),
                    }
                    r0 += 2;
                }
                while r0 < n_rows {
                    cols!(1, n_acts, r0, 0);
                    r0 += 1;
                }
            } else {
                let mut rb = 0;
                while rb < n_rows {
                    let re = (rb + ROW_BLOCK).min(n_rows);
                    let mut t0 = 0;
                    while t0 < n_acts {
                        // Balanced groups of at most 8 (9 = 5 + 4, not 8 + 1: a lone
                        // activation would pay a whole row pass for one pair per block).
                        let left = n_acts - t0;
                        let c = left.div_ceil(left.div_ceil(8));
                        for r0 in rb..re {
                            cols!(1, c, r0, t0);
                        }
                        t0 += c;
                    }
                    rb = re;
                }
            }
            LEGACY_SCRATCH.with(|s| s.replace(bufs));
            LEGACY_QUANTS.with(|q| q.replace(qt));
        }
    };
}

thread_local! {
    /// Per-thread scratch of the legacy gemm: activation scales, d_w * d_a products.
    static LEGACY_SCRATCH: core::cell::Cell<[Vec<f32>; 2]> =
        const { core::cell::Cell::new([Vec::new(), Vec::new()]) };
    /// Per-thread scratch of the legacy gemm: the activations' quants, block-major.
    static LEGACY_QUANTS: core::cell::Cell<Vec<__m256i>> = const { core::cell::Cell::new(Vec::new()) };
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
gemm_legacy!(
    gemm_q8_0_q8_0,
    BlockQ8_0,
    BlockQ8_0,
    tprep_q8_0,
    scales_q8_0
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

// The Q4_1 and Q5_1 tiles with AVX-512 VNNI (used where the CPU has it; same bits).
gemm_kernel!(
    @features "avx2,fma,f16c,avx512f,avx512vl,avx512vnni",
    gemm_q4_1_q8_1_vnni,
    BlockQ4_1,
    BlockQ8_1,
    QK,
    tprep_q4_1,
    LegacyTW,
    scales_q8_1,
    load_q8_1,
    tstep_unsigned_vnni,
    finish_summs,
    1,
    8
);
gemm_kernel!(
    @features "avx2,fma,f16c,avx512f,avx512vl,avx512vnni",
    gemm_q5_1_q8_1_vnni,
    BlockQ5_1,
    BlockQ8_1,
    QK,
    tprep_q5_1,
    LegacyTW,
    scales_q8_1,
    load_q8_1,
    tstep_unsigned_vnni,
    finish_summs,
    1,
    8
);
