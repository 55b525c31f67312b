// Quantized dot products in the float arithmetic of ggml's x86 (AVX2) vec_dot kernels,
// operation for operation, as crates/quant/src/vec_dot/ggml_order.rs defines it (the CPU
// backend's numbers, and llama.cpp's): per block, 8 integer lanes (lane l: the products of
// bytes 4l..4l+3 of each 32-element group, times the group's scale for the K-quants),
// converted to f32 and fused-multiply-added into 8 float lanes with the block's
// d_weight · d_activation; the min terms beside them; at the end ggml's horizontal sum.
//
// Why: activations are quantized, so a last-bit difference in one matmul output can move a
// quant of the next layer's input by a whole step; summing in another order (a warp's tree)
// makes greedy text part from llama.cpp's after some tokens.
//
// Integer lane sums are exact however they are formed. Each float lane runs over the row's
// blocks in order, so one thread computes one lane (`ggml_lane`: 8 threads per dot product),
// and `ggml_total` adds the 8 lanes' results as ggml does. Compiles as host C++ too, where
// crates/backend-cuda/tests/host/dequant_harness.cpp checks it bit for bit against the
// quant crate.
#pragma once
#include "dequant.cuh"

// One thread's share of a dot product: lane l of ggml's __m256 accumulator, and beside it
// - Q4_1 / Q5_1 / Q5_K: the scalar min sum `summs` (every lane computes the same);
// - Q4_K: lane l % 4 of the 4-lane min accumulator `acc_m`;
// - MXFP4 with an odd block count: the last block's scale (`side`) and lane l's integer sum
//   of it (`tail`), which ggml's scalar tail loop adds after the horizontal sum.
struct GgmlLane {
    float acc, side;
    int tail;
};

// Bytes 4l..4l+3 of a legacy (32-element) block's quants as four signed bytes: elements
// 4l..4l+3 (low nibbles hold elements 0..15, high nibbles 16..31).
template <int T> __device__ int legacy_lane_q(const u8* b, u32 l) {
    const u32 nib_shift = l < 4 ? 0 : 4;
    if constexpr (T == T_Q4_0) {
        return sub_bytes((load_u32(b + 2 + 4 * (l % 4)) >> nib_shift) & 0x0f0f0f0fu, 0x08080808u);
    } else if constexpr (T == T_Q4_1) {
        return (int)((load_u32(b + 4 + 4 * (l % 4)) >> nib_shift) & 0x0f0f0f0fu);
    } else if constexpr (T == T_Q5_0) {
        const u32 n = (load_u32(b + 6 + 4 * (l % 4)) >> nib_shift) & 0x0f0f0f0fu;
        return sub_bytes(n | bit4_bytes(load_u32(b + 2), 4 * l), 0x10101010u);
    } else if constexpr (T == T_Q5_1) {
        const u32 n = (load_u32(b + 8 + 4 * (l % 4)) >> nib_shift) & 0x0f0f0f0fu;
        return (int)(n | bit4_bytes(load_u32(b + 4), 4 * l));
    } else if constexpr (T == T_Q8_0) {
        return (int)load_u32(b + 2 + 4 * l);
    } else {
        static_assert(T == T_MXFP4, "legacy_lane_q: not a legacy type");
        return mxfp4_bytes((load_u32(b + 1 + 4 * (l % 4)) >> nib_shift) & 0x0f0f0f0fu);
    }
}

// The weight scale of a legacy block times its activation scale, as ggml forms it.
template <int T> __device__ float legacy_scale(const u8* b, float dy) {
    if constexpr (T == T_MXFP4) {
        const u32 e = b[0];
        return __fmul_rn(dy, __uint_as_float(e < 2 ? 0x00200000u << e : (e - 1) << 23));
    } else {
        return __fmul_rn(load_f16(b), dy);
    }
}

// Σ of the 32 activations of group g of a 256-block (`x`: its 64 ints), and of its halves.
__device__ __forceinline__ int group_sum(const int* x, u32 g, u32 first, u32 count) {
    int s = 0;
    for (u32 t = first; t < first + count; t++) s = dp4a(0x01010101, x[8 * g + t], s);
    return s;
}

// Lane l's integer sum of K-quant super-block `b` against activations `x` (64 ints), and its
// min contribution (Q4_K: acc_m lane l % 4's integer; Q5_K: ggml's isum).
template <int T> __device__ int k_lane(const u8* b, const int* x, u32 l, int& min_term) {
    int s = 0;
    if constexpr (T == T_Q4_K || T == T_Q5_K) {
        const u8* qs = b + (T == T_Q4_K ? 16 : 48);
        for (u32 g = 0; g < 8; g++) {
            int sc, mn;
            scale_min_k4_int(g, b + 4, sc, mn);
            u32 q = (load_u32(qs + 32 * (g / 2) + 4 * l) >> (4 * (g % 2))) & 0x0f0f0f0fu;
            if constexpr (T == T_Q5_K) q |= ((load_u32(b + 16 + 4 * l) >> g) & 0x01010101u) << 4;
            s += sc * dp4a((int)q, x[8 * g + l], 0);
        }
        // madd_epi16(mins, hadd_epi16(bsums)): the min of group m times its 32 activations.
        auto pair = [&](u32 k) {
            int sc0, mn0, sc1, mn1;
            scale_min_k4_int(2 * k, b + 4, sc0, mn0);
            scale_min_k4_int(2 * k + 1, b + 4, sc1, mn1);
            return mn0 * group_sum(x, 2 * k, 0, 8) + mn1 * group_sum(x, 2 * k + 1, 0, 8);
        };
        if constexpr (T == T_Q4_K) {
            min_term = pair(l % 4);
        } else {
            min_term = (pair(0) + pair(1)) + (pair(2) + pair(3));
        }
    } else {
        static_assert(T == T_Q6_K, "k_lane: not a K-quant");
        const i8* sc = (const i8*)(b + 192);
        for (u32 g = 0; g < 8; g++) {
            const u32 h = g / 4, gg = g % 4;
            const u32 lo = (load_u32(b + 64 * h + 32 * (gg % 2) + 4 * l) >> (4 * (gg / 2))) & 0x0f0f0f0fu;
            const u32 hi = ((load_u32(b + 128 + 32 * h + 4 * l) >> (2 * gg)) & 0x03030303u) << 4;
            s += (int)sc[2 * g + (l < 4 ? 0 : 1)] * dp4a((int)(lo | hi), x[8 * g + l], 0);
        }
        // The unsigned 6-bit quants went in; ggml subtracts 32 per lane from the bsums
        // (`q8sclsub`): lane l -= 32 · (bsums[2l] · sc[2l] + bsums[2l+1] · sc[2l+1]).
        const int off = group_sum(x, l, 0, 4) * sc[2 * l] + group_sum(x, l, 4, 4) * sc[2 * l + 1];
        s = (int)((u32)s - ((u32)off << 5));
        min_term = 0;
    }
    return s;
}

// Lane l (0..7) of the dot product of a weight row of `nb` blocks with one activation column:
// `x` its int8 quants (as ints), `xds` its per-32 (d, s) pairs (quantize.cu's layout).
template <int T>
__device__ GgmlLane ggml_lane(const u8* row, u32 nb, u32 l, const int* x, const float2* xds) {
    GgmlLane r = {0.0f, 0.0f, 0};
    constexpr u32 BYTES = Ty<T>::BYTES;
    if constexpr (T == T_Q4_K || T == T_Q5_K || T == T_Q6_K) {
        for (u32 i = 0; i < nb; i++) {
            const u8* b = row + i * BYTES;
            const float dy = xds[i * 8].x;
            int min_term;
            const int s = k_lane<T>(b, x + i * 64, l, min_term);
            const float d = __fmul_rn(dy, load_f16(b + (T == T_Q6_K ? 208 : 0)));
            if constexpr (T != T_Q6_K) {
                const float dmin = -__fmul_rn(dy, load_f16(b + 2));
                r.side = fmaf(dmin, (float)min_term, r.side);
            }
            r.acc = fmaf(d, (float)s, r.acc);
        }
    } else if constexpr (T == T_MXFP4) {
        // ggml's AVX2 kernel: blocks in pairs, even ones into one register and odd ones into
        // another, added before the horizontal sum; an odd last block goes to the scalar tail.
        float even = 0.0f, odd = 0.0f;
        u32 i = 0;
        for (; i + 1 < nb; i += 2) {
            const u8* b0 = row + i * BYTES;
            const u8* b1 = b0 + BYTES;
            even = fmaf(legacy_scale<T>(b0, xds[i].x), (float)dp4a(legacy_lane_q<T>(b0, l), x[8 * i + l], 0), even);
            odd = fmaf(legacy_scale<T>(b1, xds[i + 1].x),
                       (float)dp4a(legacy_lane_q<T>(b1, l), x[8 * (i + 1) + l], 0), odd);
        }
        r.acc = even + odd;
        if (i < nb) {
            const u8* b = row + i * BYTES;
            r.side = legacy_scale<T>(b, xds[i].x);
            r.tail = dp4a(legacy_lane_q<T>(b, l), x[8 * i + l], 0);
        }
    } else {
        for (u32 i = 0; i < nb; i++) {
            const u8* b = row + i * BYTES;
            if constexpr (T == T_Q4_1 || T == T_Q5_1) r.side = fmaf(load_f16(b + 2), xds[i].y, r.side);
            const int s = dp4a(legacy_lane_q<T>(b, l), x[8 * i + l], 0);
            r.acc = fmaf(legacy_scale<T>(b, xds[i].x), (float)s, r.acc);
        }
    }
    return r;
}

// The dot product from its 8 lanes, as ggml finishes it: hsum_float_8 (high half onto the
// low one, lanes 0+2 / 1+3, then 0+1), then the min terms or the MXFP4 tail.
template <int T>
__device__ float ggml_total(const float* acc, const float* side, const int* tail, u32 nb) {
    const float q0 = acc[4] + acc[0], q1 = acc[5] + acc[1], q2 = acc[6] + acc[2], q3 = acc[7] + acc[3];
    const float h = (q0 + q2) + (q1 + q3);
    if constexpr (T == T_Q4_1 || T == T_Q5_1 || T == T_Q5_K) {
        return h + side[0];
    } else if constexpr (T == T_Q4_K) {
        return h + ((side[0] + side[2]) + (side[1] + side[3]));
    } else if constexpr (T == T_MXFP4) {
        if (nb % 2 == 0) return h;
        int sumi = 0;
        for (int l = 0; l < 8; l++) sumi += tail[l];
        return fmaf(side[0], (float)sumi, h);
    } else {
        return h;
    }
}

#ifdef __CUDACC__
// The dot product of `row` (nb blocks) with one activation column, computed by the 8
// consecutive threads of a warp whose index mod 8 is l; every one of them gets the result.
// All 32 threads of the warp must call it (the lane exchange is warp-wide).
template <int T>
__device__ float ggml_dot8(const u8* row, u32 nb, u32 l, const int* x, const float2* xds) {
    const GgmlLane r = ggml_lane<T>(row, nb, l, x, xds);
    const u32 base = (threadIdx.x % WARP) & ~7u;
    float acc[8], side[8];
    int tail[8];
    for (int j = 0; j < 8; j++) {
        acc[j] = __shfl_sync(0xffffffffu, r.acc, base + j);
        side[j] = __shfl_sync(0xffffffffu, r.side, base + j);
        tail[j] = __shfl_sync(0xffffffffu, r.tail, base + j);
    }
    return ggml_total<T>(acc, side, tail, nb);
}
#endif
