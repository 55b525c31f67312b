// Rounds an f32 to the nearest f16 value (ties to even), as the CPU's `f16::from_f32` does.
// WGSL leaves the rounding of quantizeToF16 / pack2x16float to the implementation (SwiftShader
// does not round to nearest), so the bits are rounded by hand.

fn f16_round(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    let e = (b >> 23u) & 0xffu;
    if (e == 0xffu) {
        return x; // inf, NaN
    }
    if (e < 113u) {
        // Below f16's normal range: multiples of 2^-24 (scaling by powers of two is exact).
        return round(x * 16777216.0) / 16777216.0;
    }
    // Drop 13 mantissa bits, ties to even; a carry moves into the exponent correctly.
    let lsb = (b >> 13u) & 1u;
    let r = bitcast<f32>((b + 0xfffu + lsb) & 0xffffe000u);
    if (abs(r) > 65504.0) {
        // Infinity with x's sign, built from x's bits: a constant infinity is a WGSL error in
        // browsers (Tint: "value inf cannot be represented as 'f32'").
        return bitcast<f32>((b & 0x80000000u) | 0x7f800000u);
    }
    return r;
}
