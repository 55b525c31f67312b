// rms_norm: each row divided by its root mean square (ggml_rms_norm). One workgroup per row.
// SUBGROUPS (devices with subgroup arithmetic; the Vulkan backend): the row's sum of squares
// is reduced within each subgroup, then over the subgroups' partial sums, instead of the
// shared-memory tree with a barrier per level.

struct Params {
    width: u32,
    rows: u32,
    eps: f32,
    _p0: u32,
    _p1: vec4<u32>, _p2: vec4<u32>, _p3: vec4<u32>,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

#include "grid.inc.wgsl"

const WG: u32 = 256u;
var<workgroup> sums: array<f32, WG>;

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
#ifdef SUBGROUPS
    @builtin(subgroup_id) sg: u32,
    @builtin(num_subgroups) n_sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
#endif
) {
    let row = linear_group(wid, nwg);
    if (row >= P.rows) {
        return;
    }
    let base = row * P.width;
    var s = 0.0;
    for (var i = tid; i < P.width; i += WG) {
        let v = x[base + i];
        s = fma(v, v, s);
    }
#ifdef SUBGROUPS
    let part = subgroupAdd(s);
    if (lane == 0u) {
        sums[sg] = part;
    }
    workgroupBarrier();
    var total = 0.0;
    for (var i = 0u; i < n_sg; i++) {
        total += sums[i];
    }
#else
    sums[tid] = s;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half = half / 2u) {
        if (tid < half) {
            sums[tid] += sums[tid + half];
        }
        workgroupBarrier();
    }
    let total = sums[0];
#endif
    let scale = 1.0 / sqrt(total / f32(P.width) + P.eps);
    for (var i = tid; i < P.width; i += WG) {
        y[base + i] = x[base + i] * scale;
    }
}
