//! GeGLU (`Op::Geglu`): `gelu(gate) * up`.
//!
//! GELU is ggml's CPU GELU: the tanh approximation looked up in a table indexed by the input
//! rounded to f16 (the table holds f16 values), with x ≤ -10 → 0 and x ≥ 10 → x. Reproducing the
//! table keeps our activations bit-identical to llama.cpp's, not merely close.

use half::f16;
use std::sync::OnceLock;

const SQRT_2_OVER_PI: f32 = 0.797_884_6;
const GELU_COEF_A: f32 = 0.044715;

/// The tanh-approximated GELU in f32 (the function the table samples), as ggml's
/// `ggml_gelu_f32` is compiled (GCC, -O3, FMA available): `1.0f + GELU_COEF_A*x*x` is contracted
/// into one fused multiply-add, `fma(GELU_COEF_A*x, x, 1)`; nothing else is. That changes one
/// f16 table entry (x = -1.99902344), enough to move Gemma 3's logprobs by ~0.1.
pub fn gelu_tanh(x: f32) -> f32 {
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (GELU_COEF_A * x).mul_add(x, 1.0)).tanh())
}

/// The table, indexed by an f16's bits, with one zero entry more: the AVX2 path gathers 4
/// bytes at each 2-byte entry, so the last entry's read ends inside the table too.
fn gelu_table() -> &'static [f16] {
    static TABLE: OnceLock<Vec<f16>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=u16::MAX)
            .map(|bits| f16::from_f32(gelu_tanh(f16::from_bits(bits).to_f32())))
            .chain([f16::ZERO])
            .collect()
    })
}

/// ggml's CPU GELU of one value, from the table.
pub fn gelu_table_lookup(x: f32) -> f32 {
    gelu_ggml(x, gelu_table())
}

/// ggml's CPU GELU of one value (see the module comment).
#[inline]
pub fn gelu_ggml(x: f32, table: &[f16]) -> f32 {
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x
    } else {
        table[f16::from_f32(x).to_bits() as usize].to_f32()
    }
}

/// `out = gelu(gate) * up`: each element a lookup in the 64 Ki-entry f16 table (ggml's own
/// GELU loop is scalar). On x86-64 with AVX2, 8 elements at a time with a gather, the same
/// bits ([`geglu_scalar`] is the definition).
pub fn geglu(gate: &[f32], up: &[f32], out: &mut [f32]) {
    let n = out.len().min(gate.len()).min(up.len());
    #[cfg(target_arch = "x86_64")]
    let done = if tessera_quant::isa::level().has_avx2() {
        // SAFETY: the CPU runs AVX2 and F16C (`isa::level` never exceeds what was detected).
        unsafe { geglu_avx2(&gate[..n], &up[..n], &mut out[..n]) }
    } else {
        0
    };
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    let done = geglu_simd128(&gate[..n], &up[..n], &mut out[..n]);
    #[cfg(not(any(
        target_arch = "x86_64",
        all(target_arch = "wasm32", target_feature = "simd128")
    )))]
    let done = 0;
    geglu_scalar(&gate[done..n], &up[done..n], &mut out[done..n]);
}

/// The definition of [`geglu`].
pub fn geglu_scalar(gate: &[f32], up: &[f32], out: &mut [f32]) {
    let table = gelu_table();
    for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
        // As ggml: the ≥ 10 branch multiplies x itself, the table branch its f16 value.
        *o = gelu_ggml(g, table) * u;
    }
}

/// [`geglu_scalar`] on whole vectors of 8; returns how many elements it did. The index is
/// `cvtps2ph`'s f16 (round to nearest even, as `f16::from_f32`); the lanes ≤ -10 and ≥ 10 are
/// replaced after the lookup, as the scalar branches do (NaN takes the table's entry there too).
///
/// # Safety
/// The CPU must support AVX2 and F16C; the three slices have one length.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
unsafe fn geglu_avx2(gate: &[f32], up: &[f32], out: &mut [f32]) -> usize {
    use std::arch::x86_64::*;
    let table = gelu_table().as_ptr() as *const i32;
    let n = out.len() / 8 * 8;
    let (lo, hi, zero) = (
        _mm256_set1_ps(-10.0),
        _mm256_set1_ps(10.0),
        _mm256_setzero_ps(),
    );
    let low16 = _mm256_set1_epi32(0xffff);
    for i in (0..n).step_by(8) {
        let g = _mm256_loadu_ps(gate.as_ptr().add(i));
        let idx = _mm256_cvtepu16_epi32(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(g));
        // Entry e is at byte 2e; the gather reads it and the next entry's 2 bytes.
        let entries = _mm256_and_si256(_mm256_i32gather_epi32::<2>(table, idx), low16);
        let packed = _mm_packus_epi32(
            _mm256_castsi256_si128(entries),
            _mm256_extracti128_si256::<1>(entries),
        );
        let mut v = _mm256_cvtph_ps(packed);
        v = _mm256_blendv_ps(v, zero, _mm256_cmp_ps::<_CMP_LE_OQ>(g, lo));
        v = _mm256_blendv_ps(v, g, _mm256_cmp_ps::<_CMP_GE_OQ>(g, hi));
        let u = _mm256_loadu_ps(up.as_ptr().add(i));
        _mm256_storeu_ps(out.as_mut_ptr().add(i), _mm256_mul_ps(v, u));
    }
    n
}

/// [`geglu_scalar`] on whole vectors of 4 in wasm SIMD128 (where `half` converts one value at
/// a time in software, which made the scalar loop a visible part of Gemma 3's browser
/// prefill); returns how many elements it did. The index is the gate rounded to f16 in SIMD
/// lanes (`round_f16`, bit-identical to `f16::from_f32`), its bits formed from the rounded value:
/// exponent and mantissa moved down and rebiased where it is normal, its multiple of 2^-24
/// where it is subnormal, and the sign. wasm has no gather: the four entries are read one by
/// one. The lanes ≤ -10 and ≥ 10 are replaced after the lookup, as the scalar branches do; a
/// vector with a NaN goes to the scalar loop (its index is `half`'s NaN encoding).
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
fn geglu_simd128(gate: &[f32], up: &[f32], out: &mut [f32]) -> usize {
    use core::arch::wasm32::*;
    use tessera_quant::isa::{Simd, Simd128};
    let table = gelu_table();
    let s = Simd128;
    let (lo, hi) = (f32x4_splat(-10.0), f32x4_splat(10.0));
    let (gate, up) = (gate.chunks_exact(4), up.chunks_exact(4));
    let mut done = 0;
    for ((o, g), u) in out.chunks_exact_mut(4).zip(gate).zip(up) {
        let gv = s.load(g);
        if v128_any_true(f32x4_ne(gv, gv)) {
            geglu_scalar(g, u, o);
            done += 4;
            continue;
        }
        let r = s.round_f16(gv);
        let magnitude = v128_and(r, u32x4_splat(0x7fff_ffff));
        let normal = u32x4_shr(i32x4_sub(magnitude, u32x4_splat(112 << 23)), 13);
        let subnormal = i32x4_trunc_sat_f32x4(f32x4_mul(magnitude, f32x4_splat(16_777_216.0)));
        let is_normal = i32x4_ge(magnitude, u32x4_splat(0x3880_0000)); // 2^-14
        let bits = v128_or(
            v128_bitselect(normal, subnormal, is_normal),
            v128_and(u32x4_shr(r, 16), u32x4_splat(0x8000)),
        );
        // Clamped to the table (the lanes outside ±10 are replaced below anyway).
        let idx = v128_and(bits, u32x4_splat(0xffff));
        let entry = |i: u32| table[i as usize].to_bits() as u32;
        let entries = u32x4(
            entry(u32x4_extract_lane::<0>(idx)),
            entry(u32x4_extract_lane::<1>(idx)),
            entry(u32x4_extract_lane::<2>(idx)),
            entry(u32x4_extract_lane::<3>(idx)),
        );
        let mut v = s.f16_bits_to_f32(entries);
        v = v128_bitselect(f32x4_splat(0.0), v, f32x4_le(gv, lo));
        v = v128_bitselect(gv, v, f32x4_ge(gv, hi));
        s.store(o, f32x4_mul(v, s.load(u)));
        done += 4;
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn gelu_table_has_the_contracted_entry() {
        // The one entry where GCC's fused `1 + a*x*x` and the twice-rounded form part (checked
        // with a C program built like ggml): x = f16 0xbfff → 0xa9d3 (0xa9d2 unfused).
        let t = gelu_table();
        assert_eq!(t[0xbfff].to_bits(), 0xa9d3);
    }

    #[test]
    fn gelu_table_is_close_to_the_exact_function_and_clamps() {
        let t = gelu_table();
        for i in -2000..2000 {
            let x = i as f32 * 0.005;
            let got = gelu_ggml(x, t);
            let want = gelu_tanh(x);
            // f16 rounding of the input and of the result.
            assert!(
                (got - want).abs() <= 2e-3 * (1.0 + want.abs()),
                "{x}: {got} vs {want}"
            );
        }
        assert_eq!(gelu_ggml(-11.0, t), 0.0);
        assert_eq!(gelu_ggml(12.5, t), 12.5);
        // The table path rounds the input to f16: two inputs with the same f16 give equal output.
        assert_eq!(gelu_ggml(1.0, t), gelu_ggml(1.0 + 1e-4, t));
    }

    /// Every f16 bucket of the gate (and values around the ±10 edges, infinities, NaN) against
    /// several `up` values: the dispatched kernel equals the definition bit for bit.
    #[test]
    fn geglu_gives_the_definitions_bits() {
        let mut gate: Vec<f32> = (0..=u16::MAX).map(|b| f16::from_bits(b).to_f32()).collect();
        gate.extend((0..4000).map(|i| -10.5 + i as f32 * 0.00525));
        gate.extend((0..4000).map(|i| 9.5 + i as f32 * 0.00025 + 1e-5));
        gate.extend([
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            65520.0,
            -1e-8,
        ]);
        for u in [1.0f32, -3.25, 0.0, f32::INFINITY] {
            let up = vec![u; gate.len()];
            let (mut got, mut want) = (vec![0.0; gate.len()], vec![0.0; gate.len()]);
            geglu(&gate, &up, &mut got);
            geglu_scalar(&gate, &up, &mut want);
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert_eq!(a.to_bits(), b.to_bits(), "gate {} up {u}", gate[i]);
            }
        }
    }

    #[test]
    fn geglu_multiplies_by_up() {
        let mut o = [0.0f32; 3];
        geglu(&[0.5, -11.0, 11.0], &[2.0, 3.0, 0.5], &mut o);
        let t = gelu_table();
        assert_eq!(o, [gelu_ggml(0.5, t) * 2.0, 0.0, 5.5]);
    }
}
