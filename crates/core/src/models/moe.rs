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

/// One block's experts.
pub struct MoeWeights {
    /// `ffn_gate_inp`: `[n_embd, n_expert]`.
    pub router: WeightId,
    /// `exp_probs_b.bias`: added to the probabilities to choose the experts.
    pub selection_bias: Option<WeightId>,
    /// `ffn_gate_up_exps` (`[n_embd, 2·n_ff_exp, n_expert]`, each expert's gate rows first),
    /// tried first, or the pair `ffn_gate_exps` / `ffn_up_exps`.
    pub gate_up: GateUpWeights,
    /// `ffn_down_exps`: `[n_ff_exp, n_embd, n_expert]`.
    pub down: WeightId,
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
            selection_bias: w.optional(&format!("blk.{il}.exp_probs_b.bias"), &[x])?,
            gate_up,
            down: w.require(&n("ffn_down_exps"), &[f, e, x])?,
            shared,
        }))
    }
}

/// The experts' SwiGLU feed-forward of the normed input `h` `[n_embd, T]`.
pub fn moe_block(
    b: &mut GraphBuilder,
    moe: &MoeHParams,
    mw: &MoeWeights,
    h: NodeId,
) -> Result<NodeId, EngineError> {
    let logits = b.mul_mat(mw.router, h)?;
    let route = b.moe_route(logits, moe.route_params(mw.selection_bias))?;
    let ne = b.ne(h);
    let x = b.reshape(h, [ne[0], 1, ne[1], 1])?;
    let (g, u) = match mw.gate_up {
        GateUpWeights::Separate { gate, up } => {
            (b.mul_mat_id(gate, x, route)?, b.mul_mat_id(up, x, route)?)
        }
        GateUpWeights::Fused { gate_up } => {
            let gu = b.mul_mat_id(gate_up, x, route)?;
            let n_ff = b.ne(gu)[0] / 2;
            (b.slice(gu, 0, n_ff)?, b.slice(gu, n_ff, n_ff)?)
        }
    };
    let a = b.swiglu(g, u)?;
    let experts = b.mul_mat_id(mw.down, a, route)?;
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
