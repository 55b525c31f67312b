//! Byte-level BPE (`tokenizer.ggml.model = "gpt2"`): each pre-tokenized word is turned into
//! GPT-2's byte characters and merged by rank, lowest rank first and leftmost first among
//! equal ranks, as llama.cpp's `llm_tokenizer_bpe_session` does. Gemma 4's SentencePiece-style
//! BPE (`"gemma4"`, [`BpeModel::raw`]) merges the word's UTF-8 characters instead.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use super::pretokenize::{self, Step};
use super::unicode::{byte_to_char_table, CodePoints};
use super::vocab::Vocab;

/// Merge tables over interned strings: ids below `n_vocab` are the vocabulary's tokens, the
/// rest are merge halves/results that are not tokens themselves.
pub struct BpeModel {
    /// (left, right) -> (rank, merged string id). The first listing of a pair wins.
    merges: HashMap<(u32, u32), (u32, u32)>,
    /// The interned id of each byte's GPT-2 character, if that string is known at all.
    byte_sym: [Option<u32>; 256],
    /// The GPT-2 character of each byte, UTF-8 encoded (for the unknown-symbol fallback).
    byte_text: Vec<String>,
    /// Interned ids at or above this are not vocabulary tokens.
    n_vocab: u32,
    pub steps: Vec<Step>,
    /// Llama-3 style: a whole word that is a token is emitted without merging.
    pub ignore_merges: bool,
    /// Gemma 4: symbols are the word's UTF-8 characters (spaces arrive as `▁`), a word of
    /// newlines that is a token is emitted whole, and a symbol that is no token falls back to
    /// `<0xXX>` byte tokens.
    pub raw: bool,
    /// Interned strings that are not tokens (merge halves), for [`BpeModel::raw`]'s lookups.
    extra: HashMap<String, u32>,
}

impl BpeModel {
    /// `merges` are the `tokenizer.ggml.merges` strings ("left right").
    pub fn new(
        vocab: &Vocab,
        merges: &[&str],
        steps: Vec<Step>,
        ignore_merges: bool,
        raw: bool,
    ) -> BpeModel {
        let n_vocab = vocab.len() as u32;
        let mut extra: HashMap<String, u32> = HashMap::new();
        let intern = |s: &str, extra: &mut HashMap<String, u32>| -> u32 {
            if let Some(id) = vocab.id_of(s) {
                return id;
            }
            let next = n_vocab + extra.len() as u32;
            *extra.entry(s.to_owned()).or_insert(next)
        };
        let mut table = HashMap::with_capacity(merges.len());
        for (rank, m) in merges.iter().enumerate() {
            // Split at the first space after the first byte (a half may itself be " ").
            let space = m
                .as_bytes()
                .iter()
                .skip(1)
                .position(|&b| b == b' ')
                .map(|i| i + 1);
            let (left, right) = match space {
                Some(i) => (&m[..i], &m[i + 1..]),
                None => ("", ""),
            };
            let l = intern(left, &mut extra);
            let r = intern(right, &mut extra);
            let mut joined = String::with_capacity(left.len() + right.len());
            joined.push_str(left);
            joined.push_str(right);
            let merged = intern(&joined, &mut extra);
            table.entry((l, r)).or_insert((rank as u32, merged));
        }
        let chars = byte_to_char_table();
        let byte_text: Vec<String> = chars.iter().map(|c| c.to_string()).collect();
        let byte_sym = std::array::from_fn(|b| {
            vocab
                .id_of(&byte_text[b])
                .or_else(|| extra.get(&byte_text[b]).copied())
        });
        BpeModel {
            merges: table,
            byte_sym,
            byte_text,
            n_vocab,
            steps,
            ignore_merges,
            raw,
            extra,
        }
    }

    /// Tokenize one raw-text fragment (no special tokens inside), appending ids to `out`.
    pub fn encode(&self, vocab: &Vocab, text: &str, out: &mut Vec<u32>) {
        let cp = CodePoints::new(text);
        let spans = pretokenize::split(&cp, &self.steps);
        // Byte offsets of each code point, to slice words out of `text`.
        let mut byte_at = Vec::with_capacity(cp.cps.len() + 1);
        let mut off = 0;
        for c in text.chars() {
            byte_at.push(off);
            off += c.len_utf8();
        }
        byte_at.push(off);
        let mut scratch = Scratch::default();
        for (a, b) in spans {
            let word = &text.as_bytes()[byte_at[a]..byte_at[b]];
            self.encode_word(vocab, word, out, &mut scratch);
        }
    }

    fn encode_word(&self, vocab: &Vocab, word: &[u8], out: &mut Vec<u32>, s: &mut Scratch) {
        if self.ignore_merges {
            let encoded: String = word
                .iter()
                .map(|&b| self.byte_text[b as usize].as_str())
                .collect();
            if let Some(id) = vocab.id_of(&encoded) {
                out.push(id);
                return;
            }
        }
        s.symbols.clear();
        s.queue.clear();
        if self.raw {
            if self.raw_symbols(vocab, word, out, s) {
                return;
            }
        } else {
            self.byte_symbols(word, s);
        }
        for i in 1..s.symbols.len() {
            self.push_bigram(s, i as i32 - 1, i as i32);
        }
        while let Some(bg) = s.queue.pop() {
            let (l, r) = (bg.left as usize, bg.right as usize);
            let (ls, rs) = (s.symbols[l], s.symbols[r]);
            // Outdated: one side was merged away or grew since this pair was queued.
            if ls.len == 0 || rs.len == 0 || ls.id != Some(bg.left_id) || rs.id != Some(bg.right_id)
            {
                continue;
            }
            s.symbols[l].len += rs.len;
            s.symbols[l].id = Some(bg.merged);
            s.symbols[r].len = 0;
            s.symbols[l].next = rs.next;
            if rs.next >= 0 {
                s.symbols[rs.next as usize].prev = l as i32;
            }
            let (prev, next) = (s.symbols[l].prev, s.symbols[l].next);
            self.push_bigram(s, prev, l as i32);
            self.push_bigram(s, l as i32, next);
        }
        for sym in s.symbols.iter().filter(|sym| sym.len > 0) {
            match sym.id.filter(|&id| id < self.n_vocab) {
                Some(id) => out.push(id),
                None if self.raw => {
                    // Gemma 4's byte fallback: a `<0xXX>` token per byte.
                    for &b in &word[sym.start as usize..(sym.start + sym.len) as usize] {
                        out.extend(vocab.id_of(&format!("<0x{b:02X}>")));
                    }
                }
                None => {
                    // llama.cpp looks each byte of the symbol's GPT-2 text up as a one-byte token.
                    let bytes = &word[sym.start as usize..(sym.start + sym.len) as usize];
                    for &b in bytes {
                        for &tb in self.byte_text[b as usize].as_bytes() {
                            if let Ok(one) = std::str::from_utf8(std::slice::from_ref(&tb)) {
                                if let Some(id) = vocab.id_of(one) {
                                    out.push(id);
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// One symbol per byte: its GPT-2 character's interned id.
    fn byte_symbols(&self, word: &[u8], s: &mut Scratch) {
        for (i, &b) in word.iter().enumerate() {
            s.symbols.push(Symbol {
                id: self.byte_sym[b as usize],
                start: i as u32,
                len: 1,
                prev: i as i32 - 1,
                next: if i + 1 == word.len() {
                    -1
                } else {
                    i as i32 + 1
                },
            });
        }
    }

    /// One symbol per UTF-8 character ([`BpeModel::raw`]). A word of newlines that is a token
    /// goes to `out` whole instead: then this returns true (nothing left to merge).
    fn raw_symbols(&self, vocab: &Vocab, word: &[u8], out: &mut Vec<u32>, s: &mut Scratch) -> bool {
        let Ok(text) = std::str::from_utf8(word) else {
            return true;
        };
        if text.bytes().all(|b| b == b'\n') {
            if let Some(id) = vocab.id_of(text) {
                out.push(id);
                return true;
            }
        }
        let n = text.chars().count();
        for (i, (at, c)) in text.char_indices().enumerate() {
            let ch = &text[at..at + c.len_utf8()];
            s.symbols.push(Symbol {
                id: vocab.id_of(ch).or_else(|| self.extra.get(ch).copied()),
                start: at as u32,
                len: c.len_utf8() as u32,
                prev: i as i32 - 1,
                next: if i + 1 == n { -1 } else { i as i32 + 1 },
            });
        }
        false
    }

    fn push_bigram(&self, s: &mut Scratch, left: i32, right: i32) {
        if left < 0 || right < 0 {
            return;
        }
        let (Some(l), Some(r)) = (s.symbols[left as usize].id, s.symbols[right as usize].id) else {
            return;
        };
        if let Some(&(rank, merged)) = self.merges.get(&(l, r)) {
            s.queue.push(Bigram {
                rank,
                left,
                right,
                left_id: l,
                right_id: r,
                merged,
            });
        }
    }
}

#[derive(Clone, Copy)]
struct Symbol {
    /// Interned string id; `None` for a byte whose character appears nowhere in vocab/merges.
    id: Option<u32>,
    start: u32,
    len: u32,
    prev: i32,
    next: i32,
}

#[derive(Default)]
struct Scratch {
    symbols: Vec<Symbol>,
    queue: BinaryHeap<Bigram>,
}

#[derive(PartialEq, Eq)]
struct Bigram {
    rank: u32,
    left: i32,
    right: i32,
    left_id: u32,
    right_id: u32,
    merged: u32,
}

impl Ord for Bigram {
    /// Max-heap order: the lowest rank, then the leftmost pair, comes out first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.rank.cmp(&self.rank).then(other.left.cmp(&self.left))
    }
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
