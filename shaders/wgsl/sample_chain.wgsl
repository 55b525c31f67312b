// Sampling one logits row on the GPU with the engine's chain (crates/core/src/sampling.rs):
// logit bias and repetition penalties → top-k → top-p → min-p → temperature → the draw `u`
// (taken from the engine's seeded RNG on the CPU), so a step reads back two words: a status
// and the token. One workgroup.
//
// The chain works on the candidates in the CPU sampler's order (descending logit, ascending id
// on ties) without sorting: every cut (the k-th candidate, the top-p prefix, the drawn token) is
// "the last candidate whose cumulative weight from the top reaches a goal", found by building
// its rank key bit by bit, one reduction over the candidates per bit. A candidate's rank key is
// (ordered bits of its logit, !id), larger = earlier.
//
// Scratch (`work`, 3 × width words): the edited row, then the compacted ids and logits of the
// top-k candidates.
//
// Spec (read-only storage, written per step): [0] top_k, [1] top_p, [2] min_p, [3] temperature,
// [4] u, [5] repeat_penalty, [6] frequency_penalty, [7] presence_penalty, [8] n_bias,
// [9] n_counts, then n_bias × (token, bias), then n_counts × (token, occurrences).
// Result: ids[0] = 0 (a token) | 1 (every logit masked) | 2 (a NaN logit), ids[1] = the token
// (or the NaN's index).

struct Params {
    width: u32,
    row: u32,
    _p0: u32, _p1: u32,
    _p2: vec4<u32>, _p3: vec4<u32>, _p4: vec4<u32>,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> spec: array<u32>;
@group(0) @binding(3) var<storage, read_write> ids: array<u32>;
@group(0) @binding(4) var<storage, read_write> work: array<u32>;

const WG: u32 = 256u;
const NEG_INF_BITS: u32 = 0xff800000u;

// -inf built at run time: a constant infinity is a WGSL error in browsers (Tint: "value -inf
// cannot be represented as 'f32'"), while naga accepts it.
fn neg_inf() -> f32 {
    var bits = NEG_INF_BITS;
    return bitcast<f32>(bits);
}
var<workgroup> red_f: array<f32, WG>;
var<workgroup> red_u: array<u32, WG>;
var<workgroup> red_i: array<u32, WG>;
var<private> tid: u32;

fn sum_f(v: f32) -> f32 {
    red_f[tid] = v;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half = half / 2u) {
        if (tid < half) {
            red_f[tid] = red_f[tid] + red_f[tid + half];
        }
        workgroupBarrier();
    }
    let r = workgroupUniformLoad(&red_f[0]);
    workgroupBarrier();
    return r;
}

// Largest key among the threads' `k`, and the lowest index among those with it.
fn max_key(k: u32, i: u32) -> vec2<u32> {
    red_u[tid] = k;
    red_i[tid] = i;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half = half / 2u) {
        if (tid < half) {
            let ok = red_u[tid + half];
            let oi = red_i[tid + half];
            if (ok > red_u[tid] || (ok == red_u[tid] && oi < red_i[tid])) {
                red_u[tid] = ok;
                red_i[tid] = oi;
            }
        }
        workgroupBarrier();
    }
    let rk = workgroupUniformLoad(&red_u[0]);
    let ri = workgroupUniformLoad(&red_i[0]);
    workgroupBarrier();
    return vec2<u32>(rk, ri);
}

// Order-preserving bits of a float: a > b ⇔ okey(a) > okey(b) (no NaN here).
fn okey(l: f32) -> u32 {
    let b = bitcast<u32>(l);
    if ((b & 0x80000000u) != 0u) {
        return ~b;
    }
    return b | 0x80000000u;
}

fn ge(k: u32, id: u32, hi: u32, lo: u32) -> bool {
    return k > hi || (k == hi && ~id >= lo);
}

// The set a search runs over and how it weighs a candidate.
struct Set {
    // 0: the edited row (ids 0..width, masked logits excluded); 1: the compacted candidates.
    src: u32,
    n: u32,
    // Members: rank ≥ (keep_hi, keep_lo) and logit ≥ min_l.
    keep_hi: u32,
    keep_lo: u32,
    min_l: f32,
    // Weight: 1 when `counting`, else exp(logit * scale - offset).
    counting: bool,
    scale: f32,
    offset: f32,
}

fn cand(s: Set, j: u32) -> vec2<u32> {
    if (s.src == 0u) {
        return vec2<u32>(j, work[j]);
    }
    return vec2<u32>(work[P.width + j], work[2u * P.width + j]);
}

// Total weight of the members with rank ≥ (hi, lo), or (eq) with logit key == hi.
fn mass(s: Set, hi: u32, lo: u32, eq: bool) -> f32 {
    var acc = 0.0;
    for (var j = tid; j < s.n; j += WG) {
        let c = cand(s, j);
        let l = bitcast<f32>(c.y);
        if (c.y == NEG_INF_BITS || l < s.min_l) {
            continue;
        }
        let k = okey(l);
        if (!ge(k, c.x, s.keep_hi, s.keep_lo)) {
            continue;
        }
        var inside = ge(k, c.x, hi, lo);
        if (eq) {
            inside = k == hi;
        }
        if (inside) {
            if (s.counting) {
                acc += 1.0;
            } else {
                acc += exp(l * s.scale - s.offset);
            }
        }
    }
    return sum_f(acc);
}

// The rank key of the last member (in the CPU sampler's order) whose cumulative weight from
// the top reaches `goal` (exceeds it when `strict`). When only one member has that logit the
// id part is left 0 (every member with that logit is then that one).
fn search(s: Set, goal: f32, strict: bool) -> vec2<u32> {
    var hi = 0u;
    for (var b = 0u; b < 32u; b++) {
        let c = hi | (0x80000000u >> b);
        let m = mass(s, c, 0u, false);
        if (m > goal || (!strict && m == goal)) {
            hi = c;
        }
    }
    var lo = 0u;
    var counting = s;
    counting.counting = true;
    if (mass(counting, hi, 0u, true) > 1.0) {
        for (var b = 0u; b < 32u; b++) {
            let c = lo | (0x80000000u >> b);
            let m = mass(s, hi, c, false);
            if (m > goal || (!strict && m == goal)) {
                lo = c;
            }
        }
    }
    return vec2<u32>(hi, lo);
}

@compute @workgroup_size(256)
fn sample(@builtin(local_invocation_index) lid: u32) {
    tid = lid;
    let width = P.width;
    let base = P.row * width;
    for (var i = tid; i < width; i += WG) {
        work[i] = bitcast<u32>(x[base + i]);
    }
    storageBarrier();
    // Bias, then penalties, in the CPU sampler's order and arithmetic (one invocation).
    if (tid == 0u) {
        let n_bias = spec[8];
        let n_counts = spec[9];
        for (var e = 0u; e < n_bias; e++) {
            let t = spec[10u + 2u * e];
            if (t < width) {
                work[t] = bitcast<u32>(bitcast<f32>(work[t]) + bitcast<f32>(spec[11u + 2u * e]));
            }
        }
        let rp = bitcast<f32>(spec[5]);
        let fp = bitcast<f32>(spec[6]);
        let pp = bitcast<f32>(spec[7]);
        for (var e = 0u; e < n_counts; e++) {
            let at = 10u + 2u * n_bias + 2u * e;
            let t = spec[at];
            if (t < width) {
                var l = bitcast<f32>(work[t]);
                if (l <= 0.0) {
                    l = l * rp;
                } else {
                    l = l / rp;
                }
                l = l - (f32(spec[at + 1u]) * fp + pp);
                work[t] = bitcast<u32>(l);
            }
        }
    }
    storageBarrier();

    // The best candidate (the greedy token), a NaN if any, the number of unmasked logits.
    var best_k = 0u;
    var best_i = 0xffffffffu;
    var nan_i = 0xffffffffu;
    var n_valid = 0u;
    for (var i = tid; i < width; i += WG) {
        let bits = work[i];
        let l = bitcast<f32>(bits);
        if ((bits & 0x7fffffffu) > 0x7f800000u) {
            nan_i = min(nan_i, i);
            continue;
        }
        if (bits == NEG_INF_BITS) {
            continue;
        }
        n_valid += 1u;
        let k = okey(l);
        if (k > best_k || (k == best_k && i < best_i)) {
            best_k = k;
            best_i = i;
        }
    }
    let nan = max_key(select(0u, 1u, nan_i != 0xffffffffu), nan_i);
    let best = max_key(best_k, best_i);
    let valid = u32(sum_f(f32(n_valid)));
    if (nan.x != 0u) {
        if (tid == 0u) {
            ids[0] = 2u;
            ids[1] = nan.y;
        }
        return;
    }
    if (valid == 0u) {
        if (tid == 0u) {
            ids[0] = 1u;
            ids[1] = 0u;
        }
        return;
    }
    let temperature = bitcast<f32>(spec[3]);
    if (temperature <= 0.0) {
        if (tid == 0u) {
            ids[0] = 0u;
            ids[1] = best.y;
        }
        return;
    }
    let m = bitcast<f32>(work[best.y]);

    // top-k on the whole row: the k-th candidate's rank.
    var row = Set(0u, width, 0u, 0u, -3.4e38, true, 1.0, 0.0);
    row.min_l = neg_inf();
    let top_k = spec[0];
    var cut = vec2<u32>(0u, 0u);
    if (top_k > 0u && top_k < valid) {
        cut = search(row, f32(top_k), false);
    }
    // Compact the members (each invocation a contiguous slice, in order).
    let chunk = (width + WG - 1u) / WG;
    let begin = min(tid * chunk, width);
    let end = min(begin + chunk, width);
    var mine = 0u;
    for (var i = begin; i < end; i++) {
        let bits = work[i];
        if (bits != NEG_INF_BITS && ge(okey(bitcast<f32>(bits)), i, cut.x, cut.y)) {
            mine += 1u;
        }
    }
    red_u[tid] = mine;
    workgroupBarrier();
    if (tid == 0u) {
        var acc = 0u;
        for (var t = 0u; t < WG; t++) {
            let c = red_u[t];
            red_u[t] = acc;
            acc += c;
        }
    }
    workgroupBarrier();
    var at = red_u[tid];
    for (var i = begin; i < end; i++) {
        let bits = work[i];
        if (bits != NEG_INF_BITS && ge(okey(bitcast<f32>(bits)), i, cut.x, cut.y)) {
            work[width + at] = i;
            work[2u * width + at] = bits;
            at += 1u;
        }
    }
    storageBarrier();
    let n = u32(sum_f(f32(mine)));

    // top-p over the softmax (before temperature) of the top-k candidates.
    var cands = Set(1u, n, 0u, 0u, -3.4e38, false, 1.0, m);
    cands.min_l = neg_inf();
    let top_p = bitcast<f32>(spec[1]);
    if (top_p < 1.0) {
        let total = mass(cands, 0u, 0u, false);
        // At least the best candidate (whose weight is exp(0) = 1) is kept.
        let p_cut = search(cands, max(top_p * total, 1e-30), false);
        cands.keep_hi = p_cut.x;
        cands.keep_lo = p_cut.y;
    }
    // min-p: probability ≥ min_p × the best's ⇔ logit ≥ best + ln(min_p).
    let min_p = bitcast<f32>(spec[2]);
    if (min_p > 0.0) {
        cands.min_l = m + log(min_p);
    }
    // The draw: softmax of logit / temperature, the first candidate whose cumulative
    // probability exceeds u.
    let inv_t = 1.0 / temperature;
    cands.scale = inv_t;
    cands.offset = m * inv_t;
    let total = mass(cands, 0u, 0u, false);
    let drawn = search(cands, bitcast<f32>(spec[4]) * total, true);
    // The drawn candidate (the best one if rounding left u past the total).
    if (tid == 0u) {
        ids[0] = 0u;
        ids[1] = best.y;
    }
    storageBarrier();
    var ties = cands;
    ties.counting = true;
    let unique = mass(ties, drawn.x, 0u, true) <= 1.0;
    for (var j = tid; j < n; j += WG) {
        let c = cand(cands, j);
        let l = bitcast<f32>(c.y);
        if (l < cands.min_l || !ge(okey(l), c.x, cands.keep_hi, cands.keep_lo)) {
            continue;
        }
        if (okey(l) == drawn.x && (unique || ~c.x == drawn.y)) {
            ids[1] = c.x;
        }
    }
}
