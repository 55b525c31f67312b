// Sampling on the GPU, so a step reads back token ids, not logits.
// - argmax: each row's greedy token (the lowest index among equal maxima, like the CPU).
// - sample_chain: one logits row through the engine's chain (crates/core/src/sampling.rs):
//   logit bias and repetition penalties → top-k → top-p → min-p → temperature → the draw `u`
//   (taken from the engine's seeded RNG on the CPU), exactly as shaders/wgsl/sample_chain.wgsl
//   does it (the comments there explain the method): candidates are never sorted; each cut is
//   "the last candidate whose cumulative weight from the top reaches a goal", found by building
//   its rank key (ordered logit bits, !id) bit by bit, one block reduction per bit.
//   Spec (u32 words): [0] top_k, [1] top_p, [2] min_p, [3] temperature, [4] u,
//   [5] repeat_penalty, [6] frequency_penalty, [7] presence_penalty (f32 bits), [8] n_bias,
//   [9] n_counts, then n_bias × (token, bias bits), then n_counts × (token, occurrences).
//   Result: ids[0] = 0 (a token) | 1 (every logit masked) | 2 (a NaN logit), ids[1] = the
//   token (or the NaN's index). `work` is 3 × width words of scratch.
#include "common.cuh"

#define SWG 256
#define NEG_INF_BITS 0xff800000u

extern "C" __global__ void argmax(const float* x, u32* ids, u32 width) {
    __shared__ float best_val[SWG];
    __shared__ u32 best_idx[SWG];
    const u32 row = blockIdx.x, tid = threadIdx.x;
    float bv = -3.4e38f;
    u32 bi = 0xffffffffu;
    for (u32 i = tid; i < width; i += SWG) {
        const float v = x[(u64)row * width + i];
        if (v > bv) { bv = v; bi = i; }
    }
    best_val[tid] = bv;
    best_idx[tid] = bi;
    __syncthreads();
    for (u32 half = SWG / 2; half > 0; half /= 2) {
        if (tid < half) {
            const float ov = best_val[tid + half];
            const u32 oi = best_idx[tid + half];
            if (ov > best_val[tid] || (ov == best_val[tid] && oi < best_idx[tid])) {
                best_val[tid] = ov;
                best_idx[tid] = oi;
            }
        }
        __syncthreads();
    }
    if (tid == 0) ids[row] = min(best_idx[0], width - 1);
}

struct Shared {
    float f[SWG];
    u32 u[SWG];
    u32 i[SWG];
};

__device__ float sum_f(Shared& sh, float v) {
    const u32 tid = threadIdx.x;
    sh.f[tid] = v;
    __syncthreads();
    for (u32 half = SWG / 2; half > 0; half /= 2) {
        if (tid < half) sh.f[tid] = sh.f[tid] + sh.f[tid + half];
        __syncthreads();
    }
    const float r = sh.f[0];
    __syncthreads();
    return r;
}

// The largest key among the threads' `k`, and the lowest index among those with it.
__device__ uint2 max_key(Shared& sh, u32 k, u32 i) {
    const u32 tid = threadIdx.x;
    sh.u[tid] = k;
    sh.i[tid] = i;
    __syncthreads();
    for (u32 half = SWG / 2; half > 0; half /= 2) {
        if (tid < half) {
            const u32 ok = sh.u[tid + half], oi = sh.i[tid + half];
            if (ok > sh.u[tid] || (ok == sh.u[tid] && oi < sh.i[tid])) {
                sh.u[tid] = ok;
                sh.i[tid] = oi;
            }
        }
        __syncthreads();
    }
    const uint2 r = make_uint2(sh.u[0], sh.i[0]);
    __syncthreads();
    return r;
}

// Order-preserving bits of a float: a > b ⇔ okey(a) > okey(b) (no NaN here).
__device__ __forceinline__ u32 okey(float l) {
    const u32 b = __float_as_uint(l);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ bool ge(u32 k, u32 id, u32 hi, u32 lo) {
    return k > hi || (k == hi && ~id >= lo);
}

// The set a search runs over and how it weighs a candidate.
struct Set {
    u32 src;        // 0: the edited row (ids 0..width); 1: the compacted candidates
    u32 n;
    u32 keep_hi, keep_lo; // members: rank >= (keep_hi, keep_lo) and logit >= min_l
    float min_l;
    bool counting;  // weight 1, else exp(logit * scale - offset)
    float scale, offset;
};

__device__ __forceinline__ uint2 cand(const Set& s, const u32* work, u32 width, u32 j) {
    return s.src == 0 ? make_uint2(j, work[j]) : make_uint2(work[width + j], work[2 * width + j]);
}

// Total weight of the members with rank >= (hi, lo), or (eq) with logit key == hi.
__device__ float mass(Shared& sh, const Set& s, const u32* work, u32 width, u32 hi, u32 lo,
                      bool eq) {
    float acc = 0.0f;
    for (u32 j = threadIdx.x; j < s.n; j += SWG) {
        const uint2 c = cand(s, work, width, j);
        const float l = __uint_as_float(c.y);
        if (c.y == NEG_INF_BITS || l < s.min_l) continue;
        const u32 k = okey(l);
        if (!ge(k, c.x, s.keep_hi, s.keep_lo)) continue;
        const bool inside = eq ? k == hi : ge(k, c.x, hi, lo);
        if (inside) acc += s.counting ? 1.0f : expf(l * s.scale - s.offset);
    }
    return sum_f(sh, acc);
}

// The rank key of the last member whose cumulative weight from the top reaches `goal`
// (exceeds it when `strict`); the id part stays 0 when only one member has that logit.
__device__ uint2 search(Shared& sh, const Set& s, const u32* work, u32 width, float goal,
                        bool strict) {
    u32 hi = 0;
    for (u32 b = 0; b < 32; b++) {
        const u32 c = hi | (0x80000000u >> b);
        const float m = mass(sh, s, work, width, c, 0, false);
        if (m > goal || (!strict && m == goal)) hi = c;
    }
    u32 lo = 0;
    Set counting = s;
    counting.counting = true;
    if (mass(sh, counting, work, width, hi, 0, true) > 1.0f) {
        for (u32 b = 0; b < 32; b++) {
            const u32 c = lo | (0x80000000u >> b);
            const float m = mass(sh, s, work, width, hi, c, false);
            if (m > goal || (!strict && m == goal)) lo = c;
        }
    }
    return make_uint2(hi, lo);
}

extern "C" __global__ void __launch_bounds__(SWG)
sample_chain(const float* x, u32 width, u32 row, const u32* spec, u32* ids, u32* work) {
    __shared__ Shared sh;
    const u32 tid = threadIdx.x;
    const float* xr = x + (u64)row * width;
    for (u32 i = tid; i < width; i += SWG) work[i] = __float_as_uint(xr[i]);
    __syncthreads();
    // Bias, then penalties, in the CPU sampler's order and arithmetic (one thread).
    if (tid == 0) {
        const u32 n_bias = spec[8], n_counts = spec[9];
        for (u32 e = 0; e < n_bias; e++) {
            const u32 t = spec[10 + 2 * e];
            if (t < width)
                work[t] = __float_as_uint(__uint_as_float(work[t]) + __uint_as_float(spec[11 + 2 * e]));
        }
        const float rp = __uint_as_float(spec[5]), fp = __uint_as_float(spec[6]),
                    pp = __uint_as_float(spec[7]);
        for (u32 e = 0; e < n_counts; e++) {
            const u32 at = 10 + 2 * n_bias + 2 * e;
            const u32 t = spec[at];
            if (t < width) {
                float l = __uint_as_float(work[t]);
                l = l <= 0.0f ? l * rp : l / rp;
                l = l - ((float)spec[at + 1] * fp + pp);
                work[t] = __float_as_uint(l);
            }
        }
    }
    __syncthreads();

    // The best candidate (the greedy token), a NaN if any, the number of unmasked logits.
    u32 best_k = 0, best_i = 0xffffffffu, nan_i = 0xffffffffu, n_valid = 0;
    for (u32 i = tid; i < width; i += SWG) {
        const u32 bits = work[i];
        if ((bits & 0x7fffffffu) > 0x7f800000u) { nan_i = min(nan_i, i); continue; }
        if (bits == NEG_INF_BITS) continue;
        n_valid += 1;
        const u32 k = okey(__uint_as_float(bits));
        if (k > best_k || (k == best_k && i < best_i)) { best_k = k; best_i = i; }
    }
    const uint2 nan = max_key(sh, nan_i != 0xffffffffu ? 1u : 0u, nan_i);
    const uint2 best = max_key(sh, best_k, best_i);
    const u32 valid = (u32)sum_f(sh, (float)n_valid);
    if (nan.x != 0) {
        if (tid == 0) { ids[0] = 2; ids[1] = nan.y; }
        return;
    }
    if (valid == 0) {
        if (tid == 0) { ids[0] = 1; ids[1] = 0; }
        return;
    }
    const float temperature = __uint_as_float(spec[3]);
    if (temperature <= 0.0f) {
        if (tid == 0) { ids[0] = 0; ids[1] = best.y; }
        return;
    }
    const float m = __uint_as_float(work[best.y]);
    const float neg_inf = __uint_as_float(NEG_INF_BITS);

    // top-k on the whole row: the k-th candidate's rank.
    const Set row_set = {0, width, 0, 0, neg_inf, true, 1.0f, 0.0f};
    const u32 top_k = spec[0];
    uint2 cut = make_uint2(0, 0);
    if (top_k > 0 && top_k < valid) cut = search(sh, row_set, work, width, (float)top_k, false);
    // Compact the members (each thread a contiguous slice, in order).
    const u32 chunk = (width + SWG - 1) / SWG;
    const u32 begin = min(tid * chunk, width), end = min(begin + chunk, width);
    u32 mine = 0;
    for (u32 i = begin; i < end; i++) {
        const u32 bits = work[i];
        if (bits != NEG_INF_BITS && ge(okey(__uint_as_float(bits)), i, cut.x, cut.y)) mine += 1;
    }
    sh.u[tid] = mine;
    __syncthreads();
    if (tid == 0) {
        u32 acc = 0;
        for (u32 t = 0; t < SWG; t++) { const u32 c = sh.u[t]; sh.u[t] = acc; acc += c; }
    }
    __syncthreads();
    u32 at = sh.u[tid];
    __syncthreads();
    for (u32 i = begin; i < end; i++) {
        const u32 bits = work[i];
        if (bits != NEG_INF_BITS && ge(okey(__uint_as_float(bits)), i, cut.x, cut.y)) {
            work[width + at] = i;
            work[2 * width + at] = bits;
            at += 1;
        }
    }
    __syncthreads();
    const u32 n = (u32)sum_f(sh, (float)mine);

    // top-p over the softmax (before temperature) of the top-k candidates.
    Set cands = {1, n, 0, 0, neg_inf, false, 1.0f, m};
    const float top_p = __uint_as_float(spec[1]);
    if (top_p < 1.0f) {
        const float total = mass(sh, cands, work, width, 0, 0, false);
        // At least the best candidate (whose weight is exp(0) = 1) is kept.
        const uint2 p_cut = search(sh, cands, work, width, fmaxf(top_p * total, 1e-30f), false);
        cands.keep_hi = p_cut.x;
        cands.keep_lo = p_cut.y;
    }
    // min-p: probability >= min_p × the best's ⇔ logit >= best + ln(min_p).
    const float min_p = __uint_as_float(spec[2]);
    if (min_p > 0.0f) cands.min_l = m + logf(min_p);
    // The draw: softmax of logit / temperature, the first candidate whose cumulative
    // probability exceeds u.
    const float inv_t = 1.0f / temperature;
    cands.scale = inv_t;
    cands.offset = m * inv_t;
    const float total = mass(sh, cands, work, width, 0, 0, false);
    const uint2 drawn = search(sh, cands, work, width, __uint_as_float(spec[4]) * total, true);
    // The drawn candidate (the best one if rounding left u past the total).
    if (tid == 0) { ids[0] = 0; ids[1] = best.y; }
    __syncthreads();
    Set ties = cands;
    ties.counting = true;
    const bool unique = mass(sh, ties, work, width, drawn.x, 0, true) <= 1.0f;
    for (u32 j = tid; j < n; j += SWG) {
        const uint2 c = cand(cands, work, width, j);
        const float l = __uint_as_float(c.y);
        if (l < cands.min_l || !ge(okey(l), c.x, cands.keep_hi, cands.keep_lo)) continue;
        if (okey(l) == drawn.x && (unique || ~c.x == drawn.y)) ids[1] = c.x;
    }
}
