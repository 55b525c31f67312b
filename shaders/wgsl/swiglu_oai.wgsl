// swiglu_oai: gpt-oss's clamped SwiGLU, gate in `a`, up in `b`:
// g = min(gate, limit), u = clamp(up, -limit, limit), y = g / (1 + exp(-alpha g)) * (u + 1).

struct Params {
    n: u32,
    alpha: f32,
    limit: f32,
    _p0: u32,
    _p1: vec4<u32>, _p2: vec4<u32>, _p3: vec4<u32>,
}

#include "elementwise.inc.wgsl"

fn element(i: u32) -> f32 {
    let g = min(a[i], P.limit);
    let u = clamp(b[i], -P.limit, P.limit);
    return g / (1.0 + exp(P.alpha * -g)) * (u + 1.0);
}
