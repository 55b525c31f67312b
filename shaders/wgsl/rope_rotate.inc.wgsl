// ggml's rope, one output element at a time. The angle of pair i is freq_scale * pos *
// theta_scale^i with theta_scale = base^(-2/n_dims), built by repeated multiplication exactly
// as ggml's rope cache does (pow would round differently).
// mode 0: adjacent pairs (2i, 2i+1) (llama); mode 1: pairs (i, i + n_dims/2) (NeoX, gemma).

fn rope_angle(pos: f32, i: u32, n_dims: u32, base: f32, freq_scale: f32) -> f32 {
    let theta_scale = pow(base, -2.0 / f32(n_dims));
    var theta = pos;
    for (var j = 0u; j < i; j++) {
        theta *= theta_scale;
    }
    return freq_scale * theta;
}

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

// The rotated value of an element `v` whose partner is `p`.
fn rope_rotate(v: f32, p: f32, theta: f32, second: bool) -> f32 {
    let c = cos(theta);
    let s = sin(theta);
    if (second) {
        // x1' = x0 * s + x1 * c with x0 = partner, x1 = self.
        return fma(p, s, v * c);
    }
    // x0' = x0 * c - x1 * s.
    return fma(v, c, -(p * s));
}
