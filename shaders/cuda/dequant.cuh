// ggml's block formats, read 32 weights (one "chunk") at a time. Template argument T is the
// ggml type id (GgmlType in crates/gguf), the same set the WGSL backend computes with
// (shaders/wgsl/dequant.inc.wgsl): F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K,
// MXFP4. Every quantized format has 32-element (sub-)blocks, so a chunk never straddles two.
//
// A quantized chunk is 32 small signed integers q (packed 4 to an int, for dp4a), scales d0
// (elements 0..15) and d1 (16..31) and an offset m: weight i = d * q_i + m. That is ggml's
// dequantize arithmetic term for term (q4_0: (n - 8) * d; q4_1: n * d + m; q4_K:
// (d * sc) * n - dmin * mn; q6_K: (d * sc) * (n - 32); ...), so `chunk_value` with unfused
// multiply and add gives ggml's floats bit for bit. (The quantized dot products, in ggml's
// float order, are ggml_order.cuh's.)
#pragma once
#include "common.cuh"

#define T_F32 0
#define T_F16 1
#define T_Q4_0 2
#define T_Q4_1 3
#define T_Q5_0 6
#define T_Q5_1 7
#define T_Q8_0 8
#define T_Q4_K 12
#define T_Q5_K 13
#define T_Q6_K 14
#define T_MXFP4 39

// Elements and bytes per block.
template <int T> struct Ty;
template <> struct Ty<T_F32> { enum { QK = 1, BYTES = 4 }; };
template <> struct Ty<T_F16> { enum { QK = 1, BYTES = 2 }; };
template <> struct Ty<T_Q4_0> { enum { QK = 32, BYTES = 18 }; };
template <> struct Ty<T_Q4_1> { enum { QK = 32, BYTES = 20 }; };
template <> struct Ty<T_Q5_0> { enum { QK = 32, BYTES = 22 }; };
template <> struct Ty<T_Q5_1> { enum { QK = 32, BYTES = 24 }; };
template <> struct Ty<T_Q8_0> { enum { QK = 32, BYTES = 34 }; };
template <> struct Ty<T_Q4_K> { enum { QK = 256, BYTES = 144 }; };
template <> struct Ty<T_Q5_K> { enum { QK = 256, BYTES = 176 }; };
template <> struct Ty<T_Q6_K> { enum { QK = 256, BYTES = 210 }; };
template <> struct Ty<T_MXFP4> { enum { QK = 32, BYTES = 17 }; };

// Which activation format the integer dot of a weight type takes, as ggml's CPU backend
// quantizes activations for its vec_dot kernels: Q8_0 blocks of 32, Q8_K blocks of 256, or
// floats (F32 as they are, F16 rounded to f16).
#define ACT_F32 0
#define ACT_Q8_0 1
#define ACT_Q8_K 2
template <int T> struct Act { enum { KIND = (T == T_F32 || T == T_F16) ? ACT_F32 : (T >= T_Q4_K && T <= T_Q6_K) ? ACT_Q8_K : ACT_Q8_0 }; };

struct Chunk {
    int q[8];
    float d0, d1, m;
};

// Per-byte n - k of four unsigned bytes n in 0..127 (k < 128), with no borrow between bytes:
// the top bit of each byte is set first and flipped back after.
__device__ __forceinline__ int sub_bytes(u32 n, u32 k4) {
    return (int)(((n | 0x80808080u) - k4) ^ 0x80808080u);
}

// Bits b .. b+3 of `bits` as bit 4 of four bytes (Q5 formats' fifth bit).
__device__ __forceinline__ u32 bit4_bytes(u32 bits, u32 b) {
    const u32 h = bits >> b;
    return ((h & 1u) << 4) | ((h & 2u) << 11) | ((h & 4u) << 18) | ((h & 8u) << 25);
}

// ggml's get_scale_min_k4: 6-bit scale and min of sub-block j from the 12 packed bytes `q`.
__device__ __forceinline__ void scale_min_k4_int(u32 j, const u8* q, int& sc, int& mn) {
    if (j < 4) {
        sc = q[j] & 63;
        mn = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
        mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// The same as floats (the dequantizing kernels' form).
__device__ __forceinline__ void scale_min_k4(u32 j, const u8* q, float& sc, float& mn) {
    int s, m;
    scale_min_k4_int(j, q, s, m);
    sc = (float)s;
    mn = (float)m;
}

// Q4_K / Q5_K: sub-block `sub`'s scale d · sc and offset -dmin · mn (the block starts with
// f16 d, f16 dmin and the 12 packed scale bytes).
__device__ __forceinline__ void k_scales(const u8* b, u32 sub, Chunk& o) {
    float sc, mn;
    scale_min_k4(sub, b + 4, sc, mn);
    o.d0 = o.d1 = __fmul_rn(load_f16(b), sc);
    o.m = -__fmul_rn(load_f16(b + 2), mn);
}

// ggml's kvalues_mxfp4 (E2M1 values doubled) of the four nibbles in the low bits of each byte.
__device__ __forceinline__ int mxfp4_bytes(u32 nibbles) {
    const i8 kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    u32 out = 0;
    for (int b = 0; b < 4; b++) out |= (u32)(u8)kv[(nibbles >> (8 * b)) & 15u] << (8 * b);
    return (int)out;
}

// Chunk c (elements 32c .. 32c + 31) of the quantized row starting at `row`.
template <int T> __device__ void load_chunk(const u8* row, u32 c, Chunk& o);

template <> __device__ void load_chunk<T_Q4_0>(const u8* row, u32 c, Chunk& o) {
    const u8* b = row + c * 18;
    o.d0 = o.d1 = load_f16(b);
    o.m = 0.0f;
    for (int t = 0; t < 4; t++) {
        const u32 w = load_u32(b + 2 + 4 * t);
        o.q[t] = sub_bytes(w & 0x0f0f0f0fu, 0x08080808u);
        o.q[t + 4] = sub_bytes((w >> 4) & 0x0f0f0f0fu, 0x08080808u);
    }
}

template <> __device__ void load_chunk<T_Q4_1>(const u8* row, u32 c, Chunk& o) {
    const u8* b = row + c * 20;
    o.d0 = o.d1 = load_f16(b);
    o.m = load_f16(b + 2);
    for (int t = 0; t < 4; t++) {
        const u32 w = load_u32(b + 4 + 4 * t);
        o.q[t] = (int)(w & 0x0f0f0f0fu);
        o.q[t + 4] = (int)((w >> 4) & 0x0f0f0f0fu);
    }
}

template <> __device__ void load_chunk<T_Q5_0>(const u8* row, u32 c, Chunk& o) {
    const u8* b = row + c * 22;
    o.d0 = o.d1 = load_f16(b);
    o.m = 0.0f;
    const u32 qh = load_u32(b + 2);
    for (int t = 0; t < 4; t++) {
        const u32 w = load_u32(b + 6 + 4 * t);
        o.q[t] = sub_bytes((w & 0x0f0f0f0fu) | bit4_bytes(qh, 4 * t), 0x10101010u);
        o.q[t + 4] = sub_bytes(((w >> 4) & 0x0f0f0f0fu) | bit4_bytes(qh, 16 + 4 * t), 0x10101010u);
    }
}

template <> __device__ void load_chunk<T_Q5_1>(const u8* row, u32 c, Chunk& o) {
    const u8* b = row + c * 24;
    o.d0 = o.d1 = load_f16(b);
    o.m = load_f16(b + 2);
    const u32 qh = load_u32(b + 4);
    for (int t = 0; t < 4; t++) {
        const u32 w = load_u32(b + 8 + 4 * t);
        o.q[t] = (int)((w & 0x0f0f0f0fu) | bit4_bytes(qh, 4 * t));
        o.q[t + 4] = (int)(((w >> 4) & 0x0f0f0f0fu) | bit4_bytes(qh, 16 + 4 * t));
    }
}

template <> __device__ void load_chunk<T_Q8_0>(const u8* row, u32 c, Chunk& o) {
    const u8* b = row + c * 34;
    o.d0 = o.d1 = load_f16(b);
    o.m = 0.0f;
    for (int t = 0; t < 8; t++) o.q[t] = (int)load_u32(b + 2 + 4 * t);
}

// 17-byte blocks: E8M0 exponent e, then element j in the low nibble of byte j, j + 16 in the
// high one. The scale is ggml_e8m0_to_fp32_half: 2^(e - 128) built from its bits.
template <> __device__ void load_chunk<T_MXFP4>(const u8* row, u32 c, Chunk& o) {
    const u8* b = row + c * 17;
    const u32 e = b[0];
    o.d0 = o.d1 = __uint_as_float(e < 2 ? 0x00200000u << e : (e - 1) << 23);
    o.m = 0.0f;
    for (int t = 0; t < 4; t++) {
        const u32 w = load_u32(b + 1 + 4 * t);
        o.q[t] = mxfp4_bytes(w & 0x0f0f0f0fu);
        o.q[t + 4] = mxfp4_bytes((w >> 4) & 0x0f0f0f0fu);
    }
}

template <> __device__ void load_chunk<T_Q4_K>(const u8* row, u32 c, Chunk& o) {
    const u8* b = row + (c / 8) * 144;
    const u32 sub = c % 8;
    k_scales(b, sub, o);
    const u8* qs = b + 16 + 32 * (sub / 2);
    const u32 shift = (sub % 2) * 4;
    for (int t = 0; t < 8; t++) o.q[t] = (int)((load_u32(qs + 4 * t) >> shift) & 0x0f0f0f0fu);
}

template <> __device__ void load_chunk<T_Q5_K>(const u8* row, u32 c, Chunk& o) {
    const u8* b = row + (c / 8) * 176;
    const u32 sub = c % 8;
    k_scales(b, sub, o);
    const u8* qh = b + 16;
    const u8* ql = b + 48 + 32 * (sub / 2);
    const u32 shift = (sub % 2) * 4;
    for (int t = 0; t < 8; t++) {
        const u32 lo = (load_u32(ql + 4 * t) >> shift) & 0x0f0f0f0fu;
        const u32 hi = ((load_u32(qh + 4 * t) >> sub) & 0x01010101u) << 4;
        o.q[t] = (int)(lo | hi);
    }
}

// 210-byte blocks: ql[128], qh[64], int8 scales[16] (one per 16 weights), d at byte 208.
template <> __device__ void load_chunk<T_Q6_K>(const u8* row, u32 c, Chunk& o) {
    const u8* b = row + (c / 8) * 210;
    const u32 n = (c % 8) / 4, r = c % 4;
    const float d = load_f16(b + 208);
    const u8* ql = b + 64 * n + (r & 1) * 32;
    const u8* qh = b + 128 + 32 * n;
    const u32 shift = (r >> 1) * 4;
    const i8* sc = (const i8*)(b + 192 + 8 * n + 2 * r);
    o.d0 = __fmul_rn(d, (float)sc[0]);
    o.d1 = __fmul_rn(d, (float)sc[1]);
    o.m = 0.0f;
    for (int t = 0; t < 8; t++) {
        const u32 lo = (load_u32(ql + 4 * t) >> shift) & 0x0f0f0f0fu;
        const u32 hi = ((load_u32(qh + 4 * t) >> (2 * r)) & 0x03030303u) << 4;
        o.q[t] = sub_bytes(lo | hi, 0x20202020u);
    }
}

__device__ __forceinline__ int chunk_q(const Chunk& ch, int i) {
    return (int)(i8)(ch.q[i / 4] >> (8 * (i % 4)));
}

// Weight i of a chunk, as ggml's dequantize_row computes it (no fused multiply-add).
__device__ __forceinline__ float chunk_value(const Chunk& ch, int i) {
    const float v = __fmul_rn(i < 16 ? ch.d0 : ch.d1, (float)chunk_q(ch, i));
    return ch.m == 0.0f ? v : __fadd_rn(v, ch.m);
}

// Elements 32c .. 32c + 31 of weight row `row` (k elements) as floats; past k: zeros (only
// float rows may end inside a chunk).
template <int T> __device__ void dequant32(const u8* row, u32 c, u32 k, float* o) {
    if constexpr (T == T_F32 || T == T_F16) {
        for (int i = 0; i < 32; i++) {
            const u32 e = c * 32 + i;
            o[i] = e >= k ? 0.0f
                 : T == T_F32 ? ((const float*)row)[e]
                 : f16_to_f32(((const u16*)row)[e]);
        }
    } else {
        Chunk ch;
        load_chunk<T>(row, c, ch);
        for (int i = 0; i < 32; i++) o[i] = chunk_value(ch, i);
    }
}

// The chunk's dot product with float activations `x` (F32 and F16 weights; `x` already
// rounded to f16 for F16 weights, as ggml's CPU backend converts them).
template <int T> __device__ float dot32_f32(const u8* row, u32 c, u32 k, const float* x) {
    float w[32];
    dequant32<T>(row, c, k, w);
    float acc = 0.0f;
    const u32 n = min(32u, k - c * 32);
    for (u32 i = 0; i < n; i++) acc = fmaf(w[i], x[c * 32 + i], acc);
    return acc;
}

// Stamps out an extern "C" kernel per weight type: KERNEL_FOR_TYPES(name_prefix, TEMPLATE,
// (params), (args)) defines name_prefix_f32 ... name_prefix_mxfp4 calling TEMPLATE<T>(args).
#define KERNEL_FOR_TYPE(prefix, suffix, tmpl, T, params, args) \
    extern "C" __global__ void prefix##_##suffix params { tmpl<T> args; }
#define KERNEL_FOR_TYPES(prefix, tmpl, params, args)               \
    KERNEL_FOR_TYPE(prefix, f32, tmpl, T_F32, params, args)        \
    KERNEL_FOR_TYPE(prefix, f16, tmpl, T_F16, params, args)        \
    KERNEL_FOR_TYPE(prefix, q4_0, tmpl, T_Q4_0, params, args)      \
    KERNEL_FOR_TYPE(prefix, q4_1, tmpl, T_Q4_1, params, args)      \
    KERNEL_FOR_TYPE(prefix, q5_0, tmpl, T_Q5_0, params, args)      \
    KERNEL_FOR_TYPE(prefix, q5_1, tmpl, T_Q5_1, params, args)      \
    KERNEL_FOR_TYPE(prefix, q8_0, tmpl, T_Q8_0, params, args)      \
    KERNEL_FOR_TYPE(prefix, q4_k, tmpl, T_Q4_K, params, args)      \
    KERNEL_FOR_TYPE(prefix, q5_k, tmpl, T_Q5_K, params, args)      \
    KERNEL_FOR_TYPE(prefix, q6_k, tmpl, T_Q6_K, params, args)      \
    KERNEL_FOR_TYPE(prefix, mxfp4, tmpl, T_MXFP4, params, args)
