//! SentencePiece-style BPE (`tokenizer.ggml.model = "llama"`, e.g. Gemma): spaces become `▁`,
//! the text is split into UTF-8 characters, and adjacent pieces are merged while their
//! concatenation is a vocabulary token, highest score first (leftmost first among equal
//! scores). Characters that never form a token fall back to `<0xXX>` byte tokens. This is
//! llama.cpp's `llm_tokenizer_spm_session`.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::vocab::Vocab;

/// Tokenize `text` (spaces already escaped to `▁`), appending ids to `out`.
pub fn encode(vocab: &Vocab, text: &str, out: &mut Vec<u32>) {
    let mut symbols: Vec<Symbol> = Vec::with_capacity(text.len());
    for (start, c) in text.char_indices() {
        let i = symbols.len() as i32;
        symbols.push(Symbol {
            start,
            len: c.len_utf8(),
            prev: i - 1,
            next: i + 1,
        });
    }
    if let Some(last) = symbols.last_mut() {
        last.next = -1;
    }
    let mut queue = BinaryHeap::new();
    for i in 1..symbols.len() {
        try_add_bigram(vocab, text, &symbols, &mut queue, i as i32 - 1, i as i32);
    }
    while let Some(bg) = queue.pop() {
        let (l, r) = (bg.left as usize, bg.right as usize);
        let (ls, rs) = (symbols[l], symbols[r]);
        // Outdated: a side was merged away or grew since this pair was queued.
        if ls.len == 0 || rs.len == 0 || ls.len + rs.len != bg.size {
            continue;
        }
        symbols[l].len += rs.len;
        symbols[r].len = 0;
        symbols[l].next = rs.next;
        if rs.next >= 0 {
            symbols[rs.next as usize].prev = l as i32;
        }
        let (prev, next) = (symbols[l].prev, symbols[l].next);
        try_add_bigram(vocab, text, &symbols, &mut queue, prev, l as i32);
        try_add_bigram(vocab, text, &symbols, &mut queue, l as i32, next);
    }
    let mut i = if symbols.is_empty() { -1 } else { 0 };
    while i >= 0 {
        let sym = symbols[i as usize];
        let piece = &text[sym.start..sym.start + sym.len];
        match vocab.id_of(piece) {
            Some(id) => out.push(id),
            // Every merged piece is a token, so only single characters get here.
            None => {
                for &b in piece.as_bytes() {
                    if let Some(id) = vocab.byte_token(b) {
                        out.push(id);
                    }
                }
            }
        }
        i = sym.next;
    }
}

fn try_add_bigram(
    vocab: &Vocab,
    text: &str,
    symbols: &[Symbol],
    queue: &mut BinaryHeap<Bigram>,
    left: i32,
    right: i32,
) {
    if left < 0 || right < 0 {
        return;
    }
    let (l, r) = (symbols[left as usize], symbols[right as usize]);
    // Neighbours in the chain are contiguous in the text.
    let joined = &text[l.start..r.start + r.len];
    if let Some(id) = vocab.id_of(joined) {
        queue.push(Bigram {
            score: vocab.score(id),
            left,
            right,
            size: joined.len(),
        });
    }
}

#[derive(Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: i32,
    next: i32,
}

struct Bigram {
    score: f32,
    left: i32,
    right: i32,
    size: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Bigram {}

impl Ord for Bigram {
    /// Max-heap order: the highest score, then the leftmost pair, comes out first.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .partial_cmp(&other.score)
            .unwrap_or(Ordering::Equal)
            .then(other.left.cmp(&self.left))
    }
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
