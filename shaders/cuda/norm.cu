// rms_norm: each row divided by its root mean square (ggml_rms_norm), one block per row.
// Optionally fused with the norm weight (the graph's rms_norm + mul_weight): w == null skips it.
#include "common.cuh"

extern "C" __global__ void rms_norm(const float* x, const float* w, float* y, u32 width,
                                    u32 rows, float eps) {
    __shared__ float scratch[32];
    const u32 row = blockIdx.y * gridDim.x + blockIdx.x;
    if (row >= rows) return;
    const float* xr = x + (u64)row * width;
    float s = 0.0f;
    for (u32 i = threadIdx.x; i < width; i += blockDim.x) s = fmaf(xr[i], xr[i], s);
    s = block_sum(s, scratch);
    const float scale = 1.0f / sqrtf(s / (float)width + eps);
    float* yr = y + (u64)row * width;
    for (u32 i = threadIdx.x; i < width; i += blockDim.x) {
        const float v = xr[i] * scale;
        yr[i] = w ? v * w[i] : v;
    }
}
