//! Files written by Python's `gguf.GGUFWriter` read here, and files written here read in
//! Python's `gguf.GGUFReader`, with the same metadata and tensor layout.
//! Needs python3 with the `gguf` and `numpy` packages.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::synthetic_writer;
use tessera_gguf::{GgmlType, GgufFile, Value, ValueType};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python_gguf.py")
}

fn python(args: &[&str]) -> String {
    let out = Command::new("python3")
        .arg(script())
        .args(args)
        .output()
        .expect("python3 is needed for this test (with the `gguf` and `numpy` packages)");
    assert!(
        out.status.success(),
        "python3 {args:?} failed (are the `gguf` and `numpy` packages installed?):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A fresh directory under the system temp dir for this test.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gguf-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn check_python_model(m: &GgufFile) {
    let h = m.header();
    assert_eq!(h.architecture(), Some("llama"));
    assert_eq!(h.get_str("general.name"), Some("py ünïcödé"));
    assert_eq!(h.get("t.u8"), Some(&Value::U8(250)));
    assert_eq!(h.get("t.i8"), Some(&Value::I8(-7)));
    assert_eq!(h.get("t.u16"), Some(&Value::U16(60000)));
    assert_eq!(h.get("t.i16"), Some(&Value::I16(-12345)));
    assert_eq!(h.get("t.u32"), Some(&Value::U32(4_000_000_000)));
    assert_eq!(h.get("t.i32"), Some(&Value::I32(-2_000_000_000)));
    assert_eq!(h.get("t.f32"), Some(&Value::F32(0.15625)));
    assert_eq!(h.get("t.u64"), Some(&Value::U64((1 << 63) + 5)));
    assert_eq!(h.get("t.i64"), Some(&Value::I64(-(1 << 62))));
    assert_eq!(h.get("t.f64"), Some(&Value::F64(1e-300)));
    assert_eq!(h.get_bool("t.bool"), Some(true));
    let strings: Vec<_> = h
        .get_array("t.strings")
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(strings, ["a", "", "ü", "<|im_start|>"]);
    assert_eq!(
        h.get("t.nested"),
        Some(&Value::Array(
            ValueType::Array,
            vec![
                Value::Array(ValueType::I32, vec![Value::I32(1), Value::I32(2)]),
                Value::Array(ValueType::I32, vec![Value::I32(3)]),
            ]
        ))
    );
    assert_eq!(h.get_array("tokenizer.ggml.tokens").unwrap().len(), 3);

    let f32t = h.tensor("f32").unwrap();
    assert_eq!(
        (f32t.dims.as_slice(), f32t.ty, f32t.size),
        (&[5, 3][..], GgmlType::F32, 60)
    );
    let f16t = h.tensor("f16").unwrap();
    assert_eq!(
        (f16t.dims.as_slice(), f16t.ty),
        (&[6, 4, 2][..], GgmlType::F16)
    );
    let q8 = h.tensor("q8").unwrap();
    assert_eq!(
        (q8.dims.as_slice(), q8.ty, q8.size),
        (&[64, 2][..], GgmlType::Q8_0, 136)
    );
    let i32t = h.tensor("i32").unwrap();
    assert_eq!(i32t.ty, GgmlType::I32);
    let ints: Vec<i32> = m
        .tensor_data("i32")
        .unwrap()
        .chunks(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(ints, [0, 1, 2, 3, 4, 5, 6]);
}

#[test]
fn reads_a_file_written_by_python() {
    let dir = temp_dir("py-write");
    let path = dir.join("model.gguf");
    python(&["write", path.to_str().unwrap()]);
    let m = GgufFile::open(&path).unwrap();
    check_python_model(&m);
    let bytes = std::fs::read(&path).unwrap();
    let from_bytes = GgufFile::from_bytes(bytes).unwrap();
    assert_eq!(from_bytes.header(), m.header());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn reads_a_split_model_written_by_python() {
    let dir = temp_dir("py-split");
    let path = dir.join("model.gguf");
    python(&["write-split", path.to_str().unwrap()]);
    let first = dir.join("model-00001-of-00002.gguf");
    let m = GgufFile::open(&first).unwrap();
    assert_eq!(m.shard_count(), 2);
    check_python_model(&m);
    // Opening by the second shard's name opens the whole model too.
    let m2 = GgufFile::open(dir.join("model-00002-of-00002.gguf")).unwrap();
    assert_eq!(m2.header(), m.header());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn python_reads_a_file_written_here() {
    let dir = temp_dir("py-read");
    let path = dir.join("ours.gguf");
    let w = synthetic_writer();
    std::fs::write(&path, w.to_bytes()).unwrap();
    let ours = GgufFile::open(&path).unwrap();
    let h = ours.header();
    let summary = python(&["read", path.to_str().unwrap()]);

    // Spot checks on the JSON text (no JSON parser among this crate's dependencies).
    assert!(
        summary.contains(r#""general.architecture": "llama""#),
        "{summary}"
    );
    assert!(
        summary.contains(r#""t.i64": -9223372036854775808"#),
        "{summary}"
    );
    assert!(
        summary.contains(r#""tokenizer.ggml.tokens": ["<s>", "</s>", "a", "", "\u00fc"]"#),
        "{summary}"
    );
    for t in &h.tensors {
        let expect = format!(
            r#"{{"name": "{}", "dims": {:?}, "type": {}, "offset": {}, "size": {}}}"#,
            t.name,
            t.dims,
            t.ty.id(),
            h.data_offset + t.offset,
            t.size
        );
        assert!(summary.contains(&expect), "missing {expect} in {summary}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}
