// y[col][row0 + r] = dot(weight row r, x[col]) with packed integer dot products (devices with
// shaderIntegerDotProduct; the Vulkan backend), in ggml's x86 arithmetic, operation for
// operation (crates/quant/src/vec_dot/ggml_order.rs, which the CPU backend runs): per block,
// 8 integer lanes (lane l: the products of bytes 4l..4l+3 of each 32-element chunk, times the
// chunk's scale for the K-quants), converted to f32 and fused-multiply-added into 8 float
// lanes with the block's d_weight · d_activation; the min terms beside them; at the end
// ggml's horizontal sum. Integer sums are exact however they are formed, so each output has
// the CPU backend's bits (given IEEE f32 and a fused fma, see fma1).
// The activations come from quantize.wgsl's PACK variant: per 32-element chunk 8 words of
// signed bytes q, its scale d (f32 bits), the sum of its q (i32 bits) and q8_1's s =
// f16(d · sum) (f32 bits, for Q4_1/Q5_1). Weights: qchunk.inc.wgsl.
// Each invocation computes NR weight rows (1, or 4 for tall weights in decode) for NC
// activation columns (1 in decode, 8 in batches), no barriers (written for CPU adapters, as
// mul_mat.wgsl's tile; constant trip counts so that the loops unroll).
// Defines: W_<TYPE> (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K), W_ALIGNED, WG, NR, NC,
// EXACT_FMA (f64, see fma1).

struct Params {
    k: u32,          // row length (elements, a multiple of the block)
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
// P.n * P.k / 4 words of q, then per chunk a scale, a sum and an s.
@group(0) @binding(2) var<storage, read> x: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

#include "bytes.inc.wgsl"
#include "qchunk.inc.wgsl"
#include "grid.inc.wgsl"

const OUTS: u32 = NR * NC;

// One output's float state: ggml's __m256 accumulator, Q4_K's 4-lane min accumulator, and
// the scalar min sum of Q4_1/Q5_1/Q5_K.
struct Acc {
    lanes: array<f32, 8>,
    m4: vec4<f32>,
    s: f32,
}

// a · b + c rounded once, as ggml's fused multiply-adds. EXACT_FMA (devices with f64): the
// product of two f32 is exact in f64, and the f64 sum rounded to f32 is the fused result but
// in the rare case where rounding twice differs (the sum's 29 extra bits exactly at half an
// f32 step). WGSL's fma may be a multiply and an add (lavapipe splits it), which differs
// from the CPU's bits in about a quarter of the outputs.
fn fma1(a: f32, b: f32, c: f32) -> f32 {
#ifdef EXACT_FMA
    return f32(f64(a) * f64(b) + f64(c));
#else
    return fma(a, b, c);
#endif
}

// ggml's hsum_float_8 (high half + low half, lanes 0+2 / 1+3, then 0+1), plus the min terms.
fn total(a: Acc) -> f32 {
    let v = a.lanes;
    let h = ((v[4] + v[0]) + (v[6] + v[2])) + ((v[5] + v[1]) + (v[7] + v[3]));
    if (MIN == 2u) {
        return h + ((a.m4.x + a.m4.z) + (a.m4.y + a.m4.w));
    }
    if (MIN == 0u) {
        return h;
    }
    return h + a.s;
}

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
    let n_all = P.n * n_chunks;
    let d_at = n_all * 8u;
    let sum_at = d_at + n_all;
    let s_at = sum_at + n_all;
    var acc: array<Acc, OUTS>;
    for (var b = 0u; b < n_chunks / CHUNKS; b++) {
        // This block's integer lanes and (K-quants) min products per chunk pair, per output.
        var il: array<array<i32, 8>, OUTS>;
        var ip: array<vec4<i32>, OUTS>;
        // The block's float scale and min per row (every chunk of a block carries them).
        var wd: array<vec2<f32>, NR>;
        for (var j = 0u; j < CHUNKS; j++) {
            let c = b * CHUNKS + j;
            // The rows' chunks stay in registers; the columns' stream past them. Rows past
            // the binding are computed (clamped), not stored.
            var wc: array<QChunk, NR>;
            for (var r = 0u; r < NR; r++) {
                wc[r] = qchunk32(min(first + r, P.rows - 1u) * P.row_bytes, c);
                wd[r] = vec2<f32>(wc[r].d, wc[r].m);
            }
            for (var col = 0u; col < NC; col++) {
                let xc = min(col0 + col, P.n - 1u) * n_chunks + c;
                let xb = xc * 8u;
                let sum = bitcast<i32>(x[sum_at + xc]);
                for (var r = 0u; r < NR; r++) {
                    let o = col * NR + r;
                    for (var l = 0u; l < 8u; l++) {
                        var v = dot4I8Packed(wc[r].p[l], x[xb + l]);
                        if (OFF != 0) {
                            // The offset of the types stored without a sign, exactly.
                            v += OFF * dot4I8Packed(0x01010101u, x[xb + l]);
                        }
                        il[o][l] += wc[r].sc * v;
                    }
                    ip[o][j / 2u] += wc[r].mn * sum;
                }
            }
        }
        for (var col = 0u; col < NC; col++) {
            let xc = min(col0 + col, P.n - 1u) * n_chunks + b * CHUNKS;
            let dx = bitcast<f32>(x[d_at + xc]);
            for (var r = 0u; r < NR; r++) {
                let o = col * NR + r;
                // ggml's order: the min term of the block, then the lanes.
                if (MIN == 1u) {
                    acc[o].s = fma1(wd[r].y, bitcast<f32>(x[s_at + xc]), acc[o].s);
                }
                let dmin = -(dx * wd[r].y);
                if (MIN == 2u) {
                    let p = vec4<f32>(ip[o]);
                    let m = acc[o].m4;
                    acc[o].m4 = vec4<f32>(fma1(dmin, p.x, m.x), fma1(dmin, p.y, m.y),
                                          fma1(dmin, p.z, m.z), fma1(dmin, p.w, m.w));
                }
                if (MIN == 3u) {
                    let isum = (ip[o].x + ip[o].y) + (ip[o].z + ip[o].w);
                    acc[o].s = fma1(dmin, f32(isum), acc[o].s);
                }
                let dd = wd[r].x * dx;
                for (var l = 0u; l < 8u; l++) {
                    acc[o].lanes[l] = fma1(dd, f32(il[o][l]), acc[o].lanes[l]);
                }
            }
        }
    }
    for (var col = 0u; col < NC; col++) {
        let c = col0 + col;
        for (var r = 0u; r < NR; r++) {
            let row = first + r;
            if (row < P.rows && c < P.n) {
                y[c * P.m + P.row0 + row] = total(acc[col * NR + r]);
            }
        }
    }
}
