// Rotary embedding of x viewed as [head_dim, n_heads, n_tokens] at positions pos0 + t (the
// batch's first position, read on the device so a captured decode graph replays unchanged).
#include "rope.cuh"

extern "C" __global__ void rope(RopeArgs a, const u32* pos0, const float* x,
                                const float* freq_factors, float* y) {
    const u32 i = global_index();
    if (i >= a.head_dim * a.n_heads * a.n_tokens) return;
    const u32 t = i / (a.head_dim * a.n_heads);
    y[i] = rope_element(a, x, i, (float)(pos0[0] + t), freq_factors);
}
