// add_weight: y = a + b[i % width], a bias row added to every row.

struct Params {
    n: u32,
    width: u32,
    _p0: u32, _p1: u32,
    _p2: vec4<u32>, _p3: vec4<u32>, _p4: vec4<u32>,
}

#include "elementwise.inc.wgsl"

fn element(i: u32) -> f32 {
    return a[i] + b[i % P.width];
}
