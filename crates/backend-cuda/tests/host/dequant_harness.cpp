// Host harness for shaders/cuda/dequant.cuh and ggml_order.cuh (compiled by g++, no CUDA;
// driven by tests/conformance/host_kernels.rs): reads `rows` rows of one weight type and one
// column of activations in quantize.cu's layout (K int8 quants, then a float2 (d, s) per 32),
// writes each row's 32-element chunks as dequant32 gives them, then each row's dot product
// with the activations in ggml's order (ggml_lane for the 8 lanes, then ggml_total; quantized
// types only, 0 for F32/F16).
// Usage: dequant_harness TYPE K ROWS ROW_BYTES weights.bin acts.bin out.bin
#include "harness.h"
#include "ggml_order.cuh"

template <int T>
static void run(const u8* w, u32 k, u32 rows, u32 row_bytes, const i8* q, const float2* ds, FILE* out) {
    for (u32 r = 0; r < rows; r++) {
        for (u32 c = 0; c < (k + 31) / 32; c++) {
            float v[32];
            dequant32<T>(w + (u64)r * row_bytes, c, k, v);
            fwrite(v, 4, std::min(32u, k - c * 32), out);
        }
    }
    for (u32 r = 0; r < rows; r++) {
        float dot = 0.0f;
        if constexpr (Act<T>::KIND != ACT_F32) {
            float acc[8], side[8];
            int tail[8];
            const u32 nb = k / Ty<T>::QK;
            for (u32 l = 0; l < 8; l++) {
                const GgmlLane g = ggml_lane<T>(w + (u64)r * row_bytes, nb, l, (const int*)q, ds);
                acc[l] = g.acc;
                side[l] = g.side;
                tail[l] = g.tail;
            }
            dot = ggml_total<T>(acc, side, tail, nb);
        }
        fwrite(&dot, 4, 1, out);
    }
}

int main(int argc, char** argv) {
    if (argc != 8) return 1;
    const int ty = atoi(argv[1]);
    const u32 k = atoi(argv[2]), rows = atoi(argv[3]), row_bytes = atoi(argv[4]);
    std::vector<char> w = slurp(argv[5]), a = slurp(argv[6]);
    const i8* q = (const i8*)a.data();
    const float2* ds = (const float2*)(a.data() + k);
    FILE* out = fopen(argv[7], "wb");
    const u8* wp = (const u8*)w.data();
    switch (ty) {
        case T_F32: run<T_F32>(wp, k, rows, row_bytes, q, ds, out); break;
        case T_F16: run<T_F16>(wp, k, rows, row_bytes, q, ds, out); break;
        case T_Q4_0: run<T_Q4_0>(wp, k, rows, row_bytes, q, ds, out); break;
        case T_Q4_1: run<T_Q4_1>(wp, k, rows, row_bytes, q, ds, out); break;
        case T_Q5_0: run<T_Q5_0>(wp, k, rows, row_bytes, q, ds, out); break;
        case T_Q5_1: run<T_Q5_1>(wp, k, rows, row_bytes, q, ds, out); break;
        case T_Q8_0: run<T_Q8_0>(wp, k, rows, row_bytes, q, ds, out); break;
        case T_Q4_K: run<T_Q4_K>(wp, k, rows, row_bytes, q, ds, out); break;
        case T_Q5_K: run<T_Q5_K>(wp, k, rows, row_bytes, q, ds, out); break;
        case T_Q6_K: run<T_Q6_K>(wp, k, rows, row_bytes, q, ds, out); break;
        case T_MXFP4: run<T_MXFP4>(wp, k, rows, row_bytes, q, ds, out); break;
        default: return 3;
    }
    fclose(out);
    return 0;
}
