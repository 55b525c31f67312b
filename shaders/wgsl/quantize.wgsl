// Activation rounding before a matmul, as ggml's CPU backend quantizes activations for its
// vec_dot kernels (llama.cpp's numbers depend on it: a last-bit difference becomes a whole
// quantization step). The result stays f32 ("fake quantization": d * q), so the matmul
// kernels are unchanged and the products equal ggml's integer dot products up to float
// summation order. One invocation per block, no barriers. One define picks the format:
// ACT_Q8_0 (Q4_0/Q5_0/Q8_0 and Q4_1/Q5_1 weights: blocks of 32, d = f16(amax / 127),
// q = round_half_even(x * 127 / amax)), ACT_Q8_K (K-quants: blocks of 256, iscale =
// -127 / max, q = min(127, round(iscale * x)), d = 1 / iscale), ACT_F16 (F16 weights).

struct Params {
    n: u32, // elements (a multiple of the block size)
    _p0: u32, _p1: u32, _p2: u32,
    _p3: vec4<u32>, _p4: vec4<u32>, _p5: vec4<u32>,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

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
    for (var i = 0u; i < BLOCK; i++) {
        y[base + i] = d * clamp(round(x[base + i] * id), -128.0, 127.0);
    }
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
}
