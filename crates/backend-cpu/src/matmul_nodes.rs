//! The backend's `MulMat` nodes. Each input is quantized once for the weights' activation type,
//! weights are repacked on first use (`repacked.rs`), and consecutive matmuls of one input (q,
//! k and v; gate and up) run as one pool job (`ops::mul_mat::mul_mats`): a decode step's small
//! matmuls then cost one synchronisation per input, not one per matrix.

use std::sync::Arc;

use tessera_core::error::EngineError;
use tessera_core::graph::{Graph, Op};
use tessera_core::plan::Plan;
use tessera_core::threading::ThreadPool;
use tessera_core::weights::WeightStore;
use tessera_gguf::GgmlType;
use tessera_quant::repack::RepackedMatrix;

use crate::ops::mul_mat::{self, MatWeights, QuantizedActs, MAX_MATS};
use crate::repacked::RepackedWeights;

/// What the backend keeps for its matmul nodes from step to step.
pub struct MatmulNodes {
    acts: QuantizedActs,
    /// Which node's output (and to which type) `acts` holds during one graph run.
    acts_of: Option<(usize, GgmlType)>,
    pub repacked: RepackedWeights,
    /// The slow float reference instead (dequantized weights, f32 activations).
    pub reference: bool,
}

impl MatmulNodes {
    pub fn new() -> MatmulNodes {
        MatmulNodes {
            acts: QuantizedActs::default(),
            acts_of: None,
            repacked: RepackedWeights::new(),
            reference: false,
        }
    }

    /// Forgets the quantized activations (a new graph run's buffers hold new values).
    pub fn begin_graph(&mut self) {
        self.acts_of = None;
    }

    /// Runs `MulMat` node `first` and the `MulMat` nodes right after it that read the same
    /// input with weights of the same row length and activation type; returns how many ran.
    /// `slots` are the plan's buffers.
    pub fn run(
        &mut self,
        pool: &dyn ThreadPool,
        graph: &Graph,
        plan: &Plan,
        weights: &WeightStore,
        first: usize,
        slots: &mut [Vec<f32>],
    ) -> Result<usize, EngineError> {
        let Op::MulMat { w, x } = graph.nodes[first].op else {
            unreachable!("MatmulNodes::run on a node that is no MulMat");
        };
        let d = weights.desc(w);
        let (k, act_ty) = (d.ne[0], mul_mat::act_type(d.ty)?);
        let root = plan_root(graph, x.0 as usize);
        let (x_slot, x_len) = (plan.slot_of[root], graph.nodes[root].n_elements());
        if self.reference {
            let mut dst = std::mem::take(&mut slots[plan.slot_of[first]]);
            let n = graph.nodes[first].n_elements();
            let xs = &slots[x_slot][..x_len];
            let result =
                mul_mat::mul_mat_reference(d.ty, weights.bytes(w), k, d.ne[1], xs, &mut dst[..n]);
            slots[plan.slot_of[first]] = dst;
            return result.map(|()| 1);
        }
        if self.acts_of != Some((root, act_ty)) {
            self.acts
                .quantize(pool, act_ty, &slots[x_slot][..x_len], k)?;
            self.acts_of = Some((root, act_ty));
        }
        let end = run_end(graph, plan, weights, first, root, k, act_ty);

        // Fixed-size arrays (unused entries repeat or stay empty): a decode step allocates
        // nothing here.
        let count = end - first;
        let weight_of = |i: usize| match graph.nodes[i].op {
            Op::MulMat { w, .. } => w,
            _ => unreachable!("run_end takes MulMat nodes only"),
        };
        let mut packed: [Option<Arc<RepackedMatrix>>; MAX_MATS] = Default::default();
        for (j, p) in packed.iter_mut().take(count).enumerate() {
            *p = self.repacked.get(pool, weights, weight_of(first + j))?;
            if p.as_ref().is_some_and(|p| p.needs_act_sums()) {
                self.acts.ensure_sums();
            }
        }
        let mats: [MatWeights; MAX_MATS] = std::array::from_fn(|j| {
            let j = j.min(count - 1);
            match &packed[j] {
                Some(p) => MatWeights::Repacked(p),
                None => {
                    let w = weight_of(first + j);
                    let d = weights.desc(w);
                    MatWeights::File {
                        ty: d.ty,
                        bytes: weights.bytes(w),
                        k,
                        m: d.ne[1],
                    }
                }
            }
        });
        let mut bufs: [Vec<f32>; MAX_MATS] = Default::default();
        let mut lens = [0usize; MAX_MATS];
        for j in 0..count {
            bufs[j] = std::mem::take(&mut slots[plan.slot_of[first + j]]);
            lens[j] = graph.nodes[first + j].n_elements();
        }
        let mut views = bufs.iter_mut().zip(lens);
        let mut outs: [&mut [f32]; MAX_MATS] = std::array::from_fn(|_| {
            let (b, len) = views.next().expect("MAX_MATS buffers");
            &mut b[..len]
        });
        mul_mat::mul_mats(pool, &mats[..count], &self.acts, &mut outs[..count]);
        for (j, b) in bufs.into_iter().take(count).enumerate() {
            slots[plan.slot_of[first + j]] = b;
        }
        Ok(end - first)
    }
}

/// One past the last node of the job starting at `first`: `MulMat` nodes in a row (at most
/// [`MAX_MATS`]) on input `root`, rows of `k`, activation type `act_ty`, each with its own
/// output buffer. A node whose type has no activation type ends the job and reports that at
/// its own turn.
fn run_end(
    graph: &Graph,
    plan: &Plan,
    weights: &WeightStore,
    first: usize,
    root: usize,
    k: usize,
    act_ty: GgmlType,
) -> usize {
    let mut end = first + 1;
    while end < graph.nodes.len() && end - first < MAX_MATS {
        let Op::MulMat { w, x } = graph.nodes[end].op else {
            break;
        };
        let d = weights.desc(w);
        let same_input = plan_root(graph, x.0 as usize) == root
            && d.ne[0] == k
            && mul_mat::act_type(d.ty).ok() == Some(act_ty);
        // The plan gives nodes that are alive together their own slots; checked anyway,
        // since the outputs are written at the same time.
        let own_slot = (first..end).all(|i| plan.slot_of[i] != plan.slot_of[end])
            && plan.slot_of[end] != plan.slot_of[root];
        if !(same_input && own_slot) {
            break;
        }
        end += 1;
    }
    end
}

/// The node owning the storage of node `i` (through reshapes).
fn plan_root(graph: &Graph, mut i: usize) -> usize {
    while let Op::Reshape { x } = graph.nodes[i].op {
        i = x.0 as usize;
    }
    i
}
