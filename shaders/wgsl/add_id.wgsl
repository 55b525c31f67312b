// add_id: y[t][j][i] = x[t][j][i] + bias[e][i], e the j-th expert the route chose for token t
// (the route's n_used ids, exact floats, then their weights).

struct Params {
    n: u32,          // elements (m · n_used · tokens)
    m: u32,          // row length
    n_used: u32,
    _p0: u32,
    _p1: vec4<u32>, _p2: vec4<u32>, _p3: vec4<u32>,
}

#include "elementwise.inc.wgsl"

// `a` holds the experts' outputs, `b` the biases `[m, n_expert]`, `c` the route.
fn element(i: u32) -> f32 {
    let r = i % P.m;
    let row = i / P.m;               // t · n_used + j
    let t = row / P.n_used;
    let j = row % P.n_used;
    let e = u32(c[t * 2u * P.n_used + j]);
    return a[i] + b[e * P.m + r];
}
