// reglu: y = relu(gate) * up, gate in `a`, up in `b`.

struct Params {
    n: u32,
    _p0: u32, _p1: u32, _p2: u32,
    _p3: vec4<u32>, _p4: vec4<u32>, _p5: vec4<u32>,
}

#include "elementwise.inc.wgsl"

fn element(i: u32) -> f32 {
    let g = a[i];
    return select(0.0, g * b[i], g > 0.0);
}
