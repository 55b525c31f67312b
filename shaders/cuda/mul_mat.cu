// y = x · wᵀ for a weight w of m rows of k elements in its GGUF block format, read directly.
//
// - matvec_<type> (decode and small batches, n ≤ 8 columns), NC columns per launch (z).
//   Quantized weights take quantized activations (quantize.cu) and integer dot products with
//   dp4a in ggml's CPU float order (ggml_order.cuh: 8 threads per dot product; a warp takes
//   one row and 4 columns, or 4 rows of one column in decode). F32 and F16 weights take float
//   activations (rounded to f16 for F16 weights), a warp per row striding over it.
// - dequant_f16_<type> (prefill): rows of w dequantized to f16, for cuBLAS's f16 GEMM with f32
//   accumulation (llama.cpp's CUDA backend does the same for large batches).
#include "ggml_order.cuh"

#define WARPS_PER_BLOCK 4
#define NC 4

// F32 / F16 weights: the warp's lanes stride over the row, 4 elements at a time (16- or
// 8-byte loads where row and activations allow, else one at a time), NC columns.
template <int T>
__device__ void matvec_float(const u8* wr, u32 k, u32 n, u32 col0, const float* x, float* acc) {
    const u32 lane = threadIdx.x % WARP;
    const u32 nc = min((u32)NC, n - col0);
    const bool vec = k % 4 == 0 && (u64)wr % (T == T_F32 ? 16 : 8) == 0 && (u64)x % 16 == 0;
    if (vec) {
        for (u32 e = lane * 4; e < k; e += WARP * 4) {
            float wv[4];
            if constexpr (T == T_F32) {
                const float4 v = *(const float4*)(wr + (u64)e * 4);
                wv[0] = v.x, wv[1] = v.y, wv[2] = v.z, wv[3] = v.w;
            } else {
                const uint2 v = *(const uint2*)(wr + (u64)e * 2);
                wv[0] = f16_to_f32((u16)v.x), wv[1] = f16_to_f32((u16)(v.x >> 16));
                wv[2] = f16_to_f32((u16)v.y), wv[3] = f16_to_f32((u16)(v.y >> 16));
            }
            for (u32 j = 0; j < nc; j++) {
                const float4 xv = *(const float4*)(x + (u64)(col0 + j) * k + e);
                acc[j] = fmaf(wv[0], xv.x, acc[j]);
                acc[j] = fmaf(wv[1], xv.y, acc[j]);
                acc[j] = fmaf(wv[2], xv.z, acc[j]);
                acc[j] = fmaf(wv[3], xv.w, acc[j]);
            }
        }
    } else {
        for (u32 e = lane; e < k; e += WARP) {
            const float wv = T == T_F32 ? ((const float*)wr)[e] : f16_to_f32(((const u16*)wr)[e]);
            for (u32 j = 0; j < nc; j++) acc[j] = fmaf(wv, x[(u64)(col0 + j) * k + e], acc[j]);
        }
    }
}

// Grid: one warp per weight row and NC columns (z), except for quantized weights with one
// column (decode), where the warp's 4 groups of 8 threads take 4 rows.
template <int T>
__device__ void matvec(const u8* w, u32 row_bytes, u32 k, u32 m, u32 n, const void* x,
                       const float2* xds, float* y) {
    const u32 warp = (blockIdx.y * gridDim.x + blockIdx.x) * WARPS_PER_BLOCK + threadIdx.x / WARP;
    const u32 lane = threadIdx.x % WARP;
    if constexpr (Act<T>::KIND == ACT_F32) {
        const u32 row = warp, col0 = blockIdx.z * NC;
        if (row >= m) return;  // the whole warp
        float acc[NC] = {};
        matvec_float<T>(w + (u64)row * row_bytes, k, n, col0, (const float*)x, acc);
        for (int j = 0; j < NC; j++) {
            const float s = warp_sum(acc[j]);
            if (lane == 0 && col0 + j < n) y[(u64)(col0 + j) * m + row] = s;
        }
    } else {
        // ggml's order (ggml_order.cuh), 8 threads per dot product. A group past the last row
        // or column repeats the last one (every thread takes part in the lane exchange).
        const u32 g = lane / 8;
        const bool decode = n == 1;
        const u32 first_row = decode ? warp * 4 : warp;
        if (first_row >= m) return;  // the whole warp
        const u32 row = first_row + (decode ? g : 0);
        const u32 col = decode ? 0 : blockIdx.z * NC + g;
        const u32 r = min(row, m - 1);
        const u64 c = min(col, n - 1);
        const float s = ggml_dot8<T>(w + (u64)r * row_bytes, k / Ty<T>::QK, lane % 8,
                                     (const int*)((const i8*)x + c * k), xds + c * (k / 32));
        if (lane % 8 == 0 && row < m && col < n) y[c * m + r] = s;
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
