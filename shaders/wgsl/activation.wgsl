// activation: a gateless feed-forward's activation of `a`, by define: ACT_SILU (x / (1 +
// exp(-x))), ACT_GELU (tanh approximation with ggml's f16-table rounding, as geglu), ACT_RELU.

struct Params {
    n: u32,
    _p0: u32, _p1: u32, _p2: u32,
    _p3: vec4<u32>, _p4: vec4<u32>, _p5: vec4<u32>,
}

#include "elementwise.inc.wgsl"
#ifdef ACT_GELU
#include "gelu.inc.wgsl"
#endif

fn element(i: u32) -> f32 {
    let x = a[i];
#ifdef ACT_SILU
    return x / (1.0 + exp(-x));
#endif
#ifdef ACT_GELU
    return gelu_ggml(x);
#endif
#ifdef ACT_RELU
    return max(x, 0.0);
#endif
}
