// Reads of GGUF block bytes from the weight binding `w: array<u32>` (declared by the kernel).
// Blocks are not 4-byte aligned (Q4_0 is 18 bytes), so every read is byte-addressed; every
// block with a 16-bit field has an even size, so those fields never straddle two words (MXFP4's
// 17-byte blocks have none: their bytes are read with `load_u8` and `load_u32_any`).

fn load_u8(off: u32) -> u32 {
    return (w[off >> 2u] >> ((off & 3u) * 8u)) & 0xffu;
}

fn load_i8(off: u32) -> i32 {
    return extractBits(i32(load_u8(off)), 0u, 8u);
}

// `off` must be even.
fn load_u16(off: u32) -> u32 {
    return (w[off >> 2u] >> ((off & 2u) * 8u)) & 0xffffu;
}

fn load_f16(off: u32) -> f32 {
    return unpack2x16float(load_u16(off)).x;
}

// 4 bytes at an even (maybe not 4-aligned) offset, little-endian: one or two word loads
// instead of four byte loads. W_ALIGNED (the host's promise: rows and blocks are whole words,
// so every such offset of the format is 4-aligned) makes it one load with no branch, which
// CPU adapters need: there both sides of a lane-dependent branch run.
fn load_u32_even(off: u32) -> u32 {
    let i = off >> 2u;
#ifdef W_ALIGNED
    return w[i];
#else
    if ((off & 2u) == 0u) {
        return w[i];
    }
    return (w[i] >> 16u) | (w[i + 1u] << 16u);
#endif
}

// 4 bytes at any offset, little-endian: one or two word loads (MXFP4's odd-sized blocks).
// The second word exists whenever it is read: it holds byte `off + 3`.
fn load_u32_any(off: u32) -> u32 {
    let i = off >> 2u;
    let s = (off & 3u) * 8u;
    if (s == 0u) {
        return w[i];
    }
    return (w[i] >> s) | (w[i + 1u] << (32u - s));
}

// The two f16 values at an even offset (scale and min of a block), from one 32-bit read.
fn load_f16x2(off: u32) -> vec2<f32> {
    return unpack2x16float(load_u32_even(off));
}

fn nibbles_lo(word: u32) -> vec4<f32> {
    return vec4<f32>(unpack4xU8(word & 0x0f0f0f0fu));
}

fn nibbles_hi(word: u32) -> vec4<f32> {
    return vec4<f32>(unpack4xU8((word >> 4u) & 0x0f0f0f0fu));
}

// Bit `b + i` of `bits` for the four lanes i = 0..3.
fn bits4(bits: u32, b: u32) -> vec4<u32> {
    return (vec4<u32>(bits) >> (vec4<u32>(b) + vec4<u32>(0u, 1u, 2u, 3u))) & vec4<u32>(1u);
}

// ggml's get_scale_min_k4: 6-bit scale and min of sub-block j from the 12 packed bytes at `q`.
fn scale_min_k4(j: u32, q: u32) -> vec2<f32> {
    if (j < 4u) {
        return vec2<f32>(f32(load_u8(q + j) & 63u), f32(load_u8(q + j + 4u) & 63u));
    }
    let sc = (load_u8(q + j + 4u) & 15u) | ((load_u8(q + j - 4u) >> 6u) << 4u);
    let m = (load_u8(q + j + 4u) >> 4u) | ((load_u8(q + j) >> 6u) << 4u);
    return vec2<f32>(f32(sc), f32(m));
}
