// Causal grouped-query attention over the f16 KV cache, flash-attention style: one workgroup
// per (token, head) walks the keys in tiles of WG, computing WG scores at once, and keeps an
// online softmax (running max and sum) so the scores are never stored. Each thread owns PPT
// pairs of output dimensions. q is rounded to f16 first, as ggml's CPU flash attention does.
// Defines: WG (threads = keys per tile), HD (a capacity: the q tile's size, at least the head
// dim P.hd, which is even; a parameter, so that a few prebuilt variants serve every model),
// PPT = ceil(dv capacity / 2 / WG) (pairs past P.dv are skipped); F16
// (devices with shader-f16): the cache is read as f16 pairs instead of unpacking u32 words,
// the same values. SINKS: binding 6 holds a sink logit per head, one more score in the
// softmax's denominator (after the keys, as ggml), without a value.

struct Params {
    n_head: u32,
    group: u32,       // n_head / n_head_kv
    dv: u32,
    n_tokens: u32,
    k_pairs: u32,     // u32 words per cached position (K): n_head_kv * hd / 2
    v_pairs: u32,     // (V): n_head_kv * dv / 2
    window: u32,      // 0: none; else a query at p sees keys p - window < j <= p
    scale: f32,
    softcap: f32,     // 0: none
    hd: u32,          // head dim of q and K (even, at most HD)
    _p1: u32, _p2: u32,
    _p3: vec4<u32>,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> q: array<f32>;
#ifdef F16
@group(0) @binding(3) var<storage, read> k_cache: array<vec2<f16>>;
@group(0) @binding(4) var<storage, read> v_cache: array<vec2<f16>>;

fn k_pair(i: u32) -> vec2<f32> {
    return vec2<f32>(k_cache[i]);
}

fn v_pair(i: u32) -> vec2<f32> {
    return vec2<f32>(v_cache[i]);
}
#else
@group(0) @binding(3) var<storage, read> k_cache: array<u32>;
@group(0) @binding(4) var<storage, read> v_cache: array<u32>;

fn k_pair(i: u32) -> vec2<f32> {
    return unpack2x16float(k_cache[i]);
}

fn v_pair(i: u32) -> vec2<f32> {
    return unpack2x16float(v_cache[i]);
}
#endif
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
#ifdef SINKS
@group(0) @binding(6) var<storage, read> sinks: array<f32>;
#endif

#include "grid.inc.wgsl"
#include "f16_round.inc.wgsl"

var<workgroup> q_sh: array<f32, HD>;
var<workgroup> p_sh: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let row = linear_group(wid, nwg); // t * n_head + h
    if (row >= P.n_tokens * P.n_head) {
        return;
    }
    let t = row / P.n_head;
    let kvh = (row % P.n_head) / P.group;
    let pos = step[0] + t;
    var lo = 0u;
    if (P.window > 0u && pos + 1u > P.window) {
        lo = pos + 1u - P.window;
    }
    for (var d = tid; d < P.hd; d += WG) {
        q_sh[d] = f16_round(q[row * P.hd + d]);
    }
    workgroupBarrier();

    var acc: array<vec2<f32>, PPT>;
    var run_max = -3.0e38;
    var run_sum = 0.0;
    let k_head = kvh * (P.hd / 2u);
    let v_head = kvh * (P.dv / 2u);
    for (var base = lo; base <= pos; base += WG) {
        let j = base + tid;
        var s = -3.0e38;
        if (j <= pos) {
            let kb = j * P.k_pairs + k_head;
            var dot = 0.0;
            for (var p = 0u; p < P.hd / 2u; p++) {
                let kk = k_pair(kb + p);
                dot = fma(q_sh[2u * p], kk.x, dot);
                dot = fma(q_sh[2u * p + 1u], kk.y, dot);
            }
            // With a cap, P.scale holds scale / cap (as ggml folds them): cap * tanh(s * scale).
            s = dot * P.scale;
            if (P.softcap > 0.0) {
                s = P.softcap * tanh(s);
            }
        }
        p_sh[tid] = s;
        workgroupBarrier();
        var tile_max = run_max;
        let n_keys = min(WG, pos + 1u - base);
        for (var i = 0u; i < n_keys; i++) {
            tile_max = max(tile_max, p_sh[i]);
        }
        workgroupBarrier();
        p_sh[tid] = select(0.0, exp(s - tile_max), j <= pos);
        workgroupBarrier();
        let correction = exp(run_max - tile_max);
        run_max = tile_max;
        var tile_sum = 0.0;
        for (var i = 0u; i < n_keys; i++) {
            tile_sum += p_sh[i];
        }
        run_sum = run_sum * correction + tile_sum;
        for (var r = 0u; r < PPT; r++) {
            let pair = tid + r * WG;
            if (2u * pair < P.dv) {
                var a = acc[r] * correction;
                for (var i = 0u; i < n_keys; i++) {
                    let vv = v_pair((base + i) * P.v_pairs + v_head + pair);
                    a = fma(vec2<f32>(p_sh[i]), vv, a);
                }
                acc[r] = a;
            }
        }
        workgroupBarrier();
    }
    var ms = 1.0;
#ifdef SINKS
    let sink = sinks[row % P.n_head];
    var vs = 1.0;
    if (sink > run_max) {
        ms = exp(run_max - sink);
    } else {
        vs = exp(sink - run_max);
    }
    run_sum = fma(run_sum, ms, vs);
#endif
    let inv = select(0.0, 1.0 / run_sum, run_sum > 0.0);
    for (var r = 0u; r < PPT; r++) {
        let pair = tid + r * WG;
        if (2u * pair < P.dv) {
            let o = row * P.dv + 2u * pair;
            y[o] = (acc[r].x * ms) * inv;
            y[o + 1u] = (acc[r].y * ms) * inv;
        }
    }
}
