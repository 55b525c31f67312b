// y[col][row0 + r] = dot(weight row r, x[col]) for the rows of one weight binding (a weight
// larger than maxStorageBufferBindingSize is split by rows into several bindings, one dispatch
// each). The weights are read as GGUF blocks; nothing is dequantized ahead of time.
//
// Two variants, by define:
// - ROW_PER_WORKGROUP (GPUs): one workgroup per weight row and NC activation columns (z); the
//   row is dequantized 32 weights at a time (WG threads striding over the chunks) and reused
//   for the NC columns; partial sums are reduced in workgroup memory.
// - otherwise (CPU adapters such as lavapipe, where barriers are costly and each invocation is
//   a SIMD lane), no barriers: TILE (batches) 4 weight rows × TILE_COLS columns per invocation
//   (8, or 16 with TILE_WIDE: tall weights), else (decode) NR weight rows (1 or 8) of the one
//   column.
// Defines: W_<TYPE>, WG (threads), NC (columns per workgroup, GPUs), NR (rows per invocation,
// CPU adapters' decode), TILE, TILE_COLS, TILE_WIDE.

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
// CPU adapters: the code is written out with constant indices because SwiftShader does not
// unroll loops: a private array indexed by a loop counter stays in memory there, every access
// a per-lane gather. Every variant sums each output in the same
// order: per 32-element chunk a vec4 fma chain and its pairwise horizontal sum, chunk by chunk.

// Chunk c of weight row `row` (clamped to the binding: rows past it are computed, not stored).
fn tile_weights(row: u32, c: u32) -> array<vec4<f32>, 8> {
    var o: array<vec4<f32>, 8>;
    dequant32(min(row, P.rows - 1u) * P.row_bytes, c, &o);
    return o;
}

// Chunk c of activation column `col`; the vec4s past the row's end (float weights) are zero.
fn tile_acts(col: u32, c: u32) -> array<vec4<f32>, 8> {
    let len = min(8u, (P.k - c * 32u) / 4u);
    let xb = (min(col, P.n - 1u) * P.k + c * 32u) / 4u;
    let z = vec4<f32>(0.0);
    return array<vec4<f32>, 8>(
        select(z, x[xb], 0u < len), select(z, x[xb + 1u], 1u < len),
        select(z, x[xb + 2u], 2u < len), select(z, x[xb + 3u], 3u < len),
        select(z, x[xb + 4u], 4u < len), select(z, x[xb + 5u], 5u < len),
        select(z, x[xb + 6u], 6u < len), select(z, x[xb + 7u], 7u < len));
}

fn dot32(a: array<vec4<f32>, 8>, b: array<vec4<f32>, 8>) -> f32 {
    var s = fma(a[0], b[0], vec4<f32>(0.0));
    s = fma(a[1], b[1], s);
    s = fma(a[2], b[2], s);
    s = fma(a[3], b[3], s);
    s = fma(a[4], b[4], s);
    s = fma(a[5], b[5], s);
    s = fma(a[6], b[6], s);
    s = fma(a[7], b[7], s);
    return (s.x + s.y) + (s.z + s.w);
}

// Column chunk `xc` against the four weight rows' chunks.
fn dot32x4(w0: array<vec4<f32>, 8>, w1: array<vec4<f32>, 8>, w2: array<vec4<f32>, 8>,
           w3: array<vec4<f32>, 8>, xc: array<vec4<f32>, 8>) -> vec4<f32> {
    return vec4<f32>(dot32(w0, xc), dot32(w1, xc), dot32(w2, xc), dot32(w3, xc));
}

#ifdef TILE
// Batches: 4 weight rows × TILE_COLS columns per invocation (8, or 16 with TILE_WIDE).
@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let first = (linear_group(wid, nwg) * WG + tid) * 4u;
    if (first >= P.rows) {
        return;
    }
    let col0 = wid.z * TILE_COLS;
    let n_chunks = (P.k + 31u) / 32u;
    // acc[j]: column col0 + j, rows first .. first + 3.
    var acc: array<vec4<f32>, TILE_COLS>;
    for (var c = 0u; c < n_chunks; c++) {
        // The four rows' chunks stay in registers; the columns' stream past them.
        let w0 = tile_weights(first, c);
        let w1 = tile_weights(first + 1u, c);
        let w2 = tile_weights(first + 2u, c);
        let w3 = tile_weights(first + 3u, c);
        acc[0] += dot32x4(w0, w1, w2, w3, tile_acts(col0, c));
        acc[1] += dot32x4(w0, w1, w2, w3, tile_acts(col0 + 1u, c));
        acc[2] += dot32x4(w0, w1, w2, w3, tile_acts(col0 + 2u, c));
        acc[3] += dot32x4(w0, w1, w2, w3, tile_acts(col0 + 3u, c));
        acc[4] += dot32x4(w0, w1, w2, w3, tile_acts(col0 + 4u, c));
        acc[5] += dot32x4(w0, w1, w2, w3, tile_acts(col0 + 5u, c));
        acc[6] += dot32x4(w0, w1, w2, w3, tile_acts(col0 + 6u, c));
        acc[7] += dot32x4(w0, w1, w2, w3, tile_acts(col0 + 7u, c));
#ifdef TILE_WIDE
        acc[8] += dot32x4(w0, w1, w2, w3, tile_acts(col0 + 8u, c));
        acc[9] += dot32x4(w0, w1, w2, w3, tile_acts(col0 + 9u, c));
        acc[10] += dot32x4(w0, w1, w2, w3, tile_acts(col0 + 10u, c));
        acc[11] += dot32x4(w0, w1, w2, w3, tile_acts(col0 + 11u, c));
        acc[12] += dot32x4(w0, w1, w2, w3, tile_acts(col0 + 12u, c));
        acc[13] += dot32x4(w0, w1, w2, w3, tile_acts(col0 + 13u, c));
        acc[14] += dot32x4(w0, w1, w2, w3, tile_acts(col0 + 14u, c));
        acc[15] += dot32x4(w0, w1, w2, w3, tile_acts(col0 + 15u, c));
#endif
    }
    for (var j = 0u; j < TILE_COLS; j++) {
        let col = col0 + j;
        for (var r = 0u; r < 4u; r++) {
            let row = first + r;
            if (row < P.rows && col < P.n) {
                y[col * P.m + P.row0 + row] = acc[j][r];
            }
        }
    }
}
#else
// Decode (one column): NR (1 or 8) weight rows per invocation, the activation chunk loaded
// once for all of them.
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
    let n_chunks = (P.k + 31u) / 32u;
    // acc[r / 4][r % 4]: row first + r.
    var acc: array<vec4<f32>, 2>;
    for (var c = 0u; c < n_chunks; c++) {
        let xc = tile_acts(0u, c);
        acc[0].x += dot32(tile_weights(first, c), xc);
        if (NR == 8u) {
            acc[0].y += dot32(tile_weights(first + 1u, c), xc);
            acc[0].z += dot32(tile_weights(first + 2u, c), xc);
            acc[0].w += dot32(tile_weights(first + 3u, c), xc);
            acc[1].x += dot32(tile_weights(first + 4u, c), xc);
            acc[1].y += dot32(tile_weights(first + 5u, c), xc);
            acc[1].z += dot32(tile_weights(first + 6u, c), xc);
            acc[1].w += dot32(tile_weights(first + 7u, c), xc);
        }
    }
    for (var r = 0u; r < NR; r++) {
        let row = first + r;
        if (row < P.rows) {
            y[P.row0 + row] = acc[r / 4u][r % 4u];
        }
    }
}
#endif
#endif
