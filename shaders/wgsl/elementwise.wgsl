// Element-wise ops over n floats; one define picks the op:
// OP_ADD (a + b), OP_SCALE (a * s), OP_MUL_ROW (a * b[i % width], norm weights),
// OP_SWIGLU (silu(a) * b), OP_GEGLU (gelu_tanh(a) * b, ggml's f16-table rounding),
// OP_SOFTCAP (cap * tanh(a / cap)).

struct Params {
    n: u32,
    width: u32,
    s: f32,
    _p0: u32,
    _p1: vec4<u32>, _p2: vec4<u32>, _p3: vec4<u32>,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
#ifndef UNARY
@group(0) @binding(2) var<storage, read> b: array<f32>;
#endif
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

#include "grid.inc.wgsl"
#include "f16_round.inc.wgsl"

const GELU_SQRT_2_OVER_PI: f32 = 0.7978845608028654;
const GELU_COEF_A: f32 = 0.044715;

// ggml looks GELU up in a table indexed by the f16 of x and holding f16 results.
fn gelu_ggml(x: f32) -> f32 {
    if (x <= -10.0) {
        return 0.0;
    }
    if (x >= 10.0) {
        return x;
    }
    let h = f16_round(x);
    // ggml's formula; tanh from exp except on lavapipe (BUILTIN_MATH, see rope_rotate.inc.wgsl):
    // the built-in tanh's precision is the implementation's, and SwiftShader's moved the f16
    // rounding of results away from the CPU's (tanhf). tanh |u| =
    // 1 - 2 / (exp(2|u|) + 1) is within an ulp of 1 in absolute terms, all 1 + tanh u keeps.
    let u = GELU_SQRT_2_OVER_PI * h * (1.0 + GELU_COEF_A * h * h);
#ifdef BUILTIN_MATH
    let t = tanh(u);
#else
    let t = sign(u) * (1.0 - 2.0 / (exp(2.0 * abs(u)) + 1.0));
#endif
    return f16_round(0.5 * h * (1.0 + t));
}

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = linear_group(wid, nwg) * 256u + lid;
    if (i >= P.n) {
        return;
    }
#ifdef OP_ADD
    y[i] = a[i] + b[i];
#endif
#ifdef OP_SCALE
    y[i] = a[i] * P.s;
#endif
#ifdef OP_MUL_ROW
    y[i] = a[i] * b[i % P.width];
#endif
#ifdef OP_SWIGLU
    let g = a[i];
    y[i] = g / (1.0 + exp(-g)) * b[i];
#endif
#ifdef OP_GEGLU
    y[i] = gelu_ggml(a[i]) * b[i];
#endif
#ifdef OP_SOFTCAP
    y[i] = tanh(a[i] * (1.0 / P.s)) * P.s;
#endif
}
