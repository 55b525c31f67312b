// The small ops, one thread per output element: add, scale, softcap, a weight row multiplied
// into / added to every row (norm weights, biases), add_id (each chosen expert's bias), the
// rows outputs were asked for, and a range of every row (parts of a fused projection).
#include "common.cuh"

extern "C" __global__ void add(const float* a, const float* b, float* y, u32 n) {
    const u32 i = global_index();
    if (i < n) y[i] = a[i] + b[i];
}

extern "C" __global__ void scale(const float* x, float* y, u32 n, float s) {
    const u32 i = global_index();
    if (i < n) y[i] = x[i] * s;
}

extern "C" __global__ void softcap(const float* x, float* y, u32 n, float cap) {
    const u32 i = global_index();
    if (i < n) y[i] = cap * tanhf(x[i] / cap);
}

extern "C" __global__ void mul_weight(const float* x, const float* w, float* y, u32 n, u32 width) {
    const u32 i = global_index();
    if (i < n) y[i] = x[i] * w[i % width];
}

extern "C" __global__ void add_weight(const float* x, const float* w, float* y, u32 n, u32 width) {
    const u32 i = global_index();
    if (i < n) y[i] = x[i] + w[i % width];
}

// x [m, n_used, T] plus column e of bias [m, n_expert], e the route's j-th expert of token t.
extern "C" __global__ void add_id(const float* x, const float* bias, const float* route,
                                  float* y, u32 n, u32 m, u32 n_used) {
    const u32 i = global_index();
    if (i >= n) return;
    const u32 r = i % m, row = i / m;
    const u32 t = row / n_used, j = row % n_used;
    const u32 e = (u32)route[(u64)t * 2 * n_used + j];
    y[i] = x[i] + bias[(u64)e * m + r];
}

// Row `rows[o]` of x for each output o (the batch's output rows, uploaded with the step).
extern "C" __global__ void output_rows(const float* x, const u32* rows, float* y, u32 n,
                                       u32 width) {
    const u32 i = global_index();
    if (i < n) y[i] = x[(u64)rows[i / width] * width + i % width];
}

// Elements offset .. offset + len of every row of `width`.
extern "C" __global__ void slice(const float* x, float* y, u32 n, u32 width, u32 offset,
                                 u32 len) {
    const u32 i = global_index();
    if (i < n) y[i] = x[(u64)(i / len) * width + offset + i % len];
}
