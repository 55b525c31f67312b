// mul_mat_id: the experts' matmul over the chosen experts only. For every (token t, slot j)
// of the route, y[t·n_used + j][r] = dot(weight row e·m + r, x[row]) with e the slot's expert
// and row the token's (x_shared: one input row per token) or the slot's. One warp per output
// element; the dot products are mul_mat.cu's (quantized: ggml's order, by the warp's first 8
// threads; the other 24 repeat them, so that every thread takes part in the lane exchange).
// The route ([ids as floats..., weights...] per token) comes from moe.cu's moe_route.
#include "ggml_order.cuh"

template <int T>
__device__ void mul_mat_id(const u8* w, u32 row_bytes, u32 k, u32 m, u32 n_used, u32 n_slots,
                           u32 x_shared, const void* x, const float2* xds, const float* route,
                           float* y) {
    const u64 out = (u64)(blockIdx.y * gridDim.x + blockIdx.x) * (blockDim.x / WARP)
                  + threadIdx.x / WARP;
    const u32 lane = threadIdx.x % WARP;
    if (out >= (u64)n_slots * m) return;
    const u32 slot = (u32)(out / m), r = (u32)(out % m);
    const u32 t = slot / n_used;
    const u32 e = (u32)route[(u64)t * 2 * n_used + slot % n_used];
    const u32 xrow = x_shared ? t : slot;
    const u8* wr = w + ((u64)e * m + r) * row_bytes;
    if constexpr (Act<T>::KIND == ACT_F32) {
        float acc = 0.0f;
        for (u32 c = lane; c < (k + 31) / 32; c += WARP)
            acc += dot32_f32<T>(wr, c, k, (const float*)x + (u64)xrow * k);
        acc = warp_sum(acc);
        if (lane == 0) y[out] = acc;
    } else {
        const float s = ggml_dot8<T>(wr, k / Ty<T>::QK, lane % 8,
                                     (const int*)((const i8*)x + (u64)xrow * k), xds + (u64)xrow * (k / 32));
        if (lane == 0) y[out] = s;
    }
}

KERNEL_FOR_TYPES(mul_mat_id, mul_mat_id,
    (const u8* w, u32 row_bytes, u32 k, u32 m, u32 n_used, u32 n_slots, u32 x_shared,
     const void* x, const float2* xds, const float* route, float* y),
    (w, row_bytes, k, m, n_used, n_slots, x_shared, x, xds, route, y))
