//! The byte-level API: typed errors, unsupported types, alignment, and agreement with the
//! typed per-format functions.

// proptest does not build for wasm32 (the wasm test run covers the vec-dot kernels).
#![cfg(not(target_arch = "wasm32"))]

use bytemuck::Zeroable;
use half::{bf16, f16};
use proptest::prelude::*;
use tessera_quant::*;

fn supported() -> Vec<GgmlType> {
    GgmlType::all().filter(|t| t.is_supported()).collect()
}

#[test]
fn every_supported_type_converts_both_ways() {
    use GgmlType::*;
    let expected = [
        F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K,
        MXFP4,
    ];
    assert_eq!(supported().len(), expected.len());
    let x: Vec<f32> = (0..512)
        .map(|i| ((i * 29 % 97) as f32 - 48.0) / 7.0)
        .collect();
    for ty in expected {
        let mut bytes = vec![0u8; row_bytes(ty, 512).unwrap()];
        quantize_row(ty, &x, &mut bytes).unwrap_or_else(|e| panic!("{ty}: {e}"));
        let mut y = vec![0f32; 512];
        dequantize_row(ty, &bytes, &mut y).unwrap_or_else(|e| panic!("{ty}: {e}"));
    }
}

#[test]
fn unsupported_types_are_named_in_the_error() {
    let unsupported: Vec<GgmlType> = GgmlType::all().filter(|t| !t.is_supported()).collect();
    assert!(unsupported.contains(&GgmlType::IQ2_XS));
    for ty in unsupported {
        let n = ty.block_size() as usize;
        let src = vec![0u8; ty.type_size() as usize];
        let mut dst = vec![0f32; n];
        assert_eq!(
            dequantize_row(ty, &src, &mut dst),
            Err(QuantError::Unsupported(ty))
        );
        let mut bytes = vec![0u8; ty.type_size() as usize];
        assert_eq!(
            quantize_row(ty, &dst, &mut bytes),
            Err(QuantError::Unsupported(ty))
        );
    }
    let e = dequantize_row(GgmlType::IQ2_XS, &[], &mut []).unwrap_err();
    assert_eq!(e.to_string(), "unsupported type IQ2_XS");
}

#[test]
fn wrong_lengths_are_typed_errors() {
    let mut out = vec![0f32; 32];
    assert_eq!(
        dequantize_row(GgmlType::Q4_0, &[0u8; 17], &mut out),
        Err(QuantError::BadLength {
            ty: GgmlType::Q4_0,
            expected: 18,
            got: 17,
            what: "source bytes"
        })
    );
    assert_eq!(
        dequantize_row(GgmlType::Q4_K, &[0u8; 144], &mut out),
        Err(QuantError::PartialBlock {
            ty: GgmlType::Q4_K,
            n: 32,
            block_size: 256
        })
    );
    let x = vec![1f32; 256];
    let mut bytes = vec![0u8; 145];
    let e = quantize_row(GgmlType::Q4_K, &x, &mut bytes).unwrap_err();
    assert_eq!(
        e,
        QuantError::BadLength {
            ty: GgmlType::Q4_K,
            expected: 144,
            got: 145,
            what: "destination bytes"
        }
    );
    assert_eq!(
        e.to_string(),
        "Q4_K: destination bytes has length 145, expected 144"
    );
    assert!(matches!(
        quantize_row(GgmlType::Q8_0, &x[..33], &mut bytes),
        Err(QuantError::PartialBlock { n: 33, .. })
    ));
    assert_eq!(
        row_bytes(GgmlType::Q6_K, 512),
        Ok(420),
        "row_bytes agrees with the type table"
    );
}

#[test]
fn empty_rows_are_fine() {
    for ty in supported() {
        dequantize_row(ty, &[], &mut []).unwrap();
        quantize_row(ty, &[], &mut []).unwrap();
    }
}

#[test]
fn float_formats_round_trip_exactly_on_their_grids() {
    let x: Vec<f32> = (0..64).map(|i| (i as f32 - 31.5) * 0.375).collect();
    for ty in [GgmlType::F32, GgmlType::F16, GgmlType::BF16] {
        let mut bytes = vec![0u8; row_bytes(ty, 64).unwrap()];
        quantize_row(ty, &x, &mut bytes).unwrap();
        let mut y = vec![0f32; 64];
        dequantize_row(ty, &bytes, &mut y).unwrap();
        assert_eq!(x, y, "{ty}");
    }
    // Round to nearest even at the halfway point, NaN stays NaN (quiet).
    assert_eq!(f32_to_bf16(f32::from_bits(0x3F80_8000)).to_bits(), 0x3F80);
    assert_eq!(f32_to_bf16(f32::from_bits(0x3F81_8000)).to_bits(), 0x3F82);
    assert_eq!(f32_to_bf16(f32::from_bits(0x3F80_8001)).to_bits(), 0x3F81);
    assert_eq!(f32_to_bf16(f32::from_bits(0x7F80_0001)).to_bits(), 0x7FC0);
    assert_eq!(f32_to_bf16(f32::MAX).to_bits(), 0x7F80);
    let mut h = [f16::ZERO; 2];
    quantize_row_f16(&[65520.0, 1.0 + 1.0 / 2048.0], &mut h);
    assert_eq!(h, [f16::INFINITY, f16::ONE]);
    let mut b = [bf16::ZERO; 1];
    quantize_row_bf16(&[1.0], &mut b);
    assert_eq!(b[0], bf16::ONE);
}

#[test]
fn q8_1_and_q8_k_dequantize_as_d_times_q() {
    let mut b = BlockQ8_1::zeroed();
    b.d = f16::from_f32(0.5);
    b.s = f16::from_f32(123.0); // redundant; ignored
    b.qs[0] = -128;
    b.qs[31] = 127;
    let mut y = [1f32; 32];
    dequantize_row_q8_1(&[b], &mut y);
    assert_eq!((y[0], y[1], y[31]), (-64.0, 0.0, 63.5));

    let mut k = BlockQ8K::zeroed();
    k.d = -0.25;
    k.qs[0] = 4;
    k.qs[255] = -127;
    let mut y = [1f32; 256];
    dequantize_row_q8_k(&[k], &mut y);
    assert_eq!((y[0], y[1], y[255]), (-1.0, 0.0, 31.75));
}

#[test]
fn hand_computed_q4_0_and_q4_k_blocks() {
    // Q4_0: d = 2, element j in the low nibble of qs[j], element j+16 in the high nibble.
    let mut b = BlockQ4_0::zeroed();
    b.d = f16::from_f32(2.0);
    b.qs[0] = 0xF0; // element 0: 0 - 8, element 16: 15 - 8
    b.qs[15] = 0x19; // element 15: 9 - 8, element 31: 1 - 8
    let mut y = [0f32; 32];
    dequantize_row_q4_0(&[b], &mut y);
    assert_eq!(
        (y[0], y[16], y[15], y[31], y[1]),
        (-16.0, 14.0, 2.0, -14.0, -16.0)
    );

    // Q4_K: sub-block 5 has 6-bit scale 0b10_0011 = 35 and min 0b01_0100 = 20; its elements
    // are the high nibbles of qs[64..96] (chunk 2), elements 160..192.
    let mut k = BlockQ4K::zeroed();
    k.d = f16::from_f32(0.5);
    k.dmin = f16::from_f32(0.25);
    k.scales[9] = 0x43; // low nibbles: scale 3, min 4
    k.scales[1] = 0x80; // top 2 bits of scale 5 = 0b10
    k.scales[5] = 0x40; // top 2 bits of min 5 = 0b01
    k.qs[64] = 0x70; // element 160: q = 7
    assert_eq!(k4_scale_min(&k.scales, 5), (35, 20));
    let mut y = [0f32; 256];
    dequantize_row_q4_k(&[k], &mut y);
    assert_eq!(y[160], 0.5 * 35.0 * 7.0 - 0.25 * 20.0);
    assert_eq!(y[161], -0.25 * 20.0);
}

#[test]
fn misaligned_byte_slices_give_the_same_result() {
    let x: Vec<f32> = (0..512)
        .map(|i| ((i * 13 % 101) as f32 - 50.0) * 0.03)
        .collect();
    for ty in supported() {
        let len = row_bytes(ty, 512).unwrap();
        let mut aligned = vec![0u8; len];
        quantize_row(ty, &x, &mut aligned).unwrap();
        // A Vec<u8> is only byte-aligned; offsets 1..4 cover every misalignment of f16/f32.
        for off in 1..4 {
            let mut buf = vec![0u8; len + off];
            quantize_row(ty, &x, &mut buf[off..]).unwrap();
            assert_eq!(&buf[off..], &aligned[..], "{ty} quantize at offset {off}");
            let (mut a, mut b) = (vec![0f32; 512], vec![0f32; 512]);
            dequantize_row(ty, &aligned, &mut a).unwrap();
            dequantize_row(ty, &buf[off..], &mut b).unwrap();
            assert_eq!(a, b, "{ty} dequantize at offset {off}");
        }
    }
}

#[test]
fn byte_api_matches_typed_api() {
    let x: Vec<f32> = (0..256).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
    let mut typed = vec![BlockQ8K::zeroed(); 1];
    quantize_row_q8_k(&x, &mut typed);
    let mut bytes = vec![0u8; 292];
    quantize_row(GgmlType::Q8_K, &x, &mut bytes).unwrap();
    assert_eq!(bytemuck::cast_slice::<_, u8>(&typed), &bytes[..]);

    let mut typed = vec![BlockQ6K::zeroed(); 1];
    quantize_row_q6_k(&x, &mut typed);
    let mut y1 = vec![0f32; 256];
    let mut y2 = vec![0f32; 256];
    dequantize_row_q6_k(&typed, &mut y1);
    dequantize_row(GgmlType::Q6_K, bytemuck::cast_slice(&typed), &mut y2).unwrap();
    assert_eq!(y1, y2);
}

#[test]
fn blocks_from_bytes_copies_only_when_misaligned() {
    let blocks = vec![BlockQ8K::zeroed(); 2];
    let bytes: &[u8] = bytemuck::cast_slice(&blocks);
    assert!(matches!(
        blocks_from_bytes::<BlockQ8K>(bytes),
        std::borrow::Cow::Borrowed(_)
    ));
    let mut shifted = vec![0u8; bytes.len() + 1];
    shifted[1..].copy_from_slice(bytes);
    let view = blocks_from_bytes::<BlockQ8K>(&shifted[1..]);
    assert_eq!(view.len(), 2);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any f32 row, NaN and infinities included, quantizes without panicking.
    #[test]
    fn quantize_never_panics(bits in proptest::collection::vec(any::<u32>(), 256)) {
        let x: Vec<f32> = bits.into_iter().map(f32::from_bits).collect();
        for ty in supported() {
            let mut bytes = vec![0u8; row_bytes(ty, 256).unwrap()];
            quantize_row(ty, &x, &mut bytes).unwrap();
        }
    }

    /// Any bytes dequantize without panicking.
    #[test]
    fn dequantize_never_panics(bytes in proptest::collection::vec(any::<u8>(), 1024)) {
        for ty in supported() {
            let len = row_bytes(ty, 256).unwrap();
            let mut y = vec![0f32; 256];
            dequantize_row(ty, &bytes[..len], &mut y).unwrap();
        }
    }

    /// Finite rows: every type reconstructs within a few of its own steps.
    #[test]
    fn finite_rows_round_trip_roughly(x in proptest::collection::vec(-1e3f32..1e3, 256)) {
        let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        for ty in supported() {
            let mut bytes = vec![0u8; row_bytes(ty, 256).unwrap()];
            quantize_row(ty, &x, &mut bytes).unwrap();
            let mut y = vec![0f32; 256];
            dequantize_row(ty, &bytes, &mut y).unwrap();
            for (a, b) in x.iter().zip(&y) {
                // 2-bit formats span the whole range in 3 steps; allow one full step.
                prop_assert!((a - b).abs() <= amax * 0.67 + 1e-6, "{} {} -> {}", ty, a, b);
            }
        }
    }
}
