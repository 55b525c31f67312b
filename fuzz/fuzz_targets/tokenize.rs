//! Tokenization of arbitrary bytes with real vocabularies: SmolLM2's and Gemma 3's (the test
//! models) and llama.cpp's tokenizer test vocabularies (`models/vocab`: BPE with each
//! pre-tokenizer, SentencePiece, WordPiece). The first byte picks the tokenizer, the second
//! what to do: encode the rest as text (lossy UTF-8) with or without BOS and special-token
//! parsing, or with special-token parsing kept out of byte ranges drawn from the input; or
//! decode the rest as token ids (any u32, out-of-vocabulary ones included), at once and through
//! the streaming decoder. Nothing may panic; ids stay in the vocabulary; the streaming decoder
//! gives the same text as `decode`; byte-level BPE gives its text back.
//!
//! `TESSERA_MODELS` names the models folder (default: the repository's `models/`).
#![no_main]

use std::ops::Range;
use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tessera_tokenizer::{StreamDecoder, Tokenizer};

fn tokenizers() -> &'static [(String, Tokenizer)] {
    static ALL: OnceLock<Vec<(String, Tokenizer)>> = OnceLock::new();
    ALL.get_or_init(|| {
        let dir = std::env::var_os("TESSERA_MODELS")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../models")));
        let mut paths = vec![
            dir.join("SmolLM2-135M-Instruct.Q4_1.gguf"),
            dir.join("gemma-3-270m-q4_k_m.gguf"),
        ];
        let mut vocab: Vec<PathBuf> = std::fs::read_dir(dir.join("vocab"))
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        vocab.retain(|p| p.extension().is_some_and(|x| x == "gguf"));
        vocab.sort();
        paths.extend(vocab);
        let all: Vec<(String, Tokenizer)> = paths
            .iter()
            .filter_map(|p| {
                let file = tessera_gguf::GgufFile::open(p).ok()?;
                let tok = Tokenizer::from_gguf(file.header()).ok()?;
                Some((p.file_name()?.to_string_lossy().into_owned(), tok))
            })
            .collect();
        assert!(
            all.len() >= 2,
            "no tokenizers under {}: set TESSERA_MODELS (scripts/fetch-models.sh)",
            dir.display()
        );
        all
    })
}

fuzz_target!(
    // Loading every vocabulary takes seconds: before the clock of the first input starts.
    init: {
        tokenizers();
    },
    |data: &[u8]| run(data)
);

fn run(data: &[u8]) {
    let [pick, mode, rest @ ..] = data else {
        return;
    };
    let all = tokenizers();
    let (name, tok) = &all[*pick as usize % all.len()];
    if mode & 0x80 != 0 {
        decode(tok, rest, mode & 1 == 1);
        return;
    }
    let text = String::from_utf8_lossy(rest);
    let (add_special, parse_special) = (mode & 1 == 1, mode & 2 == 2);
    let ids = if mode & 4 == 4 {
        tok.encode_with_text_spans(&text, add_special, &spans(&text, *mode))
    } else {
        tok.encode(&text, add_special, parse_special)
    };
    let n_vocab = tok.vocab_size();
    assert!(
        ids.iter().all(|&id| (id as usize) < n_vocab),
        "{name}: id out of range"
    );
    let back = tok.decode(&ids, true);
    // Byte-level BPE without special tokens or BOS is lossless, but for the spaces that
    // decoding cleans up (" ." becomes ".").
    let cleaned = |t: &str| t.replace(" ", "");
    if name.contains("gpt-2") && !add_special && !parse_special && mode & 4 == 0 {
        assert_eq!(cleaned(&back), cleaned(&text), "{name}: round trip");
    }
}

/// Sorted, disjoint byte ranges of `text` on character boundaries, drawn from `seed`.
fn spans(text: &str, seed: u8) -> Vec<Range<usize>> {
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .enumerate()
        .filter(|(k, _)| (k * 7 + seed as usize) % 5 == 0)
        .map(|(_, i)| i)
        .collect();
    bounds
        .chunks_exact(2)
        .map(|w| w[0]..w[1])
        .filter(|r| !r.is_empty())
        .collect()
}

/// Decodes `bytes` as little-endian token ids, whole and streamed.
fn decode(tok: &Tokenizer, bytes: &[u8], special: bool) {
    // Mostly ids inside the vocabulary, so that the decoders do real work; the rest anything.
    let n_vocab = tok.vocab_size().max(1) as u32;
    let ids: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .map(|id| if id >> 31 == 0 { id % n_vocab } else { id })
        .collect();
    let _ = tok.decode(&ids, special);
    // The stream gives the pieces' bytes as text, whole characters only, U+FFFD for the rest.
    let mut stream = StreamDecoder::new(tok, special);
    let mut streamed = String::new();
    let mut pieces = Vec::new();
    for &id in &ids {
        streamed.push_str(&stream.push(id));
        pieces.extend(tok.token_to_piece(id, special));
    }
    streamed.push_str(&stream.finish());
    assert_eq!(streamed, String::from_utf8_lossy(&pieces));
}
