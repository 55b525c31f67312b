// y[col][row0 + r] = dot(weight row r, x[col]) for the rows of one weight binding (a weight
// larger than maxStorageBufferBindingSize is split by rows into several bindings, one dispatch
// each). The weights are read as GGUF blocks; nothing is dequantized ahead of time.
//
// Two variants, by define:
// - ROW_PER_WORKGROUP (GPUs): one workgroup per weight row and NC activation columns (z); the
//   row is dequantized 32 weights at a time (WG threads striding over the chunks) and reused
//   for the NC columns; partial sums are reduced in workgroup memory.
// - otherwise (CPU adapters such as lavapipe, where barriers are costly and each invocation is
//   a SIMD lane): one invocation per NR weight rows and NC columns, no barriers.
// Defines: W_<TYPE>, WG (threads), NC (columns per workgroup or invocation), NR (rows per
// invocation, CPU adapters).

struct Params {
    k: u32,          // row length (elements)
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
#ifdef X_UNIFORM
// CPU adapters, decode: the activations as a uniform buffer of X_UNIFORM vec4s.
@group(0) @binding(2) var<uniform> x: array<vec4<f32>, X_UNIFORM>;
#else
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>; // k % 4 == 0
#endif
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

#include "bytes.inc.wgsl"
#include "dequant.inc.wgsl"
#include "grid.inc.wgsl"

#ifdef ROW_PER_WORKGROUP
var<workgroup> partial: array<f32, WG * NC>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let row = linear_group(wid, nwg);
    if (row >= P.rows) {
        return;
    }
    let col0 = wid.z * NC;
    let n_chunks = (P.k + 31u) / 32u;
    let row_off = row * P.row_bytes;
    var acc: array<f32, NC>;
    var wv: array<vec4<f32>, 8>;
    for (var c = tid; c < n_chunks; c += WG) {
        dequant32(row_off, c, &wv);
        // Constant trip counts: the loops unroll and wv/acc stay in registers. The vec4s
        // past the row's end (float weights only) are masked, not skipped.
        let len = min(8u, (P.k - c * 32u) / 4u);
        for (var j = 0u; j < NC; j++) {
            let col = min(col0 + j, P.n - 1u);
            let xb = (col * P.k + c * 32u) / 4u;
            var s = vec4<f32>(0.0);
            for (var t = 0u; t < 8u; t++) {
                s = fma(wv[t], select(vec4<f32>(0.0), x[xb + t], t < len), s);
            }
            acc[j] += (s.x + s.y) + (s.z + s.w);
        }
    }
    for (var j = 0u; j < NC; j++) {
        partial[j * WG + tid] = acc[j];
    }
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half = half / 2u) {
        if (tid < half) {
            for (var j = 0u; j < NC; j++) {
                partial[j * WG + tid] += partial[j * WG + tid + half];
            }
        }
        workgroupBarrier();
    }
    if (tid == 0u) {
        for (var j = 0u; j < NC; j++) {
            let col = col0 + j;
            if (col < P.n) {
                y[col * P.m + P.row0 + row] = partial[j * WG];
            }
        }
    }
}
#else
// NR weight rows per invocation: the activation chunk of the NC columns (a gather on CPU
// adapters, which do not see that its address is uniform) is loaded once into private memory
// and reused for the NR rows. Each output is summed in the same order as with NR = 1.
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
    let n_chunks = (P.k + 31u) / 32u;
    var acc: array<f32, NR * NC>;
    var wv: array<vec4<f32>, 8>;
    var xv: array<vec4<f32>, 8 * NC>;
    for (var c = 0u; c < n_chunks; c++) {
        // Constant trip counts: the loops unroll and wv/xv/acc stay in registers. The vec4s
        // past the row's end (float weights only) are masked, not skipped.
        let len = min(8u, (P.k - c * 32u) / 4u);
        for (var j = 0u; j < NC; j++) {
            let col = min(col0 + j, P.n - 1u);
            let xb = (col * P.k + c * 32u) / 4u;
            for (var t = 0u; t < 8u; t++) {
                xv[j * 8u + t] = select(vec4<f32>(0.0), x[xb + t], t < len);
            }
        }
        for (var r = 0u; r < NR; r++) {
            let row = min(first + r, P.rows - 1u);
            dequant32(row * P.row_bytes, c, &wv);
            for (var j = 0u; j < NC; j++) {
                var s = vec4<f32>(0.0);
                for (var t = 0u; t < 8u; t++) {
                    s = fma(wv[t], xv[j * 8u + t], s);
                }
                acc[r * NC + j] += (s.x + s.y) + (s.z + s.w);
            }
        }
    }
    for (var r = 0u; r < NR; r++) {
        let row = first + r;
        for (var j = 0u; j < NC; j++) {
            let col = col0 + j;
            if (row < P.rows && col < P.n) {
                y[col * P.m + P.row0 + row] = acc[r * NC + j];
            }
        }
    }
}
#endif
