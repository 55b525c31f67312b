//! Attention (`attention.wgsl`) and the KV store before it (`kv.wgsl`).

use tessera_core::graph::AttentionParams;

use crate::error::GpuError;
use crate::kv::LayerKv;
use crate::ops::kv::KvParams;
use crate::pipelines::PipelineKey;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;

use tessera_kernels::variants::{attention_ppt, head_dim_capacity, ATTENTION_WG};

/// `attention.wgsl`'s parameters.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AttentionKernelParams {
    pub n_head: u32,
    /// n_head / n_head_kv.
    pub group: u32,
    pub dv: u32,
    pub n_tokens: u32,
    /// u32 words per cached position, K: n_head_kv * head_dim / 2.
    pub k_pairs: u32,
    /// The same for V: n_head_kv * dv / 2.
    pub v_pairs: u32,
    /// 0: none; else a query at p sees keys p - window < j <= p.
    pub window: u32,
    pub scale: f32,
    /// 0: none.
    pub softcap: f32,
    /// Head dim of q and K (the kernel's `HD` is a capacity at least this).
    pub hd: u32,
}
const _: () = assert!(size_of::<AttentionKernelParams>() == wgsl_params::ATTENTION);

/// Stores the batch's k and v (`[head_dim, n_head_kv, n_tokens]`) at positions pos0 ...
pub fn store<T: Target>(
    rec: &mut Recorder<T>,
    step: &T::Buffer,
    k: &T::Buffer,
    v: &T::Buffer,
    kv: &LayerKv<T::Buffer>,
    n_tokens: usize,
) -> Result<(), GpuError> {
    if kv.k_pairs() != kv.v_pairs() {
        return Err(GpuError::Unsupported(
            "K and V of different sizes per position".into(),
        ));
    }
    let key = PipelineKey {
        family: "kv.wgsl",
        entry: "store",
        defines: vec![("STORE", 1)],
    };
    let groups = rec.grid((kv.k_pairs() * n_tokens).div_ceil(64), 1)?;
    rec.dispatch(
        key,
        KvParams {
            pairs_per_pos: kv.k_pairs() as u32,
            n_tokens: n_tokens as u32,
            ..KvParams::default()
        },
        vec![
            (1, step.clone()),
            (2, k.clone()),
            (3, v.clone()),
            (4, kv.k.clone()),
            (5, kv.v.clone()),
        ],
        groups,
    )
}

/// q `[head_dim, n_head, n_tokens]` → y `[dv * n_head, n_tokens]`; `sinks`: the n_head sink
/// logits where the model has them.
#[allow(clippy::too_many_arguments)]
pub fn attend<T: Target>(
    rec: &mut Recorder<T>,
    step: &T::Buffer,
    q: &T::Buffer,
    kv: &LayerKv<T::Buffer>,
    sinks: Option<&T::Buffer>,
    y: &T::Buffer,
    p: &AttentionParams,
    n_tokens: usize,
) -> Result<(), GpuError> {
    let hd = p.head_dim;
    let dv = kv.layout.head_dim_v;
    if hd != kv.layout.head_dim_k || p.n_head_kv != kv.layout.n_head_kv || !hd.is_multiple_of(2) {
        return Err(GpuError::Unsupported(format!(
            "attention head {hd} over a cache of {}x{}",
            kv.layout.n_head_kv, kv.layout.head_dim_k
        )));
    }
    // The head dims round up to a capacity (the prebuilt variants' closed set); the kernel
    // loops over the exact ones, parameters.
    let (Some(hd_cap), Some(dv_cap)) = (head_dim_capacity(hd), head_dim_capacity(dv)) else {
        return Err(GpuError::Unsupported(format!(
            "attention heads of {hd} (values {dv}) dimensions"
        )));
    };
    let mut defines = vec![
        ("WG", ATTENTION_WG),
        ("HD", hd_cap),
        ("PPT", attention_ppt(dv_cap)),
    ];
    if rec.gpu.f16_kernels() {
        defines.push(("F16", 1));
    }
    if sinks.is_some() {
        defines.push(("SINKS", 1));
    }
    let key = PipelineKey {
        family: "attention.wgsl",
        entry: "main",
        defines,
    };
    let params = AttentionKernelParams {
        n_head: p.n_head as u32,
        group: (p.n_head / p.n_head_kv) as u32,
        dv: dv as u32,
        n_tokens: n_tokens as u32,
        k_pairs: kv.k_pairs() as u32,
        v_pairs: kv.v_pairs() as u32,
        window: p.window.unwrap_or(0) as u32,
        scale: p.softcap.map_or(p.scale, |cap| p.scale / cap),
        softcap: p.softcap.unwrap_or(0.0),
        hd: hd as u32,
    };
    let groups = rec.grid(n_tokens * p.n_head, 1)?;
    let mut buffers = vec![
        (1, step.clone()),
        (2, q.clone()),
        (3, kv.k.clone()),
        (4, kv.v.clone()),
        (5, y.clone()),
    ];
    if let Some(sinks) = sinks {
        buffers.push((6, sinks.clone()));
    }
    rec.dispatch(key, params, buffers, groups)
}
