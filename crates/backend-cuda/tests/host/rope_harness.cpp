// Host harness for shaders/cuda/rope.cuh (g++, no CUDA; driven by
// tests/conformance/host_kernels.rs): rope of x `[head_dim, n_heads, n_tokens]` at positions
// pos0 + t, one element at a time as the `rope` kernel computes it.
// Usage: rope_harness args.bin pos0 x.bin factors.bin|- out.bin
#include "harness.h"
#include "rope.cuh"

int main(int argc, char** argv) {
    if (argc != 6) return 1;
    std::vector<char> a = slurp(argv[1]), x = slurp(argv[3]), factors;
    if (a.size() != sizeof(RopeArgs)) return 4;
    RopeArgs args;
    memcpy(&args, a.data(), sizeof args);
    const u32 pos0 = atoi(argv[2]);
    if (argv[4][0] != '-') factors = slurp(argv[4]);
    const float* ff = factors.empty() ? nullptr : (const float*)factors.data();
    const u32 n = args.head_dim * args.n_heads * args.n_tokens;
    std::vector<float> y(n);
    for (u32 i = 0; i < n; i++) {
        const u32 t = i / (args.head_dim * args.n_heads);
        y[i] = rope_element(args, (const float*)x.data(), i, (float)(pos0 + t), ff);
    }
    FILE* out = fopen(argv[5], "wb");
    fwrite(y.data(), 4, n, out);
    fclose(out);
    return 0;
}
