// Rotary embedding of x viewed as [head_dim, n_heads, n_tokens] at positions pos0 + t.

struct Params {
    head_dim: u32,
    n_heads: u32,
    n_tokens: u32,
    n_dims: u32,
    mode: u32,
    freq_base: f32,
    freq_scale: f32,
    theta_scale: f32, // freq_base^(-2/n_dims) by the host's powf
    attn_factor: f32, // multiplies cos and sin (YaRN's magnitude scaling included)
    ext_factor: f32,  // YaRN (0: none)
    corr0: f32,
    corr1: f32,
    _p1: vec4<u32>,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
#ifdef FREQ_FACTORS
@group(0) @binding(4) var<storage, read> freq_factors: array<f32>;
#endif

#include "grid.inc.wgsl"
#include "rope_rotate.inc.wgsl"

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = linear_group(wid, nwg) * 64u + lid;
    if (i >= P.head_dim * P.n_heads * P.n_tokens) {
        return;
    }
    let e = i % P.head_dim;
    let t = i / (P.head_dim * P.n_heads);
    let slot = rope_slot(e, P.n_dims, P.mode);
    if (slot.pair == P.n_dims) {
        y[i] = x[i];
        return;
    }
    let pos = f32(step[0] + t);
    let theta = rope_angle(pos, slot.pair, P.n_dims, P.freq_base, P.theta_scale, P.freq_scale);
    y[i] = rope_rotate(x[i], x[i - e + slot.partner], theta, slot.second, P.attn_factor);
}
