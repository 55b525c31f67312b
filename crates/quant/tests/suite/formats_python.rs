//! Bit-exactness against Python's `gguf.quants` (the `gguf` package, ggml's own Python port).
//!
//! Runs `tests/quant_reference.py` into a temporary directory, then for every case it wrote
//! (raw blocks → f32, or f32 → blocks) compares our output byte for byte. Needs `python3` with
//! `numpy` and `gguf` (override the interpreter with env `PYTHON`); fails if they are missing.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use tessera_quant::{dequantize_row, quantize_row_ref, GgmlType};

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn generate_reference_data() -> TempDir {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/quant_reference.py");
    let dir = std::env::temp_dir().join(format!("tessera-quant-ref-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let output = Command::new(&python)
        .arg(&script)
        .arg(&dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run `{python}` ({e}): this test needs Python 3 with numpy and gguf")
        });
    assert!(
        output.status.success(),
        "{} failed (needs Python 3 with numpy and the gguf package):\n{}",
        script.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    TempDir(dir)
}

fn type_by_name(name: &str) -> GgmlType {
    GgmlType::all()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("unknown type {name} in manifest"))
}

/// Describes the first difference between two byte strings, or None if they are equal.
fn first_difference(got: &[u8], want: &[u8], elem: usize) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!("length {} != expected {}", got.len(), want.len()));
    }
    let i = got.iter().zip(want).position(|(a, b)| a != b)?;
    let at = i / elem * elem;
    let end = (at + elem).min(got.len());
    Some(format!(
        "byte {i} (element {}): got {:02x?}, expected {:02x?}",
        i / elem,
        &got[at..end],
        &want[at..end]
    ))
}

/// Runs one case, also through a misaligned copy of the input (the byte API must not care).
fn run_case(op: &str, ty: GgmlType, n: usize, input: &[u8], expected: &[u8]) -> Option<String> {
    let mut shifted = vec![0u8; input.len() + 1];
    shifted[1..].copy_from_slice(input);
    let misaligned = &shifted[1..];
    match op {
        "dequantize" => {
            for (label, src) in [("aligned", input), ("misaligned", misaligned)] {
                let mut out = vec![0f32; n];
                if let Err(e) = dequantize_row(ty, src, &mut out) {
                    return Some(format!("{label}: error {e}"));
                }
                let got: Vec<u8> = out.iter().flat_map(|v| v.to_le_bytes()).collect();
                if let Some(d) = first_difference(&got, expected, 4) {
                    return Some(format!("{label}: {d}"));
                }
            }
            None
        }
        "quantize" => {
            let src: Vec<f32> = input
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                .collect();
            assert_eq!(src.len(), n);
            let mut out = vec![0u8; expected.len() + 1];
            for (label, dst) in [("aligned", 0), ("misaligned", 1)] {
                let dst = &mut out[dst..dst + expected.len()];
                // gguf.quants implements ggml's reference quantizers (model files).
                if let Err(e) = quantize_row_ref(ty, &src, dst) {
                    return Some(format!("{label}: error {e}"));
                }
                if let Some(d) = first_difference(dst, expected, ty.type_size() as usize) {
                    return Some(format!("{label}: {d}"));
                }
            }
            None
        }
        _ => Some(format!("unknown op {op}")),
    }
}

#[test]
fn bit_exact_against_gguf_python_package() {
    let dir = generate_reference_data();
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(dir.0.join("manifest.json")).unwrap()).unwrap();
    let cases = manifest["cases"].as_array().expect("manifest has cases");

    let mut failures = Vec::new();
    let mut covered = std::collections::BTreeSet::new();
    for case in cases {
        let op = case["op"].as_str().unwrap();
        let ty = type_by_name(case["type"].as_str().unwrap());
        let name = case["name"].as_str().unwrap();
        let n = case["n"].as_u64().unwrap() as usize;
        let input = std::fs::read(dir.0.join(case["input"].as_str().unwrap())).unwrap();
        let expected = std::fs::read(dir.0.join(case["expected"].as_str().unwrap())).unwrap();
        if let Some(why) = run_case(op, ty, n, &input, &expected) {
            failures.push(format!("{op} {ty} {name}: {why}"));
        }
        covered.insert((op.to_string(), ty.name()));
    }

    // Guard against a script that silently stopped producing cases.
    use GgmlType::*;
    for ty in [
        F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, MXFP4,
    ] {
        assert!(
            covered.contains(&("dequantize".into(), ty.name())),
            "no dequantize case for {ty}"
        );
    }
    for ty in [F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4] {
        assert!(
            covered.contains(&("quantize".into(), ty.name())),
            "no quantize case for {ty}"
        );
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from gguf.quants:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    eprintln!("{} cases bit-exact against gguf.quants", cases.len());
}
