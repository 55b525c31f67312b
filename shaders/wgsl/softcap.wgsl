// softcap: y = cap * tanh(a / cap) (Gemma's logit soft-capping).

struct Params {
    n: u32,
    cap: f32,
    _p0: u32, _p1: u32,
    _p2: vec4<u32>, _p3: vec4<u32>, _p4: vec4<u32>,
}

#include "elementwise.inc.wgsl"

fn element(i: u32) -> f32 {
    return tanh(a[i] * (1.0 / P.cap)) * P.cap;
}
