// ggml's rope, one output element at a time. The angle of pair i is freq_scale * pos *
// theta_scale^i with theta_scale = base^(-2/n_dims), built by repeated multiplication exactly
// as ggml's rope cache does, and divided by the pair's frequency factor where the model has
// them (FREQ_FACTORS: the includer binds `freq_factors`, one f32 per pair).
// mode 0: adjacent pairs (2i, 2i+1) (llama); mode 1: pairs (i, i + n_dims/2) (NeoX, gemma).
//
// The precision of WGSL's pow, sin and cos is the implementation's (Vulkan allows 2^-11
// absolute for sin/cos). BUILTIN_MATH (lavapipe) keeps the built-ins, with which lavapipe was
// measured against the CPU (forced decoding 256/256 on both models). Elsewhere theta_scale is
// the host's powf (ggml's) and sin/cos are computed by hand (`sin_cos`): SwiftShader's built-ins
// moved Gemma 3's near ties. (Host powf on lavapipe moved SmolLM2's greedy runs instead: its
// near ties are decided by last bits either way.)

// The includer's Params carry `ext_factor`, `corr0` and `corr1` (YaRN, ext_factor 0: none).
fn rope_angle(pos: f32, i: u32, n_dims: u32, base: f32, host_theta_scale: f32, freq_scale: f32) -> f32 {
#ifdef BUILTIN_MATH
    let theta_scale = pow(base, -2.0 / f32(n_dims));
#else
    let theta_scale = host_theta_scale;
#endif
    var theta = pos;
    for (var j = 0u; j < i; j++) {
        theta *= theta_scale;
    }
#ifdef FREQ_FACTORS
    theta = theta / freq_factors[i];
#endif
    let interp = freq_scale * theta;
    if (P.ext_factor == 0.0) {
        return interp;
    }
    // YaRN: blend with the unscaled angle by ext_factor * ramp(i), the ramp falling from 1 to
    // 0 between the correction dims (ggml's rope_yarn_ramp).
    let y = (f32(i) - P.corr0) / max(0.001, P.corr1 - P.corr0);
    let mix = (1.0 - clamp(y, 0.0, 1.0)) * P.ext_factor;
    return fma(interp, 1.0 - mix, theta * mix);
}

// (sin x, cos x) to about one ulp for |x| up to ~10^4 (angles are at most a few thousand
// radians). x = n pi/2 + r with pi/2 in three parts of 12 significant bits (Cody-Waite), so
// n * part is exact for |n| < 2^12; then Taylor polynomials on |r| <= pi/4.
#ifdef BUILTIN_MATH
fn sin_cos(x: f32) -> vec2<f32> {
    return vec2<f32>(sin(x), cos(x));
}
#else
fn sin_cos(x: f32) -> vec2<f32> {
    let n = round(x * 0.636619772);
    let r = ((x - n * 1.5703125) - n * 4.837512969970703e-4) - n * 7.549790126404332e-8;
    let r2 = r * r;
    var s = -1.0 / 39916800.0;
    s = s * r2 + 1.0 / 362880.0;
    s = s * r2 - 1.0 / 5040.0;
    s = s * r2 + 1.0 / 120.0;
    s = s * r2 - 1.0 / 6.0;
    s = (s * r2) * r + r;
    var c = 1.0 / 479001600.0;
    c = c * r2 - 1.0 / 3628800.0;
    c = c * r2 + 1.0 / 40320.0;
    c = c * r2 - 1.0 / 720.0;
    c = c * r2 + 1.0 / 24.0;
    c = c * r2 - 0.5;
    c = c * r2 + 1.0;
    // Quadrant n mod 4: (sin, cos) of r rotated by n quarter turns.
    switch (i32(n) & 3) {
        case 0: { return vec2<f32>(s, c); }
        case 1: { return vec2<f32>(c, -s); }
        case 2: { return vec2<f32>(-s, -c); }
        default: { return vec2<f32>(-c, s); }
    }
}
#endif

// Element e of a head: which pair it is in, its partner element, and whether it is the
// second of the pair. Elements e >= n_dims pass through (pair index n_dims).
struct RopeSlot {
    pair: u32,
    partner: u32,
    second: bool,
}

fn rope_slot(e: u32, n_dims: u32, mode: u32) -> RopeSlot {
    if (e >= n_dims) {
        return RopeSlot(n_dims, e, false);
    }
    if (mode == 0u) {
        return RopeSlot(e / 2u, e ^ 1u, (e & 1u) == 1u);
    }
    let half = n_dims / 2u;
    if (e < half) {
        return RopeSlot(e, e + half, false);
    }
    return RopeSlot(e - half, e - half, true);
}

// The rotated value of an element `v` whose partner is `p`; `mscale` multiplies the cosine and
// sine (rope.scaling.attn_factor, 1 for most models).
fn rope_rotate(v: f32, p: f32, theta: f32, second: bool, mscale: f32) -> f32 {
    let sc = sin_cos(theta);
    let s = sc.x * mscale;
    let c = sc.y * mscale;
    if (second) {
        // x1' = x0 * s + x1 * c with x0 = partner, x1 = self.
        return fma(p, s, v * c);
    }
    // x0' = x0 * c - x1 * s.
    return fma(v, c, -(p * s));
}
