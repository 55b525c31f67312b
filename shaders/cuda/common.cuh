// Shared by every kernel file: integer types (NVRTC has no system headers), f16 conversions,
// ggml's block-byte reads, GELU/SiLU as the CPU reference computes them, warp reductions.
// Kernels are `extern "C"` so the host finds them by name; variants by weight type are
// templates instantiated under names such as `matvec_q4_0` (see `KERNEL_FOR_TYPES` in dequant.cuh).
#pragma once

// The block decoding (dequant.cuh) also compiles as host C++ (g++, no CUDA), so it is tested
// against the Rust reference on machines without a GPU (crates/backend-cuda/tests/suite/
// host_dequant.rs): the few intrinsics it uses get host versions below, and device-only
// helpers (warp and block reductions, thread indices) are left out there.
#ifndef __CUDACC__
#include <algorithm>
#include <cmath>
#include <cstring>
using std::max;
using std::min;
#define __device__
#define __global__
#define __forceinline__ inline
struct float2 {
    float x, y;
};
#endif

typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;

#define NEG_BIG (-3.0e38f)
#define WARP 32

#ifdef __CUDACC__
// f16 <-> f32 by PTX's cvt (round to nearest even), no cuda_fp16.h needed.
__device__ __forceinline__ float f16_to_f32(u16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ u16 f32_to_f16(float f) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
#else
inline float f16_to_f32(u16 h) {
    _Float16 v;
    std::memcpy(&v, &h, 2);
    return (float)v;
}

inline u16 f32_to_f16(float f) {
    _Float16 v = (_Float16)f;
    u16 h;
    std::memcpy(&h, &v, 2);
    return h;
}

inline float __uint_as_float(u32 u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// Unfused on the host too (compiled with -ffp-contract=off).
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
#endif

// The nearest f16 value, as f32 (ggml rounds activations and the KV cache through f16).
__device__ __forceinline__ float f16_round(float f) {
    return f16_to_f32(f32_to_f16(f));
}

// Little-endian reads at any byte offset: GGUF blocks are not 4-byte aligned (Q4_0 is 18).
__device__ __forceinline__ u32 load_u16(const u8* p) {
    return (u32)p[0] | ((u32)p[1] << 8);
}

__device__ __forceinline__ u32 load_u32(const u8* p) {
#ifdef __CUDACC__
    // One load where the block layout leaves the word aligned (Q4_1, Q4_K, Q5_K quants).
    if ((u64)p % 4 == 0) return *(const u32*)p;
#endif
    return (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
}

__device__ __forceinline__ float load_f16(const u8* p) {
    return f16_to_f32((u16)load_u16(p));
}

// Σ of four signed byte products plus c (the dp4a instruction, sm_61 and later).
__device__ __forceinline__ int dp4a(int a, int b, int c) {
#ifdef __CUDACC__
    int r;
    asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
#else
    for (int i = 0; i < 4; i++) c += (int)(i8)(a >> (8 * i)) * (int)(i8)(b >> (8 * i));
    return c;
#endif
}

#ifdef __CUDACC__
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = WARP / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = WARP / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Reduction over a block of `blockDim.x` (a multiple of 32, at most 1024) threads, every
// thread getting the result: warp shuffles, then one warp over the warps' results in `scratch`
// (32 floats of shared memory). `identity` fills the lanes past the last warp.
template <typename Warp>
__device__ float block_reduce(float v, float* scratch, Warp warp_op, float identity) {
    const u32 lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    v = warp_op(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    return warp_op(lane < blockDim.x / WARP ? scratch[lane] : identity);
}

__device__ float block_sum(float v, float* scratch) {
    return block_reduce(v, scratch, warp_sum, 0.0f);
}

__device__ float block_max(float v, float* scratch) {
    return block_reduce(v, scratch, warp_max, NEG_BIG);
}

#endif // __CUDACC__: device-only helpers

__device__ __forceinline__ float silu(float x) {
    return x / (1.0f + expf(-x));
}

// ggml's GELU: a table indexed by the f16 of x holding f16 results of the tanh formula.
__device__ float gelu_ggml(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    const float h = f16_round(x);
    const float u = 0.7978845608028654f * h * (1.0f + 0.044715f * h * h);
    return f16_round(0.5f * h * (1.0f + tanhf(u)));
}

#ifdef __CUDACC__
// Element i of a 1-D launch of 256-thread blocks over a 2-D grid (grids are capped at 65535
// blocks per dimension, so long rows use y too).
__device__ __forceinline__ u32 global_index() {
    return (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x;
}
#endif
