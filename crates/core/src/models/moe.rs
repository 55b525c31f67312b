//! Mixture-of-experts feed-forward blocks, as llama.cpp's `build_moe_ffn`: a router
//! (`ffn_gate_inp`) chooses `n_used` experts per token ([`GraphBuilder::moe_route`]), the
//! chosen experts' gate/up and down matmuls run over those experts only
//! ([`GraphBuilder::mul_mat_id`]), and their outputs are summed with the route's weights.

use super::common::{GateUpWeights, Meta};
use crate::error::EngineError;
use crate::graph::{Gating, GraphBuilder, MoeRouteParams, NodeId};
use crate::weights::{WeightId, WeightStore};

/// The experts' hyper-parameters (`<arch>.expert_*`).
#[derive(Clone, Debug, PartialEq)]
pub struct MoeHParams {
    pub n_expert: usize,
    pub n_used: usize,
    /// Rows of each expert's gate and up matrices.
    pub n_ff_exp: usize,
    pub gating: Gating,
    /// The experts' gated activation.
    pub activation: ExpertActivation,
    pub normalize: bool,
    pub scale: f32,
    /// Shared experts (every token's), `n_ff_exp` rows each, as one SwiGLU feed-forward.
    pub n_shared: usize,
}

impl MoeHParams {
    /// `None` for a model without experts. `n_ff` is the dense feed-forward length, the
    /// experts' when the file gives no `expert_feed_forward_length` (divided among the used).
    pub fn read(meta: &Meta, n_ff: usize) -> Result<Option<MoeHParams>, EngineError> {
        // Some converters write `expert_count = 0` into dense models.
        let key = format!("{}.expert_count", meta.arch);
        if meta.header.get(&key).and_then(|v| v.as_u64()) == Some(0) {
            return Ok(None);
        }
        let Some(n_expert) = meta.opt_usize("expert_count")? else {
            return Ok(None);
        };
        let n_used = meta.usize("expert_used_count")?;
        if n_used > n_expert {
            return Err(EngineError::BadKey {
                key: format!("{}.expert_used_count", meta.arch),
                why: format!("{n_used} used of {n_expert} experts"),
            });
        }
        let gating = match meta.opt_usize("expert_gating_func")? {
            None | Some(1) => Gating::Softmax,
            Some(2) => Gating::Sigmoid,
            Some(3) => Gating::SoftmaxAfterTopK,
            Some(other) => {
                return Err(EngineError::NotSupported(format!(
                    "expert gating function {other}"
                )))
            }
        };
        Ok(Some(MoeHParams {
            n_expert,
            n_used,
            n_ff_exp: meta
                .opt_usize("expert_feed_forward_length")?
                .unwrap_or(n_ff / n_used),
            gating,
            activation: ExpertActivation::Swiglu,
            normalize: meta.opt_bool("expert_weights_norm")?.unwrap_or(false),
            scale: meta.opt_f32("expert_weights_scale")?.unwrap_or(1.0),
            n_shared: meta.opt_usize("expert_shared_count")?.unwrap_or(0),
        }))
    }

    fn route_params(&self, selection_bias: Option<WeightId>) -> MoeRouteParams {
        MoeRouteParams {
            n_used: self.n_used,
            gating: self.gating,
            selection_bias,
            normalize: self.normalize,
            scale: self.scale,
        }
    }
}

/// The gated activation of the experts' feed-forward.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ExpertActivation {
    Swiglu,
    /// gpt-oss's clamped SwiGLU ([`GraphBuilder::swiglu_oai`]).
    SwigluOai {
        alpha: f32,
        limit: f32,
    },
}

/// The experts' optional biases (gpt-oss), each `[rows, n_expert]` f32, added to the chosen
/// experts' outputs ([`GraphBuilder::add_id`]).
#[derive(Default)]
pub struct ExpertBiases {
    /// `ffn_gate_up_exps.bias` with fused experts, else `ffn_gate_exps.bias`.
    pub gate_or_fused: Option<WeightId>,
    /// `ffn_up_exps.bias` (separate experts only).
    pub up: Option<WeightId>,
    pub down: Option<WeightId>,
}

/// One block's experts.
pub struct MoeWeights {
    /// `ffn_gate_inp`: `[n_embd, n_expert]`.
    pub router: WeightId,
    /// `ffn_gate_inp.bias`: added to the router's logits.
    pub router_bias: Option<WeightId>,
    /// `exp_probs_b.bias`: added to the probabilities to choose the experts.
    pub selection_bias: Option<WeightId>,
    /// `ffn_gate_up_exps` (`[n_embd, 2·n_ff_exp, n_expert]`, each expert's gate rows first),
    /// tried first, or the pair `ffn_gate_exps` / `ffn_up_exps`.
    pub gate_up: GateUpWeights,
    /// `ffn_down_exps`: `[n_ff_exp, n_embd, n_expert]`.
    pub down: WeightId,
    pub biases: ExpertBiases,
    /// The shared experts' `ffn_{gate,up,down}_shexp`, whose output is added to the chosen
    /// experts'.
    pub shared: Option<(WeightId, WeightId, WeightId)>,
}

impl MoeWeights {
    /// Block `il`'s experts, `None` where the block has no router (a dense block).
    pub fn load(
        moe: &MoeHParams,
        n_embd: usize,
        w: &mut WeightStore,
        il: usize,
    ) -> Result<Option<MoeWeights>, EngineError> {
        let n = |s: &str| format!("blk.{il}.{s}.weight");
        let bias = |s: &str| format!("blk.{il}.{s}.bias");
        let (e, f, x) = (n_embd, moe.n_ff_exp, moe.n_expert);
        let Some(router) = w.optional(&n("ffn_gate_inp"), &[e, x])? else {
            return Ok(None);
        };
        let gate_up = match w.optional(&n("ffn_gate_up_exps"), &[e, 2 * f, x])? {
            Some(gate_up) => GateUpWeights::Fused { gate_up },
            None => GateUpWeights::Separate {
                gate: w.require(&n("ffn_gate_exps"), &[e, f, x])?,
                up: w.require(&n("ffn_up_exps"), &[e, f, x])?,
            },
        };
        let biases = match gate_up {
            GateUpWeights::Fused { .. } => ExpertBiases {
                gate_or_fused: w.optional(&bias("ffn_gate_up_exps"), &[2 * f, x])?,
                up: None,
                down: None,
            },
            GateUpWeights::Separate { .. } => ExpertBiases {
                gate_or_fused: w.optional(&bias("ffn_gate_exps"), &[f, x])?,
                up: w.optional(&bias("ffn_up_exps"), &[f, x])?,
                down: None,
            },
        };
        let biases = ExpertBiases {
            down: w.optional(&bias("ffn_down_exps"), &[e, x])?,
            ..biases
        };
        let shared = match moe.n_shared {
            0 => None,
            n_shared => {
                let fs = f * n_shared;
                Some((
                    w.require(&n("ffn_gate_shexp"), &[e, fs])?,
                    w.require(&n("ffn_up_shexp"), &[e, fs])?,
                    w.require(&n("ffn_down_shexp"), &[fs, e])?,
                ))
            }
        };
        Ok(Some(MoeWeights {
            router,
            router_bias: w.optional(&bias("ffn_gate_inp"), &[x])?,
            selection_bias: w.optional(&format!("blk.{il}.exp_probs_b.bias"), &[x])?,
            gate_up,
            down: w.require(&n("ffn_down_exps"), &[f, e, x])?,
            biases,
            shared,
        }))
    }
}

/// The experts' gated feed-forward of the normed input `h` `[n_embd, T]`.
pub fn moe_block(
    b: &mut GraphBuilder,
    moe: &MoeHParams,
    mw: &MoeWeights,
    h: NodeId,
) -> Result<NodeId, EngineError> {
    let mut logits = b.mul_mat(mw.router, h)?;
    if let Some(bias) = mw.router_bias {
        logits = b.add_weight(logits, bias)?;
    }
    let route = b.moe_route(logits, moe.route_params(mw.selection_bias))?;
    let ne = b.ne(h);
    let x = b.reshape(h, [ne[0], 1, ne[1], 1])?;
    // The chosen experts' `w · x`, plus their biases where the file has them.
    let experts_mm = |b: &mut GraphBuilder, w, x, bias: Option<WeightId>| {
        let y = b.mul_mat_id(w, x, route)?;
        match bias {
            Some(bias) => b.add_id(y, bias, route),
            None => Ok(y),
        }
    };
    let biases = &mw.biases;
    let (g, u) = match mw.gate_up {
        GateUpWeights::Separate { gate, up } => (
            experts_mm(b, gate, x, biases.gate_or_fused)?,
            experts_mm(b, up, x, biases.up)?,
        ),
        GateUpWeights::Fused { gate_up } => {
            let gu = experts_mm(b, gate_up, x, biases.gate_or_fused)?;
            let n_ff = b.ne(gu)[0] / 2;
            (b.slice(gu, 0, n_ff)?, b.slice(gu, n_ff, n_ff)?)
        }
    };
    let a = match moe.activation {
        ExpertActivation::Swiglu => b.swiglu(g, u)?,
        ExpertActivation::SwigluOai { alpha, limit } => b.swiglu_oai(g, u, alpha, limit)?,
    };
    let experts = experts_mm(b, mw.down, a, biases.down)?;
    let out = b.moe_sum(experts, route)?;
    match mw.shared {
        Some((gate, up, down)) => {
            let (g, u) = (b.mul_mat(gate, h)?, b.mul_mat(up, h)?);
            let a = b.swiglu(g, u)?;
            let shared = b.mul_mat(down, a)?;
            b.add(out, shared)
        }
        None => Ok(out),
    }
}
