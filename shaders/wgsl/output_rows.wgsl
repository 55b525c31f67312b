// output_rows: keeps the rows the caller asked outputs for (a gather by the step buffer's
// output rows: [pos0, n_tokens, n_outputs, 0, tokens..., output rows...]).

struct Params {
    k: u32,          // row length (elements)
    n_tokens: u32,
    _p0: u32, _p1: u32,
    _p2: vec4<u32>, _p3: vec4<u32>, _p4: vec4<u32>,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

// x: element of the row, y: output row.
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    let r = gid.y;
    if (i >= P.k) {
        return;
    }
    let src = step[4u + P.n_tokens + r];
    y[r * P.k + i] = x[src * P.k + i];
}
