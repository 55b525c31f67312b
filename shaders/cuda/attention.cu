// The KV cache (per layer, K and V as f16 laid out [position][kv head][dim], like the CPU
// cache) and causal grouped-query attention over it, flash-attention style, as the WGSL kernel
// (shaders/wgsl/attention.wgsl) computes it: one block per (token, head) walks the keys in
// tiles of FA_WG, one score per thread, with an online softmax (running max and sum) so the
// scores are never stored; each thread owns up to FA_PPT pairs of output dimensions. q is
// rounded to f16 first, as ggml's CPU flash attention does. Options: a sliding window, a
// softcap of the scores, and attention sinks (one logit per head joining the denominator).
#include "rope.cuh"

#define FA_WG 128
#define MAX_HEAD_DIM 512
#define FA_PPT (MAX_HEAD_DIM / 2 / FA_WG)

// Stores n_tokens rows of `per_pos` values (K or V of every kv head) at positions pos0...
extern "C" __global__ void kv_store(const u32* pos0, const float* x, u16* cache, u32 per_pos,
                                    u32 n_tokens) {
    const u32 i = global_index();
    if (i >= per_pos * n_tokens) return;
    cache[(u64)pos0[0] * per_pos + i] = f32_to_f16(x[i]);
}

// Context shift: `moved` holds a copy of the keys at positions n_keep + n_discard .., which are
// written back at dst_pos = n_keep .. rotated by `delta` = -n_discard (rotations compose, as
// llama.cpp's K-shift relies on). a.n_heads is the kv heads, a.n_tokens the positions moved.
extern "C" __global__ void kv_shift(RopeArgs a, const u16* moved, const float* freq_factors,
                                    float delta, u32 dst_pos, u16* k_cache) {
    const u32 per_pos = a.head_dim * a.n_heads;
    const u32 i = global_index();
    if (i >= per_pos * a.n_tokens) return;
    const u32 e = i % a.head_dim;
    u32 pair, partner;
    bool second;
    rope_slot(e, a.n_dims, a.mode, pair, partner, second);
    float v = f16_to_f32(moved[i]);
    if (pair < a.n_dims) {
        const float theta = rope_angle(a, delta, pair, freq_factors);
        v = rope_rotate(v, f16_to_f32(moved[i - e + partner]), theta, second, a.attn_factor);
    }
    k_cache[(u64)dst_pos * per_pos + i] = f32_to_f16(v);
}

struct AttnArgs {
    u32 n_head, group, hd, dv, n_tokens;
    u32 k_per_pos, v_per_pos; // f16 values per cached position: n_head_kv · hd, n_head_kv · dv
    u32 window;               // 0: none; else a query at p sees keys p - window < j <= p
    float scale;              // with a softcap: scale / cap (ggml folds them)
    float softcap;            // 0: none
};

extern "C" __global__ void __launch_bounds__(FA_WG)
flash_attn(AttnArgs a, const u32* pos0, const float* q, const u16* k_cache,
           const u16* v_cache, const float* sinks, float* y) {
    __shared__ float q_sh[MAX_HEAD_DIM];
    __shared__ float p_sh[FA_WG];
    __shared__ float scratch[32];
    const u32 row = blockIdx.y * gridDim.x + blockIdx.x; // t · n_head + h
    if (row >= a.n_tokens * a.n_head) return;
    const u32 tid = threadIdx.x;
    const u32 t = row / a.n_head, h = row % a.n_head, kvh = h / a.group;
    const u32 pos = pos0[0] + t;
    const u32 lo = a.window > 0 && pos + 1 > a.window ? pos + 1 - a.window : 0;
    for (u32 d = tid; d < a.hd; d += FA_WG) q_sh[d] = f16_round(q[(u64)row * a.hd + d]);
    __syncthreads();

    float acc[FA_PPT][2] = {};
    float run_max = NEG_BIG, run_sum = 0.0f;
    const u16* k_head = k_cache + kvh * a.hd;
    const u16* v_head = v_cache + kvh * a.dv;
    for (u32 base = lo; base <= pos; base += FA_WG) {
        const u32 j = base + tid;
        float s = NEG_BIG;
        if (j <= pos) {
            const u16* kj = k_head + (u64)j * a.k_per_pos;
            float dot = 0.0f;
            for (u32 d = 0; d < a.hd; d += 2) {
                dot = fmaf(q_sh[d], f16_to_f32(kj[d]), dot);
                dot = fmaf(q_sh[d + 1], f16_to_f32(kj[d + 1]), dot);
            }
            s = dot * a.scale;
            if (a.softcap > 0.0f) s = a.softcap * tanhf(s);
        }
        const u32 n_keys = min((u32)FA_WG, pos + 1 - base);
        const float tile_max = fmaxf(run_max, block_max(s, scratch));
        p_sh[tid] = j <= pos ? expf(s - tile_max) : 0.0f;
        __syncthreads();
        const float correction = expf(run_max - tile_max);
        run_max = tile_max;
        float tile_sum = 0.0f;
        for (u32 i = 0; i < n_keys; i++) tile_sum += p_sh[i];
        run_sum = run_sum * correction + tile_sum;
        for (u32 r = 0; r < FA_PPT; r++) {
            const u32 d = 2 * (tid + r * FA_WG);
            if (d >= a.dv) break;
            float a0 = acc[r][0] * correction, a1 = acc[r][1] * correction;
            for (u32 i = 0; i < n_keys; i++) {
                const u16* vi = v_head + (u64)(base + i) * a.v_per_pos + d;
                a0 = fmaf(p_sh[i], f16_to_f32(vi[0]), a0);
                a1 = fmaf(p_sh[i], f16_to_f32(vi[1]), a1);
            }
            acc[r][0] = a0;
            acc[r][1] = a1;
        }
        __syncthreads();
    }
    float ms = 1.0f;
    if (sinks) {
        // The sink joins the denominator after the keys, as ggml adds it.
        const float sink = sinks[h];
        float vs = 1.0f;
        if (sink > run_max) ms = expf(run_max - sink);
        else vs = expf(sink - run_max);
        run_sum = fmaf(run_sum, ms, vs);
    }
    const float inv = run_sum > 0.0f ? 1.0f / run_sum : 0.0f;
    for (u32 r = 0; r < FA_PPT; r++) {
        const u32 d = 2 * (tid + r * FA_WG);
        if (d >= a.dv) break;
        y[(u64)row * a.dv + d] = (acc[r][0] * ms) * inv;
        y[(u64)row * a.dv + d + 1] = (acc[r][1] * ms) * inv;
    }
}
