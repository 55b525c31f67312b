//! Hyper-parameters, layer weights and graph blocks shared by the architectures.

use tessera_gguf::Header;

use crate::backend::{KvLayerLayout, KvLayout};
use crate::error::EngineError;
use crate::graph::{AttentionParams, GraphBuilder, NodeId, RopeMode, RopeParams, Yarn};
use crate::weights::{WeightId, WeightStore};

use super::moe::{moe_block, MoeHParams, MoeWeights};

/// Hyper-parameters found under `<arch>.` in the metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct HParams {
    pub arch: String,
    pub n_vocab: usize,
    pub n_ctx_train: usize,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim_k: usize,
    pub head_dim_v: usize,
    pub n_ff: usize,
    pub norm_eps: f32,
    pub rope_dims: usize,
    pub rope_freq_base: f32,
    pub rope_freq_scale: f32,
    /// `rope.scaling.attn_factor` (1 when absent), times YaRN's attention factor: multiplies
    /// rope's cosines and sines.
    pub rope_attn_factor: f32,
    /// YaRN rope scaling's original context, where the file asks for YaRN.
    pub rope_yarn_ctx: Option<usize>,
    /// The experts, in a mixture-of-experts model.
    pub moe: Option<MoeHParams>,
}

/// Reads metadata values with the architecture prefix and typed errors.
pub struct Meta<'h> {
    pub header: &'h Header,
    pub arch: String,
}

/// Upper bound on sizes read from metadata (far above any real model; guards allocations).
const MAX_DIM: u64 = 1 << 24;

impl<'h> Meta<'h> {
    pub fn new(header: &'h Header) -> Result<Self, EngineError> {
        let arch = header
            .architecture()
            .ok_or(EngineError::NoArchitecture)?
            .to_string();
        Ok(Meta { header, arch })
    }

    fn key(&self, k: &str) -> String {
        format!("{}.{k}", self.arch)
    }

    pub fn opt_usize(&self, k: &str) -> Result<Option<usize>, EngineError> {
        let key = self.key(k);
        match self.header.get(&key) {
            None => Ok(None),
            Some(v) => match v.as_u64() {
                Some(x) if x > 0 && x <= MAX_DIM => Ok(Some(x as usize)),
                _ => Err(EngineError::BadKey {
                    key,
                    why: format!("expected a positive integer up to {MAX_DIM}, got {v:?}"),
                }),
            },
        }
    }

    pub fn usize(&self, k: &str) -> Result<usize, EngineError> {
        self.opt_usize(k)?
            .ok_or_else(|| EngineError::MissingKey(self.key(k)))
    }

    pub fn opt_f32(&self, k: &str) -> Result<Option<f32>, EngineError> {
        let key = self.key(k);
        match self.header.get(&key) {
            None => Ok(None),
            Some(v) => match v.as_f32() {
                Some(x) if x.is_finite() => Ok(Some(x)),
                _ => Err(EngineError::BadKey {
                    key,
                    why: format!("expected a number, got {v:?}"),
                }),
            },
        }
    }

    pub fn opt_bool(&self, k: &str) -> Result<Option<bool>, EngineError> {
        let key = self.key(k);
        match self.header.get(&key) {
            None => Ok(None),
            Some(v) => v.as_bool().map(Some).ok_or_else(|| EngineError::BadKey {
                key,
                why: format!("expected a boolean, got {v:?}"),
            }),
        }
    }
}

impl HParams {
    /// The hyper-parameters every architecture has; `n_vocab` comes from the embedding's shape.
    pub fn read(meta: &Meta) -> Result<HParams, EngineError> {
        let n_embd = meta.usize("embedding_length")?;
        let n_head = meta.usize("attention.head_count")?;
        let n_head_kv = meta.opt_usize("attention.head_count_kv")?.unwrap_or(n_head);
        if n_head % n_head_kv != 0 {
            return Err(EngineError::BadKey {
                key: format!("{}.attention.head_count_kv", meta.arch),
                why: format!("{n_head} heads are not a multiple of {n_head_kv} KV heads"),
            });
        }
        let head_dim_k = match meta.opt_usize("attention.key_length")? {
            Some(d) => d,
            None if n_embd % n_head == 0 => n_embd / n_head,
            None => {
                return Err(EngineError::MissingKey(format!(
                    "{}.attention.key_length",
                    meta.arch
                )))
            }
        };
        let head_dim_v = meta
            .opt_usize("attention.value_length")?
            .unwrap_or(head_dim_k);
        let rope_dims = meta
            .opt_usize("rope.dimension_count")?
            .unwrap_or(head_dim_k);
        if head_dim_k > crate::backend::MAX_HEAD_DIM
            || head_dim_v > crate::backend::MAX_HEAD_DIM
            || rope_dims > head_dim_k
            || rope_dims % 2 != 0
        {
            return Err(EngineError::BadKey {
                key: format!("{}.attention.key_length", meta.arch),
                why: format!("unsupported head size {head_dim_k}/{head_dim_v} (rope {rope_dims})"),
            });
        }
        // As llama.cpp: `rope.scaling.factor` scales the angles unless the type is "none"
        // (a missing type reads as "linear").
        let factor = meta.opt_f32("rope.scaling.factor")?.filter(|&f| f > 0.0);
        let n_ctx_train = meta.usize("context_length")?;
        let mut rope_freq_scale = 1.0;
        let mut rope_attn_factor = meta.opt_f32("rope.scaling.attn_factor")?.unwrap_or(1.0);
        let mut rope_yarn_ctx = None;
        let scaling = meta
            .header
            .get_str(&format!("{}.rope.scaling.type", meta.arch))
            .unwrap_or("linear");
        match scaling {
            "none" => {}
            "linear" => rope_freq_scale = factor.map_or(1.0, |f| 1.0 / f),
            "yarn" => {
                rope_freq_scale = factor.map_or(1.0, |f| 1.0 / f);
                rope_yarn_ctx = Some(
                    meta.opt_usize("rope.scaling.original_context_length")?
                        .unwrap_or(n_ctx_train),
                );
                // llama.cpp's YaRN attention factor (without a log multiplier), the sums
                // fused as GCC compiles them: mscale(s) / (1 + 0.1 ln s), s = 1 / freq_scale.
                let s = 1.0 / rope_freq_scale;
                let mscale = if s <= 1.0 {
                    1.0
                } else {
                    0.1f32.mul_add(s.ln(), 1.0)
                };
                rope_attn_factor *= mscale * (1.0 / 0.1f32.mul_add(s.ln(), 1.0));
            }
            other => {
                return Err(EngineError::BadKey {
                    key: format!("{}.rope.scaling.type", meta.arch),
                    why: format!("rope scaling '{other}' is not supported"),
                })
            }
        }
        let n_ff = meta.usize("feed_forward_length")?;
        Ok(HParams {
            moe: MoeHParams::read(meta, n_ff)?,
            arch: meta.arch.clone(),
            n_vocab: 0,
            n_ctx_train,
            n_embd,
            n_layer: meta.usize("block_count")?,
            n_head,
            n_head_kv,
            head_dim_k,
            head_dim_v,
            n_ff,
            norm_eps: meta
                .opt_f32("attention.layer_norm_rms_epsilon")?
                .ok_or_else(|| {
                    EngineError::MissingKey(format!(
                        "{}.attention.layer_norm_rms_epsilon",
                        meta.arch
                    ))
                })?,
            rope_dims,
            rope_freq_base: meta.opt_f32("rope.freq_base")?.unwrap_or(10000.0),
            rope_freq_scale,
            rope_attn_factor,
            rope_yarn_ctx,
        })
    }

    pub fn rope(&self, mode: RopeMode, freq_base: f32) -> RopeParams {
        RopeParams {
            n_dims: self.rope_dims,
            mode,
            freq_base,
            freq_scale: self.rope_freq_scale,
            freq_factors: None,
            attn_factor: self.rope_attn_factor,
            yarn: self
                .rope_yarn_ctx
                .map(|n_ctx_orig| Yarn::new(self.rope_dims, n_ctx_orig, freq_base)),
        }
    }

    /// A KV layout with the same shape for every layer; `rope_of(layer)` gives its rope.
    pub fn kv_layout(&self, n_ctx: usize, rope_of: impl Fn(usize) -> RopeParams) -> KvLayout {
        KvLayout {
            n_ctx,
            n_seq: 1,
            layers: (0..self.n_layer)
                .map(|il| KvLayerLayout {
                    n_head_kv: self.n_head_kv,
                    head_dim_k: self.head_dim_k,
                    head_dim_v: self.head_dim_v,
                    rope: rope_of(il),
                })
                .collect(),
        }
    }
}

/// Embedding and output weights.
pub struct IoWeights {
    pub tok_embd: WeightId,
    pub output_norm: WeightId,
    /// `output.weight`, or the embedding when tied.
    pub output: WeightId,
    /// `output.bias`, where the file has one.
    pub output_bias: Option<WeightId>,
}

impl IoWeights {
    /// Registers the embedding (which fixes `hp.n_vocab`) and output weights.
    pub fn load(hp: &mut HParams, w: &mut WeightStore) -> Result<IoWeights, EngineError> {
        let n_vocab = w
            .file()
            .header()
            .tensor("token_embd.weight")
            .ok_or_else(|| EngineError::MissingTensor("token_embd.weight".into()))?
            .dims
            .get(1)
            .copied()
            .unwrap_or(0);
        if n_vocab == 0 || n_vocab > 1 << 24 {
            return Err(EngineError::BadShape {
                name: "token_embd.weight".into(),
                got: vec![hp.n_embd as u64, n_vocab],
                expected: vec![hp.n_embd as u64],
            });
        }
        hp.n_vocab = n_vocab as usize;
        let tok_embd = w.require("token_embd.weight", &[hp.n_embd, hp.n_vocab])?;
        let output_norm = w.require("output_norm.weight", &[hp.n_embd])?;
        let output = w
            .optional("output.weight", &[hp.n_embd, hp.n_vocab])?
            .unwrap_or(tok_embd);
        let output_bias = w.optional("output.bias", &[hp.n_vocab])?;
        Ok(IoWeights {
            tok_embd,
            output_norm,
            output,
            output_bias,
        })
    }
}

/// The weights of one transformer block; optional pieces are `None` where an architecture
/// has no such tensor.
pub struct LayerWeights {
    pub attn_norm: WeightId,
    pub qkv: QkvWeights,
    pub wo: WeightId,
    /// `attn_output.bias` (gpt-oss).
    pub wo_bias: Option<WeightId>,
    /// `attn_sinks.weight`: a learned logit per query head in the softmax (gpt-oss).
    pub sinks: Option<WeightId>,
    pub q_norm: Option<WeightId>,
    pub k_norm: Option<WeightId>,
    pub attn_post_norm: Option<WeightId>,
    pub ffn_norm: WeightId,
    pub ffn: FfnWeights,
    pub ffn_post_norm: Option<WeightId>,
}

/// A block's feed-forward: dense, or a mixture of experts (a block with a router).
pub enum FfnWeights {
    Dense {
        gate_up: GateUpWeights,
        down: WeightId,
    },
    Moe(MoeWeights),
}

/// The q, k and v projections: separate matrices with optional biases (Qwen2's, as llama.cpp
/// loads them for any architecture), or one `attn_qkv` whose output rows are q, k, then v
/// (Phi-3), tried first as llama.cpp does.
pub enum QkvWeights {
    Separate {
        wq: WeightId,
        wk: WeightId,
        wv: WeightId,
        bq: Option<WeightId>,
        bk: Option<WeightId>,
        bv: Option<WeightId>,
    },
    Fused {
        wqkv: WeightId,
        bqkv: Option<WeightId>,
    },
}

/// The gate and up projections of a gated feed-forward: separate matrices, or one `ffn_up` of
/// 2·n_ff rows, the gate's first (Phi-3), used when the file has no `ffn_gate`.
pub enum GateUpWeights {
    Separate { gate: WeightId, up: WeightId },
    Fused { gate_up: WeightId },
}

impl LayerWeights {
    pub fn load(hp: &HParams, w: &mut WeightStore, il: usize) -> Result<LayerWeights, EngineError> {
        let n = |s: &str| format!("blk.{il}.{s}.weight");
        let bias = |s: &str| format!("blk.{il}.{s}.bias");
        let (e, hk, hv) = (hp.n_embd, hp.head_dim_k, hp.head_dim_v);
        let (nq, nk, nv) = (hk * hp.n_head, hk * hp.n_head_kv, hv * hp.n_head_kv);
        let qkv = match w.optional(&n("attn_qkv"), &[e, nq + nk + nv])? {
            Some(wqkv) => QkvWeights::Fused {
                wqkv,
                bqkv: w.optional(&bias("attn_qkv"), &[nq + nk + nv])?,
            },
            None => QkvWeights::Separate {
                wq: w.require(&n("attn_q"), &[e, nq])?,
                wk: w.require(&n("attn_k"), &[e, nk])?,
                wv: w.require(&n("attn_v"), &[e, nv])?,
                bq: w.optional(&bias("attn_q"), &[nq])?,
                bk: w.optional(&bias("attn_k"), &[nk])?,
                bv: w.optional(&bias("attn_v"), &[nv])?,
            },
        };
        let experts = match &hp.moe {
            Some(moe) => MoeWeights::load(moe, e, w, il)?,
            None => None,
        };
        let ffn = match experts {
            Some(mw) => FfnWeights::Moe(mw),
            None => FfnWeights::Dense {
                gate_up: match w.optional(&n("ffn_gate"), &[e, hp.n_ff])? {
                    Some(gate) => GateUpWeights::Separate {
                        gate,
                        up: w.require(&n("ffn_up"), &[e, hp.n_ff])?,
                    },
                    None => GateUpWeights::Fused {
                        gate_up: w.require(&n("ffn_up"), &[e, 2 * hp.n_ff])?,
                    },
                },
                down: w.require(&n("ffn_down"), &[hp.n_ff, e])?,
            },
        };
        // gpt-oss has no `ffn_norm`: its pre-FFN norm is named `post_attention_norm` (it
        // follows the attention's residual, where the others' `ffn_norm` is).
        let (ffn_norm, attn_post_norm) = match w.optional(&n("ffn_norm"), &[e])? {
            Some(ffn_norm) => (ffn_norm, w.optional(&n("post_attention_norm"), &[e])?),
            None => match w.optional(&n("post_attention_norm"), &[e])? {
                Some(ffn_norm) => (ffn_norm, None),
                None => return Err(EngineError::MissingTensor(n("ffn_norm"))),
            },
        };
        Ok(LayerWeights {
            attn_norm: w.require(&n("attn_norm"), &[e])?,
            qkv,
            wo: w.require(&n("attn_output"), &[hv * hp.n_head, e])?,
            wo_bias: w.optional(&bias("attn_output"), &[e])?,
            sinks: w.optional(&n("attn_sinks"), &[hp.n_head])?,
            q_norm: w.optional(&n("attn_q_norm"), &[hk])?,
            k_norm: w.optional(&n("attn_k_norm"), &[hk])?,
            attn_post_norm,
            ffn_norm,
            ffn,
            ffn_post_norm: w.optional(&n("post_ffw_norm"), &[e])?,
        })
    }
}

/// How one layer's attention is set up.
pub struct AttentionSetup {
    pub rope: RopeParams,
    /// Multiplies q before attention (gemma); `None` leaves q alone.
    pub q_scale: Option<f32>,
    /// Multiplies the scores inside attention.
    pub kq_scale: f32,
    pub window: Option<usize>,
    pub softcap: Option<f32>,
}

/// Self-attention of block `il` on the normed input `h`: projections, optional q/k norms, rope,
/// attention over the KV cache, output projection.
pub fn attention_block(
    b: &mut GraphBuilder,
    hp: &HParams,
    lw: &LayerWeights,
    il: usize,
    h: NodeId,
    setup: &AttentionSetup,
) -> Result<NodeId, EngineError> {
    let t = b.n_tokens;
    let (nq, nk, nv) = (
        hp.head_dim_k * hp.n_head,
        hp.head_dim_k * hp.n_head_kv,
        hp.head_dim_v * hp.n_head_kv,
    );
    let (q, k, v) = match lw.qkv {
        QkvWeights::Separate {
            wq,
            wk,
            wv,
            bq,
            bk,
            bv,
        } => {
            // The three products first, then the biases: matmuls of one input in a row run
            // as one job on the CPU backend.
            let (q, k, v) = (b.mul_mat(wq, h)?, b.mul_mat(wk, h)?, b.mul_mat(wv, h)?);
            (
                add_bias(b, q, bq)?,
                add_bias(b, k, bk)?,
                add_bias(b, v, bv)?,
            )
        }
        QkvWeights::Fused { wqkv, bqkv } => {
            let qkv = projection(b, wqkv, bqkv, h)?;
            (
                b.slice(qkv, 0, nq)?,
                b.slice(qkv, nq, nk)?,
                b.slice(qkv, nq + nk, nv)?,
            )
        }
    };
    let mut q = b.reshape(q, [hp.head_dim_k, hp.n_head, t, 1])?;
    let mut k = b.reshape(k, [hp.head_dim_k, hp.n_head_kv, t, 1])?;
    let v = b.reshape(v, [hp.head_dim_v, hp.n_head_kv, t, 1])?;
    if let Some(qn) = lw.q_norm {
        q = b.rms_norm_weighted(q, qn, hp.norm_eps)?;
    }
    if let Some(kn) = lw.k_norm {
        k = b.rms_norm_weighted(k, kn, hp.norm_eps)?;
    }
    let mut q = b.rope(q, setup.rope)?;
    let k = b.rope(k, setup.rope)?;
    if let Some(s) = setup.q_scale {
        q = b.scale(q, s);
    }
    let a = b.attention(
        q,
        k,
        v,
        AttentionParams {
            layer: il,
            n_head: hp.n_head,
            n_head_kv: hp.n_head_kv,
            head_dim: hp.head_dim_k,
            scale: setup.kq_scale,
            window: setup.window,
            softcap: setup.softcap,
            sinks: lw.sinks,
        },
    )?;
    projection(b, lw.wo, lw.wo_bias, a)
}

/// `w · x`, plus the bias where there is one.
fn projection(
    b: &mut GraphBuilder,
    w: WeightId,
    bias: Option<WeightId>,
    x: NodeId,
) -> Result<NodeId, EngineError> {
    let y = b.mul_mat(w, x)?;
    add_bias(b, y, bias)
}

/// `y + bias` where there is a bias.
fn add_bias(
    b: &mut GraphBuilder,
    y: NodeId,
    bias: Option<WeightId>,
) -> Result<NodeId, EngineError> {
    match bias {
        Some(bias) => b.add_weight(y, bias),
        None => Ok(y),
    }
}

/// Gated feed-forward: `down(act(gate(h)) * up(h))`, act = SiLU or GELU; or the block's
/// experts (SwiGLU).
pub fn ffn_block(
    b: &mut GraphBuilder,
    hp: &HParams,
    lw: &LayerWeights,
    h: NodeId,
    gelu: bool,
) -> Result<NodeId, EngineError> {
    let (gate_up, down) = match (&lw.ffn, &hp.moe) {
        (FfnWeights::Dense { gate_up, down }, _) => (gate_up, *down),
        (FfnWeights::Moe(mw), Some(moe)) if !gelu => return moe_block(b, moe, mw, h),
        (FfnWeights::Moe(_), _) => {
            return Err(EngineError::NotSupported(
                "experts with a GELU activation".into(),
            ))
        }
    };
    let (g, u) = match *gate_up {
        GateUpWeights::Separate { gate, up } => (b.mul_mat(gate, h)?, b.mul_mat(up, h)?),
        GateUpWeights::Fused { gate_up } => {
            let gu = b.mul_mat(gate_up, h)?;
            let n_ff = b.ne(gu)[0] / 2;
            (b.slice(gu, 0, n_ff)?, b.slice(gu, n_ff, n_ff)?)
        }
    };
    let a = if gelu {
        b.geglu(g, u)?
    } else {
        b.swiglu(g, u)?
    };
    b.mul_mat(down, a)
}

/// Final norm and output projection, with optional logit soft-capping.
pub fn output_head(
    b: &mut GraphBuilder,
    hp: &HParams,
    io: &IoWeights,
    x: NodeId,
    softcap: Option<f32>,
) -> Result<NodeId, EngineError> {
    let h = b.rms_norm_weighted(x, io.output_norm, hp.norm_eps)?;
    let logits = projection(b, io.output, io.output_bias, h)?;
    Ok(match softcap {
        Some(cap) => b.softcap(logits, cap),
        None => logits,
    })
}

/// The hyper-parameters, the embedding/output weights and every block's weights of a decoder.
pub fn load_weights(
    meta: &Meta,
    w: &mut WeightStore,
) -> Result<(HParams, IoWeights, Vec<LayerWeights>), EngineError> {
    let mut hp = HParams::read(meta)?;
    let io = IoWeights::load(&mut hp, w)?;
    let layers = (0..hp.n_layer)
        .map(|il| LayerWeights::load(&hp, w, il))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((hp, io, layers))
}
