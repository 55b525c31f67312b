// The element-wise ops, one invocation per output float, 256 a workgroup. One define picks the
// op (`crates/gpu/src/ops/elementwise.rs` holds the table of ops, defines and parameters):
// `element(i)` reads `a` (and `b`, `c` for ops of more inputs) at bindings 1 (2, 4) and the
// op's parameters `u0..u2` (integers) and `f0`, `f1` (floats). A binding the chosen op does not
// read is left out of the pipeline's layout, so one-input ops bind only `a` and `y`.

struct Params {
    n: u32,          // output elements
    u0: u32, u1: u32, u2: u32,
    f0: f32, f1: f32,
    _p0: u32, _p1: u32,
    _p2: vec4<u32>, _p3: vec4<u32>,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read> c: array<f32>;

#include "grid.inc.wgsl"
#ifdef OP_GEGLU
#include "gelu.inc.wgsl"
#endif
#ifdef OP_GELU
#include "gelu.inc.wgsl"
#endif

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
    y[i] = element(i);
}

fn element(i: u32) -> f32 {
#ifdef OP_ADD
    // y = a + b (the residual sums).
    return a[i] + b[i];
#endif
#ifdef OP_ADD_WEIGHT
    // y = a + b[i % width] (u0), a bias row added to every row.
    return a[i] + b[i % P.u0];
#endif
#ifdef OP_MUL_WEIGHT
    // y = a * b[i % width] (u0), a weight row (a norm's) multiplied into every row.
    return a[i] * b[i % P.u0];
#endif
#ifdef OP_SCALE
    // y = a * s (f0).
    return a[i] * P.f0;
#endif
#ifdef OP_SOFTCAP
    // y = cap * tanh(a / cap), cap in f0 (Gemma's logit soft-capping).
    return tanh(a[i] * (1.0 / P.f0)) * P.f0;
#endif
#ifdef OP_SWIGLU
    // y = silu(gate) * up, gate in `a`, up in `b`.
    let g = a[i];
    return g / (1.0 + exp(-g)) * b[i];
#endif
#ifdef OP_GEGLU
    // y = gelu_tanh(gate) * up, with ggml's f16-table rounding.
    return gelu_ggml(a[i]) * b[i];
#endif
#ifdef OP_REGLU
    // y = relu(gate) * up.
    let g = a[i];
    return select(0.0, g * b[i], g > 0.0);
#endif
#ifdef OP_SWIGLU_OAI
    // gpt-oss's clamped SwiGLU, alpha in f0, limit in f1: g = min(gate, limit),
    // u = clamp(up, -limit, limit), y = g / (1 + exp(-alpha g)) * (u + 1).
    let g = min(a[i], P.f1);
    let u = clamp(b[i], -P.f1, P.f1);
    return g / (1.0 + exp(P.f0 * -g)) * (u + 1.0);
#endif
#ifdef OP_MOE_SUM
    // y[t][r] = sum over the token's experts j, in order, of x[t][j][r] * weight[t][j]: `a`
    // holds the experts' outputs, `b` the route (its n_used ids, then their weights); row
    // length m in u0, n_used in u1.
    let m = P.u0;
    let n_used = P.u1;
    let t = i / m;
    let r = i % m;
    let wb = t * 2u * n_used + n_used;
    let xb = t * n_used * m + r;
    var acc = a[xb] * b[wb];
    for (var j = 1u; j < n_used; j++) {
        acc += a[xb + j * m] * b[wb + j];
    }
    return acc;
#endif
#ifdef OP_ADD_ID
    // y[t][j][r] = x[t][j][r] + bias[e][r], e the j-th expert the route chose for token t:
    // `a` holds the experts' outputs, `b` the biases `[m, n_expert]`, `c` the route (its
    // n_used ids, exact floats, then their weights); m in u0, n_used in u1.
    let m = P.u0;
    let n_used = P.u1;
    let r = i % m;
    let row = i / m;                 // t · n_used + j
    let t = row / n_used;
    let j = row % n_used;
    let e = u32(c[t * 2u * n_used + j]);
    return a[i] + b[e * m + r];
#endif
#ifdef OP_SLICE
    // Elements offset (u2) .. offset + len (u0) of every row of `a` (rows of width u1).
    return a[(i / P.u0) * P.u1 + P.u2 + i % P.u0];
#endif
#ifdef OP_SILU
    // A gateless feed-forward's activation: x / (1 + exp(-x)).
    let x = a[i];
    return x / (1.0 + exp(-x));
#endif
#ifdef OP_GELU
    // The tanh approximation with ggml's f16-table rounding, as geglu.
    return gelu_ggml(a[i]);
#endif
#ifdef OP_RELU
    return max(a[i], 0.0);
#endif
}
