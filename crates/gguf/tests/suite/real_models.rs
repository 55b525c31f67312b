//! The project's two test models parse, every tensor lies inside the file, and the stream
//! parser agrees with the mmap reader.

use std::path::PathBuf;

use tessera_gguf::{GgmlType, GgufFile};

fn model_path(file: &str) -> PathBuf {
    let dir = std::env::var_os("TESSERA_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models"));
    let path = dir.join(file);
    assert!(
        path.exists(),
        "test model {} is missing: run scripts/fetch-models.sh (or set TESSERA_MODELS)",
        path.display()
    );
    path
}

fn check_model(file: &str, arch: &str, n_tensors: usize) -> GgufFile {
    let path = model_path(file);
    let model = GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let h = model.header();
    assert_eq!(h.architecture(), Some(arch));
    assert_eq!(h.tensors.len(), n_tensors);
    assert_eq!(h.version, 3);
    let file_len = std::fs::metadata(&path).unwrap().len();
    for (i, t) in h.tensors.iter().enumerate() {
        let data = model.tensor_data(&t.name).unwrap();
        assert_eq!(data.len() as u64, t.size, "{}", t.name);
        let start = h.data_offset + t.offset;
        assert!(start + t.size <= file_len, "{} past the end", t.name);
        assert_eq!(start % h.alignment, 0);
        assert_eq!(model.tensor_location(i).unwrap().range.start as u64, start);
        assert_eq!(
            t.size,
            t.ty.row_bytes(t.dims[0]).unwrap() * (t.n_elements() / t.dims[0])
        );
    }
    model
}

#[test]
fn smollm2_loads() {
    let m = check_model("SmolLM2-135M-Instruct.Q4_1.gguf", "llama", 272);
    let h = m.header();
    assert_eq!(h.get_u64("llama.block_count"), Some(30));
    assert_eq!(h.get_str("tokenizer.ggml.model"), Some("gpt2"));
    assert_eq!(h.get_array("tokenizer.ggml.tokens").unwrap().len(), 49152);
    assert_eq!(h.tensor("token_embd.weight").unwrap().ty, GgmlType::Q8_0);
}

#[test]
fn gemma3_loads() {
    let m = check_model("gemma-3-270m-q4_k_m.gguf", "gemma3", 236);
    let h = m.header();
    assert_eq!(h.get_u64("gemma3.block_count"), Some(18));
    assert_eq!(h.get_array("tokenizer.ggml.tokens").unwrap().len(), 262144);
}

/// Streams the model in `chunk`-byte pieces (piece mode, nothing held) and checks the header
/// and every byte against the mmap reader.
fn stream_matches_mmap(file: &str, chunk: usize) {
    use std::io::Read;
    use tessera_gguf::{StreamEvent, StreamParser};

    let path = model_path(file);
    let mapped = GgufFile::open(&path).unwrap();
    let mut reader = std::fs::File::open(&path).unwrap();
    let mut parser = StreamParser::pieces();
    let mut buf = vec![0u8; chunk];
    let mut header_seen = false;
    let mut done = vec![false; mapped.header().tensors.len()];
    loop {
        let n = reader.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        for ev in parser.feed(&buf[..n]).unwrap() {
            match ev {
                StreamEvent::HeaderComplete(h) => {
                    assert_eq!(&h, mapped.header());
                    header_seen = true;
                }
                StreamEvent::TensorPiece {
                    index,
                    offset_in_tensor,
                    bytes,
                    last,
                } => {
                    let whole = mapped.tensor_data_at(index).unwrap();
                    let at = offset_in_tensor as usize;
                    assert!(
                        bytes == whole[at..at + bytes.len()],
                        "tensor {index} at {at}"
                    );
                    if last {
                        assert_eq!(at + bytes.len(), whole.len());
                        done[index] = true;
                    }
                }
                StreamEvent::TensorReady { .. } => panic!("whole tensors in piece mode"),
            }
        }
    }
    parser.finish().unwrap();
    assert!(header_seen);
    assert!(done.iter().all(|&d| d));
}

#[test]
fn smollm2_streams_like_mmap() {
    stream_matches_mmap("SmolLM2-135M-Instruct.Q4_1.gguf", 4093);
}

#[test]
fn gemma3_streams_like_mmap() {
    stream_matches_mmap("gemma-3-270m-q4_k_m.gguf", 65521);
}

#[test]
fn gemma3_header_streams_in_tiny_chunks() {
    // 7-byte chunks through the 262k-token vocabulary: the scanner must not re-read it.
    let path = model_path("gemma-3-270m-q4_k_m.gguf");
    let mapped = GgufFile::open(&path).unwrap();
    let h = mapped.header();
    let bytes = std::fs::read(&path).unwrap();
    let head = &bytes[..h.data_offset as usize];
    let mut parser = tessera_gguf::StreamParser::new();
    let mut found = None;
    for c in head.chunks(7) {
        for ev in parser.feed(c).unwrap() {
            if let tessera_gguf::StreamEvent::HeaderComplete(h2) = ev {
                found = Some(h2);
            }
        }
    }
    assert_eq!(found.as_ref(), Some(h));
}
