// get_rows: the embedding rows of the step's token ids, dequantized to f32 (rows of
// k % 4 == 0 elements; one dispatch per weight binding; tokens whose row lies in another
// binding are skipped). The step buffer: [pos0, n_tokens, n_outputs, 0, tokens..., output rows...].

struct Params {
    k: u32,          // row length (elements)
    rows: u32,       // table rows in this binding
    row0: u32,       // first table row of this binding
    row_bytes: u32,
    n_tokens: u32,
    _p0: u32, _p1: u32, _p2: u32,
    _p3: vec4<u32>, _p4: vec4<u32>,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

#include "bytes.inc.wgsl"
#include "dequant.inc.wgsl"

// x: 32-element chunk of the row, y: token.
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    let t = gid.y;
    if (c * 32u >= P.k || t >= P.n_tokens) {
        return;
    }
    let id = step[4u + t];
    if (id < P.row0 || id >= P.row0 + P.rows) {
        return;
    }
    var v: array<vec4<f32>, 8>;
    dequant32((id - P.row0) * P.row_bytes, c, &v);
    let len = min(32u, P.k - c * 32u);
    for (var l = 0u; l < len; l++) {
        y[t * P.k + c * 32u + l] = v[l / 4u][l % 4u];
    }
}
