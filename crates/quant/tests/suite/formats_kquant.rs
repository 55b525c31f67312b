//! The K-quant and activation quantizers, which `gguf.quants` cannot check: golden bytes
//! from ggml's C reference, structural invariants of ggml's algorithms, and error bounds.
//!
//! The golden bytes were produced by compiling ggml's `quantize_row_*_ref` functions (with
//! `-ffp-contract=off`, i.e. plain IEEE f32 arithmetic, which is what these functions mean
//! without FMA contraction) and running them on `golden_input()`; that C build also agreed
//! with this crate on thousands of random and degenerate rows (see docs/quant.md).

use bytemuck::Zeroable;
use half::f16;
use rand::{Rng, SeedableRng};
use tessera_quant::*;

/// 256 deterministic values (an LCG, no RNG crate involved), heavy-tailed, with an all-zero
/// 16-element sub-block, an outlier and a tiny value.
fn golden_input() -> Vec<f32> {
    let mut state = 0x2545_F491u32;
    let mut x: Vec<f32> = (0..256)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let u = (state >> 8) as f32 / 16_777_216.0 * 2.0 - 1.0;
            u * u * u * 4.0 + u * 0.25
        })
        .collect();
    x[48..64].fill(0.0);
    x[100] = 9.5;
    x[170] = -0.001;
    x
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The reference quantizers (`quantize_row_*_ref`), which the golden bytes come from.
fn quantized(ty: GgmlType, x: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; row_bytes(ty, x.len()).unwrap()];
    quantize_row_ref(ty, x, &mut out).unwrap();
    out
}

fn dequantized(ty: GgmlType, bytes: &[u8], n: usize) -> Vec<f32> {
    let mut out = vec![0f32; n];
    dequantize_row(ty, bytes, &mut out).unwrap();
    out
}

/// ggml's C reference output for `golden_input()`.
const GOLDEN: &[(GgmlType, &str)] = &[
    (
        GgmlType::Q8_0,
        concat!(
            "df264b01b003fbfbf341f9034dfdfb08052a02e3eb021c0afa198102e7692968fef60a28c6467f4808f862b200fafdbd",
            "221392ee000000000000000000000000000000005b272bd601be01dee810f706d9bc0021b2fb0281fb1bf562e15b6e0d",
            "df9758ff0089ca2cd600ffff7fe61c000106ff2b1a03fdf702d8f2ceffcbe1fffb00ce01130000fb872700e681bfe371",
            "02fec820ff1703000e4b29ae5d00f70027fefe48f00210dfff1c4628f903fe06ebfc3ea569cf00f90f0c05e4fe0aefff",
            "d205e7fb0119fd2d0081fe023128ffdcfc04e715feecb19cffc50360816ced6c01f85401c1b183ea6d4200fd03090f27",
            "e481fc15f9f50deb0220add776ccb93622005f06007ee71cd8f43b47f3d75e70",
        ),
    ),
    (
        GgmlType::Q8_1,
        concat!(
            "df26fa464b01b003fbfbf341f9034dfdfb08052a02e3eb021c0afa198102e7692968fef60a280c41c6467f4808f862b2",
            "00fafdbd221392ee000000000000000000000000000000005b27b3c72bd601be01dee810f706d9bc0021b2fb0281fb1b",
            "f562e15b6e0ddf9758ff0089ca2cc3c5d600ffff7fe61c000106ff2b1a03fdf702d8f2ceffcbe1fffb00ce01130000fb",
            "8727004200e681bfe37102fec820ff1703000e4b29ae5d00f70027fefe48f00210dfff1c4628b5c4f903fe06ebfc3ea5",
            "69cf00f90f0c05e4fe0aefffd205e7fb0119fd2d0081fe0231283dc5ffdcfc04e715feecb19cffc50360816ced6c01f8",
            "5401c1b183ea6d4200fd03090f27f847e481fc15f9f50deb0220add776ccb93622005f06007ee71cd8f43b47f3d75e70",
        ),
    ),
    (
        GgmlType::Q2_K,
        concat!(
            "85c8ca0074c87fe6d997b9f7faeac935375a6c4ae6165d63666657426a7a0227e241a122e23252f2b0e211c3f2e3e282",
            "661564a55567aa525d862656ea7a46b75a7ceb5979e91a59091fb9ad2a21e9ea1a348634",
        ),
    ),
    (
        GgmlType::Q3_K,
        concat!(
            "7f29ece9a7fbd03f8fbf7b33d57d3bff2df064f5dd75813dbcad7079eddd7d696b2801180060f71b000023d8cc2c0c06",
            "0043c3100130b0313000331371030000c0730042371308fc225980e1ccf08076f23340003c006ee04035b1a403454003",
            "d96c4230f8ecf05daa9a917ac42c",
        ),
    ),
    (
        GgmlType::Q4_K,
        concat!(
            "cd23372c5ba19e7ff4f5f8fb8ef2f25f3db8f3b97868d72d78797d389889096b787677787a79787a7078777f7b7f7878",
            "1b454844e826674947484674684a43384810380a470e264e4f4906415e48484188868084768fc828f45a888a9898896d",
            "8b937e8857886b8888ad87b88906888a680678987679886783923854e84e30bf977fd8887df864935077bfcc7858d8e9",
        ),
    ),
    (
        GgmlType::Q5_K,
        concat!(
            "5d1f532c9ca19f7ff2f2f6fd81f3c23f752366e30d71f215a1957139f77731d5b560d4f541f511b53435e0f17545f5f0",
            "7b71f681f0d0bf49e0d1eb50301201c6e1edeee1e4e2e0e4e0e1edefe6efe0ef269b9098e05ced929fa19b08d0a59680",
            "913070149f0d4c9c8e921c93cc909081001d1028ec0e9050f9a41003303022d91526fb10bf20e50010490e70120c1013",
            "c00cf021fde310de063350a9e19d706f4effb100fcf1c836a0ee7f89e1a0b1d2",
        ),
    ),
    (
        GgmlType::Q6_K,
        concat!(
            "1ef000510e2e6b6acd210f5f0ed312e10019fb70d7838e66b0318a7b5a0a0f3ebe0f010e0e72980300f1015098fb1b24",
            "108070200000d0f0d0002010b00000d0007af010a95c00b0c2780016118003b3b2bc00e0530003c111a7b60f0bfb1026",
            "920ff15ee6d13dbc108fb062eb3ceee88f028cf005016a9fa0361feb30a18f40bb82a082259951af996a9b4d65668e9b",
            "a20151229232117270a21183b2a3a1416a1558a5596ba25e818a2a5ae67606bb55bb245ab62a95468a987639a9922629",
            "1d2ec8001f33803633dbd13b38392fd1bf18",
        ),
    ),
    (
        GgmlType::Q8_K,
        concat!(
            "653299bde5001dff020205e902ffe40102fdfef1ff0a07fff6fc02f72eff09daf1db010418e3cae2fd03d7210002011c",
            "f2f82e0800000000000000000000000000000000f010001a000d09fa04fe0f1a00f31e02ff3102f604db0cddd6fb0d28",
            "de00002e2a000101811ae400fffa01d5e6fd0309fe280e3201351f01050032ffed000005000a32190bd4ff0116f400f7",
            "ff00fae3f020dc000400f10101e406fffa0d00f503ff01fd0902e429d1160003f9fbfe0c01fb080015fe0b0200f501ec",
            "003901ff001002fe0bf70109232c011affd638d108d10004db001c23370ad0e30001fffc0a2f02f80204fb08fff41f0f",
            "d4131aecf400ddfe00d109f60f04eae6050fddd7c7ffdbffdeff00006800020069ffe4001100c8ff00003f006400e7ff",
            "4a004aff",
        ),
    ),
];

#[test]
fn golden_bytes_match_ggml_c_reference() {
    let x = golden_input();
    let mut failures = vec![];
    for &(ty, want) in GOLDEN {
        let got = hex(&quantized(ty, &x));
        if got != want {
            failures.push(format!("{ty}:\n  got  {got}\n  want {want}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Rows of `n` values with the shapes that stress the quantizers.
fn test_rows(seed: u64, n: usize) -> Vec<(String, Vec<f32>)> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut normal = |scale: f32| -> Vec<f32> {
        (0..n)
            .map(|_| {
                // Box-Muller; exact distribution does not matter, only variety.
                let (u1, u2): (f32, f32) = (rng.random_range(1e-7..1.0), rng.random());
                scale * (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
            })
            .collect()
    };
    let mut rows = vec![
        ("normal".to_string(), normal(1.0)),
        ("normal_1e-3".to_string(), normal(1e-3)),
        ("normal_300".to_string(), normal(300.0)),
    ];
    let mut outlier = normal(1.0);
    outlier[n / 3] = 50.0;
    rows.push(("outlier".into(), outlier));
    rows.push((
        "negative".into(),
        normal(1.0).iter().map(|v| -v.abs() - 0.1).collect(),
    ));
    rows.push((
        "positive".into(),
        normal(1.0).iter().map(|v| v.abs() + 2.0).collect(),
    ));
    rows.push(("constant".into(), vec![0.75; n]));
    rows
}

fn rel_rmse(x: &[f32], y: &[f32]) -> f64 {
    let err: f64 = x.iter().zip(y).map(|(a, b)| ((a - b) as f64).powi(2)).sum();
    let sig: f64 = x.iter().map(|a| (*a as f64).powi(2)).sum();
    (err / sig).sqrt()
}

#[test]
fn round_trip_error_is_bounded() {
    use GgmlType::*;
    // Relative RMS error of dequantize(quantize(x)); the bounds are ~1.25x the worst row
    // measured (Gaussian rows give ggml's usual figures: Q4_0 0.085, Q4_K 0.071, Q6_K 0.018,
    // Q8_0 0.0052), so a broken packing or a wrong scale search fails.
    let bounds = [
        (F16, 3e-4),
        (BF16, 2.2e-3),
        (Q4_0, 0.125),
        (Q4_1, 0.12),
        (Q5_0, 0.085),
        (Q5_1, 0.056),
        (Q8_0, 0.011),
        (Q8_1, 0.011),
        (Q2_K, 0.38),
        (Q3_K, 0.19),
        (Q4_K, 0.11),
        (Q5_K, 0.053),
        (Q6_K, 0.033),
        (Q8_K, 0.031),
        // Power-of-two scales and 8 magnitudes: Gaussian rows measure 0.11-0.118.
        (MXFP4, 0.15),
    ];
    let n = 256 * 16;
    for (ty, bound) in bounds {
        for (name, x) in test_rows(7, n) {
            let y = dequantized(ty, &quantized(ty, &x), n);
            let e = rel_rmse(&x, &y);
            assert!(e <= bound, "{ty} {name}: relative RMSE {e:.4} > {bound}");
        }
    }
}

#[test]
fn all_zero_rows_stay_exactly_zero() {
    for ty in GgmlType::all().filter(|t| t.is_supported()) {
        let x = vec![0f32; 512];
        let y = dequantized(ty, &quantized(ty, &x), 512);
        assert!(y.iter().all(|&v| v == 0.0), "{ty}");
    }
}

#[test]
fn q8_activation_invariants() {
    for (name, x) in test_rows(11, 1024) {
        // Q8_0 / Q8_1: d = amax / 127 (as f16), the max-magnitude element gets |q| = 127,
        // and s = d * sum(q) computed from the f32 d.
        let mut q80 = vec![BlockQ8_0::zeroed(); 32];
        let mut q81 = vec![BlockQ8_1::zeroed(); 32];
        quantize_row_q8_0(&x, &mut q80);
        quantize_row_q8_1(&x, &mut q81);
        for (i, (a, b)) in q80.iter().zip(&q81).enumerate() {
            let xs = &x[32 * i..32 * i + 32];
            let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            assert_eq!(a.d, f16::from_f32(d), "{name}");
            assert_eq!(
                a.qs.iter().map(|q| q.unsigned_abs()).max(),
                Some(127),
                "{name}"
            );
            assert_eq!(a.qs, b.qs, "{name}");
            let sum: i32 = b.qs.iter().map(|&q| q as i32).sum();
            assert_eq!(b.s, f16::from_f32(sum as f32 * d), "{name}");
            for (&v, &q) in xs.iter().zip(&a.qs) {
                assert!((v / d - q as f32).abs() <= 0.5001, "{name}: {v} -> {q}");
            }
        }
        // Q8_K: d = max / -127 of the signed max-magnitude element (q = -127 there),
        // |q| <= 127, bsums are the sums of 16 quants.
        let mut q8k = vec![BlockQ8K::zeroed(); 4];
        quantize_row_q8_k(&x, &mut q8k);
        for (i, b) in q8k.iter().enumerate() {
            let xs = &x[256 * i..256 * i + 256];
            let (imax, _) = xs.iter().enumerate().fold((0, 0f32), |(bi, bm), (j, v)| {
                if v.abs() > bm {
                    (j, v.abs())
                } else {
                    (bi, bm)
                }
            });
            assert_eq!(b.d, 1.0 / (-127.0 / xs[imax]), "{name}");
            assert_eq!(b.qs[imax], -127, "{name}");
            assert!(b.qs.iter().all(|&q| q >= -127), "{name}");
            for (s, q) in b.bsums.iter().zip(b.qs.chunks(16)) {
                assert_eq!(
                    *s as i32,
                    q.iter().map(|&q| q as i32).sum::<i32>(),
                    "{name}"
                );
            }
        }
    }
}

#[test]
fn k_quant_scale_invariants() {
    for (name, x) in test_rows(13, 1024) {
        // Q4_K / Q5_K: the largest sub-block scale and min quantize to 63 (6 bits).
        let mut q4 = vec![BlockQ4K::zeroed(); 4];
        let mut q5 = vec![BlockQ5K::zeroed(); 4];
        quantize_row_q4_k(&x, &mut q4);
        quantize_row_q5_k(&x, &mut q5);
        let k4 = q4.iter().map(|b| (b.d, b.dmin, b.scales));
        for (d, dmin, scales) in k4.chain(q5.iter().map(|b| (b.d, b.dmin, b.scales))) {
            assert!(d.to_f32() >= 0.0 && dmin.to_f32() >= 0.0, "{name}");
            let sm: Vec<(u8, u8)> = (0..8).map(|j| k4_scale_min(&scales, j)).collect();
            if d.to_f32() > 0.0 {
                assert_eq!(sm.iter().map(|p| p.0).max(), Some(63), "{name}");
            }
            if dmin.to_f32() > 0.0 {
                assert_eq!(sm.iter().map(|p| p.1).max(), Some(63), "{name}");
            }
        }
        // Q6_K: the sub-block with the largest |scale| gets -128 (d carries the sign).
        let mut q6 = vec![BlockQ6K::zeroed(); 4];
        quantize_row_q6_k(&x, &mut q6);
        for b in &q6 {
            assert!(b.scales.contains(&-128), "{name}: {:?}", b.scales);
        }
        // Q3_K: likewise -32 for the 6-bit scales.
        let mut q3 = vec![BlockQ3K::zeroed(); 4];
        quantize_row_q3_k(&x, &mut q3);
        for b in &q3 {
            assert!(q3k_scales(&b.scales).contains(&-32), "{name}");
        }
        // Q2_K: the largest 4-bit scale and min are 15.
        let mut q2 = vec![BlockQ2K::zeroed(); 4];
        quantize_row_q2_k(&x, &mut q2);
        for b in &q2 {
            if b.d.to_f32() > 0.0 {
                assert_eq!(b.scales.iter().map(|s| s & 15).max(), Some(15), "{name}");
            }
            if b.dmin.to_f32() > 0.0 {
                assert_eq!(b.scales.iter().map(|s| s >> 4).max(), Some(15), "{name}");
            }
        }
    }
}

#[test]
fn quantizing_a_dequantized_row_is_stable_for_q8() {
    // Q8_0 values already on the grid d * q (with d exactly representable) survive a
    // second round trip unchanged.
    let x: Vec<f32> = (0..64)
        .map(|i| ((i * 37 % 255) as f32 - 127.0) * 0.125)
        .collect();
    let mut b = vec![BlockQ8_0::zeroed(); 2];
    quantize_row_q8_0(&x, &mut b);
    let mut y = vec![0f32; 64];
    dequantize_row_q8_0(&b, &mut y);
    let mut b2 = vec![BlockQ8_0::zeroed(); 2];
    quantize_row_q8_0(&y, &mut b2);
    assert_eq!(
        bytemuck::cast_slice::<_, u8>(&b),
        bytemuck::cast_slice::<_, u8>(&b2)
    );
}
