// Gated and gateless feed-forward activations, one thread per output element, with the CPU
// reference's arithmetic: swiglu silu(gate)·up, geglu gelu(gate)·up (ggml's f16-table GELU),
// reglu relu(gate)·up, swiglu_oai (gpt-oss: g = min(gate, limit), u = clamp(up, ±limit),
// g·sigmoid(alpha·g)·(u + 1)), and activation (SiLU, GELU or ReLU of one input).
#include "common.cuh"

extern "C" __global__ void swiglu(const float* gate, const float* up, float* y, u32 n) {
    const u32 i = global_index();
    if (i < n) y[i] = silu(gate[i]) * up[i];
}

extern "C" __global__ void geglu(const float* gate, const float* up, float* y, u32 n) {
    const u32 i = global_index();
    if (i < n) y[i] = gelu_ggml(gate[i]) * up[i];
}

extern "C" __global__ void reglu(const float* gate, const float* up, float* y, u32 n) {
    const u32 i = global_index();
    if (i < n) y[i] = fmaxf(gate[i], 0.0f) * up[i];
}

extern "C" __global__ void swiglu_oai(const float* gate, const float* up, float* y, u32 n,
                                      float alpha, float limit) {
    const u32 i = global_index();
    if (i >= n) return;
    const float g = fminf(gate[i], limit);
    const float u = fminf(fmaxf(up[i], -limit), limit);
    y[i] = g / (1.0f + expf(alpha * -g)) * (u + 1.0f);
}

// act: 0 SiLU, 1 GELU, 2 ReLU (core's graph::Activation order).
extern "C" __global__ void activation(const float* x, float* y, u32 n, u32 act) {
    const u32 i = global_index();
    if (i >= n) return;
    const float v = x[i];
    y[i] = act == 0 ? silu(v) : act == 1 ? gelu_ggml(v) : fmaxf(v, 0.0f);
}
