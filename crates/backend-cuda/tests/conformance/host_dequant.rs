//! The kernels' block decoding checked without a GPU: `shaders/cuda/dequant.cuh` compiled as
//! host C++ (`tests/host/dequant_harness.cpp`, g++) dequantizes random blocks of every weight
//! type bit for bit like the quant crate (ggml's arithmetic), and its integer (dp4a) dot
//! products match the float dot product of the dequantized weights. Skipped without a C++
//! compiler. (In the conformance binary for its data helpers; it needs no GPU.)

use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;

const K: usize = 512;
const ROWS: usize = 5;

/// The harness built in a fresh folder, or None without a C++ compiler.
fn harness(dir: &Path) -> Option<PathBuf> {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = dir.join("dequant_harness");
    let status = Command::new(&cxx)
        .args(["-std=c++17", "-O1", "-ffp-contract=off", "-I"])
        .arg(manifest.join("../../shaders/cuda"))
        .arg(manifest.join("tests/host/dequant_harness.cpp"))
        .arg("-o")
        .arg(&exe)
        .status();
    match status {
        Ok(s) if s.success() => Some(exe),
        Ok(s) => panic!("{cxx} failed to compile dequant.cuh as host C++: {s}"),
        Err(e) => {
            eprintln!("skipped: no C++ compiler ({cxx}: {e})");
            None
        }
    }
}

#[test]
fn dequant_cuh_decodes_every_type_like_the_quant_crate() {
    let dir = std::env::temp_dir().join(format!("tessera-cuda-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let Some(exe) = harness(&dir) else { return };
    // Activations: int8 quants with per-32 (d, s = d · Σq), the layout quantize.cu writes.
    let q: Vec<i8> = values(K, 7, 1.0)
        .iter()
        .map(|v| (v * 127.0).round() as i8)
        .collect();
    let d: Vec<f32> = values(K / 32, 8, 1.0)
        .iter()
        .map(|v| 0.01 + v.abs() * 0.02)
        .collect();
    let mut acts: Vec<u8> = q.iter().map(|&v| v as u8).collect();
    for (c, &dc) in d.iter().enumerate() {
        let sum: i32 = q[c * 32..(c + 1) * 32].iter().map(|&v| v as i32).sum();
        acts.extend(dc.to_le_bytes());
        acts.extend((dc * sum as f32).to_le_bytes());
    }
    std::fs::write(dir.join("acts.bin"), &acts).unwrap();
    for (i, ty) in WEIGHT_TYPES.into_iter().enumerate() {
        let data = values(K * ROWS, 100 + i as u64, 3.0);
        let bytes = encode(ty, K, &data);
        let rb = bytes.len() / ROWS;
        std::fs::write(dir.join("w.bin"), &bytes).unwrap();
        let out = dir.join("out.bin");
        let ok = Command::new(&exe)
            .args([ty.id(), K as u32, ROWS as u32, rb as u32].map(|v| v.to_string()))
            .args([dir.join("w.bin"), dir.join("acts.bin"), out.clone()])
            .status()
            .unwrap();
        assert!(ok.success(), "{ty:?}: harness failed");
        let got: Vec<f32> = std::fs::read(&out)
            .unwrap()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(got.len(), K * ROWS + ROWS, "{ty:?}");
        for r in 0..ROWS {
            let mut want = vec![0.0f32; K];
            tessera_quant::dequantize_row(ty, &bytes[r * rb..(r + 1) * rb], &mut want).unwrap();
            let row = &got[r * K..(r + 1) * K];
            for (j, (g, w)) in row.iter().zip(&want).enumerate() {
                assert_eq!(
                    g.to_bits(),
                    w.to_bits(),
                    "{ty:?} row {r} element {j}: {g} vs {w}"
                );
            }
            if matches!(ty, GgmlType::F32 | GgmlType::F16) {
                continue;
            }
            // The integer dot product against Σ w · d · q in f64 (a float summation order
            // apart: relative to the sum of magnitudes).
            let (mut dot, mut mag) = (0.0f64, 0.0f64);
            for (j, &w) in want.iter().enumerate() {
                let term = w as f64 * d[j / 32] as f64 * q[j] as f64;
                dot += term;
                mag += term.abs();
            }
            let g = got[K * ROWS + r] as f64;
            assert!(
                (g - dot).abs() <= 1e-5 * mag,
                "{ty:?} row {r}: dp4a dot {g} vs {dot}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
