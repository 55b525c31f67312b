// geglu: y = gelu_tanh(gate) * up, gate in `a`, up in `b`, with ggml's f16-table rounding.

struct Params {
    n: u32,
    _p0: u32, _p1: u32, _p2: u32,
    _p3: vec4<u32>, _p4: vec4<u32>, _p5: vec4<u32>,
}

#include "elementwise.inc.wgsl"
#include "gelu.inc.wgsl"

fn element(i: u32) -> f32 {
    return gelu_ggml(a[i]) * b[i];
}
