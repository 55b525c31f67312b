//! Detokenization, round trips, end-of-generation ids, streaming and speed.

use std::time::Instant;

use tessera_testkit::*;
use tessera_tokenizer::{StreamDecoder, Tokenizer};

const EXTRA_TEXTS: &[&str] = &[
    "emoji 😀👍🏽 and flags 🇫🇷",
    "combining: e\u{301} a\u{308} — dashes – and “quotes”",
    "tabs\tand\r\nwindows newlines\n\n\nthree",
    "  leading and trailing  ",
    "ÆØÅ æøå ß ẞ İı",
    "日本語 한국어 ภาษาไทย हिन्दी",
    "don't I'M we've they'll it's 'quoted'",
];

fn plain_texts() -> Vec<String> {
    let mut v: Vec<String> = tokenize_cases("tokenize_smollm2.jsonl")
        .into_iter()
        .map(|c| c.text)
        .collect();
    v.extend(EXTRA_TEXTS.iter().map(|s| s.to_string()));
    v.push("x".repeat(300));
    v
}

fn round_trip(tok: &Tokenizer) {
    for text in plain_texts() {
        let ids = tok.encode(&text, false, false);
        assert_eq!(tok.decode(&ids, true), text, "ids {ids:?}");
    }
}

#[test]
fn smollm2_round_trips() {
    round_trip(&tokenizer(SMOLLM2));
}

#[test]
fn gemma3_round_trips() {
    round_trip(&tokenizer(GEMMA3));
}

#[test]
fn smollm2_special_tokens_and_eog() {
    let tok = tokenizer(SMOLLM2);
    assert_eq!(tok.vocab_size(), 49152);
    assert_eq!(tok.bos(), Some(1));
    assert_eq!(tok.eos(), Some(2));
    assert!(!tok.add_bos());
    assert_eq!(tok.token_text(1), Some("<|im_start|>"));
    // <|endoftext|> and <|im_end|> end generation; <|im_start|> does not.
    assert!(tok.is_eog(0) && tok.is_eog(2) && !tok.is_eog(1));
    assert!(!tok.is_eog(19556));
    // Control tokens render only with `special`.
    let ids = tok.encode("<|im_start|>user\nHi<|im_end|>", false, true);
    assert_eq!(ids[0], 1);
    assert_eq!(tok.decode(&ids, true), "<|im_start|>user\nHi<|im_end|>");
    assert_eq!(tok.decode(&ids, false), "user\nHi");
    // GPT-2 byte characters decode to bytes: "Ġ" is a space, "Ċ" a newline.
    assert_eq!(tok.token_text(216), Some("Ġ"));
    assert_eq!(tok.token_to_piece(216, false), b" ");
    assert_eq!(tok.token_to_piece(198, false), b"\n");
    assert!(tok.token_to_piece(10_000_000, true).is_empty());
}

#[test]
fn gemma3_special_tokens_and_eog() {
    let tok = tokenizer(GEMMA3);
    assert_eq!(tok.vocab_size(), 262144);
    assert_eq!((tok.bos(), tok.eos()), (Some(2), Some(1)));
    assert!(tok.add_bos());
    assert_eq!(tok.encode("", true, true), [2]);
    assert!(tok.encode("", false, true).is_empty());
    // <eos>, <end_of_turn> and (as llama.cpp treats it) </s> end generation.
    assert!(tok.is_eog(1) && tok.is_eog(106) && tok.is_eog(212));
    assert!(!tok.is_eog(2) && !tok.is_eog(105));
    // No space prefix for Gemma, so nothing is stripped when decoding.
    let ids = tok.encode(" Hello", true, true);
    assert_eq!(tok.decode(&ids, false), " Hello");
    assert_eq!(tok.decode(&ids, true), "<bos> Hello");
    // Byte-fallback tokens are single bytes.
    let e4 = tok.token_id("<0xE4>").expect("byte token");
    assert_eq!(tok.token_to_piece(e4, false), [0xE4]);
    // SentencePiece spaces become real spaces.
    assert_eq!(tok.token_to_piece(5830, false), b" leading");
}

#[test]
fn stream_decoder_holds_back_split_characters() {
    let tok = tokenizer(GEMMA3);
    let bytes: Vec<u32> = "你😀"
        .bytes()
        .map(|b| tok.token_id(&format!("<0x{b:02X}>")).unwrap())
        .collect();
    let mut dec = StreamDecoder::new(&tok, false);
    let outs: Vec<String> = bytes.iter().map(|&id| dec.push(id)).collect();
    assert_eq!(outs, ["", "", "你", "", "", "", "😀"]);
    assert_eq!(dec.finish(), "");

    // An unfinished character at the end is flushed as U+FFFD; a stray byte is replaced at once.
    let mut dec = StreamDecoder::new(&tok, false);
    assert_eq!(dec.push(bytes[0]), "");
    assert_eq!(dec.pending().len(), 1);
    assert_eq!(dec.finish(), "\u{FFFD}");
    let stray = tok.token_id("<0xBF>").unwrap();
    assert_eq!(dec.push(stray) + &dec.push(5830), "\u{FFFD} leading");
}

#[test]
fn stream_decoder_matches_decode_on_byte_level_bpe() {
    let tok = tokenizer(SMOLLM2);
    for text in plain_texts() {
        let ids = tok.encode(&text, false, false);
        let mut dec = StreamDecoder::new(&tok, true);
        let mut streamed = String::new();
        for &id in &ids {
            streamed += &dec.push(id);
        }
        streamed += &dec.finish();
        assert_eq!(streamed, tok.decode(&ids, true));
    }
    // The emoji is several byte-level tokens: the decoder emits it whole, once.
    let ids = tok.encode("😀", false, false);
    assert!(ids.len() > 1, "{ids:?}");
    let mut dec = StreamDecoder::new(&tok, false);
    let outs: Vec<String> = ids.iter().map(|&id| dec.push(id)).collect();
    assert_eq!(outs.concat(), "😀");
    assert!(
        outs[..outs.len() - 1].iter().all(String::is_empty),
        "{outs:?}"
    );
}

#[test]
fn encoding_a_long_text_is_fast() {
    let path = "/usr/share/common-licenses/GPL-3";
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    for model in [SMOLLM2, GEMMA3] {
        let tok = tokenizer(model);
        let t = Instant::now();
        let ids = tok.encode(&text, true, false);
        let secs = t.elapsed().as_secs_f64();
        eprintln!(
            "{model}: {} bytes -> {} tokens in {:.1} ms",
            text.len(),
            ids.len(),
            secs * 1e3
        );
        assert!(secs < 1.0, "{model}: encoding GPL-3 took {secs:.2} s");
        assert_eq!(tok.decode(&ids, false), text);
    }
}
