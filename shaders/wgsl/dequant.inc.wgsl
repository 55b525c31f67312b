// dequant32(row_off, c, out): elements c*32 .. c*32+31 of the weight row starting at byte
// `row_off`, as 8 vec4s, in ggml's block layouts (ggml's dequantize_row_* arithmetic: scale
// times integer, plus or minus the min). Exactly one W_<TYPE> define selects the format.
// Every format has 32-element (sub-)blocks, so a chunk never straddles two blocks; quantized
// bytes are read a word at a time. Needs bytes.inc.wgsl and a `P.k` (row length).

#ifdef W_F32
fn dequant32(row_off: u32, c: u32, o: ptr<function, array<vec4<f32>, 8>>) {
    for (var t = 0u; t < 8u; t++) {
        let i = c * 32u + 4u * t;
        let b = (row_off >> 2u) + i;
        if (i < P.k) {
            (*o)[t] = vec4<f32>(bitcast<f32>(w[b]), bitcast<f32>(w[b + 1u]),
                                bitcast<f32>(w[b + 2u]), bitcast<f32>(w[b + 3u]));
        } else {
            (*o)[t] = vec4<f32>(0.0);
        }
    }
}
#endif

#ifdef W_F16
fn dequant32(row_off: u32, c: u32, o: ptr<function, array<vec4<f32>, 8>>) {
    for (var t = 0u; t < 8u; t++) {
        let i = c * 32u + 4u * t;
        if (i < P.k) {
            let off = row_off + 2u * i;
            (*o)[t] = vec4<f32>(unpack2x16float(load_u32_even(off)),
                                unpack2x16float(load_u32_even(off + 4u)));
        } else {
            (*o)[t] = vec4<f32>(0.0);
        }
    }
}
#endif

#ifdef W_Q4_0
fn dequant32(row_off: u32, c: u32, o: ptr<function, array<vec4<f32>, 8>>) {
    let base = row_off + c * 18u;
    let d = load_f16(base);
    for (var t = 0u; t < 4u; t++) {
        let q = load_u32_even(base + 2u + 4u * t);
        (*o)[t] = (nibbles_lo(q) - 8.0) * d;
        (*o)[t + 4u] = (nibbles_hi(q) - 8.0) * d;
    }
}
#endif

#ifdef W_Q4_1
fn dequant32(row_off: u32, c: u32, o: ptr<function, array<vec4<f32>, 8>>) {
    let base = row_off + c * 20u;
    let dm = load_f16x2(base);
    let d = dm.x;
    let m = dm.y;
    for (var t = 0u; t < 4u; t++) {
        let q = load_u32_even(base + 4u + 4u * t);
        (*o)[t] = nibbles_lo(q) * d + m;
        (*o)[t + 4u] = nibbles_hi(q) * d + m;
    }
}
#endif

#ifdef W_Q5_0
fn dequant32(row_off: u32, c: u32, o: ptr<function, array<vec4<f32>, 8>>) {
    let base = row_off + c * 22u;
    let d = load_f16(base);
    let qh = load_u32_even(base + 2u);
    for (var t = 0u; t < 4u; t++) {
        let q = load_u32_even(base + 6u + 4u * t);
        let h0 = vec4<f32>(bits4(qh, 4u * t) * 16u);
        let h1 = vec4<f32>(bits4(qh, 16u + 4u * t) * 16u);
        (*o)[t] = (nibbles_lo(q) + h0 - 16.0) * d;
        (*o)[t + 4u] = (nibbles_hi(q) + h1 - 16.0) * d;
    }
}
#endif

#ifdef W_Q5_1
fn dequant32(row_off: u32, c: u32, o: ptr<function, array<vec4<f32>, 8>>) {
    let base = row_off + c * 24u;
    let dm = load_f16x2(base);
    let d = dm.x;
    let m = dm.y;
    let qh = load_u32_even(base + 4u);
    for (var t = 0u; t < 4u; t++) {
        let q = load_u32_even(base + 8u + 4u * t);
        let h0 = vec4<f32>(bits4(qh, 4u * t) * 16u);
        let h1 = vec4<f32>(bits4(qh, 16u + 4u * t) * 16u);
        (*o)[t] = (nibbles_lo(q) + h0) * d + m;
        (*o)[t + 4u] = (nibbles_hi(q) + h1) * d + m;
    }
}
#endif

#ifdef W_Q8_0
fn dequant32(row_off: u32, c: u32, o: ptr<function, array<vec4<f32>, 8>>) {
    let base = row_off + c * 34u;
    let d = load_f16(base);
    for (var t = 0u; t < 8u; t++) {
        (*o)[t] = vec4<f32>(unpack4xI8(load_u32_even(base + 2u + 4u * t))) * d;
    }
}
#endif

#ifdef W_MXFP4
// ggml's kvalues_mxfp4 (the E2M1 values doubled: 0 1 2 3 4 6 8 12, bit 3 the sign) of four
// 4-bit codes, as exact integers (code 8, "-0", is 0 as in ggml's int8 table).
fn fp4_doubled(q: vec4<u32>) -> vec4<f32> {
    let m = q & vec4<u32>(7u);
    // Codes 4..7: (2 or 3) << (1 or 2). For codes 0..3 the shift wraps and is discarded.
    let big = (vec4<u32>(2u) + (m & vec4<u32>(1u))) << ((m >> vec4<u32>(1u)) - vec4<u32>(1u));
    let mag = vec4<i32>(select(m, big, m >= vec4<u32>(4u)));
    return vec4<f32>(select(mag, -mag, (q & vec4<u32>(8u)) != vec4<u32>(0u)));
}

// 17-byte blocks: E8M0 exponent byte e, then 16 bytes of codes (element j in the low nibble of
// byte j, element j + 16 in the high nibble). x = kvalue * 2^(e - 128), the half scale built
// from its bits as ggml's ggml_e8m0_to_fp32_half does (e = 0, 1: the subnormals 2^-128, 2^-127,
// which a GPU may flush to zero; they only scale values below 2^-123).
fn dequant32(row_off: u32, c: u32, o: ptr<function, array<vec4<f32>, 8>>) {
    let base = row_off + c * 17u;
    let e = load_u8(base);
    let d = bitcast<f32>(select((e - 1u) << 23u, 0x00200000u << (e & 1u), e < 2u));
    for (var t = 0u; t < 4u; t++) {
        let q = load_u32_any(base + 1u + 4u * t);
        (*o)[t] = fp4_doubled(unpack4xU8(q & 0x0f0f0f0fu)) * d;
        (*o)[t + 4u] = fp4_doubled(unpack4xU8((q >> 4u) & 0x0f0f0f0fu)) * d;
    }
}
#endif

#ifdef W_Q4_K
fn dequant32(row_off: u32, c: u32, o: ptr<function, array<vec4<f32>, 8>>) {
    let base = row_off + (c / 8u) * 144u;
    let sub = c % 8u;
    let sm = scale_min_k4(sub, base + 4u);
    let dm = load_f16x2(base);
    let d1 = dm.x * sm.x;
    let m1 = dm.y * sm.y;
    let qs = base + 16u + 32u * (sub / 2u);
    let shift = (sub % 2u) * 4u;
    for (var t = 0u; t < 8u; t++) {
        let q = (load_u32_even(qs + 4u * t) >> shift) & 0x0f0f0f0fu;
        (*o)[t] = d1 * vec4<f32>(unpack4xU8(q)) - m1;
    }
}
#endif

#ifdef W_Q5_K
fn dequant32(row_off: u32, c: u32, o: ptr<function, array<vec4<f32>, 8>>) {
    let base = row_off + (c / 8u) * 176u;
    let sub = c % 8u;
    let sm = scale_min_k4(sub, base + 4u);
    let dm = load_f16x2(base);
    let d1 = dm.x * sm.x;
    let m1 = dm.y * sm.y;
    let qh = base + 16u;
    let ql = base + 48u + 32u * (sub / 2u);
    let shift = (sub % 2u) * 4u;
    for (var t = 0u; t < 8u; t++) {
        let lo = unpack4xU8((load_u32_even(ql + 4u * t) >> shift) & 0x0f0f0f0fu);
        let hi = (unpack4xU8(load_u32_even(qh + 4u * t)) >> vec4<u32>(sub)) & vec4<u32>(1u);
        (*o)[t] = d1 * vec4<f32>(lo + hi * 16u) - m1;
    }
}
#endif

#ifdef W_Q6_K
fn dequant32(row_off: u32, c: u32, o: ptr<function, array<vec4<f32>, 8>>) {
    let base = row_off + (c / 8u) * 210u;
    let n = (c % 8u) / 4u;
    let r = c % 4u;
    let d = load_f16(base + 208u);
    let ql = base + 64u * n + (r & 1u) * 32u;
    let qh = base + 128u + 32u * n;
    let shift = (r >> 1u) * 4u;
    let sc = base + 192u + 8u * n + 2u * r;
    let ds = vec2<f32>(d * f32(load_i8(sc)), d * f32(load_i8(sc + 1u)));
    for (var t = 0u; t < 8u; t++) {
        let lo = unpack4xU8((load_u32_even(ql + 4u * t) >> shift) & 0x0f0f0f0fu);
        let hi = (unpack4xU8(load_u32_even(qh + 4u * t)) >> vec4<u32>(2u * r)) & vec4<u32>(3u);
        let q = vec4<i32>(lo | (hi << vec4<u32>(4u))) - vec4<i32>(32);
        (*o)[t] = select(ds.x, ds.y, t >= 4u) * vec4<f32>(q);
    }
}
#endif
