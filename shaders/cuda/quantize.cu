// Activations in the formats the matmuls take, with the numbers of ggml's CPU backend
// (crates/quant/src/quantize/activation.rs and k_quants.rs are the definitions):
// - q8_0 / q8_1 (Q4_0, Q5_0, Q8_0, MXFP4 and Q4_1, Q5_1 weights): blocks of 32,
//   d = amax / 127 (stored f16), q = round_half_even(x * (127 / amax)), s = f16(d * Σq);
// - q8_k (K-quant weights): blocks of 256, iscale = -127 / (the largest-magnitude x),
//   q = min(127, round_half_even(iscale * x)), d = 1 / iscale (stored f32);
// - round_f16 (F16 weights: ggml converts the activations to f16), to_f16 (the cuBLAS path).
// Quants go to `q` (int8, the input's layout); each 32-element chunk gets a float2 `ds`
// (q8_k: its 256-block's d, repeated for its 8 chunks), so the matmuls read one format.
#include "common.cuh"

// q8_0 / q8_1: one warp per 32-element block, one element per lane.
extern "C" __global__ void quantize_q8_0(const float* x, i8* q, float2* ds, u32 n_blocks) {
    const u32 block = global_index() / WARP, lane = threadIdx.x % WARP;
    if (block >= n_blocks) return;
    const float v = x[block * 32 + lane];
    // ggml's amax ignores NaNs the same way only lane by lane; a NaN row is garbage either way.
    const float amax = warp_max(fabsf(v));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const float r = v * id;
    // x86's cvtps2dq: NaN and out-of-range give INT_MIN, which saturates to -128.
    const int i = isnan(r) || fabsf(r) >= 2147483648.0f ? -2147483647 - 1 : __float2int_rn(r);
    q[block * 32 + lane] = (i8)max(-128, min(127, i));
    // Σ of the unsaturated quants (ggml's q8_1 s), wrapping as ggml's i32 sum does.
    int sum = i;
    for (int o = WARP / 2; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) ds[block] = make_float2(f16_round(d), f16_round(d * (float)sum));
}

// q8_k: one block of 256 threads per 256-element block.
extern "C" __global__ void quantize_q8_k(const float* x, i8* q, float2* ds, u32 n_blocks) {
    __shared__ float s_abs[8];
    __shared__ u32 s_idx[8];
    const u32 block = blockIdx.y * gridDim.x + blockIdx.x;
    if (block >= n_blocks) return;
    const u32 i = threadIdx.x, lane = i % WARP, warp = i / WARP;
    const float v = x[block * 256 + i];
    // The first element of the largest magnitude (ggml's loop takes strictly greater ones).
    float a = fabsf(v);
    u32 idx = i;
    for (int o = WARP / 2; o > 0; o /= 2) {
        const float oa = __shfl_xor_sync(0xffffffffu, a, o);
        const u32 oi = __shfl_xor_sync(0xffffffffu, idx, o);
        if (oa > a || (oa == a && oi < idx)) { a = oa; idx = oi; }
    }
    if (lane == 0) { s_abs[warp] = a; s_idx[warp] = idx; }
    __syncthreads();
    a = s_abs[0];
    idx = s_idx[0];
    for (int w = 1; w < 8; w++) {
        if (s_abs[w] > a) { a = s_abs[w]; idx = s_idx[w]; }
    }
    if (a == 0.0f) {
        q[block * 256 + i] = 0;
        if (i < 8) ds[block * 8 + i] = make_float2(0.0f, 0.0f);
        return;
    }
    const float iscale = -127.0f / x[block * 256 + idx];
    q[block * 256 + i] = (i8)min(127, __float2int_rn(iscale * v));
    if (i < 8) ds[block * 8 + i] = make_float2(1.0f / iscale, 0.0f);
}

extern "C" __global__ void round_f16(const float* x, float* y, u32 n) {
    const u32 i = global_index();
    if (i < n) y[i] = f16_round(x[i]);
}

extern "C" __global__ void to_f16(const float* x, u16* y, u32 n) {
    const u32 i = global_index();
    if (i < n) y[i] = f32_to_f16(x[i]);
}
