//! The project's two test models parse, every tensor lies inside the file, and the stream
//! parser agrees with the mmap reader.

use std::path::PathBuf;

use gguf::{GgmlType, GgufFile};

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
