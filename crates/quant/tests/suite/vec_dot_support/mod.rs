//! Random block generators and per-type descriptions shared by the vec-dot tests.
//!
//! Blocks are generated directly (random quant bits, chosen scales) rather than through the
//! quantizers, so these tests depend only on the block layouts.

#![allow(dead_code)]

use bytemuck::{Pod, Zeroable};
use half::f16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tessera_gguf::GgmlType;
use tessera_quant::blocks::*;
use tessera_quant::vec_dot::scalar;

/// What a generated row looks like.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    /// Random quant bits, sane scales.
    Random,
    /// Everything zero, scales included.
    Zero,
    /// Every quant bit set (largest unsigned quants, signed extremes), large scales.
    AllOnes,
    /// Every quant bit clear (for the offset types: the most negative quant), large scales.
    AllZeroBits,
    /// Random quant bits, scales from the ends of the f16 range (max, tiny, subnormal, zero).
    ExtremeScales,
    /// Scales ±1 and activations in [-2, 2]: every float sum is an exact integer, so SIMD and
    /// scalar must agree bit for bit.
    ExactIntegers,
}

pub const MODES: [Mode; 6] = [
    Mode::Random,
    Mode::Zero,
    Mode::AllOnes,
    Mode::AllZeroBits,
    Mode::ExtremeScales,
    Mode::ExactIntegers,
];

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

fn weight_scale(rng: &mut StdRng, mode: Mode) -> f16 {
    let v = match mode {
        Mode::Random => rng.random_range(0.001f32..0.1) * if rng.random() { 1.0 } else { -1.0 },
        Mode::Zero => 0.0,
        Mode::AllOnes | Mode::AllZeroBits => 60000.0,
        Mode::ExtremeScales => {
            const S: [f32; 7] = [65504.0, -65504.0, 6.1e-5, 1.0e-7, 0.0, 1.0, -3.0e-6];
            S[rng.random_range(0..S.len())]
        }
        Mode::ExactIntegers => {
            if rng.random() {
                1.0
            } else {
                -1.0
            }
        }
    };
    f16::from_f32(v)
}

fn act_scale(rng: &mut StdRng, mode: Mode) -> f32 {
    match mode {
        Mode::Random => rng.random_range(0.001f32..0.05),
        Mode::Zero => 0.0,
        // Q8_1's s = d * sum(qs) must stay a finite f16: d * 127 * 32 ≤ 65504.
        Mode::AllOnes | Mode::AllZeroBits => 16.0,
        Mode::ExtremeScales => {
            const S: [f32; 5] = [16.0, 6.1e-5, 1.0e-7, 0.0, 3.0];
            S[rng.random_range(0..S.len())]
        }
        Mode::ExactIntegers => 1.0,
    }
}

/// Fills the quant bits of `b` (everything; scales are overwritten afterwards).
fn fill_bits<B: Pod>(rng: &mut StdRng, mode: Mode, b: &mut B) {
    let bytes = bytemuck::bytes_of_mut(b);
    match mode {
        Mode::Zero | Mode::AllZeroBits => bytes.fill(0),
        Mode::AllOnes => bytes.fill(0xFF),
        _ => rng.fill(bytes),
    }
}

/// Activation quants: [-127, 127] for Q8_0/Q8_1 (`lowest` = -127), [-128, 127] for Q8_K.
fn act_quants(rng: &mut StdRng, mode: Mode, lowest: i8, qs: &mut [i8], row_sign: bool) {
    for q in qs.iter_mut() {
        *q = match mode {
            Mode::Random | Mode::ExtremeScales => rng.random_range(lowest..=127),
            Mode::Zero => 0,
            Mode::AllOnes => 127,
            Mode::AllZeroBits => {
                if row_sign {
                    lowest
                } else {
                    127
                }
            }
            Mode::ExactIntegers => rng.random_range(-2..=2),
        };
    }
}

pub trait WeightBlock: Pod {
    const TYPE: GgmlType;
    fn generate(rng: &mut StdRng, mode: Mode) -> Self;
    /// |d| × largest |quant × sub-block scale| (a bound for the error tolerance), and |min| terms.
    fn magnitude_factors(&self) -> (f64, f64);
}

pub trait ActBlock: Pod {
    fn generate(rng: &mut StdRng, mode: Mode) -> Self;
    fn scale(&self) -> f64;
    fn abs_quant_sum(&self) -> f64;
    /// |s| for Q8_1, Σ|bsums| for Q8_K (what the min terms multiply).
    fn min_factor(&self) -> f64;
}

fn f(h: f16) -> f64 {
    h.to_f64().abs()
}

macro_rules! legacy_weight {
    ($B:ty, $T:ident, $qmax:expr, $has_min:tt) => {
        impl WeightBlock for $B {
            const TYPE: GgmlType = GgmlType::$T;
            fn generate(rng: &mut StdRng, mode: Mode) -> Self {
                let mut b = <$B>::zeroed();
                fill_bits(rng, mode, &mut b);
                b.d = weight_scale(rng, mode);
                legacy_weight!(@min b, rng, mode, $has_min);
                b
            }
            fn magnitude_factors(&self) -> (f64, f64) {
                (f(self.d) * $qmax, legacy_weight!(@minval self, $has_min))
            }
        }
    };
    (@min $b:ident, $rng:ident, $mode:ident, true) => {
        $b.m = weight_scale($rng, $mode);
    };
    (@min $b:ident, $rng:ident, $mode:ident, false) => {};
    (@minval $s:ident, true) => {
        f($s.m)
    };
    (@minval $s:ident, false) => {
        0.0
    };
}

legacy_weight!(BlockQ4_0, Q4_0, 8.0, false);
legacy_weight!(BlockQ4_1, Q4_1, 15.0, true);
legacy_weight!(BlockQ5_0, Q5_0, 16.0, false);
legacy_weight!(BlockQ5_1, Q5_1, 31.0, true);
legacy_weight!(BlockQ8_0, Q8_0, 128.0, false);

impl WeightBlock for BlockMxfp4 {
    const TYPE: GgmlType = GgmlType::MXFP4;
    fn generate(rng: &mut StdRng, mode: Mode) -> Self {
        let mut b = Self::zeroed();
        fill_bits(rng, mode, &mut b);
        // The E8M0 scale is 2^(e-127) (the kernels use half of it with doubled values).
        b.e = match mode {
            Mode::Random => rng.random_range(110..=128),
            Mode::Zero => 0,
            // 2^15 * 6: as large as the legacy types' extreme scales.
            Mode::AllOnes | Mode::AllZeroBits => 142,
            // Both subnormal encodings, the smallest normal one, and large ones whose sums
            // stay finite.
            Mode::ExtremeScales => {
                const E: [u8; 7] = [0, 1, 2, 3, 60, 127, 170];
                E[rng.random_range(0..E.len())]
            }
            // Half-scale 1 (scale 2): the doubled values are the integers of the products.
            Mode::ExactIntegers => 128,
        };
        b
    }
    fn magnitude_factors(&self) -> (f64, f64) {
        (e8m0_to_f32_half(self.e) as f64 * 12.0, 0.0)
    }
}

impl WeightBlock for BlockQ2K {
    const TYPE: GgmlType = GgmlType::Q2_K;
    fn generate(rng: &mut StdRng, mode: Mode) -> Self {
        let mut b = Self::zeroed();
        fill_bits(rng, mode, &mut b);
        b.d = weight_scale(rng, mode);
        b.dmin = weight_scale(rng, mode);
        b
    }
    fn magnitude_factors(&self) -> (f64, f64) {
        (f(self.d) * 15.0 * 3.0, f(self.dmin) * 15.0)
    }
}

impl WeightBlock for BlockQ3K {
    const TYPE: GgmlType = GgmlType::Q3_K;
    fn generate(rng: &mut StdRng, mode: Mode) -> Self {
        let mut b = Self::zeroed();
        fill_bits(rng, mode, &mut b);
        b.d = weight_scale(rng, mode);
        b
    }
    fn magnitude_factors(&self) -> (f64, f64) {
        (f(self.d) * 32.0 * 4.0, 0.0)
    }
}

impl WeightBlock for BlockQ4K {
    const TYPE: GgmlType = GgmlType::Q4_K;
    fn generate(rng: &mut StdRng, mode: Mode) -> Self {
        let mut b = Self::zeroed();
        fill_bits(rng, mode, &mut b);
        b.d = weight_scale(rng, mode);
        b.dmin = weight_scale(rng, mode);
        b
    }
    fn magnitude_factors(&self) -> (f64, f64) {
        (f(self.d) * 63.0 * 15.0, f(self.dmin) * 63.0)
    }
}

impl WeightBlock for BlockQ5K {
    const TYPE: GgmlType = GgmlType::Q5_K;
    fn generate(rng: &mut StdRng, mode: Mode) -> Self {
        let mut b = Self::zeroed();
        fill_bits(rng, mode, &mut b);
        b.d = weight_scale(rng, mode);
        b.dmin = weight_scale(rng, mode);
        b
    }
    fn magnitude_factors(&self) -> (f64, f64) {
        (f(self.d) * 63.0 * 31.0, f(self.dmin) * 63.0)
    }
}

impl WeightBlock for BlockQ6K {
    const TYPE: GgmlType = GgmlType::Q6_K;
    fn generate(rng: &mut StdRng, mode: Mode) -> Self {
        let mut b = Self::zeroed();
        fill_bits(rng, mode, &mut b);
        match mode {
            // Signed scales at both ends.
            Mode::AllOnes => b.scales = [127; 16],
            Mode::AllZeroBits => b.scales = [-128; 16],
            _ => {}
        }
        b.d = weight_scale(rng, mode);
        b
    }
    fn magnitude_factors(&self) -> (f64, f64) {
        (f(self.d) * 128.0 * 32.0, 0.0)
    }
}

impl ActBlock for BlockQ8_0 {
    fn generate(rng: &mut StdRng, mode: Mode) -> Self {
        let mut b = Self::zeroed();
        let sign = rng.random();
        act_quants(rng, mode, -127, &mut b.qs, sign);
        b.d = f16::from_f32(act_scale(rng, mode));
        b
    }
    fn scale(&self) -> f64 {
        f(self.d)
    }
    fn abs_quant_sum(&self) -> f64 {
        self.qs.iter().map(|&q| (q as f64).abs()).sum()
    }
    fn min_factor(&self) -> f64 {
        0.0
    }
}

impl ActBlock for BlockQ8_1 {
    fn generate(rng: &mut StdRng, mode: Mode) -> Self {
        let mut b = Self::zeroed();
        let sign = rng.random();
        act_quants(rng, mode, -127, &mut b.qs, sign);
        b.d = f16::from_f32(act_scale(rng, mode));
        let sum: i32 = b.qs.iter().map(|&q| q as i32).sum();
        b.s = f16::from_f32(b.d.to_f32() * sum as f32);
        b
    }
    fn scale(&self) -> f64 {
        f(self.d)
    }
    fn abs_quant_sum(&self) -> f64 {
        self.qs.iter().map(|&q| (q as f64).abs()).sum()
    }
    fn min_factor(&self) -> f64 {
        f(self.s)
    }
}

impl ActBlock for BlockQ8K {
    fn generate(rng: &mut StdRng, mode: Mode) -> Self {
        let mut b = Self::zeroed();
        let sign = rng.random();
        act_quants(rng, mode, -128, &mut b.qs, sign);
        b.d = act_scale(rng, mode);
        for (s, chunk) in b.bsums.iter_mut().zip(b.qs.chunks_exact(16)) {
            *s = chunk.iter().map(|&q| q as i16).sum();
        }
        b
    }
    fn scale(&self) -> f64 {
        (self.d as f64).abs()
    }
    fn abs_quant_sum(&self) -> f64 {
        self.qs.iter().map(|&q| (q as f64).abs()).sum()
    }
    fn min_factor(&self) -> f64 {
        self.bsums.iter().map(|&s| (s as f64).abs()).sum()
    }
}

/// A weight type, its activation type and its scalar reference.
pub struct Pair<W, A> {
    pub block_size: usize,
    pub reference: fn(usize, &[W], &[A]) -> f32,
}

pub fn generate_row<B, F: FnMut(&mut StdRng) -> B>(
    rng: &mut StdRng,
    nb: usize,
    mut f: F,
) -> Vec<B> {
    (0..nb).map(|_| f(rng)).collect()
}

/// An upper bound of the sum of the magnitudes of all the terms of the dot product: the float
/// reassociation error of a SIMD kernel is a small multiple of f32 epsilon times this.
pub fn magnitude<W: WeightBlock, A: ActBlock>(w: &[W], a: &[A]) -> f64 {
    w.iter()
        .zip(a)
        .map(|(w, a)| {
            let (qd, mins) = w.magnitude_factors();
            qd * a.scale() * a.abs_quant_sum() + mins * a.min_factor() * scale_for_mins::<A>(a)
        })
        .sum()
}

/// Q8_1's s already includes d; Q8_K's bsums do not.
fn scale_for_mins<A: ActBlock>(a: &A) -> f64 {
    if std::mem::size_of::<A>() == std::mem::size_of::<BlockQ8K>() {
        a.scale()
    } else {
        1.0
    }
}

pub const Q4_0: Pair<BlockQ4_0, BlockQ8_0> = Pair {
    block_size: QK,
    reference: scalar::vec_dot_q4_0_q8_0,
};
pub const Q4_1: Pair<BlockQ4_1, BlockQ8_1> = Pair {
    block_size: QK,
    reference: scalar::vec_dot_q4_1_q8_1,
};
pub const Q5_0: Pair<BlockQ5_0, BlockQ8_0> = Pair {
    block_size: QK,
    reference: scalar::vec_dot_q5_0_q8_0,
};
pub const Q5_1: Pair<BlockQ5_1, BlockQ8_1> = Pair {
    block_size: QK,
    reference: scalar::vec_dot_q5_1_q8_1,
};
pub const Q8_0: Pair<BlockQ8_0, BlockQ8_0> = Pair {
    block_size: QK,
    reference: scalar::vec_dot_q8_0_q8_0,
};
pub const MXFP4: Pair<BlockMxfp4, BlockQ8_0> = Pair {
    block_size: QK,
    reference: scalar::vec_dot_mxfp4_q8_0,
};
pub const Q2_K: Pair<BlockQ2K, BlockQ8K> = Pair {
    block_size: QK_K,
    reference: scalar::vec_dot_q2_k_q8_k,
};
pub const Q3_K: Pair<BlockQ3K, BlockQ8K> = Pair {
    block_size: QK_K,
    reference: scalar::vec_dot_q3_k_q8_k,
};
pub const Q4_K: Pair<BlockQ4K, BlockQ8K> = Pair {
    block_size: QK_K,
    reference: scalar::vec_dot_q4_k_q8_k,
};
pub const Q5_K: Pair<BlockQ5K, BlockQ8K> = Pair {
    block_size: QK_K,
    reference: scalar::vec_dot_q5_k_q8_k,
};
pub const Q6_K: Pair<BlockQ6K, BlockQ8K> = Pair {
    block_size: QK_K,
    reference: scalar::vec_dot_q6_k_q8_k,
};
