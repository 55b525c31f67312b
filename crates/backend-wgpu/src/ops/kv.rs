//! The K re-rotation of a context shift (`kv.wgsl`, entry `shift`).

use crate::error::WgpuError;
use crate::kv::LayerKv;
use crate::ops::rope::mode_index;
use crate::pipelines::PipelineKey;
use crate::recorder::{Params, Recorder};

/// Writes `moved` (a copy of `n_moved` positions of K) at `dst_pos ..`, rotated by `delta`.
pub fn shift_keys(
    rec: &mut Recorder,
    moved: &wgpu::Buffer,
    kv: &LayerKv,
    n_moved: usize,
    dst_pos: usize,
    delta: f32,
) -> Result<(), WgpuError> {
    let rope = kv.layout.rope;
    let key = PipelineKey {
        family: "kv.wgsl",
        entry: "shift",
        defines: vec![("SHIFT", 1)],
    };
    let params = Params::new()
        .u(kv.k_pairs())
        .u(n_moved)
        .u(kv.layout.head_dim_k)
        .u(rope.n_dims)
        .u(mode_index(rope.mode))
        .f(rope.freq_base)
        .f(rope.freq_scale)
        .u(dst_pos)
        .f(delta)
        .f(rope.theta_scale());
    let groups = rec.grid((kv.k_pairs() * n_moved).div_ceil(64), 1)?;
    rec.dispatch(
        key,
        params,
        vec![(1, moved.clone()), (4, kv.k.clone())],
        groups,
    )
}
