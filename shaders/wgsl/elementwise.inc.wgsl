// The frame of the element-wise kernels: one invocation per output float, 256 a workgroup.
// The including file declares `struct Params` (the element count `n` first) and
// `fn element(i: u32) -> f32`, which reads `a` (and `b`, `c` for ops of more inputs) at
// bindings 1 (2, 4). A binding the entry point does not use is left out of the pipeline's
// layout, so one-input ops bind only `a` and `y`.

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read> c: array<f32>;

#include "grid.inc.wgsl"

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = linear_group(wid, nwg) * 256u + lid;
    if (i >= P.n) {
        return;
    }
    y[i] = element(i);
}
