// The mixture-of-experts router of moe.cu, per token (host-compilable: tested against the CPU
// backend without a GPU in crates/backend-cuda/tests/conformance/host_kernels.rs).
#pragma once
#include "common.cuh"

#define MAX_USED 32
#define GATING_SOFTMAX 0
#define GATING_SIGMOID 1
#define GATING_SOFTMAX_AFTER_TOPK 2

struct RouteArgs {
    u32 n_expert, n_used, n_tokens, gating, normalize;
    float scale;
};

__device__ float gated(const RouteArgs& a, float l, float max_logit, float inv_sum) {
    if (a.gating == GATING_SOFTMAX) return expf(l - max_logit) * inv_sum;
    if (a.gating == GATING_SIGMOID) return 1.0f / (1.0f + expf(-l));
    return l;
}

// Token t's n_used experts of the highest selection score (gated probability plus the
// optional selection bias; equal scores keep the lower index) and their weights, written
// [ids as floats..., weights...].
__device__ void route_token(const RouteArgs& a, const float* logits, const float* bias, u32 t,
                            float* y) {
    const float* l = logits + (u64)t * a.n_expert;
    float max_logit = NEG_BIG;
    for (u32 e = 0; e < a.n_expert; e++) max_logit = fmaxf(max_logit, l[e]);
    float sum = 0.0f;
    for (u32 e = 0; e < a.n_expert; e++) sum += expf(l[e] - max_logit);
    const float inv_sum = 1.0f / sum;
    u32 chosen[MAX_USED];
    float w[MAX_USED];
    for (u32 j = 0; j < a.n_used; j++) {
        u32 best = 0;
        float best_s = NEG_BIG;
        bool found = false;
        for (u32 e = 0; e < a.n_expert; e++) {
            bool taken = false;
            for (u32 q = 0; q < j; q++) taken = taken || chosen[q] == e;
            float s = gated(a, l[e], max_logit, inv_sum);
            if (bias) s += bias[e];
            if (!taken && (!found || s > best_s)) { best = e; best_s = s; found = true; }
        }
        chosen[j] = best;
        w[j] = gated(a, l[best], max_logit, inv_sum);
    }
    if (a.gating == GATING_SOFTMAX_AFTER_TOPK) {
        float wmax = NEG_BIG, wsum = 0.0f;
        for (u32 j = 0; j < a.n_used; j++) wmax = fmaxf(wmax, w[j]);
        for (u32 j = 0; j < a.n_used; j++) { w[j] = expf(w[j] - wmax); wsum += w[j]; }
        for (u32 j = 0; j < a.n_used; j++) w[j] = w[j] / wsum;
    }
    if (a.normalize) {
        float total = 0.0f;
        for (u32 j = 0; j < a.n_used; j++) total += w[j];
        total = fmaxf(total, 6.103515625e-5f);
        for (u32 j = 0; j < a.n_used; j++) w[j] = w[j] / total;
    }
    float* out = y + (u64)t * 2 * a.n_used;
    for (u32 j = 0; j < a.n_used; j++) {
        out[j] = (float)chosen[j];
        out[a.n_used + j] = w[j] * a.scale;
    }
}
