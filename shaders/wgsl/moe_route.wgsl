// moe_route: per token (one invocation each), the n_used experts with the highest selection
// score and their weights, written as [ids (as floats)..., weights...]. Gating by define:
// GATING_SOFTMAX, GATING_SIGMOID, otherwise the raw logits (the delayed softmax then runs over
// the chosen: DELAYED_SOFTMAX). SELECTION_BIAS adds `bias` to the scores used to choose.
// NORMALIZE divides the weights by their sum (clamped to at least 2^-14); `scale` multiplies.

struct Params {
    n_expert: u32,
    n_used: u32,     // at most MAX_USED
    n_tokens: u32,
    scale: f32,
    _p0: vec4<u32>, _p1: vec4<u32>, _p2: vec4<u32>,
}

const MAX_USED: u32 = 32u;

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
#ifdef SELECTION_BIAS
@group(0) @binding(2) var<storage, read> bias: array<f32>;
#endif

#include "grid.inc.wgsl"

// The gated probability of expert e of the token whose logits start at `base`.
fn prob(base: u32, e: u32, max_logit: f32, inv_sum: f32) -> f32 {
    let l = logits[base + e];
#ifdef GATING_SOFTMAX
    return exp(l - max_logit) * inv_sum;
#else
#ifdef GATING_SIGMOID
    return 1.0 / (1.0 + exp(-l));
#else
    return l;
#endif
#endif
}

fn selection(base: u32, e: u32, max_logit: f32, inv_sum: f32) -> f32 {
    var s = prob(base, e, max_logit, inv_sum);
#ifdef SELECTION_BIAS
    s += bias[e];
#endif
    return s;
}

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let t = linear_group(wid, nwg) * 64u + lid;
    if (t >= P.n_tokens) {
        return;
    }
    let base = t * P.n_expert;
    var max_logit = -3.0e38;
    for (var e = 0u; e < P.n_expert; e++) {
        max_logit = max(max_logit, logits[base + e]);
    }
    var sum = 0.0;
    for (var e = 0u; e < P.n_expert; e++) {
        sum += exp(logits[base + e] - max_logit);
    }
    let inv_sum = 1.0 / sum;
    var chosen: array<u32, MAX_USED>;
    var weights: array<f32, MAX_USED>;
    for (var j = 0u; j < P.n_used; j++) {
        // The best expert not chosen yet; equal scores keep the lower index.
        var best = 0u;
        var best_s = -3.0e38;
        var found = false;
        for (var e = 0u; e < P.n_expert; e++) {
            var taken = false;
            for (var q = 0u; q < j; q++) {
                taken = taken || chosen[q] == e;
            }
            let s = selection(base, e, max_logit, inv_sum);
            if (!taken && (!found || s > best_s)) {
                best = e;
                best_s = s;
                found = true;
            }
        }
        chosen[j] = best;
        weights[j] = prob(base, best, max_logit, inv_sum);
    }
#ifdef DELAYED_SOFTMAX
    var wmax = -3.0e38;
    for (var j = 0u; j < P.n_used; j++) {
        wmax = max(wmax, weights[j]);
    }
    var wsum = 0.0;
    for (var j = 0u; j < P.n_used; j++) {
        weights[j] = exp(weights[j] - wmax);
        wsum += weights[j];
    }
    for (var j = 0u; j < P.n_used; j++) {
        weights[j] = weights[j] / wsum;
    }
#endif
#ifdef NORMALIZE
    var total = 0.0;
    for (var j = 0u; j < P.n_used; j++) {
        total += weights[j];
    }
    total = max(total, 6.103515625e-5);
    for (var j = 0u; j < P.n_used; j++) {
        weights[j] = weights[j] / total;
    }
#endif
    let out = t * 2u * P.n_used;
    for (var j = 0u; j < P.n_used; j++) {
        y[out + j] = f32(chosen[j]);
        y[out + P.n_used + j] = weights[j] * P.scale;
    }
}
