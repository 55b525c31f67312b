//! Feeds arbitrary bytes to every way into the GGUF reader: `parse_header`, `GgufFile::from_bytes`
//! and the stream parser (both modes, with chunk sizes drawn from the input itself), and checks
//! they agree: whatever the slice reader accepts, the stream parser reads identically, and a
//! model the reader accepts survives a writer round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera_gguf::{parse_header, GgufFile, GgufWriter, Header, StreamEvent, StreamParser};

/// Chunk sizes from a cheap generator seeded by the input, so chunking varies with it.
fn chunk_sizes(data: &[u8]) -> impl Iterator<Item = usize> {
    let mut x = data
        .iter()
        .take(16)
        .fold(data.len() as u64 ^ 0x9E37_79B9_7F4A_7C15, |h, &b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01B3)
        })
        | 1;
    std::iter::repeat_with(move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Mostly tiny chunks, sometimes large ones.
        if x % 8 == 0 {
            (x >> 8) as usize % 4096 + 1
        } else {
            (x >> 8) as usize % 17 + 1
        }
    })
}

/// Streams `data`; returns the header and each tensor's bytes if the stream was accepted.
fn stream(data: &[u8], pieces: bool) -> Option<(Header, Vec<Vec<u8>>)> {
    let mut p = if pieces {
        StreamParser::pieces()
    } else {
        StreamParser::new()
    };
    let mut header = None;
    let mut tensors: Vec<Vec<u8>> = Vec::new();
    let mut at = 0;
    let mut sizes = chunk_sizes(data);
    while at < data.len() {
        let n = sizes.next().unwrap().min(data.len() - at);
        let events = p.feed(&data[at..at + n]).ok()?;
        at += n;
        for ev in events {
            match ev {
                StreamEvent::HeaderComplete(h) => {
                    assert!(header.is_none());
                    tensors = vec![Vec::new(); h.tensors.len()];
                    header = Some(h);
                }
                StreamEvent::TensorReady { index, bytes, .. } => tensors[index] = bytes,
                StreamEvent::TensorPiece {
                    index,
                    offset_in_tensor,
                    bytes,
                    ..
                } => {
                    assert_eq!(offset_in_tensor, tensors[index].len() as u64);
                    tensors[index].extend_from_slice(&bytes);
                }
            }
        }
    }
    p.finish().ok()?;
    Some((header.expect("a finished stream has a header"), tensors))
}

fuzz_target!(|data: &[u8]| {
    let parsed = parse_header(data);
    let file = GgufFile::from_bytes(data.to_vec());
    let streamed = stream(data, false);
    let streamed_pieces = stream(data, true);

    if let Ok(file) = &file {
        let h = file.header();
        assert_eq!(debug(parsed.as_ref().ok()), debug(Some(h)));
        for s in [&streamed, &streamed_pieces] {
            let (sh, st) = s.as_ref().expect("stream refused what from_bytes accepted");
            assert_eq!(debug(sh), debug(h));
            for (i, bytes) in st.iter().enumerate() {
                assert_eq!(Some(bytes.as_slice()), file.tensor_data_at(i));
            }
        }
        round_trip(file);
    }
    if let Some((sh, _)) = &streamed {
        assert_eq!(debug(parsed.as_ref().ok()), debug(Some(sh)));
    }
});

/// Headers compared through Debug, so NaN metadata floats compare equal to themselves.
fn debug(x: impl std::fmt::Debug) -> String {
    format!("{x:?}")
}

/// Writes the accepted model back out and reads it again: same metadata and tensor bytes.
fn round_trip(file: &GgufFile) {
    let h = file.header();
    let mut w = GgufWriter::new();
    w.set_version(h.version).unwrap();
    for (k, v) in &h.metadata {
        if w.add(k.clone(), v.clone()).is_err() {
            // e.g. a u64 `general.alignment` the writer does not produce; nothing to compare.
            return;
        }
    }
    for (i, t) in h.tensors.iter().enumerate() {
        let data = file.tensor_data_at(i).unwrap().to_vec();
        w.add_tensor(t.name.clone(), &t.dims, t.ty, data).unwrap();
    }
    let again = GgufFile::from_bytes(w.to_bytes()).expect("re-reading a written model");
    let h2 = again.header();
    assert_eq!(h2.metadata.len(), h.metadata.len());
    for ((k1, v1), (k2, v2)) in h.metadata.iter().zip(&h2.metadata) {
        assert_eq!(k1, k2);
        if k1 == "general.alignment" {
            // Any integer type is read; the writer always stores a u32.
            assert_eq!(v1.as_u64(), v2.as_u64());
        } else {
            // Compare through Debug so NaN floats compare equal to themselves.
            assert_eq!(format!("{v1:?}"), format!("{v2:?}"));
        }
    }
    for (i, t) in h.tensors.iter().enumerate() {
        let t2 = &h2.tensors[i];
        assert_eq!(
            (&t.name, &t.dims, t.ty, t.size),
            (&t2.name, &t2.dims, t2.ty, t2.size)
        );
        assert_eq!(file.tensor_data_at(i), again.tensor_data_at(i));
    }
}
