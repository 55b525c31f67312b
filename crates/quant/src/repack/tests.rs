//! Every kernel build against the reference, bit for bit; the reference against float math.

use super::*;
use rand::{Rng, SeedableRng};
// In Node, under wasm-bindgen-test (`cargo test --target wasm32-unknown-unknown`).
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

const TYPES: [GgmlType; 7] = [
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
];

fn floats(rng: &mut rand::rngs::StdRng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

fn quantize(ty: GgmlType, x: &[f32], n: usize) -> Vec<u8> {
    let rb = crate::row_bytes(ty, n).unwrap();
    let mut out = vec![0u8; rb * (x.len() / n)];
    for (src, dst) in x.chunks(n).zip(out.chunks_mut(rb)) {
        crate::quantize_row(ty, src, dst).unwrap();
    }
    out
}

/// Where a weight block keeps its f16 scales (d, and m or dmin).
fn scale_offsets(ty: GgmlType) -> &'static [usize] {
    match ty {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => &[0],
        GgmlType::Q4_1 | GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
        GgmlType::Q6_K => &[208],
        _ => unreachable!(),
    }
}

/// Random bytes in every quant field (extremes included: Q8_0 -128, Q6_K scale -128), with
/// small finite f16 scales so sums stay finite.
fn random_rows(rng: &mut rand::rngs::StdRng, ty: GgmlType, n: usize, n_rows: usize) -> Vec<u8> {
    let rb = crate::row_bytes(ty, n).unwrap();
    let mut w: Vec<u8> = (0..rb * n_rows).map(|_| rng.random()).collect();
    let bs = ty.type_size() as usize;
    for block in w.chunks_exact_mut(bs) {
        for &o in scale_offsets(ty) {
            let v = half::f16::from_f32(rng.random_range(-0.01f32..0.01));
            block[o..o + 2].copy_from_slice(&v.to_le_bytes());
        }
    }
    w
}

fn check_all_isas(ty: GgmlType, n: usize, w: &[u8], n_rows: usize, acts: &[u8], n_acts: usize) {
    let m = RepackedMatrix::with_kind(Kind::of(ty).unwrap(), ty, n, n_rows, w, &|n, f| {
        (0..n).rev().for_each(f)
    })
    .unwrap();
    let rb = w.len() / n_rows;
    let ab = acts.len() / n_acts;
    let width = m.n_groups() * ROWS;
    let mut sums = Vec::new();
    act_block_sums(acts, &mut sums);
    // Where repacking is on, its build must be among those checked.
    assert!(isa().is_none_or(|i| i.runs_here()));
    for isa in Isa::ALL {
        if !isa.runs_here() || !m.kind.has_kernels(isa) {
            eprintln!(
                "skipping {} for {ty} (not on this CPU, or no kernels)",
                isa.name()
            );
            continue;
        }
        let mut out = vec![f32::NAN; width * n_acts];
        m.gemm_with(isa, 0..m.n_groups(), acts, n_acts, &sums, &mut out);
        for t in 0..n_acts {
            for r in 0..n_rows {
                let want =
                    reference::dot(ty, n, &w[r * rb..(r + 1) * rb], &acts[t * ab..(t + 1) * ab]);
                let got = out[t * width + r];
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{ty} {} row {r} act {t}: {got} vs {want}",
                    isa.name()
                );
            }
            for r in n_rows..width {
                assert_eq!(out[t * width + r], 0.0, "{ty} padding row {r}");
            }
        }
        // A sub-range of groups gives the same values as the whole matrix.
        if m.n_groups() > 1 {
            let mut part = vec![f32::NAN; ROWS * n_acts];
            m.gemm_with(isa, 1..2, acts, n_acts, &sums, &mut part);
            for t in 0..n_acts {
                assert_eq!(
                    part[t * ROWS..(t + 1) * ROWS],
                    out[t * width + ROWS..t * width + 2 * ROWS]
                );
            }
        }
    }
}

#[test]
fn every_isa_gives_the_reference_bits_on_quantized_weights() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let n = 512;
    for ty in TYPES {
        for (n_rows, n_acts) in [(8, 1), (13, 5), (19, 4), (3, 9)] {
            let w = quantize(ty, &floats(&mut rng, n * n_rows), n);
            let act_ty = crate::vec_dot_type(ty).unwrap();
            let acts = quantize(act_ty, &floats(&mut rng, n * n_acts), n);
            check_all_isas(ty, n, &w, n_rows, &acts, n_acts);
        }
    }
}

#[test]
fn every_isa_gives_the_reference_bits_on_random_bytes() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let n = 256;
    for ty in TYPES {
        let n_rows = 17;
        let w = random_rows(&mut rng, ty, n, n_rows);
        let act_ty = crate::vec_dot_type(ty).unwrap();
        let acts = quantize(act_ty, &floats(&mut rng, n * 6), n);
        check_all_isas(ty, n, &w, n_rows, &acts, 6);
    }
}

/// The largest integer sums a block can give: every quant bit set (nibbles 15, Q5's fifth bits
/// 1, Q6_K's 63, K-quant sub-block scales 63), against activations all -127 or all 127 (the
/// quantizers' range: ggml's Q8_0, Q8_1 and Q8_K never give -128, and its x86 Q8_0 kernels,
/// like these, would negate -128 wrongly), so that a kernel keeping narrow partial sums (the
/// AVX2 build's i16) fails here if it keeps too many. Five activation rows: one tile of four
/// and one row alone.
#[test]
fn every_isa_gives_the_reference_bits_on_extreme_bytes() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(13);
    let n = 256;
    for ty in TYPES {
        let n_rows = 9;
        let mut w = random_rows(&mut rng, ty, n, n_rows);
        // random_rows' small f16 scales (d, and m or dmin) stay; every other byte is 0xff.
        let scales = scale_offsets(ty);
        for block in w.chunks_exact_mut(ty.type_size() as usize) {
            let kept: Vec<[u8; 2]> = scales.iter().map(|&o| [block[o], block[o + 1]]).collect();
            block.fill(0xff);
            for (&o, v) in scales.iter().zip(kept) {
                block[o..o + 2].copy_from_slice(&v);
            }
        }
        let act_ty = crate::vec_dot_type(ty).unwrap();
        let n_acts = 5;
        let mut acts = quantize(act_ty, &floats(&mut rng, n * n_acts), n);
        let ab = acts.len() / n_acts;
        for (t, row) in acts.chunks_exact_mut(ab).enumerate() {
            let q: i8 = if t % 2 == 0 { -127 } else { 127 };
            for block in row.chunks_exact_mut(act_ty.type_size() as usize) {
                // The quants after the block's scale fields (Q8_K: f32 d, then 16 i16 sums).
                let qs = match act_ty {
                    GgmlType::Q8_0 => 2..34,
                    GgmlType::Q8_1 => 4..36,
                    GgmlType::Q8_K => {
                        for s in block[260..292].chunks_exact_mut(2) {
                            s.copy_from_slice(&(16 * q as i16).to_le_bytes());
                        }
                        4..260
                    }
                    _ => unreachable!(),
                };
                block[qs].fill(q as u8);
            }
        }
        check_all_isas(ty, n, &w, n_rows, &acts, n_acts);
    }
}

#[test]
fn the_reference_is_the_float_dot_product_up_to_rounding() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let n = 1024;
    for ty in TYPES {
        let w = quantize(ty, &floats(&mut rng, n), n);
        let act_ty = crate::vec_dot_type(ty).unwrap();
        let acts = quantize(act_ty, &floats(&mut rng, n), n);
        let (mut wf, mut af) = (vec![0.0f32; n], vec![0.0f32; n]);
        crate::dequantize_row(ty, &w, &mut wf).unwrap();
        crate::dequantize_row(act_ty, &acts, &mut af).unwrap();
        let want: f64 = wf.iter().zip(&af).map(|(&a, &b)| a as f64 * b as f64).sum();
        let got = reference::dot(ty, n, &w, &acts) as f64;
        let ggml = crate::vec_dot(ty, n, &w, &acts) as f64;
        let scale = wf
            .iter()
            .zip(&af)
            .map(|(&a, &b)| (a as f64 * b as f64).abs())
            .sum::<f64>();
        // Q8_1 keeps its Σa rounded to f16, so Q4_1 sits a little further from the float sum.
        assert!((got - want).abs() < 2e-3 * scale, "{ty}: {got} vs {want}");
        // ggml's kernel rounds differently, never by more than the same small margin; Q4_1's
        // reference is ggml's arithmetic.
        assert!(
            (got - ggml).abs() < 1e-5 * scale,
            "{ty}: {got} vs ggml {ggml}"
        );
        if Kind::of(ty).unwrap().keeps_ggml_bits() {
            assert_eq!(got.to_bits(), ggml.to_bits(), "{ty}");
        }
    }
}

#[test]
fn a_wrong_length_is_an_error() {
    let err = RepackedMatrix::new(GgmlType::Q8_0, 64, 3, &[0u8; 100]);
    assert!(matches!(err, Err(QuantError::BadLength { .. })));
    let err = RepackedMatrix::new(GgmlType::Q4_K, 100, 3, &[]);
    assert!(matches!(err, Err(QuantError::PartialBlock { .. })));
}

/// Packing split over tasks (run in reverse, as a pool may) gives the sequential packing's
/// matrix, for a row count that puts several groups in each task's chunk.
#[test]
fn parallel_packing_equals_sequential_packing() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let (n, n_rows) = (256, 1003);
    for ty in TYPES {
        let w = quantize(ty, &floats(&mut rng, n * n_rows), n);
        let Some(seq) = RepackedMatrix::new(ty, n, n_rows, &w).unwrap() else {
            // No kernels for this layout here (Q4_1 in wasm, or no SIMD).
            assert!(!Kind::of(ty).unwrap().has_kernels_here());
            continue;
        };
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let par = RepackedMatrix::new_parallel(ty, n, n_rows, &w, &|count, task| {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            (0..count).rev().for_each(task)
        })
        .unwrap()
        .unwrap();
        assert_eq!(calls.into_inner(), 1);
        assert!(seq.words == par.words, "{ty}: parallel packing differs");
    }
}
