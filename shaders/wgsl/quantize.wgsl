// Activation rounding before a matmul, as ggml's CPU backend quantizes activations for its
// vec_dot kernels (llama.cpp's numbers depend on it: a last-bit difference becomes a whole
// quantization step). The result stays f32 ("fake quantization": d * q), so the matmul
// kernels are unchanged and the products equal ggml's integer dot products up to float
// summation order. One invocation per block, no barriers. One define picks the format:
// ACT_Q8_0 (Q4_0/Q5_0/Q8_0 and Q4_1/Q5_1 weights: blocks of 32, d = f16(amax / 127),
// q = round_half_even(x * 127 / amax)), ACT_Q8_K (K-quants: blocks of 256, iscale =
// -127 / max, q = min(127, round(iscale * x)), d = 1 / iscale), ACT_F16 (F16 weights).
// PACK (with ACT_Q8_0 or ACT_Q8_K; mul_mat_q8.wgsl's input, devices with packed integer dot
// products): the same q as signed bytes, four to a word, then per 32-element chunk its scale
// d (f32 bits; a Q8_K block's d repeated for its 8 chunks), the sum of its q (i32 bits) and
// q8_1's s = f16(amax / 127 · sum) (f32 bits; Q8_0 only, which Q4_1/Q5_1 read as ggml's q8_1):
// P.n / 4 words, then P.n / 32 of each.

struct Params {
    n: u32, // elements (a multiple of the block size)
    _p0: u32, _p1: u32, _p2: u32,
    _p3: vec4<u32>, _p4: vec4<u32>, _p5: vec4<u32>,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
#ifdef PACK
@group(0) @binding(3) var<storage, read_write> y: array<u32>;
#else
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
#endif

#include "grid.inc.wgsl"
#include "f16_round.inc.wgsl"

#ifdef ACT_Q8_0
const BLOCK: u32 = 32u;
#endif
#ifdef ACT_Q8_K
const BLOCK: u32 = 256u;
#endif
#ifdef ACT_F16
const BLOCK: u32 = 4u; // element-wise; rows are a multiple of 4
#endif

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let b = linear_group(wid, nwg) * 64u + lid;
    let base = b * BLOCK;
    if (base >= P.n) {
        return;
    }
#ifdef ACT_F16
    for (var i = 0u; i < BLOCK; i++) {
        y[base + i] = f16_round(x[base + i]);
    }
#endif
#ifdef ACT_Q8_0
    var amax = 0.0;
    for (var i = 0u; i < BLOCK; i++) {
        amax = max(amax, abs(x[base + i]));
    }
    let d = f16_round(amax / 127.0);
    let id = select(0.0, 127.0 / amax, amax != 0.0);
#ifdef PACK
    let sum = pack_chunk(base, d, id, 128.0);
    y[P.n / 4u + 2u * (P.n / 32u) + base / 32u] = bitcast<u32>(f16_round(amax / 127.0 * f32(sum)));
#else
    for (var i = 0u; i < BLOCK; i++) {
        y[base + i] = d * clamp(round(x[base + i] * id), -128.0, 127.0);
    }
#endif
#endif
#ifdef ACT_Q8_K
    var amax = 0.0;
    var vmax = 0.0;
    for (var i = 0u; i < BLOCK; i++) {
        let v = x[base + i];
        if (abs(v) > amax) {
            amax = abs(v);
            vmax = v;
        }
    }
#ifdef PACK
    // amax == 0: every q and d 0 (iscale's infinity would make NaNs).
    let iscale = select(0.0, -127.0 / vmax, amax != 0.0);
    let d = select(0.0, 1.0 / iscale, amax != 0.0);
    for (var c = 0u; c < BLOCK; c += 32u) {
        _ = pack_chunk(base + c, d, iscale, 127.0);
    }
#else
    if (amax == 0.0) {
        for (var i = 0u; i < BLOCK; i++) {
            y[base + i] = 0.0;
        }
        return;
    }
    let iscale = -127.0 / vmax;
    let d = 1.0 / iscale;
    for (var i = 0u; i < BLOCK; i++) {
        y[base + i] = d * min(127.0, round(iscale * x[base + i]));
    }
#endif
#endif
}

#ifdef PACK
// The 32 elements from `at` as q = clamp(round(x * scale), -lo, 127) (Q8_0 clamps at -128,
// Q8_K's q never goes below -127: lo is the bound), packed, with the chunk's d and sum; the
// sum is returned.
fn pack_chunk(at: u32, d: f32, scale: f32, lo: f32) -> i32 {
    let chunk = at / 32u;
    var sum = 0i;
    for (var t = 0u; t < 8u; t++) {
        let v = vec4<f32>(x[at + 4u * t], x[at + 4u * t + 1u], x[at + 4u * t + 2u],
                          x[at + 4u * t + 3u]);
        let q = vec4<i32>(clamp(round(v * scale), vec4<f32>(-lo), vec4<f32>(127.0)));
        sum += (q.x + q.y) + (q.z + q.w);
        y[chunk * 8u + t] = pack4xI8(q);
    }
    y[P.n / 4u + chunk] = bitcast<u32>(d);
    y[P.n / 4u + P.n / 32u + chunk] = bitcast<u32>(sum);
    return sum;
}
#endif
