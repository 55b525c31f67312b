// The KV cache: per layer, K and V as f16 pairs packed in u32 (`pack2x16float` is core WGSL,
// so this needs no shader-f16), laid out [position][kv head][dim] like the CPU cache.

struct Params {
    pairs_per_pos: u32, // n_head_kv * head_dim / 2 (K and V share it)
    n_tokens: u32,      // store: tokens; shift: positions moved
    head_dim: u32,      // shift
    n_dims: u32,        // shift: rope
    mode: u32,          // shift: rope
    freq_base: f32,
    freq_scale: f32,
    dst_pos: u32,       // shift: first destination position (n_keep)
    delta: f32,         // shift: rotation, -(n_discard)
    theta_scale: f32,   // shift: freq_base^(-2/n_dims) by the host's powf
    attn_factor: f32,   // shift: multiplies cos and sin (YaRN's magnitude scaling included)
    ext_factor: f32,    // shift: YaRN (0: none)
    corr0: f32,
    corr1: f32,
    _p2: u32, _p3: u32,
}

@group(0) @binding(0) var<uniform> P: Params;

#include "grid.inc.wgsl"
#include "f16_round.inc.wgsl"

fn pack_f16(a: f32, b: f32) -> u32 {
    return pack2x16float(vec2<f32>(f16_round(a), f16_round(b)));
}

#ifdef STORE
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(5) var<storage, read_write> v_cache: array<u32>;

// Stores the batch's keys and values at positions pos0 ...
@compute @workgroup_size(64)
fn store(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = linear_group(wid, nwg) * 64u + lid;
    if (i >= P.pairs_per_pos * P.n_tokens) {
        return;
    }
    let dst = step[0] * P.pairs_per_pos + i;
    k_cache[dst] = pack_f16(k[2u * i], k[2u * i + 1u]);
    v_cache[dst] = pack_f16(v[2u * i], v[2u * i + 1u]);
}
#endif

#ifdef SHIFT
@group(0) @binding(1) var<storage, read> moved: array<u32>;
@group(0) @binding(4) var<storage, read_write> k_cache: array<u32>;
#ifdef FREQ_FACTORS
@group(0) @binding(2) var<storage, read> freq_factors: array<f32>;
#endif

#include "rope_rotate.inc.wgsl"

fn moved_elem(e: u32) -> f32 {
    let p = unpack2x16float(moved[e / 2u]);
    return select(p.x, p.y, (e & 1u) == 1u);
}

// Writes the moved keys (a copy of positions n_keep + n_discard ..) back at n_keep ..,
// rotated by -n_discard (rotations compose, as llama.cpp's K-shift relies on).
@compute @workgroup_size(64)
fn shift(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let q = linear_group(wid, nwg) * 64u + lid;
    if (q >= P.pairs_per_pos * P.n_tokens) {
        return;
    }
    var out: vec2<f32>;
    for (var h = 0u; h < 2u; h++) {
        let i = 2u * q + h;
        let e = i % P.head_dim;
        let slot = rope_slot(e, P.n_dims, P.mode);
        var val = moved_elem(i);
        if (slot.pair < P.n_dims) {
            let theta = rope_angle(P.delta, slot.pair, P.n_dims, P.freq_base, P.theta_scale, P.freq_scale);
            val = rope_rotate(val, moved_elem(i - e + slot.partner), theta, slot.second, P.attn_factor);
        }
        out[h] = val;
    }
    k_cache[P.dst_pos * P.pairs_per_pos + q] = pack_f16(out.x, out.y);
}
#endif
