// qchunk32(row_off, c): elements c*32 .. c*32+31 of the weight row starting at byte `row_off`
// as integers, for packed integer dot products (mul_mat_q8.wgsl), in the form ggml's x86
// vec_dot kernels compute with (crates/quant/src/vec_dot/ggml_order.rs): 8 words of four
// bytes (p; byte b of the chunk is element b), each byte plus OFF the element's integer,
// times the chunk's integer scale `sc` (K-quants; 1 otherwise); `mn` the chunk's integer min
// (K-quants); `d` and `m` the block's float scale and min (Q4_1/Q5_1's m, K-quants' dmin).
// A block is CHUNKS chunks (1, or 8 for the K-quants' 256); MIN says how the min enters the
// sum: 0 none, 1 m · s per block (Q4_1, Q5_1 with q8_1's s), 2 dmin · (mins · chunk sums) in
// 4 lanes (Q4_K), 3 the same in one (Q5_K). A struct, not out-pointers: naga 30's SPIR-V
// writer panicked ("expression is not cached") on `&p[r]` of an array of arrays.
// Types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K (one W_<TYPE> define). Needs bytes.inc.wgsl.

struct QChunk {
    p: array<u32, 8>,
    sc: i32,
    mn: i32,
    d: f32,
    m: f32,
}

// Bits 0..3 of `bits` as bytes 0..3 (each 0 or 1).
fn spread4(bits: u32) -> u32 {
    return (bits & 1u) | ((bits & 2u) << 7u) | ((bits & 4u) << 14u) | ((bits & 8u) << 21u);
}

// The 4-bit quants of a legacy block at `qs`: bytes 0..15 low nibbles, 16..31 high nibbles.
fn nibble_chunk(qs: u32, o: ptr<function, QChunk>) {
    for (var t = 0u; t < 4u; t++) {
        let q = load_u32_even(qs + 4u * t);
        (*o).p[t] = q & 0x0f0f0f0fu;
        (*o).p[t + 4u] = (q >> 4u) & 0x0f0f0f0fu;
    }
}

// Their 5th bits from the block's 32-bit qh (element b: bit b), as 16s.
fn fifth_bits(qh: u32, o: ptr<function, QChunk>) {
    for (var t = 0u; t < 4u; t++) {
        (*o).p[t] |= spread4(qh >> (4u * t)) << 4u;
        (*o).p[t + 4u] |= spread4(qh >> (16u + 4u * t)) << 4u;
    }
}

fn legacy(d: f32, m: f32) -> QChunk {
    var o: QChunk;
    o.sc = 1;
    o.mn = 0;
    o.d = d;
    o.m = m;
    return o;
}

#ifdef W_Q4_0
const OFF: i32 = -8;
const CHUNKS: u32 = 1u;
const MIN: u32 = 0u;
fn qchunk32(row_off: u32, c: u32) -> QChunk {
    let base = row_off + c * 18u;
    var o = legacy(load_f16(base), 0.0);
    nibble_chunk(base + 2u, &o);
    return o;
}
#endif

#ifdef W_Q4_1
const OFF: i32 = 0;
const CHUNKS: u32 = 1u;
const MIN: u32 = 1u;
fn qchunk32(row_off: u32, c: u32) -> QChunk {
    let base = row_off + c * 20u;
    let dm = load_f16x2(base);
    var o = legacy(dm.x, dm.y);
    nibble_chunk(base + 4u, &o);
    return o;
}
#endif

#ifdef W_Q5_0
const OFF: i32 = -16;
const CHUNKS: u32 = 1u;
const MIN: u32 = 0u;
fn qchunk32(row_off: u32, c: u32) -> QChunk {
    let base = row_off + c * 22u;
    var o = legacy(load_f16(base), 0.0);
    nibble_chunk(base + 6u, &o);
    fifth_bits(load_u32_even(base + 2u), &o);
    return o;
}
#endif

#ifdef W_Q5_1
const OFF: i32 = 0;
const CHUNKS: u32 = 1u;
const MIN: u32 = 1u;
fn qchunk32(row_off: u32, c: u32) -> QChunk {
    let base = row_off + c * 24u;
    let dm = load_f16x2(base);
    var o = legacy(dm.x, dm.y);
    nibble_chunk(base + 8u, &o);
    fifth_bits(load_u32_even(base + 4u), &o);
    return o;
}
#endif

#ifdef W_Q8_0
const OFF: i32 = 0;
const CHUNKS: u32 = 1u;
const MIN: u32 = 0u;
fn qchunk32(row_off: u32, c: u32) -> QChunk {
    let base = row_off + c * 34u;
    var o = legacy(load_f16(base), 0.0);
    for (var t = 0u; t < 8u; t++) {
        o.p[t] = load_u32_even(base + 2u + 4u * t); // already signed bytes
    }
    return o;
}
#endif

// A K-quant chunk's header: the super-block's d and dmin, the chunk's 6-bit scale and min.
fn k_header(base: u32, sub: u32) -> QChunk {
    var o: QChunk;
    let sm = scale_min_k4(sub, base + 4u);
    let dm = load_f16x2(base);
    o.sc = i32(sm.x);
    o.mn = i32(sm.y);
    o.d = dm.x;
    o.m = dm.y;
    return o;
}

#ifdef W_Q4_K
const OFF: i32 = 0;
const CHUNKS: u32 = 8u;
const MIN: u32 = 2u;
fn qchunk32(row_off: u32, c: u32) -> QChunk {
    let base = row_off + (c / 8u) * 144u;
    let sub = c % 8u;
    var o = k_header(base, sub);
    let qs = base + 16u + 32u * (sub / 2u);
    let shift = (sub % 2u) * 4u;
    for (var t = 0u; t < 8u; t++) {
        o.p[t] = (load_u32_even(qs + 4u * t) >> shift) & 0x0f0f0f0fu;
    }
    return o;
}
#endif

#ifdef W_Q5_K
const OFF: i32 = 0;
const CHUNKS: u32 = 8u;
const MIN: u32 = 3u;
fn qchunk32(row_off: u32, c: u32) -> QChunk {
    let base = row_off + (c / 8u) * 176u;
    let sub = c % 8u;
    var o = k_header(base, sub);
    let qh = base + 16u;
    let ql = base + 48u + 32u * (sub / 2u);
    let shift = (sub % 2u) * 4u;
    for (var t = 0u; t < 8u; t++) {
        let lo = (load_u32_even(ql + 4u * t) >> shift) & 0x0f0f0f0fu;
        let hi = (load_u32_even(qh + 4u * t) >> sub) & 0x01010101u;
        o.p[t] = lo | (hi << 4u);
    }
    return o;
}
#endif
