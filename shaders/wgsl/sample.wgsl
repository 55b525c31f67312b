// Greedy sampling on the GPU: the index of the largest logit of each row (the lowest index
// among equal maxima, like the CPU sampler), so a decode step reads back 4 bytes.

struct Params {
    width: u32,
    rows: u32,
    _p0: u32, _p1: u32,
    _p2: vec4<u32>, _p3: vec4<u32>, _p4: vec4<u32>,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> ids: array<u32>;

const WG: u32 = 256u;
var<workgroup> best_val: array<f32, WG>;
var<workgroup> best_idx: array<u32, WG>;

@compute @workgroup_size(256)
fn argmax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let row = wid.x;
    var bv = -3.4e38;
    var bi = 0xffffffffu;
    for (var i = tid; i < P.width; i += WG) {
        let v = x[row * P.width + i];
        if (v > bv) {
            bv = v;
            bi = i;
        }
    }
    best_val[tid] = bv;
    best_idx[tid] = bi;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half = half / 2u) {
        if (tid < half) {
            let ov = best_val[tid + half];
            let oi = best_idx[tid + half];
            if (ov > best_val[tid] || (ov == best_val[tid] && oi < best_idx[tid])) {
                best_val[tid] = ov;
                best_idx[tid] = oi;
            }
        }
        workgroupBarrier();
    }
    if (tid == 0u) {
        ids[row] = min(best_idx[0], P.width - 1u);
    }
}
