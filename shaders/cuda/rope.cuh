// ggml's rope (rope.cu; the K re-rotation of a context shift in attention.cu), one output
// element per thread. The angle of pair i is freq_scale · pos · theta_scale^i, theta_scale^i built by repeated multiplication as
// ggml's rope cache does (theta_scale = the host's powf of base^(-2/n_dims), ggml's), divided
// by the pair's frequency factor when the model has them (freq_factors != null), blended with
// the unscaled angle under YaRN (ext_factor != 0). mode 0: adjacent pairs (2i, 2i+1) (llama);
// mode 1: pairs (i, i + n_dims/2) (NeoX, gemma, qwen). sin/cos are CUDA's full-precision
// sinf/cosf (within 2 ulp; no fast math).
#pragma once
#include "common.cuh"

struct RopeArgs {
    u32 head_dim, n_heads, n_tokens, n_dims, mode;
    float freq_scale, theta_scale, attn_factor, ext_factor, corr0, corr1;
};

__device__ float rope_angle(const RopeArgs& a, float pos, u32 i, const float* freq_factors) {
    float theta = pos;
    for (u32 j = 0; j < i; j++) theta *= a.theta_scale;
    if (freq_factors) theta = theta / freq_factors[i];
    const float interp = a.freq_scale * theta;
    if (a.ext_factor == 0.0f) return interp;
    const float y = ((float)i - a.corr0) / fmaxf(0.001f, a.corr1 - a.corr0);
    const float mix = (1.0f - fminf(fmaxf(y, 0.0f), 1.0f)) * a.ext_factor;
    return fmaf(interp, 1.0f - mix, theta * mix);
}

// Element e of a head: its pair, its partner element and whether it is the pair's second.
// Elements e >= n_dims pass through (pair n_dims).
__device__ void rope_slot(u32 e, u32 n_dims, u32 mode, u32& pair, u32& partner, bool& second) {
    if (e >= n_dims) { pair = n_dims; partner = e; second = false; return; }
    if (mode == 0) { pair = e / 2; partner = e ^ 1u; second = (e & 1u) == 1u; return; }
    const u32 half = n_dims / 2;
    if (e < half) { pair = e; partner = e + half; second = false; }
    else { pair = e - half; partner = e - half; second = true; }
}

__device__ float rope_rotate(float v, float p, float theta, bool second, float mscale) {
    const float s = sinf(theta) * mscale, c = cosf(theta) * mscale;
    return second ? fmaf(p, s, v * c) : fmaf(v, c, -(p * s));
}

// The rotated value of element i of x (rows of head_dim) at position `pos`.
__device__ float rope_element(const RopeArgs& a, const float* x, u32 i, float pos,
                              const float* freq_factors) {
    const u32 e = i % a.head_dim;
    u32 pair, partner;
    bool second;
    rope_slot(e, a.n_dims, a.mode, pair, partner, second);
    if (pair == a.n_dims) return x[i];
    const float theta = rope_angle(a, pos, pair, freq_factors);
    return rope_rotate(x[i], x[i - e + partner], theta, second, a.attn_factor);
}

