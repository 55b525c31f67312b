//! `Op::MulMatId`: the experts' matmul over the chosen experts only. The rows routed to each
//! expert are gathered (experts in order), quantized in one pass, and all the chosen experts'
//! weight rows are split over the threads in one dispatch: a decode step's few small expert
//! matmuls cost one synchronisation, not one per expert. Each output element is one `gemm`
//! element, i.e. `vec_dot`'s bits, whatever the batch or the thread count.

use tessera_gguf::GgmlType;
use tessera_quant::vec_dot::gemm;

use super::mul_mat::{
    act_type, call_rows, matmul_tasks, mul_mat_reference, QuantizedActs, ROW_BLOCK,
};
use crate::parallel::{for_each_chunk, SharedOut};
use tessera_core::error::EngineError;
use tessera_core::threading::ThreadPool;

/// Buffers kept across steps (decode steps allocate nothing once they have grown).
#[derive(Default)]
pub struct MulMatIdScratch {
    /// (token, slot) indices, grouped by the expert they are routed to.
    slots: Vec<usize>,
    /// Per chosen expert: (expert, first index into `slots`, count).
    groups: Vec<(usize, usize, usize)>,
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
    let MulMatIdScratch {
        slots,
        groups,
        rows,
        acts,
        out: tmp,
    } = scratch;
    slots.clear();
    groups.clear();
    for e in 0..s.n_expert {
        let first = slots.len();
        slots.extend((0..n_tokens * n_used).filter(|&slot| expert_of(slot) as usize == e));
        if slots.len() > first {
            groups.push((e, first, slots.len() - first));
        }
    }
    rows.clear();
    for &slot in slots.iter() {
        let row = if s.n_x == 1 { slot / n_used } else { slot };
        rows.extend_from_slice(&x[row * k..(row + 1) * k]);
    }
    let expert = |e: usize| &w[e * expert_bytes..(e + 1) * expert_bytes];
    if reference {
        for &(e, first, n) in groups.iter() {
            tmp.resize(n * m, 0.0);
            mul_mat_reference(
                s.w_ty,
                expert(e),
                k,
                m,
                &rows[first * k..(first + n) * k],
                tmp,
            )?;
            for (i, &slot) in slots[first..first + n].iter().enumerate() {
                out[slot * m..(slot + 1) * m].copy_from_slice(&tmp[i * m..(i + 1) * m]);
            }
        }
        return Ok(());
    }
    acts.quantize(pool, act_type(s.w_ty)?, rows, k)?;
    let (act_bytes, rb) = (acts.bytes(), acts.row_bytes);
    let w_row_bytes = expert_bytes / m;
    let (slots, groups) = (&slots[..], &groups[..]);
    let shared = SharedOut::new(out);
    // Work items: the chosen experts' weight rows, expert after expert.
    let n_items = groups.len() * m;
    let n_tasks = matmul_tasks(pool, n_tokens, n_items.div_ceil(ROW_BLOCK));
    for_each_chunk(pool, n_items, n_tasks, ROW_BLOCK, &|range| {
        TILE.with(|tile| {
            let mut tile = tile.borrow_mut();
            let mut i = range.start;
            while i < range.end {
                let (e, first, n) = groups[i / m];
                let r0 = i % m;
                let r1 = (r0 + (range.end - i)).min(m).min(r0 + call_rows(n));
                let nr = r1 - r0;
                if tile.len() < nr * n {
                    tile.resize(nr * n, 0.0);
                }
                let acts = &act_bytes[first * rb..(first + n) * rb];
                let we = &expert(e)[r0 * w_row_bytes..r1 * w_row_bytes];
                gemm(s.w_ty, k, we, nr, acts, n, &mut tile[..nr * n]);
                for (t, &slot) in slots[first..first + n].iter().enumerate() {
                    shared
                        .slice(slot * m + r0, nr)
                        .copy_from_slice(&tile[t * nr..(t + 1) * nr]);
                }
                i += nr;
            }
        });
    });
    Ok(())
}

thread_local! {
    /// Per-thread output tile (reused: decode steps allocate nothing).
    static TILE: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::mul_mat::mul_mat_quantized;
    use crate::ops::test_rng::next;
    use crate::ops::ReversePool;
    use tessera_core::threading::SequentialPool;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn values(n: usize, state: &mut u64) -> Vec<f32> {
        (0..n)
            .map(|_| (next(state) % 2001) as f32 / 1000.0 - 1.0)
            .collect()
    }

    /// Each chosen expert's output is that expert's own `mul_mat` of the token's row, bit for
    /// bit, with shared and per-expert inputs, on any split of the work; the expert rows (40)
    /// are not a multiple of the row block, so work items straddle two experts.
    #[test]
    fn equals_each_chosen_experts_own_matmul() {
        let (k, m, n_expert, n_used, n_tokens) = (64, 40, 4, 2, 3);
        let mut state = 7;
        for ty in [GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::F16] {
            let rb = tessera_quant::row_bytes(ty, k).unwrap();
            let wf = values(k * m * n_expert, &mut state);
            let mut w = vec![0u8; rb * m * n_expert];
            for (src, dst) in wf.chunks(k).zip(w.chunks_mut(rb)) {
                tessera_quant::quantize_row(ty, src, dst).unwrap();
            }
            // Experts (2, 0), (2, 3), (1, 2): expert 2 serves every token.
            let route = [
                2.0, 0.0, 0.6, 0.4, 2.0, 3.0, 0.5, 0.5, 1.0, 2.0, 0.7, 0.3f32,
            ];
            for n_x in [1, n_used] {
                let x = values(k * n_x * n_tokens, &mut state);
                let shape = MulMatIdShape {
                    w_ty: ty,
                    k,
                    m,
                    n_expert,
                    n_x,
                    n_used,
                };
                for pool in [&SequentialPool as &dyn ThreadPool, &ReversePool(3)] {
                    let mut out = vec![0.0f32; m * n_used * n_tokens];
                    let mut scratch = MulMatIdScratch::default();
                    mul_mat_id(pool, &shape, &w, &x, &route, &mut out, &mut scratch, false)
                        .unwrap();
                    for slot in 0..n_tokens * n_used {
                        let e = route[(slot / n_used) * 2 * n_used + slot % n_used] as usize;
                        let row = if n_x == 1 { slot / n_used } else { slot };
                        let mut acts = QuantizedActs::default();
                        acts.quantize(
                            &SequentialPool,
                            act_type(ty).unwrap(),
                            &x[row * k..(row + 1) * k],
                            k,
                        )
                        .unwrap();
                        let mut want = vec![0.0f32; m];
                        let we = &w[e * m * rb..(e + 1) * m * rb];
                        mul_mat_quantized(&SequentialPool, ty, we, k, m, &acts, &mut want);
                        assert_eq!(
                            &out[slot * m..(slot + 1) * m],
                            &want[..],
                            "{ty} n_x {n_x} slot {slot}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_route_to_no_expert_is_an_error() {
        let shape = MulMatIdShape {
            w_ty: GgmlType::F32,
            k: 4,
            m: 2,
            n_expert: 2,
            n_x: 1,
            n_used: 1,
        };
        let w = vec![0u8; 4 * 2 * 2 * 4];
        let mut out = vec![0.0f32; 2];
        let mut scratch = MulMatIdScratch::default();
        for bad in [2.0f32, -1.0, 0.5, f32::NAN] {
            let r = mul_mat_id(
                &SequentialPool,
                &shape,
                &w,
                &[0.0; 4],
                &[bad, 1.0],
                &mut out,
                &mut scratch,
                false,
            );
            assert!(r.is_err(), "{bad}");
        }
    }
}
