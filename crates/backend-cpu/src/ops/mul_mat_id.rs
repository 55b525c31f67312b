//! `Op::MulMatId`: the experts' matmul over the chosen experts only. A batch is grouped by
//! expert (each expert's matrix multiplies all the rows routed to it at once, as one
//! `mul_mat`), so an output element has `mul_mat`'s bits whatever the batch.

use tessera_gguf::GgmlType;

use super::mul_mat::{act_type, mul_mat_quantized, mul_mat_reference, QuantizedActs};
use tessera_core::error::EngineError;
use tessera_core::threading::ThreadPool;

/// Buffers kept across steps (decode steps allocate nothing once they have grown).
#[derive(Default)]
pub struct MulMatIdScratch {
    /// (token, slot) indices routed to the expert at hand.
    slots: Vec<usize>,
    rows: Vec<f32>,
    acts: QuantizedActs,
    out: Vec<f32>,
}

/// The shape of one [`mul_mat_id`] call.
pub struct MulMatIdShape {
    pub w_ty: GgmlType,
    /// Row length (the input's).
    pub k: usize,
    /// Rows per expert (the output's).
    pub m: usize,
    pub n_expert: usize,
    /// Input rows per token: 1 (shared by the chosen experts) or `n_used`.
    pub n_x: usize,
    pub n_used: usize,
}

/// `out[t][j] = W[route[t].id[j]] · x[t][j or 0]`: `w` holds the experts' matrices one after
/// another, `route` rows of `2 · n_used` (indices, then weights). `reference`: f32/f64 math
/// instead of ggml's quantized activations.
#[allow(clippy::too_many_arguments)]
pub fn mul_mat_id(
    pool: &dyn ThreadPool,
    s: &MulMatIdShape,
    w: &[u8],
    x: &[f32],
    route: &[f32],
    out: &mut [f32],
    scratch: &mut MulMatIdScratch,
    reference: bool,
) -> Result<(), EngineError> {
    let (k, m, n_used) = (s.k, s.m, s.n_used);
    let n_tokens = route.len() / (2 * n_used);
    let expert_bytes = w.len() / s.n_expert;
    let expert_of = |slot: usize| route[(slot / n_used) * 2 * n_used + slot % n_used];
    if (0..n_tokens * n_used).any(|slot| {
        let e = expert_of(slot);
        !(e >= 0.0 && (e as usize) < s.n_expert && e.fract() == 0.0)
    }) {
        return Err(EngineError::InvalidArgument(
            "mul_mat_id: a route names no expert of the weight".into(),
        ));
    }
    for e in 0..s.n_expert {
        scratch.slots.clear();
        scratch
            .slots
            .extend((0..n_tokens * n_used).filter(|&slot| expert_of(slot) as usize == e));
        if scratch.slots.is_empty() {
            continue;
        }
        scratch.rows.clear();
        for &slot in &scratch.slots {
            let row = if s.n_x == 1 { slot / n_used } else { slot };
            scratch.rows.extend_from_slice(&x[row * k..(row + 1) * k]);
        }
        let n = scratch.slots.len();
        scratch.out.resize(n * m, 0.0);
        let we = &w[e * expert_bytes..(e + 1) * expert_bytes];
        if reference {
            mul_mat_reference(s.w_ty, we, k, m, &scratch.rows, &mut scratch.out)?;
        } else {
            scratch
                .acts
                .quantize(pool, act_type(s.w_ty)?, &scratch.rows, k)?;
            mul_mat_quantized(pool, s.w_ty, we, k, m, &scratch.acts, &mut scratch.out);
        }
        for (i, &slot) in scratch.slots.iter().enumerate() {
            out[slot * m..(slot + 1) * m].copy_from_slice(&scratch.out[i * m..(i + 1) * m]);
        }
    }
    Ok(())
}
