// Mixture of experts around mul_mat_id.cu: the router and the weighted sum, as the WGSL
// kernels (moe_route.wgsl, moe_sum.wgsl) and the CPU reference compute them.
#include "moe.cuh"

// Per token (one thread each): route_token (moe.cuh).
extern "C" __global__ void moe_route(RouteArgs a, const float* logits, const float* bias,
                                     float* y) {
    const u32 t = global_index();
    if (t < a.n_tokens) route_token(a, logits, bias, t, y);
}

// y[t][i] = Σ over the token's experts j, in order, of x[t][j][i] · weight[t][j].
extern "C" __global__ void moe_sum(const float* x, const float* route, float* y, u32 n, u32 m,
                                   u32 n_used) {
    const u32 i = global_index();
    if (i >= n) return;
    const u32 t = i / m, r = i % m;
    const float* wt = route + (u64)t * 2 * n_used + n_used;
    const float* xt = x + (u64)t * n_used * m + r;
    float acc = xt[0] * wt[0];
    for (u32 j = 1; j < n_used; j++) acc += xt[(u64)j * m] * wt[j];
    y[i] = acc;
}
