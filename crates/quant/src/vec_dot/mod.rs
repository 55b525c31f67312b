//! Vec-dot kernels: one quantized weight row · one quantized activation row → f32.
//!
//! Weights pair with activations the way ggml pairs them ([`vec_dot_type`]): the legacy quants
//! with Q8_0 or Q8_1, the K-quants with Q8_K, F16 with F16 and F32 with F32.
//!
//! Every quantized kernel computes exactly what ggml's x86 AVX2 kernel computes, bit for bit, on
//! every platform: [`ggml_order`] defines that arithmetic in portable code (and is the kernel
//! used where no SIMD kernel exists); each ISA's file (`avx2.rs`, `simd128.rs`; NEON slots in
//! beside them) must reproduce it bit for bit. The kernels are chosen by
//! [`crate::isa::level`]: AVX2 by run-time CPU feature detection (also on AVX-512 CPUs), wasm
//! SIMD128 at compile time (`target_feature = "simd128"`). [`scalar`] holds the plain mathematical references (integer dot products, one
//! float multiply-add per block) used to check the layouts.
//!
//! [`vec_dot_x4`] multiplies one weight row with four activation rows while reading the weights
//! once; each of its results is bit-identical to [`vec_dot`] on that pair, so a token's numerics
//! do not depend on how it was batched.
//!
//! Rows are byte slices of whole rows (as in GGUF); lengths are the caller's job and only
//! debug-asserted: with wrong lengths the kernels use the whole blocks both rows hold and never
//! panic. Q8_0/Q8_1 activations must lie in [-127, 127], as their quantizers produce.

pub mod fma_f64;
pub mod ggml_order;
pub mod scalar;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd128;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub use simd128::fma_f32x4;
#[cfg(all(
    target_arch = "wasm32",
    target_feature = "simd128",
    target_feature = "relaxed-simd"
))]
pub use simd128::relaxed_simd_is_exact;

use crate::blocks::*;
use crate::isa;
use bytemuck::Pod;
use half::f16;
use std::borrow::Cow;
use std::sync::LazyLock;
use tessera_gguf::GgmlType;

/// The activation type a weight type is multiplied with, or `None` when there is no kernel.
pub fn vec_dot_type(weight: GgmlType) -> Option<GgmlType> {
    use GgmlType::*;
    match weight {
        Q4_0 | Q5_0 | Q8_0 | MXFP4 => Some(Q8_0),
        Q4_1 | Q5_1 => Some(Q8_1),
        Q2_K | Q3_K | Q4_K | Q5_K | Q6_K => Some(Q8_K),
        F16 => Some(F16),
        F32 => Some(F32),
        _ => None,
    }
}

/// Dot product of a `weight`-typed row of `n` elements with an activation row of
/// `vec_dot_type(weight)`. Returns NaN for a weight type without a kernel (see [`vec_dot_type`]).
pub fn vec_dot(weight: GgmlType, n: usize, w_row: &[u8], act_row: &[u8]) -> f32 {
    match kernels().get(weight) {
        Some(k) => (k.single)(n, w_row, act_row),
        None => {
            debug_assert!(false, "no vec_dot kernel for {weight}");
            f32::NAN
        }
    }
}

/// One weight row against four activation rows; element i is bit-identical to
/// `vec_dot(weight, n, w_row, acts[i])`.
pub fn vec_dot_x4(weight: GgmlType, n: usize, w_row: &[u8], acts: [&[u8]; 4]) -> [f32; 4] {
    match kernels().get(weight) {
        Some(k) => (k.x4)(n, w_row, acts),
        None => {
            debug_assert!(false, "no vec_dot kernel for {weight}");
            [f32::NAN; 4]
        }
    }
}

/// The instruction set the dispatched kernels use ("avx2", "simd128" or "scalar"), for logs
/// and benches.
pub fn kernel_isa() -> &'static str {
    kernels().isa
}

/// Views row bytes as blocks. GGUF data and the engine's buffers are aligned; a misaligned slice
/// (not expected) is copied rather than rejected. A trailing partial block is ignored.
pub(crate) fn blocks<B: Pod>(bytes: &[u8]) -> Cow<'_, [B]> {
    let size = std::mem::size_of::<B>();
    let whole = &bytes[..bytes.len() / size * size];
    debug_assert_eq!(bytes.len() % size, 0, "row is not a whole number of blocks");
    match bytemuck::try_cast_slice(whole) {
        Ok(b) => Cow::Borrowed(b),
        Err(_) => {
            debug_assert!(false, "misaligned row slice");
            Cow::Owned(
                whole
                    .chunks_exact(size)
                    .map(bytemuck::pod_read_unaligned)
                    .collect(),
            )
        }
    }
}

type SingleFn = fn(usize, &[u8], &[u8]) -> f32;
type X4Fn = fn(usize, &[u8], [&[u8]; 4]) -> [f32; 4];
/// (n, weight rows, n_rows, activation rows, n_acts, out).
type GemmFn = fn(usize, &[u8], usize, &[u8], usize, &mut [f32]);
/// (n, weight rows, n_rows, one activation row, out): decode, each result bit-identical to
/// `single`.
type GemvFn = fn(usize, &[u8], usize, &[u8], &mut [f32]);

struct Kernel {
    single: SingleFn,
    x4: X4Fn,
    gemm: GemmFn,
    /// Weight rows × one activation row, four rows per kernel pass, where such a kernel
    /// exists (decode): the row bytes are viewed as blocks once per call.
    gemv: Option<GemvFn>,
    /// Whether `gemm` also serves one activation row (decode) with its own four-rows pass;
    /// else `gemv` or the single kernel serve decode.
    gemm_serves_decode: bool,
}

/// Weight rows × activation rows: `out[t * n_rows + r] = vec_dot(weight, n, w_row(r),
/// act_row(t))`, bit for bit, for `n_rows` contiguous weight rows in `w` and `n_acts` contiguous
/// activation rows in `acts` (whole rows of `n` elements). The SIMD kernels work in tiles of
/// several weight rows × several activation rows, so a batch reads each weight block once per
/// few tokens; every output element still goes through exactly `vec_dot`'s float operations.
/// Writes NaN for a weight type without a kernel.
pub fn gemm(
    weight: GgmlType,
    n: usize,
    w: &[u8],
    n_rows: usize,
    acts: &[u8],
    n_acts: usize,
    out: &mut [f32],
) {
    assert!(out.len() >= n_rows * n_acts, "gemm: output too small");
    match kernels().get(weight) {
        // One token (decode) streams the weights once, in order (which the hardware prefetcher
        // follows best): four rows at a time where a kernel exists, else row by row.
        Some(k) if n_acts == 1 && !k.gemm_serves_decode => match k.gemv {
            Some(gemv) => gemv(n, w, n_rows, acts, out),
            None => gemm_looped(k.single, n, w, n_rows, acts, n_acts, out),
        },
        Some(k) => (k.gemm)(n, w, n_rows, acts, n_acts, out),
        None => {
            debug_assert!(false, "no vec_dot kernel for {weight}");
            out[..n_rows * n_acts].fill(f32::NAN);
        }
    }
}

/// The plain gemm: one `single` call per output element.
fn gemm_looped(
    single: SingleFn,
    n: usize,
    w: &[u8],
    n_rows: usize,
    acts: &[u8],
    n_acts: usize,
    out: &mut [f32],
) {
    if n_rows == 0 || n_acts == 0 {
        return;
    }
    let (wb, ab) = (w.len() / n_rows, acts.len() / n_acts);
    for t in 0..n_acts {
        let a = &acts[t * ab..(t + 1) * ab];
        for r in 0..n_rows {
            out[t * n_rows + r] = single(n, &w[r * wb..(r + 1) * wb], a);
        }
    }
}

/// Weight rows × activation rows through an x4 kernel: each weight row against four activation
/// rows at a time (the last `n_acts % 4` with `single`); bit-identical to [`gemm_looped`].
#[cfg(target_arch = "x86_64")]
fn gemm_x4(
    (x4, single): (X4Fn, SingleFn),
    n: usize,
    w: &[u8],
    n_rows: usize,
    acts: &[u8],
    n_acts: usize,
    out: &mut [f32],
) {
    if n_rows == 0 || n_acts == 0 {
        return;
    }
    let (wb, ab) = (w.len() / n_rows, acts.len() / n_acts);
    let act = |t: usize| &acts[t * ab..(t + 1) * ab];
    for r in 0..n_rows {
        let w_row = &w[r * wb..(r + 1) * wb];
        let mut t = 0;
        while t + 4 <= n_acts {
            let res = x4(n, w_row, [act(t), act(t + 1), act(t + 2), act(t + 3)]);
            for (i, v) in res.into_iter().enumerate() {
                out[(t + i) * n_rows + r] = v;
            }
            t += 4;
        }
        for t in t..n_acts {
            out[t * n_rows + r] = single(n, w_row, act(t));
        }
    }
}

/// The AVX2 MXFP4 kernel on row bytes.
#[cfg(target_arch = "x86_64")]
fn mxfp4_single_avx2(n: usize, w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: as for `mxfp4_x4_avx2`.
    unsafe { avx2::vec_dot_mxfp4_q8_0(n, &blocks::<BlockMxfp4>(w), &blocks::<BlockQ8_0>(a)) }
}

/// The AVX2 MXFP4 x4 kernel on row bytes.
#[cfg(target_arch = "x86_64")]
fn mxfp4_x4_avx2(n: usize, w: &[u8], acts: [&[u8]; 4]) -> [f32; 4] {
    let w = blocks::<BlockMxfp4>(w);
    let a = acts.map(blocks::<BlockQ8_0>);
    // SAFETY: only reachable through `avx2_table`, which `kernels` returns only with AVX2,
    // FMA and F16C.
    unsafe { avx2::vec_dot_mxfp4_q8_0_x4(n, &w, [&a[0], &a[1], &a[2], &a[3]]) }
}

/// The kernels chosen for this CPU, one per weight type.
struct KernelTable {
    isa: &'static str,
    q4_0: Kernel,
    q4_1: Kernel,
    q5_0: Kernel,
    q5_1: Kernel,
    q8_0: Kernel,
    mxfp4: Kernel,
    q2_k: Kernel,
    q3_k: Kernel,
    q4_k: Kernel,
    q5_k: Kernel,
    q6_k: Kernel,
    f16: Kernel,
    f32: Kernel,
}

impl KernelTable {
    fn get(&self, weight: GgmlType) -> Option<&Kernel> {
        use GgmlType::*;
        Some(match weight {
            Q4_0 => &self.q4_0,
            Q4_1 => &self.q4_1,
            Q5_0 => &self.q5_0,
            Q5_1 => &self.q5_1,
            Q8_0 => &self.q8_0,
            MXFP4 => &self.mxfp4,
            Q2_K => &self.q2_k,
            Q3_K => &self.q3_k,
            Q4_K => &self.q4_k,
            Q5_K => &self.q5_k,
            Q6_K => &self.q6_k,
            F16 => &self.f16,
            F32 => &self.f32,
            _ => return None,
        })
    }
}

/// A [`Kernel`] from a typed single-row function; x4 runs it four times (trivially identical).
macro_rules! looped {
    ($f:path, $W:ty, $A:ty) => {
        Kernel {
            single: |n, w, a| $f(n, &blocks::<$W>(w), &blocks::<$A>(a)),
            x4: |n, w, acts| {
                let w = blocks::<$W>(w);
                acts.map(|a| $f(n, &w, &blocks::<$A>(a)))
            },
            gemm: |n, w, nr, a, na, out| {
                gemm_looped(
                    |n, w, a| $f(n, &blocks::<$W>(w), &blocks::<$A>(a)),
                    n,
                    w,
                    nr,
                    a,
                    na,
                    out,
                )
            },
            gemv: None,
            gemm_serves_decode: false,
        }
    };
}

fn scalar_table() -> KernelTable {
    KernelTable {
        isa: "scalar",
        q4_0: looped!(ggml_order::vec_dot_q4_0_q8_0, BlockQ4_0, BlockQ8_0),
        q4_1: looped!(ggml_order::vec_dot_q4_1_q8_1, BlockQ4_1, BlockQ8_1),
        q5_0: looped!(ggml_order::vec_dot_q5_0_q8_0, BlockQ5_0, BlockQ8_0),
        q5_1: looped!(ggml_order::vec_dot_q5_1_q8_1, BlockQ5_1, BlockQ8_1),
        q8_0: looped!(ggml_order::vec_dot_q8_0_q8_0, BlockQ8_0, BlockQ8_0),
        mxfp4: looped!(ggml_order::vec_dot_mxfp4_q8_0, BlockMxfp4, BlockQ8_0),
        q2_k: looped!(ggml_order::vec_dot_q2_k_q8_k, BlockQ2K, BlockQ8K),
        q3_k: looped!(ggml_order::vec_dot_q3_k_q8_k, BlockQ3K, BlockQ8K),
        q4_k: looped!(ggml_order::vec_dot_q4_k_q8_k, BlockQ4K, BlockQ8K),
        q5_k: looped!(ggml_order::vec_dot_q5_k_q8_k, BlockQ5K, BlockQ8K),
        q6_k: looped!(ggml_order::vec_dot_q6_k_q8_k, BlockQ6K, BlockQ8K),
        f16: looped!(scalar::vec_dot_f16_f16, f16, f16),
        f32: looped!(scalar::vec_dot_f32_f32, f32, f32),
    }
}

/// A decode [`GemvFn`] from x86 kernels: four rows per `$r4` call, the last `n_rows % 4` with
/// `$single` (bit-identical either way).
#[cfg(target_arch = "x86_64")]
macro_rules! gemv {
    ($r4:ident, $single:ident, $W:ty, $A:ty) => {
        Some(|n, w: &[u8], nr: usize, a: &[u8], out: &mut [f32]| {
            if nr == 0 {
                return;
            }
            let (w, a) = (blocks::<$W>(w), blocks::<$A>(a));
            let nb = w.len() / nr;
            let row = |r: usize| &w[r * nb..(r + 1) * nb];
            let mut r = 0;
            while r + 4 <= nr {
                let rows = [row(r), row(r + 1), row(r + 2), row(r + 3)];
                out[r..r + 4].copy_from_slice(&unsafe { avx2::$r4(n, rows, &a) });
                r += 4;
            }
            for r in r..nr {
                out[r] = unsafe { avx2::$single(n, row(r), &a) };
            }
        })
    };
}

#[cfg(target_arch = "x86_64")]
fn avx2_table() -> KernelTable {
    // SAFETY (every `unsafe` below): [`kernels`] only returns this table when `isa::level()`
    // has AVX2, FMA and F16C, which is all the avx2 kernels require.
    macro_rules! simd {
        ($single:ident, $x4:ident, $gemm:ident, $W:ty, $A:ty) => {
            Kernel {
                single: |n, w, a| unsafe { avx2::$single(n, &blocks::<$W>(w), &blocks::<$A>(a)) },
                x4: |n, w, acts| {
                    let w = blocks::<$W>(w);
                    let a = acts.map(blocks::<$A>);
                    unsafe { avx2::$x4(n, &w, [&a[0], &a[1], &a[2], &a[3]]) }
                },
                gemm: |n, w, nr, a, na, out| unsafe {
                    avx2::$gemm(n, &blocks::<$W>(w), nr, &blocks::<$A>(a), na, out)
                },
                gemv: None,
                gemm_serves_decode: false,
            }
        };
        ($single:ident, $W:ty, $A:ty) => {
            Kernel {
                single: |n, w, a| unsafe { avx2::$single(n, &blocks::<$W>(w), &blocks::<$A>(a)) },
                x4: |n, w, acts| {
                    let w = blocks::<$W>(w);
                    acts.map(|a| unsafe { avx2::$single(n, &w, &blocks::<$A>(a)) })
                },
                gemm: |n, w, nr, a, na, out| {
                    gemm_looped(
                        |n, w, a| unsafe { avx2::$single(n, &blocks::<$W>(w), &blocks::<$A>(a)) },
                        n,
                        w,
                        nr,
                        a,
                        na,
                        out,
                    )
                },
                gemv: None,
                gemm_serves_decode: false,
            }
        };
    }
    // Decode's four-rows kernels (legacy types: their single-row loop is short per block, so
    // the four accumulator chains overlap; the K-quants already have long blocks).
    let mut t = KernelTable {
        isa: "avx2",
        q4_0: simd!(
            vec_dot_q4_0_q8_0,
            vec_dot_q4_0_q8_0_x4,
            gemm_q4_0_q8_0,
            BlockQ4_0,
            BlockQ8_0
        ),
        q4_1: simd!(
            vec_dot_q4_1_q8_1,
            vec_dot_q4_1_q8_1_x4,
            gemm_q4_1_q8_1,
            BlockQ4_1,
            BlockQ8_1
        ),
        q5_0: simd!(
            vec_dot_q5_0_q8_0,
            vec_dot_q5_0_q8_0_x4,
            gemm_q5_0_q8_0,
            BlockQ5_0,
            BlockQ8_0
        ),
        q5_1: simd!(
            vec_dot_q5_1_q8_1,
            vec_dot_q5_1_q8_1_x4,
            gemm_q5_1_q8_1,
            BlockQ5_1,
            BlockQ8_1
        ),
        q8_0: simd!(
            vec_dot_q8_0_q8_0,
            vec_dot_q8_0_q8_0_x4,
            gemm_q8_0_q8_0,
            BlockQ8_0,
            BlockQ8_0
        ),
        // No tiled gemm: batches go through the x4 kernel (see `gemm_x4`).
        mxfp4: Kernel {
            single: mxfp4_single_avx2,
            x4: mxfp4_x4_avx2,
            gemm: |n, w, nr, a, na, out| {
                gemm_x4((mxfp4_x4_avx2, mxfp4_single_avx2), n, w, nr, a, na, out)
            },
            gemv: None,
            gemm_serves_decode: false,
        },
        q2_k: simd!(
            vec_dot_q2_k_q8_k,
            vec_dot_q2_k_q8_k_x4,
            gemm_q2_k_q8_k,
            BlockQ2K,
            BlockQ8K
        ),
        q3_k: simd!(
            vec_dot_q3_k_q8_k,
            vec_dot_q3_k_q8_k_x4,
            gemm_q3_k_q8_k,
            BlockQ3K,
            BlockQ8K
        ),
        q4_k: simd!(
            vec_dot_q4_k_q8_k,
            vec_dot_q4_k_q8_k_x4,
            gemm_q4_k_q8_k,
            BlockQ4K,
            BlockQ8K
        ),
        q5_k: simd!(
            vec_dot_q5_k_q8_k,
            vec_dot_q5_k_q8_k_x4,
            gemm_q5_k_q8_k,
            BlockQ5K,
            BlockQ8K
        ),
        q6_k: simd!(
            vec_dot_q6_k_q8_k,
            vec_dot_q6_k_q8_k_x4,
            gemm_q6_k_q8_k,
            BlockQ6K,
            BlockQ8K
        ),
        f16: simd!(vec_dot_f16_f16, f16, f16),
        f32: simd!(vec_dot_f32_f32, f32, f32),
    };
    t.q4_0.gemv = gemv!(
        vec_dot_q4_0_q8_0_r4,
        vec_dot_q4_0_q8_0,
        BlockQ4_0,
        BlockQ8_0
    );
    t.q4_1.gemv = gemv!(
        vec_dot_q4_1_q8_1_r4,
        vec_dot_q4_1_q8_1,
        BlockQ4_1,
        BlockQ8_1
    );
    t.q5_0.gemv = gemv!(
        vec_dot_q5_0_q8_0_r4,
        vec_dot_q5_0_q8_0,
        BlockQ5_0,
        BlockQ8_0
    );
    t.q5_1.gemv = gemv!(
        vec_dot_q5_1_q8_1_r4,
        vec_dot_q5_1_q8_1,
        BlockQ5_1,
        BlockQ8_1
    );
    t.q8_0.gemv = gemv!(
        vec_dot_q8_0_q8_0_r4,
        vec_dot_q8_0_q8_0,
        BlockQ8_0,
        BlockQ8_0
    );
    t.mxfp4.gemv = gemv!(
        vec_dot_mxfp4_q8_0_r4,
        vec_dot_mxfp4_q8_0,
        BlockMxfp4,
        BlockQ8_0
    );
    t
}

/// The wasm SIMD128 kernels, compiled in when the build enables `simd128` (the browser build
/// does, in `.cargo/config.toml`): wasm has no run-time feature detection.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
fn simd128_table() -> KernelTable {
    // Every SIMD128 kernel: the typed single-row and x4 functions, and a typed gemm that
    // decodes each weight block once per call (`simd128/legacy4.rs` for the legacy types,
    // `gemm_k` for the K-quants).
    macro_rules! simd {
        ($single:ident, $x4:ident, $gemm:ident, $W:ty, $A:ty) => {
            Kernel {
                single: |n, w, a| simd128::$single(n, &blocks::<$W>(w), &blocks::<$A>(a)),
                x4: |n, w, acts| {
                    let w = blocks::<$W>(w);
                    let a = acts.map(blocks::<$A>);
                    simd128::$x4(n, &w, [&a[0], &a[1], &a[2], &a[3]])
                },
                gemm: |n, w, nr, a, na, out| {
                    simd128::$gemm(n, &blocks::<$W>(w), nr, &blocks::<$A>(a), na, out)
                },
                gemv: None,
                gemm_serves_decode: false,
            }
        };
    }
    // The legacy types' gemm also serves decode (four weight rows per pass for one activation
    // row); the K-quants decode row by row.
    macro_rules! legacy {
        ($single:ident, $x4:ident, $gemm:ident, $W:ty, $A:ty) => {
            Kernel {
                gemm_serves_decode: true,
                ..simd!($single, $x4, $gemm, $W, $A)
            }
        };
    }
    macro_rules! k_quant {
        ($single:ident, $x4:ident, $gemm:ident, $W:ty) => {
            simd!($single, $x4, $gemm, $W, BlockQ8K)
        };
    }
    KernelTable {
        isa: if cfg!(target_feature = "relaxed-simd") {
            "simd128+relaxed"
        } else {
            "simd128"
        },
        q4_0: legacy!(
            vec_dot_q4_0_q8_0,
            vec_dot_q4_0_q8_0_x4,
            gemm_q4_0_q8_0,
            BlockQ4_0,
            BlockQ8_0
        ),
        q4_1: legacy!(
            vec_dot_q4_1_q8_1,
            vec_dot_q4_1_q8_1_x4,
            gemm_q4_1_q8_1,
            BlockQ4_1,
            BlockQ8_1
        ),
        q5_0: legacy!(
            vec_dot_q5_0_q8_0,
            vec_dot_q5_0_q8_0_x4,
            gemm_q5_0_q8_0,
            BlockQ5_0,
            BlockQ8_0
        ),
        q5_1: legacy!(
            vec_dot_q5_1_q8_1,
            vec_dot_q5_1_q8_1_x4,
            gemm_q5_1_q8_1,
            BlockQ5_1,
            BlockQ8_1
        ),
        q8_0: legacy!(
            vec_dot_q8_0_q8_0,
            vec_dot_q8_0_q8_0_x4,
            gemm_q8_0_q8_0,
            BlockQ8_0,
            BlockQ8_0
        ),
        mxfp4: looped!(ggml_order::vec_dot_mxfp4_q8_0, BlockMxfp4, BlockQ8_0),
        q2_k: k_quant!(
            vec_dot_q2_k_q8_k,
            vec_dot_q2_k_q8_k_x4,
            gemm_q2_k_q8_k,
            BlockQ2K
        ),
        q3_k: k_quant!(
            vec_dot_q3_k_q8_k,
            vec_dot_q3_k_q8_k_x4,
            gemm_q3_k_q8_k,
            BlockQ3K
        ),
        q4_k: k_quant!(
            vec_dot_q4_k_q8_k,
            vec_dot_q4_k_q8_k_x4,
            gemm_q4_k_q8_k,
            BlockQ4K
        ),
        q5_k: k_quant!(
            vec_dot_q5_k_q8_k,
            vec_dot_q5_k_q8_k_x4,
            gemm_q5_k_q8_k,
            BlockQ5K
        ),
        q6_k: k_quant!(
            vec_dot_q6_k_q8_k,
            vec_dot_q6_k_q8_k_x4,
            gemm_q6_k_q8_k,
            BlockQ6K
        ),
        // Float rows keep the plain scalar kernels (as without SIMD).
        f16: looped!(scalar::vec_dot_f16_f16, f16, f16),
        f32: looped!(scalar::vec_dot_f32_f32, f32, f32),
    }
}

/// [`avx2_table`] with the AVX-512 VNNI tiles where they exist (the same bits, integer dot
/// products in one instruction).
#[cfg(target_arch = "x86_64")]
fn avx512_vnni_table() -> KernelTable {
    let mut t = avx2_table();
    t.isa = "avx512-vnni";
    // SAFETY: [`kernels`] returns this table only at the AVX-512 level with VNNI.
    t.q4_1.gemm = |n, w, nr, a, na, out| unsafe {
        avx2::gemm_q4_1_q8_1_vnni(
            n,
            &blocks::<BlockQ4_1>(w),
            nr,
            &blocks::<BlockQ8_1>(a),
            na,
            out,
        )
    };
    t.q5_1.gemm = |n, w, nr, a, na, out| unsafe {
        avx2::gemm_q5_1_q8_1_vnni(
            n,
            &blocks::<BlockQ5_1>(w),
            nr,
            &blocks::<BlockQ8_1>(a),
            na,
            out,
        )
    };
    t.q4_1.gemv = gemv!(
        vec_dot_q4_1_q8_1_r4_vnni,
        vec_dot_q4_1_q8_1,
        BlockQ4_1,
        BlockQ8_1
    );
    t.q5_1.gemv = gemv!(
        vec_dot_q5_1_q8_1_r4_vnni,
        vec_dot_q5_1_q8_1,
        BlockQ5_1,
        BlockQ8_1
    );
    t
}

/// The table for [`isa::level`] (each built on first use): the level is read at every call, so
/// [`isa::force_level`] takes effect at once.
fn kernels() -> &'static KernelTable {
    static SCALAR: LazyLock<KernelTable> = LazyLock::new(scalar_table);
    #[cfg(target_arch = "x86_64")]
    static AVX2: LazyLock<KernelTable> = LazyLock::new(avx2_table);
    #[cfg(target_arch = "x86_64")]
    static AVX512_VNNI: LazyLock<KernelTable> = LazyLock::new(avx512_vnni_table);
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    static SIMD128: LazyLock<KernelTable> = LazyLock::new(simd128_table);
    match isa::level() {
        #[cfg(target_arch = "x86_64")]
        isa::Level::Avx512 if isa::detected().avx512_vnni => &AVX512_VNNI,
        #[cfg(target_arch = "x86_64")]
        l if l.has_avx2() => &AVX2,
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        isa::Level::Simd128 => &SIMD128,
        _ => &SCALAR,
    }
}
