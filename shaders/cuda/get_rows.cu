// get_rows: the embedding rows of the step's token ids, dequantized to f32 exactly as ggml's
// dequantize_row_* (dequant.cuh). One thread per 32-element chunk (x) of a token's row (y).
#include "dequant.cuh"

template <int T>
__device__ void get_rows(const u8* w, u32 row_bytes, u32 k, const u32* tokens, u32 n_tokens,
                         float* y) {
    const u32 c = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
    if (c * 32 >= k || t >= n_tokens) return;
    float v[32];
    dequant32<T>(w + (u64)tokens[t] * row_bytes, c, k, v);
    const u32 len = min(32u, k - c * 32);
    for (u32 e = 0; e < len; e++) y[(u64)t * k + c * 32 + e] = v[e];
}

KERNEL_FOR_TYPES(get_rows, get_rows,
    (const u8* w, u32 row_bytes, u32 k, const u32* tokens, u32 n_tokens, float* y),
    (w, row_bytes, k, tokens, n_tokens, y))
