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

// A 32-bit field at an even (maybe not 4-aligned) offset.
fn load_u32_even(off: u32) -> u32 {
    return load_u16(off) | (load_u16(off + 2u) << 16u);
}
