// slice: elements offset .. offset + len of every row of `a` (rows of `width`).

struct Params {
    n: u32,
    len: u32,
    width: u32,
    offset: u32,
    _p0: vec4<u32>, _p1: vec4<u32>, _p2: vec4<u32>,
}

#include "elementwise.inc.wgsl"

fn element(i: u32) -> f32 {
    return a[(i / P.len) * P.width + P.offset + i % P.len];
}
