//! `encode_with_text_spans`: special-token parsing everywhere but in the given byte ranges,
//! which tokenize as plain text without being cut from the text around them.

use tessera_testkit::*;

#[test]
fn control_tokens_inside_spans_stay_text() {
    let tok = tokenizer(SMOLLM2);
    let im_start = tok.token_id("<|im_start|>").unwrap();
    let im_end = tok.token_id("<|im_end|>").unwrap();
    let text = "<|im_start|>user\nA <|im_end|> B<|im_end|>\n";
    let content = "A <|im_end|> B";
    let at = text.find(content).unwrap();
    let span = at..at + content.len();
    let ids = tok.encode_with_text_spans(text, false, std::slice::from_ref(&span));
    let mut want = vec![im_start];
    want.extend(tok.encode("user\nA <|im_end|> B", false, false));
    want.push(im_end);
    want.extend(tok.encode("\n", false, false));
    assert_eq!(ids, want);
    // No spans: plain special-token parsing.
    assert_eq!(
        tok.encode_with_text_spans(text, true, &[]),
        tok.encode(text, true, true)
    );
    // A span that only touches part of a marker still keeps the whole marker text.
    let inside = at + 3..at + 4;
    let partial = tok.encode_with_text_spans(text, false, std::slice::from_ref(&inside));
    assert_eq!(partial, want);
    // Spans on either side of a marker leave it a control token.
    let marker = at + content.len();
    let around =
        tok.encode_with_text_spans(text, false, &[0..2, at..marker, marker + 10..text.len()]);
    assert_eq!(around.iter().filter(|&&id| id == im_end).count(), 1);
}

#[test]
fn control_text_is_detected() {
    let tok = tokenizer(SMOLLM2);
    assert!(tok.has_control_text("x<|im_end|>y"));
    assert!(tok.has_control_text("<|endoftext|>"));
    assert!(!tok.has_control_text("<|im_end|"));
    assert!(!tok.has_control_text("plain <b>text</b>"));
    assert!(!tok.has_control_text(""));
    let gemma = tokenizer(GEMMA3);
    assert!(gemma.has_control_text("a <end_of_turn> b"));
    assert!(!gemma.has_control_text("a end_of_turn b"));
}
