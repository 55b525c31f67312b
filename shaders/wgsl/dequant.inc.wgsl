// dequant32(row_off, c, out): elements c*32 .. c*32+31 of the weight row starting at byte
// `row_off`, in ggml's block layouts (bit-identical arithmetic order to ggml's dequantize_row_*).
// Exactly one W_<TYPE> define selects the format. Every supported format has 32-element
// (sub-)blocks, so a chunk never straddles two blocks. Needs bytes.inc.wgsl.

#ifdef W_F32
fn dequant32(row_off: u32, c: u32, o: ptr<function, array<f32, 32>>) {
    for (var l = 0u; l < 32u; l++) {
        let i = c * 32u + l;
        (*o)[l] = select(0.0, bitcast<f32>(w[(row_off >> 2u) + i]), i < P.k);
    }
}
#endif

#ifdef W_F16
fn dequant32(row_off: u32, c: u32, o: ptr<function, array<f32, 32>>) {
    for (var l = 0u; l < 32u; l++) {
        let i = c * 32u + l;
        (*o)[l] = select(0.0, load_f16(row_off + 2u * i), i < P.k);
    }
}
#endif

#ifdef W_Q4_0
fn dequant32(row_off: u32, c: u32, o: ptr<function, array<f32, 32>>) {
    let base = row_off + c * 18u;
    let d = load_f16(base);
    for (var j = 0u; j < 16u; j++) {
        let b = load_u8(base + 2u + j);
        (*o)[j] = f32(i32(b & 15u) - 8) * d;
        (*o)[j + 16u] = f32(i32(b >> 4u) - 8) * d;
    }
}
#endif

#ifdef W_Q4_1
fn dequant32(row_off: u32, c: u32, o: ptr<function, array<f32, 32>>) {
    let base = row_off + c * 20u;
    let d = load_f16(base);
    let m = load_f16(base + 2u);
    for (var j = 0u; j < 16u; j++) {
        let b = load_u8(base + 4u + j);
        (*o)[j] = f32(b & 15u) * d + m;
        (*o)[j + 16u] = f32(b >> 4u) * d + m;
    }
}
#endif

#ifdef W_Q5_0
fn dequant32(row_off: u32, c: u32, o: ptr<function, array<f32, 32>>) {
    let base = row_off + c * 22u;
    let d = load_f16(base);
    let qh = load_u32_even(base + 2u);
    for (var j = 0u; j < 16u; j++) {
        let b = load_u8(base + 6u + j);
        let h0 = ((qh >> j) << 4u) & 0x10u;
        let h1 = (qh >> (j + 12u)) & 0x10u;
        (*o)[j] = f32(i32((b & 15u) | h0) - 16) * d;
        (*o)[j + 16u] = f32(i32((b >> 4u) | h1) - 16) * d;
    }
}
#endif

#ifdef W_Q5_1
fn dequant32(row_off: u32, c: u32, o: ptr<function, array<f32, 32>>) {
    let base = row_off + c * 24u;
    let d = load_f16(base);
    let m = load_f16(base + 2u);
    let qh = load_u32_even(base + 4u);
    for (var j = 0u; j < 16u; j++) {
        let b = load_u8(base + 8u + j);
        let h0 = ((qh >> j) << 4u) & 0x10u;
        let h1 = (qh >> (j + 12u)) & 0x10u;
        (*o)[j] = f32((b & 15u) | h0) * d + m;
        (*o)[j + 16u] = f32((b >> 4u) | h1) * d + m;
    }
}
#endif

#ifdef W_Q8_0
fn dequant32(row_off: u32, c: u32, o: ptr<function, array<f32, 32>>) {
    let base = row_off + c * 34u;
    let d = load_f16(base);
    for (var j = 0u; j < 32u; j++) {
        (*o)[j] = f32(load_i8(base + 2u + j)) * d;
    }
}
#endif

// ggml's get_scale_min_k4: 6-bit scale and min of sub-block j from the 12 packed bytes at `q`.
fn scale_min_k4(j: u32, q: u32) -> vec2<f32> {
    if (j < 4u) {
        return vec2<f32>(f32(load_u8(q + j) & 63u), f32(load_u8(q + j + 4u) & 63u));
    }
    let sc = (load_u8(q + j + 4u) & 15u) | ((load_u8(q + j - 4u) >> 6u) << 4u);
    let m = (load_u8(q + j + 4u) >> 4u) | ((load_u8(q + j) >> 6u) << 4u);
    return vec2<f32>(f32(sc), f32(m));
}

#ifdef W_Q4_K
fn dequant32(row_off: u32, c: u32, o: ptr<function, array<f32, 32>>) {
    let base = row_off + (c / 8u) * 144u;
    let sub = c % 8u;
    let sm = scale_min_k4(sub, base + 4u);
    let d1 = load_f16(base) * sm.x;
    let m1 = load_f16(base + 2u) * sm.y;
    let qs = base + 16u + 32u * (sub / 2u);
    let shift = (sub % 2u) * 4u;
    for (var l = 0u; l < 32u; l++) {
        (*o)[l] = d1 * f32((load_u8(qs + l) >> shift) & 15u) - m1;
    }
}
#endif

#ifdef W_Q5_K
fn dequant32(row_off: u32, c: u32, o: ptr<function, array<f32, 32>>) {
    let base = row_off + (c / 8u) * 176u;
    let sub = c % 8u;
    let sm = scale_min_k4(sub, base + 4u);
    let d1 = load_f16(base) * sm.x;
    let m1 = load_f16(base + 2u) * sm.y;
    let qh = base + 16u;
    let ql = base + 48u + 32u * (sub / 2u);
    let shift = (sub % 2u) * 4u;
    for (var l = 0u; l < 32u; l++) {
        let q = ((load_u8(ql + l) >> shift) & 15u) + ((load_u8(qh + l) >> sub) & 1u) * 16u;
        (*o)[l] = d1 * f32(q) - m1;
    }
}
#endif

#ifdef W_Q6_K
fn dequant32(row_off: u32, c: u32, o: ptr<function, array<f32, 32>>) {
    let base = row_off + (c / 8u) * 210u;
    let n = (c % 8u) / 4u;
    let r = c % 4u;
    let d = load_f16(base + 208u);
    let ql = base + 64u * n + (r & 1u) * 32u;
    let qh = base + 128u + 32u * n;
    let shift = (r >> 1u) * 4u;
    let sc = base + 192u + 8u * n + 2u * r;
    for (var l = 0u; l < 32u; l++) {
        let lo = (load_u8(ql + l) >> shift) & 15u;
        let hi = (load_u8(qh + l) >> (2u * r)) & 3u;
        let q = i32(lo | (hi << 4u)) - 32;
        (*o)[l] = d * f32(load_i8(sc + l / 16u)) * f32(q);
    }
}
#endif
