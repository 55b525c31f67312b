//! Q8_0 / Q8_1 activation quantizers (ggml's x86 CPU-backend arithmetic): the dispatched version
//! (AVX2 where available) against the portable definition, byte for byte, on random and
//! degenerate rows; and the definition itself against an independent statement of ggml's rules.

use bytemuck::Zeroable;
use half::f16;
use rand::{Rng, SeedableRng};
use tessera_gguf::GgmlType;
use tessera_quant::quantize::activation::{quantize_row_q8_0_portable, quantize_row_q8_1_portable};
use tessera_quant::*;

fn rows() -> Vec<(String, Vec<f32>)> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut rows = Vec::new();
    for scale in [1e-30f32, 1e-6, 0.01, 1.0, 37.0, 1e4, 1e30] {
        for k in 0..50 {
            let x = (0..256)
                .map(|_| rng.random_range(-1.0f32..1.0) * scale)
                .collect();
            rows.push((format!("uniform*{scale} #{k}"), x));
        }
    }
    let special = [
        ("zeros", vec![0.0f32; 64]),
        ("negative zeros", vec![-0.0f32; 64]),
        ("constant", vec![3.25f32; 64]),
        ("one NaN", {
            let mut v = vec![0.5f32; 64];
            v[9] = f32::NAN;
            v
        }),
        ("NaN first", {
            let mut v = vec![0.5f32; 64];
            v[0] = f32::NAN;
            v
        }),
        ("infinity", {
            let mut v = vec![0.5f32; 64];
            v[17] = f32::INFINITY;
            v[40] = f32::NEG_INFINITY;
            v
        }),
        (
            "subnormals",
            (0..64).map(|i| (i as f32 - 31.0) * 1e-44).collect(),
        ),
        (
            "f32 max",
            (0..64)
                .map(|i| if i % 3 == 0 { f32::MAX } else { -1.0 })
                .collect(),
        ),
        // amax = 127 makes id = 1: exact .5 ties.
        (
            "ties",
            (0..64)
                .map(|i| {
                    if i % 32 == 0 {
                        127.0
                    } else {
                        (i as f32 - 32.0) + 0.5
                    }
                })
                .collect(),
        ),
    ];
    rows.extend(special.into_iter().map(|(n, v)| (n.to_string(), v)));
    rows
}

#[test]
fn dispatched_equals_portable_q8_0() {
    for (name, x) in rows() {
        let nb = x.len() / 32;
        let mut a = vec![BlockQ8_0::zeroed(); nb];
        let mut b = vec![BlockQ8_0::zeroed(); nb];
        quantize_row_q8_0(&x, &mut a);
        quantize_row_q8_0_portable(&x, &mut b);
        assert_eq!(
            bytemuck::cast_slice::<_, u8>(&a),
            bytemuck::cast_slice::<_, u8>(&b),
            "{name}"
        );
    }
}

#[test]
fn dispatched_equals_portable_q8_1() {
    for (name, x) in rows() {
        let nb = x.len() / 32;
        let mut a = vec![BlockQ8_1::zeroed(); nb];
        let mut b = vec![BlockQ8_1::zeroed(); nb];
        quantize_row_q8_1(&x, &mut a);
        quantize_row_q8_1_portable(&x, &mut b);
        assert_eq!(
            bytemuck::cast_slice::<_, u8>(&a),
            bytemuck::cast_slice::<_, u8>(&b),
            "{name}"
        );
    }
}

/// ggml's rules for finite rows, stated directly: d = amax / 127, id = 127 / amax,
/// q = round-half-even(x * id), s = d * sum(q).
#[test]
fn finite_rows_follow_ggml_x86_rules() {
    let mut differs_from_ref = 0;
    for (name, x) in rows() {
        if x.iter().any(|v| !v.is_finite()) || name.starts_with("uniform*1e-30") {
            continue;
        }
        let nb = x.len() / 32;
        let mut q0 = vec![BlockQ8_0::zeroed(); nb];
        let mut q1 = vec![BlockQ8_1::zeroed(); nb];
        let mut r0 = vec![BlockQ8_0::zeroed(); nb];
        quantize_row_q8_0(&x, &mut q0);
        quantize_row_q8_1(&x, &mut q1);
        quantize_row_q8_0_ref(&x, &mut r0);
        for i in 0..nb {
            let xs = &x[32 * i..32 * i + 32];
            let amax = xs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
            if !id.is_finite() {
                continue; // subnormal amax: see degenerate_blocks_match_x86
            }
            let mut sum = 0i32;
            for (j, &v) in xs.iter().enumerate() {
                let q = (v * id).round_ties_even() as i32;
                sum += q;
                assert_eq!(q0[i].qs[j] as i32, q, "{name} block {i} elt {j}: {v}");
            }
            assert_eq!(q0[i].d, f16::from_f32(d), "{name}");
            assert_eq!(q1[i].qs, q0[i].qs, "{name}");
            assert_eq!(q1[i].d, q0[i].d, "{name}");
            assert_eq!(q1[i].s, f16::from_f32(d * sum as f32), "{name}");
            differs_from_ref += (r0[i].qs != q0[i].qs) as usize;
        }
    }
    // The ties row alone differs from the half-away-from-zero reference.
    assert!(differs_from_ref > 0);
}

#[test]
fn ties_round_to_even() {
    let mut x = [0.0f32; 32];
    x[0] = 127.0; // id = 1
    x[1] = 2.5;
    x[2] = 3.5;
    x[3] = -2.5;
    x[4] = -0.5;
    x[5] = 0.5;
    let mut q = [BlockQ8_0::zeroed()];
    quantize_row_q8_0(&x, &mut q);
    assert_eq!(&q[0].qs[..6], &[127, 2, 4, -2, 0, 0]);
    let mut r = [BlockQ8_0::zeroed()];
    quantize_row_q8_0_ref(&x, &mut r);
    assert_eq!(&r[0].qs[..6], &[127, 3, 4, -3, -1, 1]);
}

/// Degenerate blocks as the SIMD code treats them: NaN / ±inf products convert to the
/// "integer indefinite" and saturate to -128; amax = inf gives id = 0.
#[test]
fn degenerate_blocks_match_x86() {
    let mut x = [0.25f32; 32];
    x[3] = f32::INFINITY;
    let mut q = [BlockQ8_1::zeroed()];
    quantize_row_q8_1_portable(&x, &mut q);
    assert_eq!(q[0].d, f16::INFINITY);
    // 0.25 * 0 = 0; inf * 0 = NaN → i32::MIN → -128.
    assert_eq!(q[0].qs[0], 0);
    assert_eq!(q[0].qs[3], -128);
    // s = inf * (i32::MIN as f32) = -inf.
    assert_eq!(q[0].s, f16::NEG_INFINITY);

    // A subnormal amax: 127 / amax overflows to inf; every product is ±inf or NaN.
    let x = [1e-45f32; 32];
    let mut q = [BlockQ8_0::zeroed()];
    quantize_row_q8_0_portable(&x, &mut q);
    assert!(q[0].qs.iter().all(|&v| v == -128));
}

#[test]
fn byte_api_quantizes_like_the_cpu_backend() {
    let x: Vec<f32> = (0..64)
        .map(|i| if i % 32 == 0 { 127.0 } else { 2.5 })
        .collect();
    for (ty, want_act, want_ref) in [(GgmlType::Q8_0, 2i8, 3i8), (GgmlType::Q8_1, 2, 3)] {
        let n = row_bytes(ty, 64).unwrap();
        let mut act = vec![0u8; n];
        let mut reference = vec![0u8; n];
        quantize_row(ty, &x, &mut act).unwrap();
        quantize_row_ref(ty, &x, &mut reference).unwrap();
        let q_offset = if ty == GgmlType::Q8_0 { 2 } else { 4 };
        assert_eq!(act[q_offset + 1] as i8, want_act, "{ty}");
        assert_eq!(reference[q_offset + 1] as i8, want_ref, "{ty}");
    }
    // Every other type is the same through both.
    let x: Vec<f32> = (0..256).map(|i| (i as f32 * 0.37).sin()).collect();
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::MXFP4,
        GgmlType::Q8_K,
        GgmlType::Q4_K,
    ] {
        let n = row_bytes(ty, 256).unwrap();
        let (mut a, mut b) = (vec![0u8; n], vec![0u8; n]);
        quantize_row(ty, &x, &mut a).unwrap();
        quantize_row_ref(ty, &x, &mut b).unwrap();
        assert_eq!(a, b, "{ty}");
    }
}
