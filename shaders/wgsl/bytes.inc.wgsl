// Reads of GGUF block bytes from the weight binding `w: array<u32>` (declared by the kernel).
// Blocks are not 4-byte aligned (Q4_0 is 18 bytes), so every read is byte-addressed; every
// block size is even, so 16-bit fields never straddle two words.

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
// instead of four byte loads.
fn load_u32_even(off: u32) -> u32 {
    let i = off >> 2u;
    if ((off & 2u) == 0u) {
        return w[i];
    }
    return (w[i] >> 16u) | (w[i + 1u] << 16u);
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
