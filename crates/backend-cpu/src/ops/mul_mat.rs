//! Matrix multiplication with quantized weights, the way ggml does it on CPU.
//!
//! The weights stay in their file format. Each activation row is quantized once to the weight
//! type's vec-dot partner (`tessera_quant::vec_dot::vec_dot_type`: Q8_0, Q8_1, Q8_K, F16 or F32), then
//! every output element is one `vec_dot` of a weight row with an activation row. Work is split
//! over threads by weight rows only, never inside a dot product, and the tiled kernel
//! (`tessera_quant::vec_dot::gemm`: several weight rows × several tokens per pass) gives each element
//! exactly `vec_dot`'s bits: an output element does not depend on the thread count or on how
//! many tokens share the batch.

use tessera_gguf::GgmlType;
use tessera_quant::repack::{layout::ROWS, RepackedMatrix};
use tessera_quant::vec_dot::{gemm, vec_dot_type};

use crate::parallel::{for_each_chunk, SharedOut};
use tessera_core::error::EngineError;
use tessera_core::threading::ThreadPool;

/// Activations quantized for one weight type: `n_rows` rows of `row_bytes` bytes. The buffer is
/// kept in 8-byte words so block views (f16/f32 fields) are always aligned.
#[derive(Default)]
pub struct QuantizedActs {
    words: Vec<u64>,
    pub ty: Option<GgmlType>,
    pub row_bytes: usize,
    pub n_rows: usize,
    /// Each Q8_0 block's Σq for the repacked kernels, made on demand ([`Self::ensure_sums`]).
    sums: Vec<i32>,
    sums_ready: bool,
}

impl QuantizedActs {
    pub(crate) fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.row_bytes * self.n_rows]
    }

    pub fn row(&self, r: usize) -> &[u8] {
        &self.bytes()[r * self.row_bytes..(r + 1) * self.row_bytes]
    }

    /// Computes the block sums repacked weights need in [`mul_mats`], once per quantization.
    pub fn ensure_sums(&mut self) {
        if !self.sums_ready {
            let mut sums = std::mem::take(&mut self.sums);
            tessera_quant::repack::act_block_sums(self.bytes(), &mut sums);
            self.sums = sums;
            self.sums_ready = true;
        }
    }

    /// Quantizes `x` (rows of `k` floats) to `ty`, reusing the buffer.
    pub fn quantize(
        &mut self,
        pool: &dyn ThreadPool,
        ty: GgmlType,
        x: &[f32],
        k: usize,
    ) -> Result<(), EngineError> {
        let row_bytes = tessera_quant::row_bytes(ty, k)?;
        let n_rows = x.len() / k;
        let n_words = (row_bytes * n_rows).div_ceil(8);
        if self.words.len() < n_words {
            self.words.resize(n_words, 0);
        }
        self.ty = Some(ty);
        self.sums_ready = false;
        self.row_bytes = row_bytes;
        self.n_rows = n_rows;
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut self.words);
        let out = SharedOut::new(&mut bytes[..row_bytes * n_rows]);
        let failed = std::sync::atomic::AtomicBool::new(false);
        for_each_chunk(pool, n_rows, pool.n_threads(), 1, &|rows| {
            for r in rows {
                let dst = out.slice(r * row_bytes, row_bytes);
                if tessera_quant::quantize_row(ty, &x[r * k..(r + 1) * k], dst).is_err() {
                    failed.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            }
        });
        if failed.into_inner() {
            // Only a length/type mismatch fails, which row_bytes above already ruled out.
            return Err(EngineError::InvalidArgument(format!(
                "cannot quantize activations to {ty}"
            )));
        }
        Ok(())
    }
}

/// The activation type for weights of type `w_ty`.
pub fn act_type(w_ty: GgmlType) -> Result<GgmlType, EngineError> {
    vec_dot_type(w_ty).ok_or(EngineError::UnsupportedType {
        name: "matmul weight".into(),
        ty: w_ty,
    })
}

/// Rows of weights handled together: their bytes stay in L1 while all tokens pass by.
pub(crate) const ROW_BLOCK: usize = 16;

/// Output floats per `gemm` call (weight rows × tokens): small batches (decode, speculative
/// verification) pass up to 256 rows per call, so the kernel's per-call work (arranging the
/// activations and their scales) is spread over many rows, while the output tile stays in L1/L2;
/// long batches keep `ROW_BLOCK` rows.
pub(crate) const CALL_FLOATS: usize = 4096;

/// Weight rows per `gemm` call for `n` tokens (see [`CALL_FLOATS`]).
pub(crate) fn call_rows(n: usize) -> usize {
    (CALL_FLOATS / n.max(1)).clamp(ROW_BLOCK, 256) / ROW_BLOCK * ROW_BLOCK
}

/// Batches of at most this many tokens split a matmul into one contiguous range of weight rows
/// per thread. Such a matmul streams its weights from memory, and a thread reading one long
/// range streams faster than one hopping between several short ones (4 ranges per thread made
/// SmolLM2's decode slower). Longer batches are compute-bound and take 4 ranges per thread, so a
/// thread that was held up gets its ranges taken over.
pub(crate) const STREAMING_TOKENS: usize = 4;

/// How many ranges to split `n_units` units of weight rows into for `n_tokens` tokens.
pub(crate) fn matmul_tasks(pool: &dyn ThreadPool, n_tokens: usize, n_units: usize) -> usize {
    let per_thread = if n_tokens <= STREAMING_TOKENS { 1 } else { 4 };
    (pool.n_threads() * per_thread).min(n_units)
}

/// One weight matrix of a [`mul_mats`] job.
#[derive(Clone, Copy)]
pub enum MatWeights<'a> {
    /// Repacked into 8-row groups (`tessera_quant::repack`).
    Repacked(&'a RepackedMatrix),
    /// In the file layout: `m` rows of `k` elements of type `ty` (ggml's kernels).
    File {
        ty: GgmlType,
        bytes: &'a [u8],
        k: usize,
        m: usize,
    },
}

impl MatWeights<'_> {
    pub fn n_rows(&self) -> usize {
        match *self {
            MatWeights::Repacked(w) => w.n_rows(),
            MatWeights::File { m, .. } => m,
        }
    }

    /// Units of work: `ROW_BLOCK` rows each (the last may be short).
    fn n_units(&self) -> usize {
        match *self {
            MatWeights::Repacked(w) => w.n_groups().div_ceil(ROW_BLOCK / ROWS),
            MatWeights::File { m, .. } => m.div_ceil(ROW_BLOCK),
        }
    }

    /// The rows of `units` for every token of `acts`, into `out` (one row of `n_rows` floats
    /// per token), `call_rows(n)` weight rows per kernel call through `scratch`.
    fn run_units(
        &self,
        units: std::ops::Range<usize>,
        acts: &QuantizedActs,
        out: SharedOut<f32>,
        scratch: &mut Vec<f32>,
    ) {
        let (n, m) = (acts.n_rows, self.n_rows());
        let act_bytes = &acts.bytes()[..n * acts.row_bytes];
        let call_rows = call_rows(n);
        if scratch.len() < call_rows * n {
            scratch.resize(call_rows * n, 0.0);
        }
        // Writes a tile of `width` rows (from `r0`) × n tokens; rows past `m` are padding.
        let store = |tile: &[f32], r0: usize, width: usize| {
            let nr = width.min(m - r0);
            for t in 0..n {
                out.slice(t * m + r0, nr)
                    .copy_from_slice(&tile[t * width..t * width + nr]);
            }
        };
        match *self {
            MatWeights::Repacked(w) => {
                debug_assert!(!w.needs_act_sums() || acts.sums_ready);
                let per_unit = ROW_BLOCK / ROWS;
                let (mut g0, g_end) = (
                    units.start * per_unit,
                    (units.end * per_unit).min(w.n_groups()),
                );
                while g0 < g_end {
                    let g1 = (g0 + call_rows / ROWS).min(g_end);
                    let width = (g1 - g0) * ROWS;
                    let tile = &mut scratch[..width * n];
                    w.gemm(g0..g1, act_bytes, n, &acts.sums, tile);
                    store(tile, g0 * ROWS, width);
                    g0 = g1;
                }
            }
            MatWeights::File { ty, bytes, k, m } => {
                let row_bytes = bytes.len() / m;
                let (mut r0, r_end) = (units.start * ROW_BLOCK, (units.end * ROW_BLOCK).min(m));
                while r0 < r_end {
                    let r1 = (r0 + call_rows).min(r_end);
                    let tile = &mut scratch[..(r1 - r0) * n];
                    // Tiles of weight rows × tokens; each element bit-identical to vec_dot.
                    gemm(
                        ty,
                        k,
                        &bytes[r0 * row_bytes..r1 * row_bytes],
                        r1 - r0,
                        act_bytes,
                        n,
                        tile,
                    );
                    store(tile, r0, r1 - r0);
                    r0 = r1;
                }
            }
        }
    }
}

/// The most matrices one [`mul_mats`] job takes.
pub const MAX_MATS: usize = 4;

/// `outs[i][t][r] = mats[i].row(r) · act_row(t)` for matrices that share one activation
/// (q, k and v; gate and up): all their rows are split over the threads in one pool job, so
/// they cost one synchronisation and the ranges stay long. Each element has its kernel's bits
/// (ggml's `vec_dot` for the file layout, the repack reference for repacked weights) whatever
/// the split or the batch.
///
/// # Panics
/// With more than [`MAX_MATS`] matrices, or outputs not `acts.n_rows × n_rows` long.
pub fn mul_mats(
    pool: &dyn ThreadPool,
    mats: &[MatWeights],
    acts: &QuantizedActs,
    outs: &mut [&mut [f32]],
) {
    assert!(mats.len() <= MAX_MATS && mats.len() == outs.len());
    let mut shared = [SharedOut::new(&mut []); MAX_MATS];
    let mut first_unit = [0usize; MAX_MATS + 1];
    for (i, (w, out)) in mats.iter().zip(outs.iter_mut()).enumerate() {
        assert_eq!(out.len(), acts.n_rows * w.n_rows());
        shared[i] = SharedOut::new(out);
        first_unit[i + 1] = first_unit[i] + w.n_units();
    }
    let n_units = first_unit[mats.len()];
    let n_tasks = matmul_tasks(pool, acts.n_rows, n_units);
    for_each_chunk(pool, n_units, n_tasks, 1, &|units| {
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            for (i, w) in mats.iter().enumerate() {
                let (u0, u1) = (first_unit[i], first_unit[i + 1]);
                let (start, end) = (units.start.max(u0), units.end.min(u1));
                if start < end {
                    w.run_units(start - u0..end - u0, acts, shared[i], &mut scratch);
                }
            }
        });
    });
}

/// `out[t][r] = w_row(r) · act_row(t)` for `m` weight rows of length `k` in the file layout,
/// `acts.n_rows` tokens.
pub fn mul_mat_quantized(
    pool: &dyn ThreadPool,
    w_ty: GgmlType,
    w: &[u8],
    k: usize,
    m: usize,
    acts: &QuantizedActs,
    out: &mut [f32],
) {
    let mat = MatWeights::File {
        ty: w_ty,
        bytes: w,
        k,
        m,
    };
    mul_mats(pool, &[mat], acts, &mut [out]);
}

/// `out[t][r] = w_row(r) · act_row(t)` with the weights repacked in 8-row groups.
pub fn mul_mat_repacked(
    pool: &dyn ThreadPool,
    w: &RepackedMatrix,
    acts: &QuantizedActs,
    out: &mut [f32],
) {
    mul_mats(pool, &[MatWeights::Repacked(w)], acts, &mut [out]);
}

thread_local! {
    /// Per-thread output tile of [`mul_mats`] (reused: decode steps allocate nothing).
    static SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Reference: weights dequantized to f32, activations kept in f32, dot products in f64.
/// Slow; for checking the quantized path and for debugging.
pub fn mul_mat_reference(
    w_ty: GgmlType,
    w: &[u8],
    k: usize,
    m: usize,
    x: &[f32],
    out: &mut [f32],
) -> Result<(), EngineError> {
    let w_row_bytes = w.len() / m;
    let mut row = vec![0.0f32; k];
    for r in 0..m {
        tessera_quant::dequantize_row(w_ty, &w[r * w_row_bytes..(r + 1) * w_row_bytes], &mut row)?;
        for (t, xr) in x.chunks_exact(k).enumerate() {
            let d: f64 = row.iter().zip(xr).map(|(&a, &b)| a as f64 * b as f64).sum();
            out[t * m + r] = d as f32;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::ReversePool;
    use tessera_core::threading::SequentialPool;

    fn data(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let h = (i as u32)
                    .wrapping_mul(2654435761)
                    .wrapping_add(seed.wrapping_mul(97));
                ((h >> 8) % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    fn quantize_weights(ty: GgmlType, w: &[f32], k: usize) -> Vec<u8> {
        let rb = tessera_quant::row_bytes(ty, k).unwrap();
        let mut out = vec![0u8; rb * (w.len() / k)];
        for (src, dst) in w.chunks(k).zip(out.chunks_mut(rb)) {
            tessera_quant::quantize_row(ty, src, dst).unwrap();
        }
        out
    }

    fn run(
        pool: &dyn ThreadPool,
        ty: GgmlType,
        wq: &[u8],
        x: &[f32],
        k: usize,
        m: usize,
    ) -> Vec<f32> {
        let mut acts = QuantizedActs::default();
        acts.quantize(pool, act_type(ty).unwrap(), x, k).unwrap();
        let mut out = vec![0.0; (x.len() / k) * m];
        mul_mat_quantized(pool, ty, wq, k, m, &acts, &mut out);
        out
    }

    #[test]
    fn close_to_float_matmul_for_every_weight_type() {
        let (k, m, n) = (512, 37, 6);
        let w = data(k * m, 1);
        let x = data(k * n, 2);
        for ty in [
            GgmlType::F32,
            GgmlType::F16,
            GgmlType::Q4_0,
            GgmlType::Q4_1,
            GgmlType::Q5_0,
            GgmlType::Q5_1,
            GgmlType::Q8_0,
            GgmlType::MXFP4,
            GgmlType::Q2_K,
            GgmlType::Q3_K,
            GgmlType::Q4_K,
            GgmlType::Q5_K,
            GgmlType::Q6_K,
        ] {
            let wq = quantize_weights(ty, &w, k);
            // Reference: dequantized weights times float activations.
            let mut wd = vec![0.0f32; k * m];
            let rb = wq.len() / m;
            for r in 0..m {
                tessera_quant::dequantize_row(
                    ty,
                    &wq[r * rb..(r + 1) * rb],
                    &mut wd[r * k..(r + 1) * k],
                )
                .unwrap();
            }
            let got = run(&SequentialPool, ty, &wq, &x, k, m);
            let mut err = 0.0f64;
            let mut norm = 0.0f64;
            for t in 0..n {
                for r in 0..m {
                    let want: f64 = (0..k)
                        .map(|i| wd[r * k + i] as f64 * x[t * k + i] as f64)
                        .sum();
                    err += (got[t * m + r] as f64 - want).powi(2);
                    norm += want * want;
                }
            }
            // Only the activation quantization separates the two (normalized MSE).
            assert!(err / norm < 5e-4, "{ty}: nmse {}", err / norm);
        }
    }

    fn run_repacked(
        pool: &dyn ThreadPool,
        m: &RepackedMatrix,
        ty: GgmlType,
        x: &[f32],
        k: usize,
    ) -> Vec<f32> {
        let mut acts = QuantizedActs::default();
        acts.quantize(pool, act_type(ty).unwrap(), x, k).unwrap();
        acts.ensure_sums();
        let mut out = vec![f32::NAN; (x.len() / k) * m.n_rows()];
        mul_mat_repacked(pool, m, &acts, &mut out);
        out
    }

    /// Repacked weights: each element is the repack reference's, alone or in any batch and
    /// thread split, with a row count that leaves a partial group.
    #[test]
    fn repacked_weights_give_the_reference_bits_in_any_batch_and_split() {
        let (k, m, n) = (512, 45, 7);
        let w = data(k * m, 5);
        let x = data(k * n, 6);
        for ty in [
            GgmlType::Q4_0,
            GgmlType::Q4_1,
            GgmlType::Q5_0,
            GgmlType::Q8_0,
            GgmlType::Q4_K,
            GgmlType::Q5_K,
            GgmlType::Q6_K,
        ] {
            let wq = quantize_weights(ty, &w, k);
            let Some(packed) = RepackedMatrix::new(ty, k, m, &wq).unwrap() else {
                eprintln!("no repacked {ty} kernels on this CPU");
                continue;
            };
            let batch = run_repacked(&ReversePool(3), &packed, ty, &x, k);
            let mut acts = QuantizedActs::default();
            acts.quantize(&SequentialPool, act_type(ty).unwrap(), &x, k)
                .unwrap();
            let rb = wq.len() / m;
            for t in 0..n {
                let alone = run_repacked(&SequentialPool, &packed, ty, &x[t * k..(t + 1) * k], k);
                assert_eq!(alone, batch[t * m..(t + 1) * m], "{ty} token {t}");
                for r in 0..m {
                    let want = tessera_quant::repack::reference::dot(
                        ty,
                        k,
                        &wq[r * rb..(r + 1) * rb],
                        acts.row(t),
                    );
                    assert_eq!(
                        batch[t * m + r].to_bits(),
                        want.to_bits(),
                        "{ty} row {r} token {t}"
                    );
                }
            }
        }
    }

    /// Matrices of one input in one job (repacked and file layouts mixed, row counts that end
    /// inside a group and inside a row block): each output equals its matrix run alone, for a
    /// decode token (one range per thread) and a batch (several ranges per thread).
    #[test]
    fn matrices_in_one_job_give_each_matrix_its_own_result() {
        let k = 256;
        // All take Q8_K activations; Q3_K has no repacked layout and keeps ggml's kernels.
        let shapes = [
            (GgmlType::Q4_K, 45),
            (GgmlType::Q3_K, 37),
            (GgmlType::Q6_K, 8),
            (GgmlType::Q4_K, 100),
        ];
        let wq: Vec<Vec<u8>> = shapes
            .iter()
            .enumerate()
            .map(|(i, &(ty, m))| quantize_weights(ty, &data(k * m, 20 + i as u32), k))
            .collect();
        let packed: Vec<Option<RepackedMatrix>> = shapes
            .iter()
            .zip(&wq)
            .map(|(&(ty, m), w)| RepackedMatrix::new(ty, k, m, w).unwrap())
            .collect();
        let mats: Vec<MatWeights> = shapes
            .iter()
            .zip(&wq)
            .zip(&packed)
            .map(|((&(ty, m), w), p)| match p {
                Some(p) => MatWeights::Repacked(p),
                None => MatWeights::File { ty, bytes: w, k, m },
            })
            .collect();
        for n in [1, STREAMING_TOKENS + 3] {
            let mut acts = QuantizedActs::default();
            acts.quantize(&SequentialPool, GgmlType::Q8_K, &data(k * n, 9), k)
                .unwrap();
            acts.ensure_sums();
            let mut outs: Vec<Vec<f32>> = mats
                .iter()
                .map(|m| vec![f32::NAN; n * m.n_rows()])
                .collect();
            let mut views: Vec<&mut [f32]> = outs.iter_mut().map(|o| &mut o[..]).collect();
            mul_mats(&ReversePool(3), &mats, &acts, &mut views);
            for (i, (mat, got)) in mats.iter().zip(&outs).enumerate() {
                let mut alone = vec![f32::NAN; n * mat.n_rows()];
                mul_mats(&SequentialPool, &[*mat], &acts, &mut [&mut alone]);
                assert_eq!(*got, alone, "n {n} matrix {i}");
            }
        }
    }

    #[test]
    fn a_token_gets_the_same_bits_alone_or_in_any_batch_and_any_split() {
        let (k, m) = (256, 50);
        let w = data(k * m, 3);
        let x = data(k * 7, 4);
        for ty in [
            GgmlType::Q4_1,
            GgmlType::Q8_0,
            GgmlType::MXFP4,
            GgmlType::Q4_K,
            GgmlType::Q6_K,
            GgmlType::F32,
        ] {
            let wq = quantize_weights(ty, &w, k);
            let batch = run(&ReversePool(3), ty, &wq, &x, k, m);
            for t in 0..7 {
                let alone = run(&SequentialPool, ty, &wq, &x[t * k..(t + 1) * k], k, m);
                assert_eq!(alone, batch[t * m..(t + 1) * m], "{ty} token {t}");
            }
        }
    }
}
