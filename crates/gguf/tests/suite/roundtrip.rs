//! Writer → reader round trips, through every entry point.

use crate::common;

use common::{bytes, synthetic_writer};
use proptest::prelude::*;
use tessera_gguf::{parse_header, GgmlType, GgufError, GgufFile, GgufWriter, Value, ValueType};

#[test]
fn synthetic_model_round_trips() {
    let w = synthetic_writer();
    let file = w.to_bytes();
    let m = GgufFile::from_bytes(file.clone()).unwrap();
    let h = m.header();
    assert_eq!(h.version, 3);
    assert_eq!(h.alignment, 32);
    assert_eq!(h.data_offset % 32, 0);
    assert_eq!(h.architecture(), Some("llama"));
    assert_eq!(h.get_str("general.name"), Some("tiny ünïcödé model"));
    assert_eq!(h.get("t.u8"), Some(&Value::U8(200)));
    assert_eq!(h.get("t.i8"), Some(&Value::I8(-5)));
    assert_eq!(h.get("t.u16"), Some(&Value::U16(65000)));
    assert_eq!(h.get("t.i16"), Some(&Value::I16(-30000)));
    assert_eq!(h.get_u64("llama.block_count"), Some(2));
    assert_eq!(h.get("t.i32"), Some(&Value::I32(-2_000_000_000)));
    assert_eq!(h.get_f32("llama.rope.freq_base"), Some(10000.5));
    assert_eq!(h.get_bool("t.bool"), Some(true));
    assert_eq!(h.get_u64("t.u64"), Some(u64::MAX - 1));
    assert_eq!(h.get("t.i64"), Some(&Value::I64(i64::MIN)));
    assert_eq!(h.get("t.f64"), Some(&Value::F64(-1.25e300)));
    let tokens: Vec<&str> = h
        .get_array("tokenizer.ggml.tokens")
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(tokens, ["<s>", "</s>", "a", "", "ü"]);
    let nested = h.get_array("t.nested").unwrap();
    assert_eq!(nested[0].as_array().unwrap()[1], Value::I32(-2));
    assert_eq!(nested[1].as_array().unwrap()[0].as_str(), Some("x"));
    assert_eq!(nested[2], Value::Array(ValueType::U8, vec![]));
    assert_eq!(
        h.get("t.empty"),
        Some(&Value::Array(ValueType::F32, vec![]))
    );
    assert_eq!(h.get("missing"), None);

    let names: Vec<&str> = h.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "token_embd.weight",
            "blk.0.attn_norm.weight",
            "blk.0.ffn.weight",
            "blk.1.odd",
            "empty",
            "iq"
        ]
    );
    let embd = h.tensor("token_embd.weight").unwrap();
    assert_eq!(
        (embd.dims.as_slice(), embd.ty, embd.size),
        (&[64, 5][..], GgmlType::Q8_0, 340)
    );
    assert_eq!(h.tensor("blk.1.odd").unwrap().n_elements(), 21);
    assert_eq!(h.tensor("empty").unwrap().size, 0);
    // In the table but not computable: reported, not refused.
    let iq = h.tensor("iq").unwrap();
    assert_eq!(iq.ty, GgmlType::IQ2_XS);
    assert!(!iq.ty.is_supported());

    for (i, t) in h.tensors.iter().enumerate() {
        assert_eq!(t.offset % 32, 0, "{}", t.name);
        let data = m.tensor_data(&t.name).unwrap();
        assert_eq!(
            data,
            &bytes(i as u64 + 1, t.size as usize)[..],
            "{}",
            t.name
        );
        assert_eq!(m.tensor_data_at(i).unwrap(), data);
        let start = m.tensor_location(i).unwrap().range.start;
        assert_eq!(start % 32, 0);
    }
    assert_eq!(m.tensor_data("missing"), None);
    // parse_header on the header bytes alone gives the same header.
    let head_only = parse_header(&file[..h.data_offset as usize]).unwrap();
    assert_eq!(&head_only, h);
    // The file length is the padded end of the data.
    assert_eq!(
        file.len() as u64,
        h.data_offset + h.data_len().div_ceil(32) * 32
    );
}

#[test]
fn write_to_matches_to_bytes() {
    let w = synthetic_writer();
    let mut out = Vec::new();
    w.write_to(&mut out).unwrap();
    assert_eq!(out, w.to_bytes());
}

#[test]
fn version_2_and_custom_alignment() {
    for alignment in [1u64, 8, 64, 4096] {
        let mut w = synthetic_writer();
        w.set_version(2).unwrap().set_alignment(alignment).unwrap();
        let m = GgufFile::from_bytes(w.to_bytes()).unwrap();
        let h = m.header();
        assert_eq!(h.version, 2);
        assert_eq!(h.alignment, alignment);
        assert_eq!(h.get_u64("general.alignment"), Some(alignment));
        assert_eq!(h.data_offset % alignment, 0);
        for (i, t) in h.tensors.iter().enumerate() {
            assert_eq!(t.offset % alignment, 0);
            assert_eq!(
                m.tensor_data(&t.name).unwrap(),
                &bytes(i as u64 + 1, t.size as usize)[..]
            );
        }
    }
}

#[test]
fn writer_refuses_what_the_reader_would() {
    let mut w = GgufWriter::new();
    w.add_u32("a", 1).unwrap();
    assert!(matches!(
        w.add_u32("a", 2),
        Err(GgufError::InvalidWrite { .. })
    ));
    let mixed = Value::Array(ValueType::U8, vec![Value::U8(1), Value::U16(2)]);
    assert!(matches!(
        w.add("b", mixed),
        Err(GgufError::InvalidWrite { .. })
    ));
    assert!(w.set_alignment(3).is_err());
    assert!(w.set_alignment(0).is_err());
    assert!(w.set_version(1).is_err());
    w.add_tensor("t", &[32], GgmlType::Q4_0, vec![0; 18])
        .unwrap();
    assert!(w
        .add_tensor("t", &[32], GgmlType::Q4_0, vec![0; 18])
        .is_err());
    assert!(matches!(
        w.add_tensor("u", &[33], GgmlType::Q4_0, vec![0; 18]),
        Err(GgufError::RowNotBlockMultiple { row_len: 33, .. })
    ));
    assert!(w
        .add_tensor("u", &[32], GgmlType::Q4_0, vec![0; 17])
        .is_err());
    assert!(w
        .add_tensor("u", &[1, 1, 1, 1, 1], GgmlType::F32, vec![0; 4])
        .is_err());
    assert!(matches!(
        w.add_tensor("u", &[u64::MAX, 2], GgmlType::F32, vec![]),
        Err(GgufError::DimsOverflow { .. })
    ));
}

fn arb_scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<u8>().prop_map(Value::U8),
        any::<i8>().prop_map(Value::I8),
        any::<u16>().prop_map(Value::U16),
        any::<i16>().prop_map(Value::I16),
        any::<u32>().prop_map(Value::U32),
        any::<i32>().prop_map(Value::I32),
        // Compared through bits below, so NaNs round-trip too.
        any::<u32>().prop_map(|b| Value::F32(f32::from_bits(b))),
        any::<bool>().prop_map(Value::Bool),
        ".{0,12}".prop_map(Value::String),
        any::<u64>().prop_map(Value::U64),
        any::<i64>().prop_map(Value::I64),
        any::<u64>().prop_map(|b| Value::F64(f64::from_bits(b))),
    ]
}

fn arb_value() -> impl Strategy<Value = Value> {
    arb_scalar().prop_recursive(3, 32, 6, |inner| {
        inner.prop_flat_map(|first| {
            let ty = first.value_type();
            // Arrays hold one type: repeat values of the first element's type.
            let same = proptest::collection::vec(Just(first.clone()), 0..4);
            same.prop_map(move |items| Value::Array(ty, items))
        })
    })
}

/// Equality that treats floats by their bits.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::F32(x), Value::F32(y)) => x.to_bits() == y.to_bits(),
        (Value::F64(x), Value::F64(y)) => x.to_bits() == y.to_bits(),
        (Value::Array(t, xs), Value::Array(u, ys)) => {
            t == u && xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| same(x, y))
        }
        _ => a == b,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn random_models_round_trip(
        values in proptest::collection::vec(arb_value(), 0..8),
        shapes in proptest::collection::vec((1u64..5, 1u64..4, 0usize..3), 0..6),
        alignment_log2 in 0u32..8,
    ) {
        let mut w = GgufWriter::new();
        w.set_alignment(1 << alignment_log2).unwrap();
        for (i, v) in values.iter().enumerate() {
            w.add(format!("k{i}"), v.clone()).unwrap();
        }
        let types = [GgmlType::F32, GgmlType::Q4_1, GgmlType::Q6_K];
        let mut expect = Vec::new();
        for (i, &(blocks, rows, ty)) in shapes.iter().enumerate() {
            let ty = types[ty];
            let dims = [blocks * ty.block_size(), rows];
            let data = bytes(i as u64, (blocks * ty.type_size() * rows) as usize);
            w.add_tensor(format!("t{i}"), &dims, ty, data.clone()).unwrap();
            expect.push(data);
        }
        let m = GgufFile::from_bytes(w.to_bytes()).unwrap();
        for (i, v) in values.iter().enumerate() {
            let key = format!("k{i}");
            prop_assert!(same(m.header().get(&key).unwrap(), v));
        }
        for (i, data) in expect.iter().enumerate() {
            prop_assert_eq!(m.tensor_data(&format!("t{i}")).unwrap(), &data[..]);
        }
    }
}
