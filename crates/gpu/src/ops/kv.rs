//! The K re-rotation of a context shift (`kv.wgsl`, entry `shift`).

use crate::error::GpuError;
use crate::kv::LayerKv;
use crate::ops::rope::mode_index;
use crate::pipelines::PipelineKey;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;
use crate::target::Target;

/// `kv.wgsl`'s parameters; the store reads the first two.
#[repr(C)]
#[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct KvParams {
    /// u32 words (f16 pairs) per cached position: n_head_kv * head_dim / 2.
    pub pairs_per_pos: u32,
    /// Store: tokens; shift: positions moved.
    pub n_tokens: u32,
    pub head_dim: u32,
    pub n_dims: u32,
    /// [`mode_index`].
    pub mode: u32,
    pub freq_base: f32,
    pub freq_scale: f32,
    /// Shift: the first destination position.
    pub dst_pos: u32,
    /// Shift: the rotation, -(n_discard).
    pub delta: f32,
    /// `freq_base^(-2/n_dims)` by the host's powf.
    pub theta_scale: f32,
    pub attn_factor: f32,
    pub ext_factor: f32,
    pub corr0: f32,
    pub corr1: f32,
}
const _: () = assert!(size_of::<KvParams>() == wgsl_params::KV);

/// Writes `moved` (a copy of `n_moved` positions of K) at `dst_pos ..`, rotated by `delta`.
pub fn shift_keys<T: Target>(
    rec: &mut Recorder<T>,
    moved: &T::Buffer,
    kv: &LayerKv<T::Buffer>,
    n_moved: usize,
    dst_pos: usize,
    delta: f32,
    factors: Option<&T::Buffer>,
) -> Result<(), GpuError> {
    let rope = kv.layout.rope;
    let mut buffers = vec![(1, moved.clone()), (4, kv.k.clone())];
    let mut defines = vec![("SHIFT", 1)];
    if let Some(f) = factors {
        defines.push(("FREQ_FACTORS", 1));
        buffers.push((2, f.clone()));
    }
    let key = PipelineKey {
        family: "kv.wgsl",
        entry: "shift",
        defines,
    };
    let params = KvParams {
        pairs_per_pos: kv.k_pairs() as u32,
        n_tokens: n_moved as u32,
        head_dim: kv.layout.head_dim_k as u32,
        n_dims: rope.n_dims as u32,
        mode: mode_index(rope.mode),
        freq_base: rope.freq_base,
        freq_scale: rope.freq_scale,
        dst_pos: dst_pos as u32,
        delta,
        theta_scale: rope.theta_scale(),
        attn_factor: rope.mscale(),
        ext_factor: rope.yarn.map_or(0.0, |y| y.ext_factor),
        corr0: rope.yarn.map_or(0.0, |y| y.corr_dims[0]),
        corr1: rope.yarn.map_or(0.0, |y| y.corr_dims[1]),
    };
    let groups = rec.grid((kv.k_pairs() * n_moved).div_ceil(64), 1)?;
    rec.dispatch(key, params, buffers, groups)
}
