//! The stream parser agrees with the slice reader however the bytes are chunked, reports the
//! header as soon as its last byte arrived, and reports streams that end early.

use crate::common;

use common::synthetic_writer;
use proptest::prelude::*;
use tessera_gguf::{parse_header, GgufError, GgufFile, Header, StreamEvent, StreamParser};

/// Feeds `file` in chunks of the given sizes (cycled), collecting the header and each tensor's
/// bytes (pieces are reassembled and checked to be contiguous).
fn stream(file: &[u8], sizes: &[usize], pieces: bool) -> (Header, Vec<Option<Vec<u8>>>) {
    let mut p = if pieces {
        StreamParser::pieces()
    } else {
        StreamParser::new()
    };
    let mut header = None;
    let mut tensors: Vec<Option<Vec<u8>>> = Vec::new();
    let mut partial: Vec<Vec<u8>> = Vec::new();
    let mut at = 0;
    let mut k = 0;
    while at < file.len() {
        let n = sizes[k % sizes.len()].min(file.len() - at);
        k += 1;
        for ev in p.feed(&file[at..at + n]).unwrap() {
            match ev {
                StreamEvent::HeaderComplete(h) => {
                    assert!(header.is_none(), "header reported twice");
                    tensors = vec![None; h.tensors.len()];
                    partial = vec![Vec::new(); h.tensors.len()];
                    header = Some(h);
                }
                StreamEvent::TensorReady {
                    index,
                    range,
                    bytes,
                } => {
                    assert!(!pieces);
                    let h = header.as_ref().unwrap();
                    let t = &h.tensors[index];
                    assert_eq!(range.start, h.data_offset + t.offset);
                    assert_eq!(range.end - range.start, t.size);
                    assert!(tensors[index].replace(bytes).is_none());
                }
                StreamEvent::TensorPiece {
                    index,
                    offset_in_tensor,
                    bytes,
                    last,
                } => {
                    assert!(pieces);
                    assert_eq!(offset_in_tensor, partial[index].len() as u64);
                    partial[index].extend_from_slice(&bytes);
                    if last {
                        let done = std::mem::take(&mut partial[index]);
                        assert_eq!(
                            done.len() as u64,
                            header.as_ref().unwrap().tensors[index].size
                        );
                        assert!(tensors[index].replace(done).is_none());
                    }
                }
            }
        }
        at += n;
    }
    p.finish().unwrap();
    assert!(p.is_complete());
    (header.expect("header reported"), tensors)
}

fn check_against_slice_reader(file: &[u8], sizes: &[usize], pieces: bool) {
    let m = GgufFile::from_bytes(file.to_vec()).unwrap();
    let (h, tensors) = stream(file, sizes, pieces);
    assert_eq!(&h, m.header());
    for (i, t) in tensors.iter().enumerate() {
        assert_eq!(
            t.as_deref(),
            m.tensor_data_at(i),
            "tensor {i}, chunks {sizes:?}"
        );
    }
}

#[test]
fn chunkings_agree_with_slice_reader() {
    let file = synthetic_writer().to_bytes();
    for sizes in [
        &[1][..],
        &[2],
        &[3],
        &[7],
        &[31],
        &[33, 1, 64],
        &[4096],
        &[file.len()],
    ] {
        check_against_slice_reader(&file, sizes, false);
        check_against_slice_reader(&file, sizes, true);
    }
}

#[test]
fn header_is_reported_as_soon_as_complete() {
    let file = synthetic_writer().to_bytes();
    // The first prefix the slice parser accepts is where the header ends.
    let header_end = (0..file.len())
        .find(|&n| parse_header(&file[..n]).is_ok())
        .unwrap();
    let mut p = StreamParser::new();
    for (i, b) in file.iter().enumerate() {
        let events = p.feed(std::slice::from_ref(b)).unwrap();
        let has_header = events
            .iter()
            .any(|e| matches!(e, StreamEvent::HeaderComplete(_)));
        assert_eq!(has_header, i + 1 == header_end, "byte {i}");
    }
}

#[test]
fn early_end_is_reported() {
    let file = synthetic_writer().to_bytes();
    let h = parse_header(&file).unwrap();
    // Inside the header.
    let mut p = StreamParser::new();
    p.feed(&file[..100]).unwrap();
    assert!(matches!(p.finish(), Err(GgufError::Truncated { .. })));
    // Inside the last tensor's data.
    let mut p = StreamParser::new();
    let last = h.tensors.iter().max_by_key(|t| t.offset).unwrap();
    p.feed(&file[..(h.data_offset + last.offset + 1) as usize])
        .unwrap();
    assert!(!p.is_complete());
    let e = p.finish().unwrap_err();
    assert!(e.to_string().contains(&format!("`{}`", last.name)), "{e}");
}

#[test]
fn header_size_limit_and_failed_state() {
    let file = synthetic_writer().to_bytes();
    let mut p = StreamParser::with_max_header_bytes(64);
    assert!(matches!(
        p.feed(&file),
        Err(GgufError::HeaderTooLarge { limit: 64, .. })
    ));
    assert!(matches!(p.feed(&file), Err(GgufError::StreamFailed)));
    assert!(p.finish().is_err());
}

#[test]
fn trailing_bytes_after_the_last_tensor_are_ignored() {
    let mut file = synthetic_writer().to_bytes();
    file.extend_from_slice(&[1, 2, 3]);
    check_against_slice_reader(&file, &[5], false);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn random_chunkings_agree(sizes in proptest::collection::vec(1usize..300, 1..20), pieces: bool) {
        let file = synthetic_writer().to_bytes();
        check_against_slice_reader(&file, &sizes, pieces);
    }
}

#[test]
fn a_header_only_file_describes_the_model_without_its_bytes() {
    let file = synthetic_writer().to_bytes();
    let (h, _) = stream(&file, &[4096], true);
    let whole = GgufFile::from_bytes(file.clone()).unwrap();
    let headers_only = GgufFile::from_headers(vec![h]).unwrap();
    assert_eq!(headers_only.header(), whole.header());
    assert!(whole.has_tensor_data());
    assert!(!headers_only.has_tensor_data());
    assert_eq!(headers_only.shard_count(), 0);
    for (i, t) in whole.header().tensors.iter().enumerate() {
        assert_eq!(headers_only.tensor_index(&t.name), Some(i));
        assert_eq!(headers_only.tensor_data_at(i), None);
        assert_eq!(headers_only.tensor_location(i), None);
    }
    assert!(matches!(
        GgufFile::from_headers(Vec::new()),
        Err(GgufError::Split { .. })
    ));
}
