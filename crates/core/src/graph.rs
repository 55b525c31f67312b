//! The graph IR: what one forward step over a micro-batch computes, as a list of nodes in
//! execution order. Every node produces one f32 activation tensor (ggml shape order).
//!
//! A graph depends only on the batch's shape (number of tokens, number of outputs), not on
//! token values or positions, so a backend may reuse it (and its buffer plan) from step to step.
//! Per-step inputs (token ids, positions, which rows to output) come with the batch.

use tessera_gguf::GgmlType;

use crate::error::EngineError;
use crate::tensor::Ne;
use crate::weights::{WeightId, WeightStore};

/// Index of a node in its graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NodeId(pub u32);

/// How rope pairs the dimensions it rotates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeMode {
    /// Adjacent pairs (2i, 2i+1): llama.
    Normal,
    /// Pairs (i, i + n_dims/2): GPT-NeoX, gemma, qwen.
    Neox,
}

#[derive(Clone, Copy, Debug)]
pub struct RopeParams {
    /// Rotated dimensions at the start of each head (the rest pass through).
    pub n_dims: usize,
    pub mode: RopeMode,
    pub freq_base: f32,
    pub freq_scale: f32,
    /// Per-pair divisors of the angle (`rope_freqs.weight`: Llama 3's rope scaling; Phi-3's
    /// LongRoPE factors), f32 of `n_dims / 2` values.
    pub freq_factors: Option<WeightId>,
    /// Multiplies the cosines and sines (`rope.scaling.attn_factor`, 1 for most models).
    pub attn_factor: f32,
    /// YaRN's blend of interpolated and extrapolated angles, where the file asks for it.
    pub yarn: Option<Yarn>,
}

/// YaRN rope scaling as ggml applies it: pair `i`'s angle is the interpolated one
/// (`freq_scale · θ`) blended with the extrapolated one (`θ`) by
/// `ext_factor · ramp(i)`, the ramp falling from 1 to 0 between the correction dims.
#[derive(Clone, Copy, Debug)]
pub struct Yarn {
    pub ext_factor: f32,
    pub corr_dims: [f32; 2],
}

impl Yarn {
    /// ggml's `ggml_rope_yarn_corr_dims` for a rope of `n_dims` trained on `n_ctx_orig`
    /// positions, with llama.cpp's default betas (32 and 1).
    pub fn new(n_dims: usize, n_ctx_orig: usize, freq_base: f32) -> Yarn {
        let dim = |n_rot: f32| {
            n_dims as f32 * (n_ctx_orig as f32 / (n_rot * 2.0 * std::f32::consts::PI)).ln()
                / (2.0 * freq_base.ln())
        };
        let start = dim(32.0).floor();
        let end = dim(1.0).ceil();
        Yarn {
            ext_factor: 1.0,
            corr_dims: [start.max(0.0), end.min(n_dims as f32 - 1.0)],
        }
    }

    /// The weight of the extrapolated angle for pair `i` (ggml's `rope_yarn_ramp` times the
    /// extrapolation factor).
    pub fn mix(&self, i: usize) -> f32 {
        let [low, high] = self.corr_dims;
        let y = (i as f32 - low) / (high - low).max(0.001);
        (1.0 - y.clamp(0.0, 1.0)) * self.ext_factor
    }
}

impl RopeParams {
    /// The ratio between consecutive pairs' angles, `freq_base^(-2/n_dims)`, by `powf` in f32
    /// as ggml computes it.
    pub fn theta_scale(&self) -> f32 {
        self.freq_base.powf(-2.0 / self.n_dims as f32)
    }

    /// What multiplies the cosines and sines: the attention factor, and with YaRN also
    /// `1 + 0.1 ln(1 / freq_scale)` (ggml's `rope_yarn`, the sum fused as GCC compiles it).
    pub fn mscale(&self) -> f32 {
        match self.yarn {
            Some(_) => self.attn_factor * 0.1f32.mul_add((1.0 / self.freq_scale).ln(), 1.0),
            None => self.attn_factor,
        }
    }

    /// The angle of pair `i` for `theta` (position · theta_scale^i): divided by the pair's
    /// frequency `factor`, scaled, and with YaRN blended with the unscaled one.
    pub fn angle(&self, theta: f32, factor: f32, i: usize) -> f32 {
        let extrap = theta / factor;
        let interp = self.freq_scale * extrap;
        match self.yarn {
            Some(y) => {
                let mix = y.mix(i);
                interp.mul_add(1.0 - mix, extrap * mix)
            }
            None => interp,
        }
    }
}

/// One attention layer: causal, grouped-query, over the f16 KV cache of layer `layer`.
#[derive(Clone, Copy, Debug)]
pub struct AttentionParams {
    pub layer: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    /// Multiplies q·k.
    pub scale: f32,
    /// Sliding window: a query at position p sees keys at p - window < j <= p.
    pub window: Option<usize>,
    /// `cap * tanh(s / cap)` on the scores when set.
    pub softcap: Option<f32>,
    /// gpt-oss's attention sinks: one learned logit per query head (f32, `[n_head]`) that
    /// joins the softmax's denominator but has no value.
    pub sinks: Option<WeightId>,
}

/// The activation of a gateless feed-forward ([`Op::Activation`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `x / (1 + e^-x)`
    Silu,
    /// GELU (tanh approximation, ggml's f16 table).
    Gelu,
    /// `max(x, 0)`
    Relu,
}

/// How a mixture-of-experts router turns its logits into expert probabilities.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gating {
    Softmax,
    Sigmoid,
    /// Top-k on the raw logits, then a softmax over the k chosen (gpt-oss's "delayed softmax").
    SoftmaxAfterTopK,
}

/// A mixture-of-experts router: per token, `n_used` experts and their weights.
#[derive(Clone, Copy, Debug)]
pub struct MoeRouteParams {
    pub n_used: usize,
    pub gating: Gating,
    /// Added to the probabilities to choose the experts (not to their weights): DeepSeek V3's
    /// `exp_probs_b`; f32 of n_expert values.
    pub selection_bias: Option<WeightId>,
    /// The k weights divided by their sum (clamped to at least 2^-14, as llama.cpp).
    pub normalize: bool,
    /// Multiplies the weights (1: none).
    pub scale: f32,
}

impl PartialEq for MoeRouteParams {
    fn eq(&self, o: &MoeRouteParams) -> bool {
        self.n_used == o.n_used
            && self.gating == o.gating
            && self.selection_bias == o.selection_bias
            && self.normalize == o.normalize
            && same_bits(self.scale, o.scale)
    }
}
impl Eq for MoeRouteParams {}

#[derive(Clone, Debug)]
pub enum Op {
    /// Rows of `table` for the batch's token ids → `[n_embd, n_tokens]`.
    GetRows {
        table: WeightId,
    },
    /// Same bytes, new shape (a view: no copy).
    Reshape {
        x: NodeId,
    },
    /// Each row divided by its root mean square (ggml_rms_norm).
    RmsNorm {
        x: NodeId,
        eps: f32,
    },
    /// Element-wise product with a weight vector broadcast over rows (norm weights).
    MulWeight {
        x: NodeId,
        w: WeightId,
    },
    /// Element-wise sum with a weight vector broadcast over rows (biases).
    AddWeight {
        x: NodeId,
        w: WeightId,
    },
    Add {
        a: NodeId,
        b: NodeId,
    },
    Scale {
        x: NodeId,
        s: f32,
    },
    /// `x · wᵀ`: `w` is `[k, m]` (m rows of length k), `x` is `[k, n]` → `[m, n]`.
    MulMat {
        w: WeightId,
        x: NodeId,
    },
    /// Rotary embedding of `x` viewed as `[head_dim, n_heads, n_tokens]` at the batch positions.
    Rope {
        x: NodeId,
        params: RopeParams,
    },
    /// Stores k and v in the KV cache at the batch positions, then attends:
    /// q `[head_dim, n_head, T]` → `[head_dim * n_head, T]`.
    Attention {
        q: NodeId,
        k: NodeId,
        v: NodeId,
        params: AttentionParams,
    },
    /// `silu(gate) * up`.
    Swiglu {
        gate: NodeId,
        up: NodeId,
    },
    /// `gelu_tanh(gate) * up`.
    Geglu {
        gate: NodeId,
        up: NodeId,
    },
    /// `relu(gate) * up`.
    Reglu {
        gate: NodeId,
        up: NodeId,
    },
    /// gpt-oss's gated activation: with `g = min(gate, limit)` and `u = clamp(up, ±limit)`,
    /// `g · sigmoid(alpha · g) · (u + 1)`.
    SwigluOai {
        gate: NodeId,
        up: NodeId,
        alpha: f32,
        limit: f32,
    },
    /// The activation of a gateless feed-forward, element by element.
    Activation {
        x: NodeId,
        act: Activation,
    },
    /// `cap * tanh(x / cap)`.
    Softcap {
        x: NodeId,
        cap: f32,
    },
    /// Keeps the rows (tokens) of the batch whose outputs were asked for.
    OutputRows {
        x: NodeId,
    },
    /// The router of a mixture of experts: `logits` `[n_expert, T]` → `[2 · n_used, T]`, per
    /// token the chosen experts' indices (as floats, exact) then their weights.
    MoeRoute {
        logits: NodeId,
        params: MoeRouteParams,
    },
    /// The experts' matmul over the chosen experts only: `w` is `[k, m, n_expert]`, `x` is
    /// `[k, n_x, T]` (n_x = 1: every chosen expert reads the token's row; n_x = n_used: each
    /// its own), `route` a [`Op::MoeRoute`] → `[m, n_used, T]`.
    MulMatId {
        w: WeightId,
        x: NodeId,
        route: NodeId,
    },
    /// Each chosen expert's bias added to its output: `x` `[m, n_used, T]` plus column
    /// `expert` of `bias` (f32 `[m, n_expert]`), the experts as `route` chose them (ggml's
    /// `add_id`).
    AddId {
        x: NodeId,
        bias: WeightId,
        route: NodeId,
    },
    /// The chosen experts' outputs `x` `[m, n_used, T]` weighted by the route's weights and
    /// summed in expert order → `[m, T]`.
    MoeSum {
        x: NodeId,
        route: NodeId,
    },
    /// Elements `offset .. offset + len` of every row (splits a fused projection's output:
    /// q/k/v of `attn_qkv`, gate/up of a fused `ffn_up`).
    Slice {
        x: NodeId,
        offset: usize,
        len: usize,
    },
}

impl Op {
    /// The op's name (its variant), for profiles and traces.
    pub fn name(&self) -> &'static str {
        match self {
            Op::GetRows { .. } => "GetRows",
            Op::Reshape { .. } => "Reshape",
            Op::RmsNorm { .. } => "RmsNorm",
            Op::MulWeight { .. } => "MulWeight",
            Op::AddWeight { .. } => "AddWeight",
            Op::Add { .. } => "Add",
            Op::Scale { .. } => "Scale",
            Op::MulMat { .. } => "MulMat",
            Op::Rope { .. } => "Rope",
            Op::Attention { .. } => "Attention",
            Op::Swiglu { .. } => "Swiglu",
            Op::Geglu { .. } => "Geglu",
            Op::Reglu { .. } => "Reglu",
            Op::SwigluOai { .. } => "SwigluOai",
            Op::Activation { .. } => "Activation",
            Op::Softcap { .. } => "Softcap",
            Op::OutputRows { .. } => "OutputRows",
            Op::MoeRoute { .. } => "MoeRoute",
            Op::MulMatId { .. } => "MulMatId",
            Op::AddId { .. } => "AddId",
            Op::MoeSum { .. } => "MoeSum",
            Op::Slice { .. } => "Slice",
        }
    }

    /// The nodes this op reads.
    pub fn inputs(&self) -> Vec<NodeId> {
        match *self {
            Op::GetRows { .. } => vec![],
            Op::Reshape { x }
            | Op::RmsNorm { x, .. }
            | Op::MulWeight { x, .. }
            | Op::AddWeight { x, .. }
            | Op::Scale { x, .. }
            | Op::MulMat { x, .. }
            | Op::Rope { x, .. }
            | Op::Softcap { x, .. }
            | Op::OutputRows { x }
            | Op::Slice { x, .. } => vec![x],
            Op::Add { a, b } => vec![a, b],
            Op::MoeRoute { logits, .. } => vec![logits],
            Op::MulMatId { x, route, .. }
            | Op::AddId { x, route, .. }
            | Op::MoeSum { x, route } => {
                vec![x, route]
            }
            Op::Swiglu { gate, up }
            | Op::Geglu { gate, up }
            | Op::Reglu { gate, up }
            | Op::SwigluOai { gate, up, .. } => vec![gate, up],
            Op::Activation { x, .. } => vec![x],
            Op::Attention { q, k, v, .. } => vec![q, k, v],
        }
    }
}

/// Graph equality compares f32 parameters by their bits: a recorded or planned graph is reused
/// only for one that computes the same values (float equality would take -0.0 for 0.0, and
/// never reuse a graph with a NaN parameter).
fn same_bits(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits()
}

impl PartialEq for RopeParams {
    fn eq(&self, o: &RopeParams) -> bool {
        self.n_dims == o.n_dims
            && self.mode == o.mode
            && same_bits(self.freq_base, o.freq_base)
            && same_bits(self.freq_scale, o.freq_scale)
            && self.freq_factors == o.freq_factors
            && same_bits(self.attn_factor, o.attn_factor)
            && self
                .yarn
                .map(|y| (y.ext_factor.to_bits(), y.corr_dims.map(f32::to_bits)))
                == o.yarn
                    .map(|y| (y.ext_factor.to_bits(), y.corr_dims.map(f32::to_bits)))
    }
}
impl Eq for RopeParams {}

impl PartialEq for AttentionParams {
    fn eq(&self, o: &AttentionParams) -> bool {
        self.layer == o.layer
            && self.n_head == o.n_head
            && self.n_head_kv == o.n_head_kv
            && self.head_dim == o.head_dim
            && same_bits(self.scale, o.scale)
            && self.window == o.window
            && self.softcap.map(f32::to_bits) == o.softcap.map(f32::to_bits)
            && self.sinks == o.sinks
    }
}
impl Eq for AttentionParams {}

impl PartialEq for Op {
    fn eq(&self, o: &Op) -> bool {
        use Op::*;
        match (self, o) {
            (GetRows { table: a }, GetRows { table: b }) => a == b,
            (Reshape { x: a }, Reshape { x: b }) | (OutputRows { x: a }, OutputRows { x: b }) => {
                a == b
            }
            (RmsNorm { x: a, eps: e }, RmsNorm { x: b, eps: f })
            | (Scale { x: a, s: e }, Scale { x: b, s: f })
            | (Softcap { x: a, cap: e }, Softcap { x: b, cap: f }) => a == b && same_bits(*e, *f),
            (MulWeight { x: a, w: v }, MulWeight { x: b, w: u })
            | (AddWeight { x: a, w: v }, AddWeight { x: b, w: u })
            | (MulMat { x: a, w: v }, MulMat { x: b, w: u }) => a == b && v == u,
            (Add { a, b }, Add { a: c, b: d })
            | (Swiglu { gate: a, up: b }, Swiglu { gate: c, up: d })
            | (Geglu { gate: a, up: b }, Geglu { gate: c, up: d })
            | (Reglu { gate: a, up: b }, Reglu { gate: c, up: d }) => a == c && b == d,
            (
                SwigluOai {
                    gate: a,
                    up: b,
                    alpha: e,
                    limit: f,
                },
                SwigluOai {
                    gate: c,
                    up: d,
                    alpha: g,
                    limit: h,
                },
            ) => a == c && b == d && same_bits(*e, *g) && same_bits(*f, *h),
            (Activation { x: a, act: p }, Activation { x: b, act: q }) => a == b && p == q,
            (Rope { x: a, params: p }, Rope { x: b, params: q }) => a == b && p == q,
            (
                MoeRoute {
                    logits: a,
                    params: p,
                },
                MoeRoute {
                    logits: b,
                    params: q,
                },
            ) => a == b && p == q,
            (
                MulMatId { w, x, route },
                MulMatId {
                    w: w2,
                    x: x2,
                    route: r2,
                },
            ) => w == w2 && x == x2 && route == r2,
            (
                AddId { x, bias, route },
                AddId {
                    x: x2,
                    bias: b2,
                    route: r2,
                },
            ) => x == x2 && bias == b2 && route == r2,
            (MoeSum { x, route }, MoeSum { x: x2, route: r2 }) => x == x2 && route == r2,
            (
                Slice { x, offset, len },
                Slice {
                    x: x2,
                    offset: o2,
                    len: l2,
                },
            ) => x == x2 && offset == o2 && len == l2,
            (
                Attention { q, k, v, params },
                Attention {
                    q: q2,
                    k: k2,
                    v: v2,
                    params: p2,
                },
            ) => q == q2 && k == k2 && v == v2 && params == p2,
            _ => false,
        }
    }
}
impl Eq for Op {}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub op: Op,
    pub ne: Ne,
}

impl Node {
    pub fn n_elements(&self) -> usize {
        self.ne.iter().product()
    }
}

/// A forward step for a batch of `n_tokens` tokens producing `n_outputs` rows of logits.
///
/// Two graphs are equal when they compute the same thing: same nodes, parameters and output.
/// Backends reuse a buffer plan or a recording only for an equal graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Graph {
    pub nodes: Vec<Node>,
    pub output: NodeId,
    pub n_tokens: usize,
    pub n_outputs: usize,
}

impl Graph {
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0 as usize]
    }
}

/// Builds a graph, checking shapes as it goes.
pub struct GraphBuilder<'w> {
    weights: &'w WeightStore,
    nodes: Vec<Node>,
    pub n_tokens: usize,
    pub n_outputs: usize,
    /// The context's size (positions), which some architectures' rope depends on (0: unknown).
    pub n_ctx: usize,
}

fn shape_error(what: &str, detail: String) -> EngineError {
    EngineError::InvalidArgument(format!("graph: {what}: {detail}"))
}

impl<'w> GraphBuilder<'w> {
    pub fn new(weights: &'w WeightStore, n_tokens: usize, n_outputs: usize) -> Self {
        GraphBuilder {
            weights,
            nodes: Vec::new(),
            n_tokens,
            n_outputs,
            n_ctx: 0,
        }
    }

    pub fn ne(&self, id: NodeId) -> Ne {
        self.nodes[id.0 as usize].ne
    }

    /// Whether weight `w` is an f32 vector of `n` values.
    fn is_f32_vector(&self, w: WeightId, n: usize) -> bool {
        let d = self.weights.desc(w);
        d.ty == GgmlType::F32 && d.ne[0] == n && d.n_rows() == 1
    }

    fn push(&mut self, op: Op, ne: Ne) -> NodeId {
        self.nodes.push(Node { op, ne });
        NodeId(self.nodes.len() as u32 - 1)
    }

    pub fn get_rows(&mut self, table: WeightId) -> NodeId {
        let n_embd = self.weights.desc(table).ne[0];
        self.push(Op::GetRows { table }, [n_embd, self.n_tokens, 1, 1])
    }

    pub fn reshape(&mut self, x: NodeId, ne: Ne) -> Result<NodeId, EngineError> {
        let old = self.ne(x);
        if old.iter().product::<usize>() != ne.iter().product::<usize>() {
            return Err(shape_error("reshape", format!("{old:?} -> {ne:?}")));
        }
        Ok(self.push(Op::Reshape { x }, ne))
    }

    pub fn rms_norm(&mut self, x: NodeId, eps: f32) -> NodeId {
        let ne = self.ne(x);
        self.push(Op::RmsNorm { x, eps }, ne)
    }

    pub fn mul_weight(&mut self, x: NodeId, w: WeightId) -> Result<NodeId, EngineError> {
        let ne = self.row_vector("mul", x, w)?;
        Ok(self.push(Op::MulWeight { x, w }, ne))
    }

    /// `x + w`, `w` a bias row added to every row of `x`.
    pub fn add_weight(&mut self, x: NodeId, w: WeightId) -> Result<NodeId, EngineError> {
        let ne = self.row_vector("add", x, w)?;
        Ok(self.push(Op::AddWeight { x, w }, ne))
    }

    /// The shape of `x` when `w` is one row as wide as `x`'s rows.
    fn row_vector(&self, op: &str, x: NodeId, w: WeightId) -> Result<Ne, EngineError> {
        let ne = self.ne(x);
        let wd = self.weights.desc(w);
        if wd.ne[0] != ne[0] || wd.n_rows() != 1 {
            return Err(shape_error(op, format!("{ne:?} with a row of {:?}", wd.ne)));
        }
        Ok(ne)
    }

    /// `rms_norm(x) * w`, the norm every architecture uses.
    pub fn rms_norm_weighted(
        &mut self,
        x: NodeId,
        w: WeightId,
        eps: f32,
    ) -> Result<NodeId, EngineError> {
        let n = self.rms_norm(x, eps);
        self.mul_weight(n, w)
    }

    pub fn add(&mut self, a: NodeId, b: NodeId) -> Result<NodeId, EngineError> {
        let (na, nb) = (self.ne(a), self.ne(b));
        if na != nb {
            return Err(shape_error("add", format!("{na:?} + {nb:?}")));
        }
        Ok(self.push(Op::Add { a, b }, na))
    }

    pub fn scale(&mut self, x: NodeId, s: f32) -> NodeId {
        let ne = self.ne(x);
        self.push(Op::Scale { x, s }, ne)
    }

    pub fn mul_mat(&mut self, w: WeightId, x: NodeId) -> Result<NodeId, EngineError> {
        let xn = self.ne(x);
        let wd = self.weights.desc(w);
        if wd.ne[0] != xn[0] || wd.ne[2] != 1 || wd.ne[3] != 1 {
            return Err(shape_error(
                "mul_mat",
                format!("{} {:?} x {xn:?}", self.weights.get(w).name, wd.ne),
            ));
        }
        let rows = xn[1] * xn[2] * xn[3];
        Ok(self.push(Op::MulMat { w, x }, [wd.ne[1], rows, 1, 1]))
    }

    pub fn rope(&mut self, x: NodeId, params: RopeParams) -> Result<NodeId, EngineError> {
        let ne = self.ne(x);
        if params.n_dims > ne[0] || !params.n_dims.is_multiple_of(2) || ne[2] != self.n_tokens {
            return Err(shape_error(
                "rope",
                format!("{ne:?} n_dims {}", params.n_dims),
            ));
        }
        if let Some(f) = params.freq_factors {
            let d = self.weights.desc(f);
            if d.ty != GgmlType::F32 || d.ne[0] != params.n_dims / 2 || d.n_rows() != 1 {
                return Err(shape_error(
                    "rope",
                    format!(
                        "frequency factors {:?} {:?} for n_dims {}",
                        d.ty, d.ne, params.n_dims
                    ),
                ));
            }
        }
        Ok(self.push(Op::Rope { x, params }, ne))
    }

    pub fn attention(
        &mut self,
        q: NodeId,
        k: NodeId,
        v: NodeId,
        params: AttentionParams,
    ) -> Result<NodeId, EngineError> {
        let t = self.n_tokens;
        let hd = params.head_dim;
        let ok = self.ne(q) == [hd, params.n_head, t, 1]
            && self.ne(k) == [hd, params.n_head_kv, t, 1]
            && self.ne(v) == [hd, params.n_head_kv, t, 1]
            && params.n_head_kv > 0
            && params.n_head.is_multiple_of(params.n_head_kv)
            && params
                .sinks
                .is_none_or(|w| self.is_f32_vector(w, params.n_head));
        if !ok {
            return Err(shape_error(
                "attention",
                format!("q {:?} k {:?} v {:?}", self.ne(q), self.ne(k), self.ne(v)),
            ));
        }
        Ok(self.push(
            Op::Attention { q, k, v, params },
            [hd * params.n_head, t, 1, 1],
        ))
    }

    /// A gated activation `op` of `gate` and `up` (of one shape).
    fn glu(&mut self, gate: NodeId, up: NodeId, op: Op) -> Result<NodeId, EngineError> {
        let (ng, nu) = (self.ne(gate), self.ne(up));
        if ng != nu {
            return Err(shape_error("glu", format!("{ng:?} vs {nu:?}")));
        }
        Ok(self.push(op, ng))
    }

    pub fn swiglu(&mut self, gate: NodeId, up: NodeId) -> Result<NodeId, EngineError> {
        self.glu(gate, up, Op::Swiglu { gate, up })
    }

    pub fn geglu(&mut self, gate: NodeId, up: NodeId) -> Result<NodeId, EngineError> {
        self.glu(gate, up, Op::Geglu { gate, up })
    }

    pub fn reglu(&mut self, gate: NodeId, up: NodeId) -> Result<NodeId, EngineError> {
        self.glu(gate, up, Op::Reglu { gate, up })
    }

    /// gpt-oss's clamped SwiGLU (see [`Op::SwigluOai`]; alpha 1.702, limit 7 in gpt-oss).
    pub fn swiglu_oai(
        &mut self,
        gate: NodeId,
        up: NodeId,
        alpha: f32,
        limit: f32,
    ) -> Result<NodeId, EngineError> {
        self.glu(
            gate,
            up,
            Op::SwigluOai {
                gate,
                up,
                alpha,
                limit,
            },
        )
    }

    pub fn activation(&mut self, x: NodeId, act: Activation) -> NodeId {
        let ne = self.ne(x);
        self.push(Op::Activation { x, act }, ne)
    }

    pub fn softcap(&mut self, x: NodeId, cap: f32) -> NodeId {
        let ne = self.ne(x);
        self.push(Op::Softcap { x, cap }, ne)
    }

    /// Keeps the output rows; later ops run on `n_outputs` rows only.
    pub fn output_rows(&mut self, x: NodeId) -> NodeId {
        let ne = self.ne(x);
        self.push(Op::OutputRows { x }, [ne[0], self.n_outputs, 1, 1])
    }

    /// The router's choice of `params.n_used` experts per token from `logits` `[n_expert, T]`.
    pub fn moe_route(
        &mut self,
        logits: NodeId,
        params: MoeRouteParams,
    ) -> Result<NodeId, EngineError> {
        let ne = self.ne(logits);
        let n_expert = ne[0];
        let bias_ok = params
            .selection_bias
            .is_none_or(|b| self.is_f32_vector(b, n_expert));
        if params.n_used == 0 || params.n_used > n_expert || ne[2] != 1 || !bias_ok {
            return Err(shape_error(
                "moe_route",
                format!("{ne:?} choosing {}", params.n_used),
            ));
        }
        Ok(self.push(
            Op::MoeRoute { logits, params },
            [2 * params.n_used, ne[1], 1, 1],
        ))
    }

    /// The chosen experts' `w · x` (see [`Op::MulMatId`]).
    pub fn mul_mat_id(
        &mut self,
        w: WeightId,
        x: NodeId,
        route: NodeId,
    ) -> Result<NodeId, EngineError> {
        let (xn, rn, wd) = (self.ne(x), self.ne(route), self.weights.desc(w));
        let n_used = rn[0] / 2;
        let ok = wd.ne[0] == xn[0]
            && wd.ne[3] == 1
            && (xn[1] == 1 || xn[1] == n_used)
            && xn[2] == rn[1]
            && xn[3] == 1
            && matches!(self.nodes[route.0 as usize].op, Op::MoeRoute { .. });
        if !ok {
            return Err(shape_error(
                "mul_mat_id",
                format!(
                    "{} {:?} x {xn:?} by {rn:?}",
                    self.weights.get(w).name,
                    wd.ne
                ),
            ));
        }
        Ok(self.push(Op::MulMatId { w, x, route }, [wd.ne[1], n_used, xn[2], 1]))
    }

    /// The chosen experts' biases added to their outputs `x` (see [`Op::AddId`]).
    pub fn add_id(
        &mut self,
        x: NodeId,
        bias: WeightId,
        route: NodeId,
    ) -> Result<NodeId, EngineError> {
        let (xn, rn, bd) = (self.ne(x), self.ne(route), self.weights.desc(bias));
        let n_expert = match self.nodes[route.0 as usize].op {
            Op::MoeRoute { logits, .. } => Some(self.ne(logits)[0]),
            _ => None,
        };
        let ok = bd.ty == GgmlType::F32
            && bd.ne[0] == xn[0]
            && Some(bd.ne[1]) == n_expert
            && bd.ne[2] == 1
            && bd.ne[3] == 1
            && xn[1] == rn[0] / 2
            && xn[2] == rn[1]
            && xn[3] == 1;
        if !ok {
            return Err(shape_error(
                "add_id",
                format!("{xn:?} + {} {:?}", self.weights.get(bias).name, bd.ne),
            ));
        }
        Ok(self.push(Op::AddId { x, bias, route }, xn))
    }

    /// The route-weighted sum of the chosen experts' outputs `x` (see [`Op::MoeSum`]).
    pub fn moe_sum(&mut self, x: NodeId, route: NodeId) -> Result<NodeId, EngineError> {
        let (xn, rn) = (self.ne(x), self.ne(route));
        if xn[1] != rn[0] / 2 || xn[2] != rn[1] || xn[3] != 1 {
            return Err(shape_error("moe_sum", format!("{xn:?} by {rn:?}")));
        }
        Ok(self.push(Op::MoeSum { x, route }, [xn[0], xn[2], 1, 1]))
    }

    /// Elements `offset .. offset + len` of each row of `x`.
    pub fn slice(&mut self, x: NodeId, offset: usize, len: usize) -> Result<NodeId, EngineError> {
        let ne = self.ne(x);
        if len == 0 || offset.checked_add(len).is_none_or(|end| end > ne[0]) {
            return Err(shape_error("slice", format!("{ne:?} [{offset}, +{len})")));
        }
        Ok(self.push(Op::Slice { x, offset, len }, [len, ne[1], ne[2], ne[3]]))
    }

    pub fn finish(self, output: NodeId) -> Graph {
        Graph {
            nodes: self.nodes,
            output,
            n_tokens: self.n_tokens,
            n_outputs: self.n_outputs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scaled(s: f32, output: u32) -> Graph {
        let nodes = vec![
            Node {
                op: Op::GetRows { table: WeightId(0) },
                ne: [4, 1, 1, 1],
            },
            Node {
                op: Op::Scale { x: NodeId(0), s },
                ne: [4, 1, 1, 1],
            },
        ];
        Graph {
            nodes,
            output: NodeId(output),
            n_tokens: 1,
            n_outputs: 1,
        }
    }

    #[test]
    fn graphs_are_equal_only_when_they_compute_the_same_values() {
        assert_eq!(scaled(0.5, 1), scaled(0.5, 1));
        assert_ne!(scaled(0.5, 1), scaled(0.25, 1));
        assert_ne!(scaled(0.0, 1), scaled(-0.0, 1));
        assert_eq!(scaled(f32::NAN, 1), scaled(f32::NAN, 1));
        assert_ne!(scaled(0.5, 1), scaled(0.5, 0));
    }
}
