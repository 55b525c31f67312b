// mul_mat_id: the experts' matmul over the chosen experts only. y[slot][r] = dot(weight row
// e·m + r, x[row]) for every (token, slot) of the route, e its expert, row the token's
// (N_X_SHARED: one input row per token) or the slot's. One invocation per output element,
// no barriers; each output is summed chunk by chunk like mul_mat's. A weight larger than a
// binding is split by rows: each dispatch computes the rows of its binding and skips the rest.
// Defines: W_<TYPE>, N_X_SHARED.

struct Params {
    k: u32,          // row length (elements)
    rows: u32,       // weight rows in this binding
    row0: u32,       // first weight row of this binding
    row_bytes: u32,
    m: u32,          // rows per expert
    n_used: u32,     // experts per token
    n_slots: u32,    // tokens · n_used
    _p0: u32,
    _p1: vec4<u32>, _p2: vec4<u32>,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>; // k % 4 == 0
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read> route: array<f32>;

#include "bytes.inc.wgsl"
#include "dequant.inc.wgsl"
#include "grid.inc.wgsl"

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = linear_group(wid, nwg) * 64u + lid;
    if (i >= P.n_slots * P.m) {
        return;
    }
    let slot = i / P.m;
    let r = i % P.m;
    let t = slot / P.n_used;
    let e = u32(route[t * 2u * P.n_used + slot % P.n_used]);
    let wrow = e * P.m + r;
    if (wrow < P.row0 || wrow >= P.row0 + P.rows) {
        return;
    }
#ifdef N_X_SHARED
    let xrow = t;
#else
    let xrow = slot;
#endif
    let n_chunks = (P.k + 31u) / 32u;
    var wv: array<vec4<f32>, 8>;
    var acc = 0.0;
    for (var c = 0u; c < n_chunks; c++) {
        dequant32((wrow - P.row0) * P.row_bytes, c, &wv);
        let len = min(8u, (P.k - c * 32u) / 4u);
        let xb = (xrow * P.k + c * 32u) / 4u;
        var s = vec4<f32>(0.0);
        for (var q = 0u; q < 8u; q++) {
            s = fma(wv[q], select(vec4<f32>(0.0), x[xb + q], q < len), s);
        }
        acc += (s.x + s.y) + (s.z + s.w);
    }
    y[slot * P.m + r] = acc;
}
