// rms_norm: each row divided by its root mean square (ggml_rms_norm). One workgroup per row.

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
    sums[tid] = s;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half = half / 2u) {
        if (tid < half) {
            sums[tid] += sums[tid + half];
        }
        workgroupBarrier();
    }
    let scale = 1.0 / sqrt(sums[0] / f32(P.width) + P.eps);
    for (var i = tid; i < P.width; i += WG) {
        y[base + i] = x[base + i] * scale;
    }
}
