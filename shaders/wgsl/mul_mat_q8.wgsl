// y[col][row0 + r] = dot(weight row r, x[col]) with packed integer dot products (devices with
// shaderIntegerDotProduct; the Vulkan backend). The activations come quantized to
// 8 bits by quantize.wgsl's PACK variant: per 32-element chunk, 8 words of signed bytes q, the
// chunk's scale d and the sum of its q. The weights are read as integers (qchunk.inc.wgsl:
// weight = a * byte + b), so a chunk's dot is d * (a * Σ byte·q + b * Σ q), its integer part
// from 8 dot4I8Packed. This is how ggml's CPU vec_dot computes it (integer sums, then the
// scales), where the f32 kernel (mul_mat.wgsl) sums the same products as floats: the two
// differ in the last bits of each output.
// Each invocation computes NR weight rows (1, or 4 for tall weights and batches) for NC
// activation columns (1 in decode, 8 in batches), no barriers (written for CPU adapters,
// as mul_mat.wgsl's tile; constant trip counts so that the loops unroll).
// Defines: W_<TYPE> (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K), W_ALIGNED, WG, NR, NC.

struct Params {
    k: u32,          // row length (elements, a multiple of 32)
    rows: u32,       // weight rows in this binding
    row0: u32,       // first output row of this binding
    n: u32,          // activation columns (tokens)
    row_bytes: u32,
    m: u32,          // output row length (all rows of the weight)
    _p0: u32, _p1: u32,
    _p2: vec4<u32>, _p3: vec4<u32>,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
// P.n * P.k / 4 words of q, then a scale (f32 bits) and a sum (i32 bits) per chunk.
@group(0) @binding(2) var<storage, read> x: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

#include "bytes.inc.wgsl"
#include "qchunk.inc.wgsl"
#include "grid.inc.wgsl"

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let first = (linear_group(wid, nwg) * WG + tid) * NR;
    if (first >= P.rows) {
        return;
    }
    let col0 = wid.z * NC;
    let n_chunks = P.k / 32u;
    let d_at = P.n * n_chunks * 8u;
    let s_at = d_at + P.n * n_chunks;
    var acc: array<array<f32, NR>, NC>;
    var q: array<QChunk, NR>;
    for (var c = 0u; c < n_chunks; c++) {
        // The rows' integer chunks stay in registers; the columns' stream past them. Rows
        // past the binding are computed (clamped), not stored.
        for (var r = 0u; r < NR; r++) {
            q[r] = qchunk32(min(first + r, P.rows - 1u) * P.row_bytes, c);
        }
        for (var j = 0u; j < NC; j++) {
            let xc = min(col0 + j, P.n - 1u) * n_chunks + c;
            let xb = xc * 8u;
            let dx = bitcast<f32>(x[d_at + xc]);
            let sx = f32(bitcast<i32>(x[s_at + xc]));
            for (var r = 0u; r < NR; r++) {
                var s = dot4I8Packed(q[r].p[0], x[xb]);
                s += dot4I8Packed(q[r].p[1], x[xb + 1u]);
                s += dot4I8Packed(q[r].p[2], x[xb + 2u]);
                s += dot4I8Packed(q[r].p[3], x[xb + 3u]);
                s += dot4I8Packed(q[r].p[4], x[xb + 4u]);
                s += dot4I8Packed(q[r].p[5], x[xb + 5u]);
                s += dot4I8Packed(q[r].p[6], x[xb + 6u]);
                s += dot4I8Packed(q[r].p[7], x[xb + 7u]);
                acc[j][r] += dx * fma(q[r].ab.x, f32(s), q[r].ab.y * sx);
            }
        }
    }
    for (var j = 0u; j < NC; j++) {
        let col = col0 + j;
        for (var r = 0u; r < NR; r++) {
            let row = first + r;
            if (row < P.rows && col < P.n) {
                y[col * P.m + P.row0 + row] = acc[j][r];
            }
        }
    }
}
