//! `expf` as glibc computes it (llama.cpp's softmax calls `expf`; natively Rust's `f32::exp` is
//! glibc's), for wasm32, where `f32::exp` is the `libm` crate's port of an older, less exact
//! algorithm whose last bits differ often enough to change Gemma 3's greedy text.
//!
//! glibc's algorithm (from Arm's optimized routines): x / ln2 = k/32 + r with |r| ≤ 1/64,
//! 2^(k/32) from a 32-entry table (each entry the bits of 2^(i/32), less i·2^47 so that adding
//! k·2^47 puts k/32's integer part in the exponent), 2^r by a cubic, all in f64, rounded once to
//! f32. The three polynomial steps are fused multiply-adds in glibc's x86-64 build (`__expf_fma`)
//! and plain ones here (wasm has no f64 FMA instruction), which could only matter where the f64
//! result lies within about 2^-52 of an f32 midpoint: the test finds no input of the
//! softmax's range (every third one, 3.7e8) where this differs from the native `f32::exp`. (The
//! f64 `exp` rounded to f32, which the browser build ran before, differed on 32849 of them: it
//! is the correctly rounded value, and glibc's is not always.)

/// `2^(i/32)`'s bits less `i << 47`, i = 0..32.
const TABLE: [u64; 32] = [
    0x3ff0000000000000,
    0x3fefd9b0d3158574,
    0x3fefb5586cf9890f,
    0x3fef9301d0125b51,
    0x3fef72b83c7d517b,
    0x3fef54873168b9aa,
    0x3fef387a6e756238,
    0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715,
    0x3feef1a7373aa9cb,
    0x3feedea64c123422,
    0x3feece086061892d,
    0x3feebfdad5362a27,
    0x3feeb42b569d4f82,
    0x3feeab07dd485429,
    0x3feea47eb03a5585,
    0x3feea09e667f3bcd,
    0x3fee9f75e8ec5f74,
    0x3feea11473eb0187,
    0x3feea589994cce13,
    0x3feeace5422aa0db,
    0x3feeb737b0cdc5e5,
    0x3feec49182a3f090,
    0x3feed503b23e255d,
    0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47,
    0x3fef199bdd85529c,
    0x3fef3720dcef9069,
    0x3fef5818dcfba487,
    0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da,
    0x3fefd0765b6e4540,
];

/// 32 / ln 2.
const INV_LN2_N: f64 = 46.16624130844683;
/// 2^52 · 1.5: adding it rounds to an integer held in the low mantissa bits.
const SHIFT: f64 = 6755399441055744.0;
/// The cubic's coefficients for 2^(r/32), scaled by powers of 1/32.
const C: [f64; 3] = [
    1.6938359250920212e-6,
    2.3459809789509004e-4,
    2.1660849396613134e-2,
];

/// glibc's `expf`.
pub fn expf(x: f32) -> f32 {
    let abstop = (x.to_bits() >> 20) & 0x7ff;
    if abstop >= 0x42b {
        // |x| ≥ 88, infinities and NaNs.
        if x == f32::NEG_INFINITY {
            return 0.0;
        }
        if abstop >= 0x7f8 {
            return x + x;
        }
        if x > f32::from_bits(0x42b1_7217) {
            return f32::INFINITY;
        }
        if x < f32::from_bits(0xc2cf_f1b4) {
            return 0.0;
        }
    }
    let z = INV_LN2_N * x as f64;
    let kd = z + SHIFT;
    let ki = kd.to_bits();
    let kd = kd - SHIFT;
    let r = z - kd;
    let t = TABLE[(ki % 32) as usize].wrapping_add(ki << 47);
    let s = f64::from_bits(t);
    let z = C[0] * r + C[1];
    let r2 = r * r;
    let y = C[2] * r + 1.0;
    let y = z * r2 + y;
    (y * s) as f32
}

// Native only: wasm's `f32::exp` is not the C library's `expf`.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    /// Against the C library's `expf` (natively `f32::exp`): every third input from 0 down to
    /// the underflow (the softmax's arguments are never positive), every 101st positive one,
    /// and the edges.
    #[test]
    fn equals_glibc_expf() {
        let negative = (0x8000_0000u32..=0xc2d0_0000).step_by(3);
        let positive = (0u32..0x42b2_0000).step_by(101);
        let mut differ = Vec::new();
        for bits in negative.chain(positive) {
            let x = f32::from_bits(bits);
            if expf(x).to_bits() != x.exp().to_bits() {
                differ.push(x);
            }
        }
        assert!(
            differ.is_empty(),
            "{} differ, first {:?}",
            differ.len(),
            &differ[..differ.len().min(8)]
        );
        for x in [
            f32::NEG_INFINITY,
            f32::INFINITY,
            f32::NAN,
            -104.0,
            89.0,
            -0.0,
            0.0,
        ] {
            assert_eq!(expf(x).to_bits(), x.exp().to_bits(), "{x}");
        }
    }
}
