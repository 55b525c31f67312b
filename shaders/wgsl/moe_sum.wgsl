// moe_sum: y[t][i] = sum over the token's experts j, in order, of x[t][j][i] * weight[t][j]
// (the route's weights follow its n_used ids).

struct Params {
    n: u32,          // output elements (m · tokens)
    m: u32,          // row length
    n_used: u32,
    _p0: u32,
    _p1: vec4<u32>, _p2: vec4<u32>, _p3: vec4<u32>,
}

#include "elementwise.inc.wgsl"

// `a` holds the experts' outputs, `b` the route.
fn element(i: u32) -> f32 {
    let t = i / P.m;
    let r = i % P.m;
    let wb = t * 2u * P.n_used + P.n_used;
    let xb = t * P.n_used * P.m + r;
    var acc = a[xb] * b[wb];
    for (var j = 1u; j < P.n_used; j++) {
        acc += a[xb + j * P.m] * b[wb + j];
    }
    return acc;
}
