// Host harness for shaders/cuda/moe.cuh (g++, no CUDA; driven by
// tests/conformance/host_kernels.rs): the router of every token, as the `moe_route` kernel
// computes it, one token per thread.
// Usage: moe_harness args.bin logits.bin bias.bin|- out.bin
#include "harness.h"
#include "moe.cuh"

int main(int argc, char** argv) {
    if (argc != 5) return 1;
    std::vector<char> a = slurp(argv[1]), logits = slurp(argv[2]), bias;
    if (a.size() != sizeof(RouteArgs)) return 4;
    RouteArgs args;
    memcpy(&args, a.data(), sizeof args);
    if (argv[3][0] != '-') bias = slurp(argv[3]);
    std::vector<float> y(2 * args.n_used * args.n_tokens);
    for (u32 t = 0; t < args.n_tokens; t++)
        route_token(args, (const float*)logits.data(), bias.empty() ? nullptr : (const float*)bias.data(), t, y.data());
    FILE* out = fopen(argv[4], "wb");
    fwrite(y.data(), 4, y.size(), out);
    fclose(out);
    return 0;
}
