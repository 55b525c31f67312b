//! Weights repacked into 8-row groups for the CPU kernels (`tessera_quant::repack`), made (by the
//! backend's threads) on a weight's first matmul and kept for the backend's life.
//!
//! Q4_1's kernels compute ggml's own vec_dot on its repacked layout (llama.cpp has no
//! repacked Q4_1, so that is its arithmetic on Q4_1 models: SmolLM2's fixtures stay exact);
//! they are x86 only, so in wasm Q4_1 keeps its file layout and ggml's kernels.
//!
//! Once a weight is repacked its file pages are released (`WeightStore::release_file_pages`),
//! so the process holds one copy of each weight. A table the graph also reads row by row (a
//! tied token embedding, `GetRows`) is repacked too: the output matmul reads all of it every
//! step, `GetRows` only a few rows, which fault back in from the file.
//!
//! In wasm32 (SIMD128 kernels) the same happens for models of up to 1 GiB of weights; there
//! the file's bytes stay in memory, so the copy costs the weights' size once more.
//!
//! `TESSERA_REPACK=0` keeps every weight in its file layout (ggml's kernels), for side-by-side
//! measurements.

use std::sync::Arc;

use tessera_core::error::EngineError;
use tessera_core::threading::ThreadPool;
use tessera_core::weights::{WeightId, WeightStore};
use tessera_gguf::GgmlType;
use tessera_quant::repack::{Kind, RepackedMatrix};

#[derive(Default)]
pub struct RepackedWeights {
    /// Indexed by weight id: where its file bytes were (a different store gets a new entry)
    /// and the repacked matrix, `None` for a weight that keeps its file layout. A vector, not
    /// a map: every matmul looks its weight up (a map's SipHash lookups showed in a decode
    /// step's profile).
    map: Vec<Option<(usize, Option<Arc<RepackedMatrix>>)>>,
    disabled: bool,
}

impl RepackedWeights {
    pub fn new() -> RepackedWeights {
        RepackedWeights {
            map: Vec::new(),
            disabled: std::env::var("TESSERA_REPACK").is_ok_and(|v| v == "0"),
        }
    }

    /// Turns repacking off (every weight in its file layout, ggml's kernels) or back on.
    pub fn set_enabled(&mut self, on: bool) {
        self.disabled = !on;
        self.map.clear();
    }

    /// Whether weights of type `ty` get repacked (a layout and kernels for this CPU exist,
    /// repacking is on).
    pub fn repacks(&self, ty: GgmlType) -> bool {
        !self.disabled && Kind::of(ty).is_some_and(Kind::has_kernels_here)
    }

    /// Whether some layer weight (`blk.*`) of `weights` gets repacked into a layout whose
    /// kernels do not compute ggml's bits: the model's logits then come from the repacked
    /// kernels' arithmetic, not the reference build's.
    pub fn repacks_layers(&self, weights: &WeightStore) -> bool {
        memory_allows(weights)
            && (0..weights.len()).any(|i| {
                let w = weights.get(WeightId(i as u32));
                w.name.starts_with("blk.")
                    && self.repacks(w.desc.ty)
                    && Kind::of(w.desc.ty).is_some_and(|kind| !kind.keeps_ggml_bits())
            })
    }

    /// Weight `w`'s repacked matrix, made now on its first use; `None` when it keeps the
    /// file layout (no layout or kernels for its type here, repacking off).
    pub fn get(
        &mut self,
        pool: &dyn ThreadPool,
        weights: &WeightStore,
        w: WeightId,
    ) -> Result<Option<Arc<RepackedMatrix>>, EngineError> {
        if self.disabled {
            return Ok(None);
        }
        let bytes = weights.bytes(w);
        let key = bytes.as_ptr() as usize;
        if let Some(Some((k, m))) = self.map.get(w.0 as usize) {
            if *k == key {
                return Ok(m.clone());
            }
        }
        let d = weights.desc(w);
        let matrix = if !self.repacks(d.ty) || !memory_allows(weights) {
            None
        } else {
            RepackedMatrix::new_parallel(d.ty, d.ne[0], d.ne[1], bytes, &|n, task| {
                pool.run(n, task)
            })
            .map_err(|e| EngineError::InvalidArgument(format!("{}: {e}", weights.get(w).name)))?
            .map(Arc::new)
        };
        if matrix.is_some() {
            // The copy is what the matmuls read; a `GetRows` on the same table (tied
            // embeddings) faults back in only the pages of the rows it reads.
            weights.release_file_pages(w);
        }
        let i = w.0 as usize;
        if self.map.len() <= i {
            self.map.resize(i + 1, None);
        }
        self.map[i] = Some((key, matrix.clone()));
        Ok(matrix)
    }
}

/// Largest model (bytes of weights) repacked in wasm32, where the file's bytes stay in memory
/// beside the copy (there are no file pages to release) and a memory holds at most 4 GiB.
#[cfg(target_arch = "wasm32")]
const WASM_REPACK_LIMIT: usize = 1 << 30;

/// Whether holding a repacked copy of `weights` is affordable here.
fn memory_allows(weights: &WeightStore) -> bool {
    #[cfg(target_arch = "wasm32")]
    {
        weights.total_bytes() <= WASM_REPACK_LIMIT
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = weights;
        true
    }
}
