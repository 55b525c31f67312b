// y = x · wᵀ for a weight w of m rows of k elements in its GGUF block format, read directly.
//
// - matvec_<type> (decode and small batches, n ≤ 8 columns): one warp per weight row, its
//   lanes striding over the row's 32-element chunks, NC columns per launch (z) so a weight
//   chunk read once serves them all. Quantized weights take quantized activations (quantize.cu)
//   and dot products in integers with dp4a, as ggml's CPU vec_dot kernels do; F32 and F16
//   weights take float activations (rounded to f16 for F16 weights).
// - dequant_f16_<type> (prefill): rows of w dequantized to f16, for cuBLAS's f16 GEMM with f32
//   accumulation (llama.cpp's CUDA backend does the same for large batches).
#include "dequant.cuh"

#define ROWS_PER_BLOCK 4
#define NC 4

template <int T>
__device__ void matvec(const u8* w, u32 row_bytes, u32 k, u32 m, u32 n, const void* x,
                       const float2* xds, float* y) {
    const u32 row = (blockIdx.y * gridDim.x + blockIdx.x) * ROWS_PER_BLOCK + threadIdx.x / WARP;
    const u32 lane = threadIdx.x % WARP;
    const u32 col0 = blockIdx.z * NC;
    if (row >= m) return;
    const u8* wr = w + (u64)row * row_bytes;
    const u32 n_chunks = (k + 31) / 32;
    float acc[NC] = {};
    for (u32 c = lane; c < n_chunks; c += WARP) {
        if constexpr (Act<T>::KIND == ACT_F32) {
            for (int j = 0; j < NC && col0 + j < n; j++)
                acc[j] += dot32_f32<T>(wr, c, k, (const float*)x + (u64)(col0 + j) * k);
        } else {
            // The weight chunk is read once for the NC columns.
            Chunk ch;
            load_chunk<T>(wr, c, ch);
            for (int j = 0; j < NC && col0 + j < n; j++) {
                const u64 col = col0 + j;
                const int* xq = (const int*)((const i8*)x + col * k + c * 32);
                acc[j] += chunk_dot_q8<T>(ch, xq, xds[col * (k / 32) + c]);
            }
        }
    }
    for (int j = 0; j < NC; j++) {
        const float s = warp_sum(acc[j]);
        if (lane == 0 && col0 + j < n) y[(u64)(col0 + j) * m + row] = s;
    }
}

KERNEL_FOR_TYPES(matvec, matvec,
    (const u8* w, u32 row_bytes, u32 k, u32 m, u32 n, const void* x, const float2* xds, float* y),
    (w, row_bytes, k, m, n, x, xds, y))

// One thread per 32-element chunk of the `rows` rows: f16 weights, row-major [rows][k].
template <int T>
__device__ void dequant_f16(const u8* w, u32 row_bytes, u32 k, u32 rows, u16* out) {
    const u32 n_chunks = (k + 31) / 32;
    const u64 i = (u64)(blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= (u64)rows * n_chunks) return;
    const u32 row = (u32)(i / n_chunks), c = (u32)(i % n_chunks);
    float v[32];
    dequant32<T>(w + (u64)row * row_bytes, c, k, v);
    const u32 len = min(32u, k - c * 32);
    for (u32 e = 0; e < len; e++) out[(u64)row * k + c * 32 + e] = f32_to_f16(v[e]);
}

KERNEL_FOR_TYPES(dequant_f16, dequant_f16,
    (const u8* w, u32 row_bytes, u32 k, u32 rows, u16* out),
    (w, row_bytes, k, rows, out))
