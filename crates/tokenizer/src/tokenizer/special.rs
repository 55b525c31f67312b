//! Special-token partitioning (llama.cpp's `tokenizer_st_partition`): before the model's
//! tokenizer runs, the text of control, user-defined and unknown tokens is cut out of the input
//! and emitted as single ids. Tokens are tried longest first; each one splits every remaining
//! raw fragment at its leftmost non-overlapping occurrences. With `parse_special` off only
//! user-defined tokens are cut out.
//!
//! Instead of searching every fragment once per special token (Gemma has 6,000+ of them), all
//! occurrences are found in one pass over the text with a trie, and only the tokens that
//! occur are then applied in priority order, which yields the same fragments.

use std::ops::Range;

use super::vocab::{attr, Vocab};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fragment {
    /// Byte range of the input to tokenize normally.
    Raw(usize, usize),
    Token(u32),
}

pub struct SpecialTokens {
    /// Candidate ids in priority order: longer text first, then lower id.
    by_priority: Vec<u32>,
    /// Priority rank of each candidate id (index into `by_priority`), via the trie's values.
    trie: Trie,
}

impl SpecialTokens {
    pub fn new(vocab: &Vocab) -> SpecialTokens {
        let mut by_priority: Vec<u32> = (0..vocab.len() as u32)
            .filter(|&id| vocab.has_attr(id, attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN))
            .collect();
        let len_of = |id: u32| vocab.text(id).map_or(0, str::len);
        by_priority.sort_by(|&a, &b| len_of(b).cmp(&len_of(a)).then(a.cmp(&b)));
        let mut trie = Trie::default();
        for (rank, &id) in by_priority.iter().enumerate() {
            if let Some(text) = vocab.text(id) {
                trie.insert(text.as_bytes(), rank as u32);
            }
        }
        SpecialTokens { by_priority, trie }
    }

    /// Cut special tokens out of `text`. Within the byte ranges `literal` (sorted, disjoint)
    /// control and unknown tokens are not matched, as if `parse_special` were off there: an
    /// occurrence that overlaps one of them stays text.
    pub fn partition(
        &self,
        vocab: &Vocab,
        text: &str,
        parse_special: bool,
        literal: &[Range<usize>],
    ) -> Vec<Fragment> {
        if text.is_empty() {
            return Vec::new();
        }
        let gated = |id: u32| vocab.has_attr(id, attr::CONTROL | attr::UNKNOWN);
        // Every occurrence (rank, start), overlapping ones included.
        let bytes = text.as_bytes();
        let mut occurrences: Vec<(u32, usize)> = Vec::new();
        let mut next_literal = 0; // the first range that ends after `start`
        for start in 0..bytes.len() {
            while literal.get(next_literal).is_some_and(|r| r.end <= start) {
                next_literal += 1;
            }
            self.trie.for_each_match(&bytes[start..], |rank, len| {
                let id = self.by_priority[rank as usize];
                let in_literal = literal
                    .get(next_literal)
                    .is_some_and(|r| r.start < start + len);
                if !gated(id) || (parse_special && !in_literal) {
                    occurrences.push((rank, start));
                }
            });
        }
        let mut fragments = vec![Fragment::Raw(0, bytes.len())];
        if occurrences.is_empty() {
            return fragments;
        }
        occurrences.sort_unstable();
        let mut i = 0;
        while i < occurrences.len() {
            let rank = occurrences[i].0;
            let mut j = i;
            while j < occurrences.len() && occurrences[j].0 == rank {
                j += 1;
            }
            let starts: Vec<usize> = occurrences[i..j].iter().map(|o| o.1).collect();
            let id = self.by_priority[rank as usize];
            fragments = apply_token(vocab, bytes, &fragments, id, &starts);
            i = j;
        }
        fragments
    }

    /// Whether `text` holds the text of a control or unknown token: what `parse_special`
    /// decides about.
    pub fn has_gated_text(&self, vocab: &Vocab, text: &str) -> bool {
        let bytes = text.as_bytes();
        (0..bytes.len()).any(|start| {
            let mut found = false;
            self.trie.for_each_match(&bytes[start..], |rank, _| {
                found |= vocab.has_attr(
                    self.by_priority[rank as usize],
                    attr::CONTROL | attr::UNKNOWN,
                );
            });
            found
        })
    }
}

/// Split every raw fragment at the leftmost non-overlapping occurrences of token `id`, whose
/// occurrence start offsets in the whole text are `starts` (sorted).
fn apply_token(
    vocab: &Vocab,
    bytes: &[u8],
    fragments: &[Fragment],
    id: u32,
    starts: &[usize],
) -> Vec<Fragment> {
    let len = vocab.text(id).map_or(0, str::len);
    let lstrip = vocab.has_attr(id, attr::LSTRIP);
    let rstrip = vocab.has_attr(id, attr::RSTRIP);
    let mut out = Vec::with_capacity(fragments.len() + 2);
    for &frag in fragments {
        let Fragment::Raw(begin, end) = frag else {
            out.push(frag);
            continue;
        };
        let mut base = begin;
        let first = starts.partition_point(|&s| s < begin);
        for &s in &starts[first..] {
            if s + len > end {
                break;
            }
            if s < base {
                continue; // overlaps the previous match
            }
            let mut left_end = s;
            if lstrip {
                while left_end > base && is_c_space(bytes[left_end - 1]) {
                    left_end -= 1;
                }
            }
            if left_end > base {
                out.push(Fragment::Raw(base, left_end));
            }
            out.push(Fragment::Token(id));
            base = s + len;
            if rstrip {
                while base < end && is_c_space(bytes[base]) {
                    base += 1;
                }
            }
        }
        if base < end {
            out.push(Fragment::Raw(base, end));
        }
    }
    out
}

/// C's `isspace` in the "C" locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

/// A byte trie whose nodes may carry a value (the priority rank of a token ending there).
#[derive(Default)]
struct Trie {
    nodes: Vec<Node>,
}

#[derive(Default)]
struct Node {
    /// Sorted by byte.
    children: Vec<(u8, u32)>,
    value: Option<u32>,
}

impl Trie {
    fn insert(&mut self, key: &[u8], value: u32) {
        if self.nodes.is_empty() {
            self.nodes.push(Node::default());
        }
        let mut node = 0usize;
        for &b in key {
            let children = &self.nodes[node].children;
            node = match children.binary_search_by_key(&b, |c| c.0) {
                Ok(i) => children[i].1 as usize,
                Err(i) => {
                    let new = self.nodes.len() as u32;
                    self.nodes[node].children.insert(i, (b, new));
                    self.nodes.push(Node::default());
                    new as usize
                }
            };
        }
        // Token texts are unique, so a node holds at most one value.
        self.nodes[node].value.get_or_insert(value);
    }

    /// Call `f` with the value and length of every key that is a prefix of `text`.
    fn for_each_match(&self, text: &[u8], mut f: impl FnMut(u32, usize)) {
        if self.nodes.is_empty() {
            return;
        }
        let mut node = 0usize;
        for (depth, &b) in text.iter().enumerate() {
            let children = &self.nodes[node].children;
            match children.binary_search_by_key(&b, |c| c.0) {
                Ok(i) => node = children[i].1 as usize,
                Err(_) => return,
            }
            if let Some(v) = self.nodes[node].value {
                f(v, depth + 1);
            }
        }
    }
}
