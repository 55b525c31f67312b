// exp(x) to about one ulp from plain arithmetic. The built-in exp's precision is the
// implementation's: SwiftShader's is coarse enough to flip Gemma 3's near ties against the CPU's
// expf (lavapipe's is not). Below -87.3 (where expf is subnormal) the result is 0; above 88.72
// it is +inf, as expf's.
fn exp_accurate(x: f32) -> f32 {
    if (x < -87.3) {
        return 0.0;
    }
    if (x > 88.72) {
        return x * 1.0e38; // overflows to +inf (a constant infinity is an error in browsers)
    }
    let n = round(x * 1.44269504);
    // r = x - n ln 2 in two steps (Cody-Waite): ln2_hi has 16 significant bits, so n * ln2_hi is
    // exact and so is the first subtraction.
    let r = (x - n * 0.693145751953125) - n * 1.42860682e-6;
    // Taylor to r^7 on |r| <= 0.35: truncation below 5e-9 relative.
    var p = 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    return ldexp(p, i32(n));
}
