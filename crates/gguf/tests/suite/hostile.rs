//! Malformed and hostile files: every case yields a typed error that names what is wrong and
//! where, from the slice reader and from the stream parser, and nothing panics.

use crate::common;

use common::{synthetic_writer, Raw};
use tessera_gguf::{parse_header, GgmlType, GgufError, GgufFile, GgufWriter, StreamParser};

/// The slice reader's error for `file` (it must fail).
fn slice_err(file: &Raw) -> GgufError {
    match GgufFile::from_bytes(file.0.clone()) {
        Ok(_) => panic!("accepted a bad file"),
        Err(e) => e,
    }
}

/// The stream parser's error for `file` fed in 5-byte chunks (it must fail, at the latest in
/// `finish`).
fn stream_err(file: &Raw) -> GgufError {
    let mut p = StreamParser::new();
    for chunk in file.0.chunks(5) {
        if let Err(e) = p.feed(chunk) {
            return e;
        }
    }
    p.finish().expect_err("stream accepted a bad file")
}

/// Both readers fail with errors matching `pat`.
macro_rules! both_fail {
    ($file:expr, $pat:pat $(if $guard:expr)?) => {{
        let file = $file;
        let e = slice_err(&file);
        assert!(matches!(e, $pat $(if $guard)?), "slice reader: {e:?}");
        let s = stream_err(&file);
        assert!(matches!(s, $pat $(if $guard)?), "stream parser: {s:?}");
        e
    }};
}

#[test]
fn every_truncation_fails_cleanly() {
    let file = synthetic_writer().to_bytes();
    let h = parse_header(&file).unwrap();
    for n in 0..file.len() - 1 {
        let prefix = &file[..n];
        let e = GgufFile::from_bytes(prefix.to_vec()).err();
        // A prefix that ends in padding after the last tensor is still a whole model.
        let needs = h.data_offset + h.data_len();
        assert_eq!(e.is_some(), (n as u64) < needs, "prefix {n}");
        let mut p = StreamParser::new();
        let fed = p.feed(prefix);
        assert_eq!(
            fed.is_ok() && p.finish().is_ok(),
            (n as u64) >= needs,
            "prefix {n}"
        );
    }
}

#[test]
fn truncated_header_names_the_offset() {
    let file = Raw::header(3, 0, 1)
        .str("general.name")
        .u32(8)
        .u64(10)
        .bytes(b"abc");
    let e = both_fail!(file, GgufError::Truncated { .. });
    match e {
        GgufError::Truncated {
            what,
            offset,
            needed,
            available,
        } => {
            assert!(what.contains("general.name"), "{what}");
            assert_eq!((offset, needed, available), (56, 10, 3));
        }
        _ => unreachable!(),
    }
}

#[test]
fn wrong_magic_and_versions() {
    let e = both_fail!(
        Raw::default().bytes(b"GGML").u32(3).u64(0).u64(0),
        GgufError::BadMagic { .. }
    );
    assert!(matches!(e, GgufError::BadMagic { found } if &found == b"GGML"));
    for v in [0u32, 1, 4, 0x0300_0000] {
        let e = both_fail!(Raw::header(v, 0, 0), GgufError::UnsupportedVersion { .. });
        assert!(matches!(e, GgufError::UnsupportedVersion { version } if version == v));
    }
    both_fail!(Raw::default().bytes(b"GG"), GgufError::Truncated { .. });
}

#[test]
fn absurd_counts_are_refused_before_allocating() {
    // 2^60 metadata entries / tensors in a 24-byte file.
    let e = slice_err(&Raw::header(3, 0, 1 << 60));
    assert!(
        matches!(e, GgufError::CountTooLarge { count, offset: 16, .. } if count == 1 << 60),
        "{e:?}"
    );
    assert!(matches!(
        stream_err(&Raw::header(3, 0, 1 << 60)),
        GgufError::HeaderTooLarge { .. }
    ));
    let e = slice_err(&Raw::header(3, 1 << 60, 0));
    assert!(
        matches!(e, GgufError::CountTooLarge { offset: 8, .. }),
        "{e:?}"
    );
    assert!(matches!(
        stream_err(&Raw::header(3, u64::MAX, 0)),
        GgufError::HeaderTooLarge { .. }
    ));

    // String length 2^60 (key, then value).
    let e = both_fail!(
        Raw::header(3, 0, 1).u64(1 << 60).bytes(&[b'k'; 40]),
        GgufError::Truncated { .. } | GgufError::HeaderTooLarge { .. }
    );
    if let GgufError::Truncated { needed, offset, .. } = e {
        assert_eq!((needed, offset), (1 << 60, 32));
    } else {
        panic!("{e:?}");
    }
    let value_len = Raw::header(3, 0, 1).str("k").u32(8).u64(u64::MAX);
    assert!(matches!(
        slice_err(&value_len),
        GgufError::Truncated {
            needed: u64::MAX,
            ..
        }
    ));
    assert!(matches!(
        stream_err(&value_len),
        GgufError::HeaderTooLarge { .. }
    ));

    // Array of 2^60 u32s, and of 2^60 strings.
    for elem in [4u32, 8] {
        let file = Raw::header(3, 0, 1)
            .str("arr")
            .u32(9)
            .u32(elem)
            .u64(1 << 60)
            .u32(0);
        let e = slice_err(&file);
        match &e {
            GgufError::CountTooLarge { what, count, .. } => {
                assert!(
                    what.contains("array length") && what.contains("`arr`"),
                    "{what}"
                );
                assert_eq!(*count, 1 << 60);
            }
            _ => panic!("{e:?}"),
        }
        assert!(matches!(
            stream_err(&file),
            GgufError::HeaderTooLarge { .. }
        ));
    }
}

#[test]
fn unknown_value_types() {
    let e = both_fail!(
        Raw::header(3, 0, 1).str("k").u32(13).u32(0),
        GgufError::UnknownValueType { .. }
    );
    assert!(
        matches!(e, GgufError::UnknownValueType { ref key, id: 13, offset: 33 } if key == "k"),
        "{e:?}"
    );
    let e = both_fail!(
        Raw::header(3, 0, 1).str("arr").u32(9).u32(99).u64(1).u32(0),
        GgufError::UnknownValueType { id: 99, .. }
    );
    assert!(e.to_string().contains("`arr`"));
}

#[test]
fn bad_values() {
    // Invalid UTF-8 in a key.
    let e = both_fail!(
        Raw::header(3, 0, 1)
            .u64(2)
            .bytes(&[0x61, 0xFF])
            .u32(0)
            .u8(0),
        GgufError::InvalidUtf8 { .. }
    );
    assert!(
        matches!(e, GgufError::InvalidUtf8 { offset: 33, .. }),
        "{e:?}"
    );
    // A bool that is neither 0 nor 1.
    both_fail!(
        Raw::header(3, 0, 1).str("b").u32(7).u8(2),
        GgufError::BadMetadata { .. }
    );
    // Arrays nested 17 deep.
    let mut deep = Raw::header(3, 0, 1).str("deep").u32(9);
    for _ in 0..17 {
        deep = deep.u32(9).u64(1);
    }
    let deep = deep.u32(0).u64(0);
    both_fail!(deep, GgufError::NestingTooDeep { max: 16, .. });
    // Alignment that is not a power of two, and zero.
    for a in [0u32, 3, 48] {
        let e = both_fail!(
            Raw::header(3, 0, 1).kv_u32("general.alignment", a),
            GgufError::BadMetadata { .. }
        );
        assert!(e.to_string().contains("general.alignment"));
    }
}

#[test]
fn duplicates() {
    let e = both_fail!(
        Raw::header(3, 0, 2).kv_u32("a", 1).kv_u32("a", 2),
        GgufError::DuplicateKey { .. }
    );
    assert!(
        matches!(e, GgufError::DuplicateKey { ref key, offset: 41 } if key == "a"),
        "{e:?}"
    );
    let file = Raw::header(3, 2, 0)
        .tensor("t", &[8], 0, 0)
        .tensor("t", &[8], 0, 32)
        .data(32, 64);
    both_fail!(file, GgufError::DuplicateTensor { ref name, .. } if name == "t");
}

/// One F32 tensor info with these fields, then `data` bytes of data.
fn one_tensor(dims: &[u64], ty: u32, offset: u64, data: usize) -> Raw {
    Raw::header(3, 1, 0)
        .tensor("w", dims, ty, offset)
        .data(32, data)
}

#[test]
fn bad_tensor_infos() {
    let e = both_fail!(
        one_tensor(&[8], 1000, 0, 32),
        GgufError::UnknownTensorType { id: 1000, .. }
    );
    assert!(
        e.to_string().contains("`w`") && e.to_string().contains("1000"),
        "{e}"
    );
    // Retired ids (Q4_2 = 4) are unknown too.
    both_fail!(
        one_tensor(&[32], 4, 0, 32),
        GgufError::UnknownTensorType { id: 4, .. }
    );
    both_fail!(
        one_tensor(&[1, 1, 1, 1, 1], 0, 0, 32),
        GgufError::TooManyDims { n_dims: 5, .. }
    );
    both_fail!(
        one_tensor(&[1 << 32, 1 << 32], 0, 0, 32),
        GgufError::DimsOverflow { .. }
    );
    // Elements fit in i64 but bytes do not.
    both_fail!(
        one_tensor(&[1 << 62], 28, 0, 32),
        GgufError::DimsOverflow { .. }
    );
    let e = both_fail!(
        one_tensor(&[33, 2], 2, 0, 64),
        GgufError::RowNotBlockMultiple {
            row_len: 33,
            block_size: 32,
            ..
        }
    );
    assert!(e.to_string().contains("Q4_0"));
    both_fail!(
        one_tensor(&[8], 0, 16, 64),
        GgufError::MisalignedTensor {
            offset: 16,
            alignment: 32,
            ..
        }
    );
    both_fail!(
        one_tensor(&[8], 0, u64::MAX - 31, 32),
        GgufError::OffsetOverflow { .. }
    );
}

#[test]
fn unsupported_but_known_types_are_reported_not_refused() {
    let m = GgufFile::from_bytes(one_tensor(&[256], 17, 0, 74).0).unwrap();
    let t = m.header().tensor("w").unwrap();
    assert_eq!(t.ty, GgmlType::IQ2_XS);
    assert!(!t.ty.is_supported());
}

#[test]
fn tensor_data_past_the_end() {
    let e = slice_err(&one_tensor(&[16], 0, 0, 63));
    match e {
        GgufError::TensorOutOfBounds {
            name,
            start,
            end,
            file_len,
        } => {
            assert_eq!(name, "w");
            assert_eq!((end - start, file_len), (64, start + 63));
        }
        e => panic!("{e:?}"),
    }
    let e = stream_err(&one_tensor(&[16], 0, 0, 63));
    assert!(
        matches!(e, GgufError::Truncated { ref what, .. } if what.contains("`w`")),
        "{e:?}"
    );
    // An offset far beyond the file.
    let e = slice_err(&one_tensor(&[8], 0, 1 << 40, 32));
    assert!(matches!(e, GgufError::TensorOutOfBounds { .. }), "{e:?}");
}

#[test]
fn overlapping_tensors() {
    let file = Raw::header(3, 2, 0)
        .tensor("a", &[16], 0, 0)
        .tensor("b", &[8], 0, 32)
        .data(32, 96);
    let e = both_fail!(file, GgufError::OverlappingTensors { .. });
    assert!(
        matches!(e, GgufError::OverlappingTensors { ref first, ref second, first_end: 64, second_start: 32, .. } if first == "a" && second == "b"),
        "{e:?}"
    );
    // The same tensor range twice.
    let file = Raw::header(3, 2, 0)
        .tensor("a", &[8], 0, 0)
        .tensor("b", &[8], 0, 0)
        .data(32, 32);
    both_fail!(file, GgufError::OverlappingTensors { .. });
}

#[test]
fn split_shards_must_belong_together() {
    let mut w = GgufWriter::new();
    w.add_str("general.architecture", "llama").unwrap();
    for i in 0..3 {
        w.add_tensor(format!("t{i}"), &[8], GgmlType::F32, vec![i as u8; 32])
            .unwrap();
    }
    let shards = w.to_split(3).unwrap();
    // One shard alone is not a model.
    let e = GgufFile::from_bytes(shards[0].clone()).err().unwrap();
    assert!(matches!(e, GgufError::Split { .. }), "{e:?}");
    // Out of order, or one missing.
    let swapped = vec![shards[1].clone(), shards[0].clone(), shards[2].clone()];
    assert!(matches!(
        GgufFile::from_shards(swapped),
        Err(GgufError::Split { .. })
    ));
    let missing = vec![shards[0].clone(), shards[1].clone()];
    assert!(matches!(
        GgufFile::from_shards(missing),
        Err(GgufError::Split { .. })
    ));
    // A broken shard is named.
    let mut broken = shards.clone();
    broken[2].truncate(40);
    let e = GgufFile::from_shards(broken).err().unwrap();
    assert!(e.to_string().contains("shard 3 of 3"), "{e}");
    // A missing shard file.
    let dir = std::env::temp_dir().join(format!("gguf-test-{}-missing-shard", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("m-00001-of-00003.gguf"), &shards[0]).unwrap();
    std::fs::write(dir.join("m-00002-of-00003.gguf"), &shards[1]).unwrap();
    let e = GgufFile::open(dir.join("m-00001-of-00003.gguf"))
        .err()
        .unwrap();
    assert!(
        matches!(e, GgufError::Io { ref path, .. } if path.ends_with("m-00003-of-00003.gguf")),
        "{e:?}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn random_bytes_never_panic() {
    // Mutations of a valid file: flip bytes across the header, never a panic.
    let file = synthetic_writer().to_bytes();
    let h = parse_header(&file).unwrap();
    let mut x = 0x1234_5678_9abc_def1u64;
    for _ in 0..3000 {
        let mut f = file.clone();
        for _ in 0..3 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let at = (x % h.data_offset) as usize;
            f[at] = (x >> 32) as u8;
        }
        let _ = GgufFile::from_bytes(f.clone());
        let mut p = StreamParser::new();
        for c in f.chunks(97) {
            if p.feed(c).is_err() {
                break;
            }
        }
    }
}
