// qchunk32(row_off, c): elements c*32 .. c*32+31 of the weight row starting at byte `row_off`
// in integer form, for packed integer dot products (mul_mat_q8.wgsl): 8 words of four bytes
// each (p; element order as dequant32's vec4s), every byte a small non-negative or signed
// integer, and (a, b) such that the weight is a * byte + b: dequant32's arithmetic with the
// scale and offset left out of the integers. (A struct, not an out-pointer: naga 30's SPIR-V
// writer panicked, "expression is not cached", on the kernel passing `&p[r]` of an array of
// arrays.) Types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,
// Q5_K (one W_<TYPE> define). Needs bytes.inc.wgsl.

struct QChunk {
    p: array<u32, 8>,
    ab: vec2<f32>,
}

// Bits 0..3 of `bits` as bytes 0..3 (each 0 or 1).
fn spread4(bits: u32) -> u32 {
    return (bits & 1u) | ((bits & 2u) << 7u) | ((bits & 4u) << 14u) | ((bits & 8u) << 21u);
}

#ifdef W_Q4_0
fn qchunk32(row_off: u32, c: u32) -> QChunk {
    var o: QChunk;
    let base = row_off + c * 18u;
    let d = load_f16(base);
    for (var t = 0u; t < 4u; t++) {
        let q = load_u32_even(base + 2u + 4u * t);
        o.p[t] = q & 0x0f0f0f0fu;
        o.p[t + 4u] = (q >> 4u) & 0x0f0f0f0fu;
    }
    o.ab = vec2<f32>(d, -8.0 * d);
    return o;
}
#endif

#ifdef W_Q4_1
fn qchunk32(row_off: u32, c: u32) -> QChunk {
    var o: QChunk;
    let base = row_off + c * 20u;
    let dm = load_f16x2(base);
    for (var t = 0u; t < 4u; t++) {
        let q = load_u32_even(base + 4u + 4u * t);
        o.p[t] = q & 0x0f0f0f0fu;
        o.p[t + 4u] = (q >> 4u) & 0x0f0f0f0fu;
    }
    o.ab = dm;
    return o;
}
#endif

#ifdef W_Q5_0
fn qchunk32(row_off: u32, c: u32) -> QChunk {
    var o: QChunk;
    let base = row_off + c * 22u;
    let d = load_f16(base);
    let qh = load_u32_even(base + 2u);
    for (var t = 0u; t < 4u; t++) {
        let q = load_u32_even(base + 6u + 4u * t);
        o.p[t] = (q & 0x0f0f0f0fu) | (spread4(qh >> (4u * t)) << 4u);
        o.p[t + 4u] = ((q >> 4u) & 0x0f0f0f0fu) | (spread4(qh >> (16u + 4u * t)) << 4u);
    }
    o.ab = vec2<f32>(d, -16.0 * d);
    return o;
}
#endif

#ifdef W_Q5_1
fn qchunk32(row_off: u32, c: u32) -> QChunk {
    var o: QChunk;
    let base = row_off + c * 24u;
    let dm = load_f16x2(base);
    let qh = load_u32_even(base + 4u);
    for (var t = 0u; t < 4u; t++) {
        let q = load_u32_even(base + 8u + 4u * t);
        o.p[t] = (q & 0x0f0f0f0fu) | (spread4(qh >> (4u * t)) << 4u);
        o.p[t + 4u] = ((q >> 4u) & 0x0f0f0f0fu) | (spread4(qh >> (16u + 4u * t)) << 4u);
    }
    o.ab = dm;
    return o;
}
#endif

#ifdef W_Q8_0
fn qchunk32(row_off: u32, c: u32) -> QChunk {
    var o: QChunk;
    let base = row_off + c * 34u;
    for (var t = 0u; t < 8u; t++) {
        o.p[t] = load_u32_even(base + 2u + 4u * t); // already signed bytes
    }
    o.ab = vec2<f32>(load_f16(base), 0.0);
    return o;
}
#endif

#ifdef W_Q4_K
fn qchunk32(row_off: u32, c: u32) -> QChunk {
    var o: QChunk;
    let base = row_off + (c / 8u) * 144u;
    let sub = c % 8u;
    let sm = scale_min_k4(sub, base + 4u);
    let dm = load_f16x2(base);
    let qs = base + 16u + 32u * (sub / 2u);
    let shift = (sub % 2u) * 4u;
    for (var t = 0u; t < 8u; t++) {
        o.p[t] = (load_u32_even(qs + 4u * t) >> shift) & 0x0f0f0f0fu;
    }
    o.ab = vec2<f32>(dm.x * sm.x, -(dm.y * sm.y));
    return o;
}
#endif

#ifdef W_Q5_K
fn qchunk32(row_off: u32, c: u32) -> QChunk {
    var o: QChunk;
    let base = row_off + (c / 8u) * 176u;
    let sub = c % 8u;
    let sm = scale_min_k4(sub, base + 4u);
    let dm = load_f16x2(base);
    let qh = base + 16u;
    let ql = base + 48u + 32u * (sub / 2u);
    let shift = (sub % 2u) * 4u;
    for (var t = 0u; t < 8u; t++) {
        let lo = (load_u32_even(ql + 4u * t) >> shift) & 0x0f0f0f0fu;
        let hi = (load_u32_even(qh + 4u * t) >> sub) & 0x01010101u;
        o.p[t] = lo | (hi << 4u);
    }
    o.ab = vec2<f32>(dm.x * sm.x, -(dm.y * sm.y));
    return o;
}
#endif
