//! The CPU backend: runs graphs node by node with the kernels in [`ops`], on the injected
//! thread pool, with buffers planned once per graph shape and reused from step to step.

use std::sync::Arc;
use std::task::Poll;

use tessera_gguf::GgmlType;

use crate::kv_cache::KvCache;
use crate::matmul_nodes::MatmulNodes;
use crate::ops;
use crate::ops::attention::AttentionKernel;
use crate::parallel::for_each_row_range as by_rows;
use crate::profile::OpProfile;
use crate::spin_pool::SpinPool;
use tessera_core::backend::{Backend, Batch, KvLayout};
use tessera_core::error::EngineError;
use tessera_core::graph::{Graph, Op};
use tessera_core::plan::Plan;
use tessera_core::threading::ThreadPool;
use tessera_core::weights::WeightStore;

pub struct CpuBackend {
    pool: Arc<dyn ThreadPool>,
    /// One KV cache per sequence.
    kv: Vec<KvCache>,
    slots: Vec<Vec<f32>>,
    /// The last graph run and its buffer plan, reused only for an equal graph.
    plan: Option<(Graph, Plan)>,
    matmuls: MatmulNodes,
    mul_mat_id_scratch: ops::mul_mat_id::MulMatIdScratch,
    trace: Option<TraceFn>,
    /// The attention kernel set by `set_attention_kernel` or `TESSERA_ATTENTION`; `None`
    /// chooses per model ([`CpuBackend::attention_kernel`]).
    attention: Option<AttentionKernel>,
    /// Wall time per op (`TESSERA_CPU_PROFILE`, development only).
    profile: Option<OpProfile>,
}

/// Called after every node with its index, the node and its output (debugging aid, like
/// ggml's eval callback).
pub type TraceFn = Box<dyn FnMut(usize, &tessera_core::graph::Node, &[f32]) + Send>;

impl CpuBackend {
    pub fn new(pool: Arc<dyn ThreadPool>) -> CpuBackend {
        CpuBackend {
            pool,
            kv: vec![KvCache::default()],
            slots: Vec::new(),
            plan: None,
            matmuls: MatmulNodes::new(),
            mul_mat_id_scratch: Default::default(),
            trace: None,
            attention: match std::env::var("TESSERA_ATTENTION").as_deref() {
                Ok("ggml") => Some(AttentionKernel::Ggml),
                Ok("f32") => Some(AttentionKernel::F32Tiled),
                _ => None,
            },
            profile: OpProfile::from_env(),
        }
    }

    /// The backend on a [`SpinPool`] of `n_threads` std threads (the caller included; see
    /// [`available_threads`](crate::available_threads)): what a native program wants.
    pub fn with_threads(n_threads: usize) -> Result<CpuBackend, EngineError> {
        Ok(CpuBackend::new(Arc::new(SpinPool::on_std_threads(
            n_threads,
        )?)))
    }

    /// Forces an attention kernel, or (`None`) lets [`CpuBackend::attention_kernel`] choose.
    pub fn set_attention_kernel(&mut self, kernel: Option<AttentionKernel>) {
        self.attention = kernel;
    }

    /// The attention kernel for a model: the f32 tiled one where its layers' matmuls run the
    /// repacked kernels (its logits are not the reference build's bits anyway, and emulating
    /// f16 arithmetic costs most of a prompt's attention time), else ggml's f16 arithmetic,
    /// which keeps a model on ggml's kernels bit-identical to llama.cpp's reference.
    pub fn attention_kernel(&self, weights: &WeightStore) -> AttentionKernel {
        self.attention
            .unwrap_or(if self.matmuls.repacked.repacks_layers(weights) {
                AttentionKernel::F32Tiled
            } else {
                AttentionKernel::Ggml
            })
    }

    /// Uses the slow float reference for matmuls (dequantized weights, f32 activations).
    pub fn set_reference_matmul(&mut self, on: bool) {
        self.matmuls.reference = on;
    }

    /// Repacks quantized weights into 8-row groups on first use (the default; see
    /// `repacked.rs`), or keeps every weight in its file layout with ggml's kernels.
    pub fn set_repack(&mut self, on: bool) {
        self.matmuls.repacked.set_enabled(on);
    }

    /// Installs a callback that sees every node's output.
    pub fn set_trace(&mut self, trace: Option<TraceFn>) {
        self.trace = trace;
    }

    /// Sequence `seq`'s KV cache.
    pub fn kv_cache(&self, seq: usize) -> &KvCache {
        &self.kv[seq]
    }
}

/// Elements of node `i`'s output.
fn len_of(graph: &Graph, i: usize) -> usize {
    graph.nodes[i].n_elements()
}

impl Backend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn init_kv(&mut self, layout: &KvLayout) -> Result<(), EngineError> {
        self.kv.clear();
        for _ in 0..layout.n_seq.max(1) {
            self.kv.push(KvCache::new(layout)?);
        }
        Ok(())
    }

    fn kv_n_ctx(&self) -> usize {
        self.kv[0].n_ctx
    }

    fn kv_n_seq(&self) -> usize {
        self.kv.len()
    }

    /// Rope, the KV store and attention run per segment, every other kernel on all rows.
    fn batches_sequences(&self) -> bool {
        true
    }

    fn kv_shift_checked(
        &mut self,
        weights: &WeightStore,
        seq: usize,
        n_past: usize,
        n_keep: usize,
        n_discard: usize,
    ) -> Result<(), EngineError> {
        self.kv[seq].shift(n_past, n_keep, n_discard, |f| f32_weight(weights, f))
    }

    fn compute(
        &mut self,
        graph: &Graph,
        batch: &Batch,
        weights: &WeightStore,
        out: &mut [f32],
    ) -> Result<Poll<()>, EngineError> {
        if !weights.has_bytes() {
            return Err(EngineError::WeightsNotInMemory);
        }
        self.check_batch(graph, batch, weights)?;
        if self
            .plan
            .as_ref()
            .is_none_or(|(planned, _)| planned != graph)
        {
            let plan = Plan::new(graph);
            self.slots.resize_with(plan.slot_len.len(), Vec::new);
            for (s, &len) in self.slots.iter_mut().zip(&plan.slot_len) {
                if s.len() < len {
                    s.resize(len, 0.0);
                }
            }
            self.plan = Some((graph.clone(), plan));
        }
        let plan = &self.plan.as_ref().expect("plan set above").1;
        self.matmuls.begin_graph();
        let attention = self.attention_kernel(weights);
        let pool: &dyn ThreadPool = &*self.pool;

        let mut i = 0;
        while i < graph.nodes.len() {
            let node = &graph.nodes[i];
            if matches!(node.op, Op::Reshape { .. }) {
                i += 1;
                continue;
            }
            let started = self.profile.is_some().then(OpProfile::start);
            if let Op::MulMat { .. } = node.op {
                let count = self
                    .matmuls
                    .run(pool, graph, plan, weights, i, &mut self.slots)?;
                if let (Some(p), Some(t)) = (self.profile.as_mut(), started) {
                    p.record(node.op.name(), t);
                }
                if let Some(trace) = self.trace.as_mut() {
                    for j in i..i + count {
                        let out = &self.slots[plan.slot_of[j]][..len_of(graph, j)];
                        trace(j, &graph.nodes[j], out);
                    }
                }
                i += count;
                continue;
            }
            let n = len_of(graph, i);
            let slot = plan.slot_of[i];
            let mut dst_buf = std::mem::take(&mut self.slots[slot]);
            let dst = &mut dst_buf[..n];
            let slots = &self.slots;
            let input = |id: tessera_core::graph::NodeId| -> &[f32] {
                let j = id.0 as usize;
                &slots[plan.slot_of[j]][..len_of(graph, j)]
            };
            let result: Result<(), EngineError> = (|| {
                match node.op {
                    Op::GetRows { table } => {
                        let d = weights.desc(table);
                        ops::get_rows::get_rows(
                            d.ty,
                            weights.bytes(table),
                            d.ne[0],
                            d.ne[1],
                            batch.tokens,
                            dst,
                        )?;
                    }
                    Op::Reshape { .. } | Op::MulMat { .. } => unreachable!("handled above"),
                    Op::RmsNorm { x, eps } => {
                        let (x, w) = (input(x), node.ne[0]);
                        by_rows(pool, dst, w, &|r, dst| {
                            ops::rms_norm::rms_norm(&x[r.start * w..r.end * w], dst, w, eps)
                        });
                    }
                    Op::MulWeight { x, w } => {
                        let (x, wb) = (input(x), f32_weight(weights, w)?);
                        let w = wb.len();
                        by_rows(pool, dst, w, &|r, dst| {
                            ops::mul_weight::mul_weight(&x[r.start * w..r.end * w], wb, dst)
                        });
                    }
                    Op::AddWeight { x, w } => {
                        let (x, wb) = (input(x), f32_weight(weights, w)?);
                        let w = wb.len();
                        by_rows(pool, dst, w, &|r, dst| {
                            ops::add_weight::add_weight(&x[r.start * w..r.end * w], wb, dst)
                        });
                    }
                    Op::Add { a, b } => {
                        let (a, b, w) = (input(a), input(b), node.ne[0]);
                        by_rows(pool, dst, w, &|r, dst| {
                            let r = r.start * w..r.end * w;
                            ops::add::add(&a[r.clone()], &b[r], dst)
                        });
                    }
                    Op::Scale { x, s } => {
                        let (x, w) = (input(x), node.ne[0]);
                        by_rows(pool, dst, w, &|r, dst| {
                            ops::scale::scale(&x[r.start * w..r.end * w], s, dst)
                        });
                    }
                    Op::Rope { x, params } => {
                        let ne = node.ne;
                        let factors = match params.freq_factors {
                            Some(f) => Some(f32_weight(weights, f)?),
                            None => None,
                        };
                        // Each sequence's rows at its own positions.
                        let (x, per_token) = (input(x), ne[0] * ne[1]);
                        for (row0, seg) in batch.segment_rows() {
                            let rows = row0 * per_token..(row0 + seg.len) * per_token;
                            let x = &x[rows.clone()];
                            by_rows(pool, &mut dst[rows], per_token, &|r, dst| {
                                ops::rope::rope(
                                    &x[r.start * per_token..r.end * per_token],
                                    dst,
                                    ne[0],
                                    ne[1],
                                    seg.pos0 + r.start,
                                    &params,
                                    factors,
                                )
                            });
                        }
                    }
                    Op::Attention { q, k, v, params } => {
                        // Each sequence's keys and values go to its own cache.
                        let n_tokens = batch.tokens.len();
                        let (ks, vs) = (input(k).len() / n_tokens, input(v).len() / n_tokens);
                        for (row0, seg) in batch.segment_rows() {
                            let rows = row0..row0 + seg.len;
                            self.kv[seg.seq].store(
                                params.layer,
                                seg.pos0,
                                &input(k)[rows.start * ks..rows.end * ks],
                                &input(v)[rows.start * vs..rows.end * vs],
                            );
                        }
                        let sinks = match params.sinks {
                            Some(w) => Some(f32_weight(weights, w)?),
                            None => None,
                        };
                        let segments: Vec<_> = batch
                            .segment_rows()
                            .map(|(row0, seg)| ops::attention::AttentionSegment {
                                kv: &self.kv[seg.seq].layers[params.layer],
                                row0,
                                n_tokens: seg.len,
                                pos0: seg.pos0,
                            })
                            .collect();
                        ops::attention::attention_segments(
                            pool,
                            input(q),
                            &segments,
                            &params,
                            sinks,
                            attention,
                            dst,
                        );
                    }
                    Op::Swiglu { gate, up } | Op::Geglu { gate, up } | Op::Reglu { gate, up } => {
                        let f: fn(&[f32], &[f32], &mut [f32]) = match node.op {
                            Op::Swiglu { .. } => ops::swiglu::swiglu,
                            Op::Geglu { .. } => ops::geglu::geglu,
                            _ => ops::reglu::reglu,
                        };
                        glu(pool, input(gate), input(up), node.ne[0], dst, f)
                    }
                    Op::SwigluOai {
                        gate,
                        up,
                        alpha,
                        limit,
                    } => glu(pool, input(gate), input(up), node.ne[0], dst, |g, u, o| {
                        ops::swiglu_oai::swiglu_oai(g, u, alpha, limit, o)
                    }),
                    Op::Activation { x, act } => {
                        let (x, w) = (input(x), node.ne[0]);
                        by_rows(pool, dst, w, &|r, dst| {
                            ops::activation::activation(&x[r.start * w..r.end * w], act, dst)
                        });
                    }
                    Op::Softcap { x, cap } => {
                        let (x, w) = (input(x), node.ne[0]);
                        by_rows(pool, dst, w, &|r, dst| {
                            ops::softcap::softcap(&x[r.start * w..r.end * w], cap, dst)
                        });
                    }
                    Op::MoeRoute { logits, params } => {
                        let bias = match params.selection_bias {
                            Some(b) => Some(f32_weight(weights, b)?),
                            None => None,
                        };
                        let n_expert = graph.node(logits).ne[0];
                        ops::moe_route::moe_route(input(logits), n_expert, &params, bias, dst);
                    }
                    Op::MulMatId { w, x, route } => {
                        let d = weights.desc(w);
                        let shape = ops::mul_mat_id::MulMatIdShape {
                            w_ty: d.ty,
                            k: d.ne[0],
                            m: d.ne[1],
                            n_expert: d.ne[2],
                            n_x: graph.node(x).ne[1],
                            n_used: node.ne[1],
                        };
                        ops::mul_mat_id::mul_mat_id(
                            pool,
                            &shape,
                            weights.bytes(w),
                            input(x),
                            input(route),
                            dst,
                            &mut self.mul_mat_id_scratch,
                            self.matmuls.reference,
                        )?;
                    }
                    Op::AddId { x, bias, route } => ops::add_id::add_id(
                        input(x),
                        f32_weight(weights, bias)?,
                        input(route),
                        node.ne[0],
                        node.ne[1],
                        dst,
                    ),
                    Op::MoeSum { x, route } => ops::moe_sum::moe_sum(
                        input(x),
                        input(route),
                        node.ne[0],
                        graph.node(x).ne[1],
                        dst,
                    ),
                    Op::Slice { x, offset, .. } => {
                        ops::slice::slice(input(x), graph.node(x).ne[0], offset, dst)
                    }
                    Op::OutputRows { x } => {
                        ops::output_rows::output_rows(input(x), node.ne[0], batch.output_rows, dst)
                    }
                }
                Ok(())
            })();
            self.slots[slot] = dst_buf;
            result?;
            if let (Some(p), Some(t)) = (self.profile.as_mut(), started) {
                p.record(node.op.name(), t);
            }
            if let Some(trace) = self.trace.as_mut() {
                trace(i, node, &self.slots[slot][..n]);
            }
            i += 1;
        }
        let o = graph.output.0 as usize;
        let n = len_of(graph, o);
        out[..n].copy_from_slice(&self.slots[plan.slot_of[o]][..n]);
        if let Some(p) = self.profile.as_mut() {
            p.graph_run();
        }
        Ok(Poll::Ready(()))
    }
}

/// A gated activation (`f(gate, up, out)`, element-wise) over rows of `width`, split like
/// [`by_rows`].
fn glu(
    pool: &dyn ThreadPool,
    gate: &[f32],
    up: &[f32],
    width: usize,
    dst: &mut [f32],
    f: impl Fn(&[f32], &[f32], &mut [f32]) + Sync,
) {
    by_rows(pool, dst, width, &|r, dst| {
        let r = r.start * width..r.end * width;
        f(&gate[r.clone()], &up[r], dst)
    });
}

/// A weight that must be f32 (norm weights), viewed as floats.
fn f32_weight(
    weights: &WeightStore,
    w: tessera_core::weights::WeightId,
) -> Result<&[f32], EngineError> {
    let d = weights.desc(w);
    if d.ty != GgmlType::F32 {
        return Err(EngineError::UnsupportedType {
            name: weights.get(w).name.clone(),
            ty: d.ty,
        });
    }
    bytemuck::try_cast_slice(weights.bytes(w)).map_err(|_| EngineError::MissingTensorData {
        name: weights.get(w).name.clone(),
    })
}
