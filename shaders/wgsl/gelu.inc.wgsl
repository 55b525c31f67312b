// ggml's GELU (for elementwise.wgsl's OP_GEGLU and OP_GELU).

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
