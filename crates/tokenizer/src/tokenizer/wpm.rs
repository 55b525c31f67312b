//! WordPiece (`tokenizer.ggml.model = "bert"`), llama.cpp's `llm_tokenizer_wpm_session`. The
//! text is normalized as BERT's normalizer does it in llama.cpp (each code point to the first
//! one of its NFD decomposition, accent marks and control characters dropped, lowercased) and
//! split into words at whitespace; punctuation, ASCII symbols and CJK ideographs are words of
//! their own. Each word, prefixed with `▁` (GGUF's spelling of a word start; continuation
//! pieces have no `##`), is covered from the left by the longest vocabulary tokens; a word that
//! cannot be covered entirely becomes one unknown token.

use super::unicode::{is_control, nfd_first, to_lower, CpFlags};
use super::vocab::Vocab;

pub struct WpmModel {
    /// The longest token text in bytes: no match is looked for beyond it.
    max_token_len: usize,
    /// `tokenizer.ggml.normalizer.lowercase` (true by default).
    lowercase: bool,
    /// `tokenizer.ggml.normalizer.strip_accents` (as `lowercase` by default): NFD, then marks
    /// dropped.
    strip_accents: bool,
}

impl WpmModel {
    pub fn new(vocab: &Vocab, lowercase: bool, strip_accents: bool) -> WpmModel {
        let max_token_len = (0..vocab.len() as u32)
            .filter_map(|id| vocab.text(id))
            .map(str::len)
            .max()
            .unwrap_or(0);
        WpmModel {
            max_token_len,
            lowercase,
            strip_accents,
        }
    }

    /// Tokenize one raw fragment, appending ids to `out` (`unk` for words no tokens cover).
    pub fn encode(&self, vocab: &Vocab, unk: Option<u32>, text: &str, out: &mut Vec<u32>) {
        let mut word = String::new();
        for w in self.words(text) {
            word.clear();
            word.push('\u{2581}');
            word.push_str(&w);
            let start = out.len();
            let mut i = 0;
            while i < word.len() {
                let end = word.len().min(i + self.max_token_len);
                let longest = (i + 1..=end)
                    .rev()
                    .find_map(|j| Some((j, vocab.id_of(word.get(i..j)?)?)));
                match longest {
                    Some((j, id)) => {
                        out.push(id);
                        i = j;
                    }
                    None => {
                        out.truncate(start);
                        break;
                    }
                }
            }
            if out.len() == start {
                out.extend(unk);
            }
        }
    }

    /// The normalized words of `text` (llama.cpp's `preprocess`), none empty.
    fn words(&self, text: &str) -> Vec<String> {
        let mut words = vec![String::new()];
        for c in text.chars() {
            let c = if self.strip_accents { nfd_first(c) } else { c };
            let flags = CpFlags::of(c as u32);
            if flags.is_whitespace() {
                if words.last().is_some_and(|w| !w.is_empty()) {
                    words.push(String::new());
                }
                continue;
            }
            if c == '\0' || c == '\u{FFFD}' || is_control(c) {
                continue;
            }
            if self.strip_accents && flags.is_mark() {
                continue;
            }
            let out = if self.lowercase { to_lower(c) } else { c };
            let alone = flags.is_punctuation()
                || ((c as u32) < 0x7F && flags.is_symbol())
                || is_cjk(c as u32);
            if alone {
                // A word of its own, then a new word.
                if words.last().is_some_and(|w| w.is_empty()) {
                    words.pop();
                }
                words.push(out.to_string());
                words.push(String::new());
            } else if let Some(w) = words.last_mut() {
                w.push(out);
            }
        }
        if words.last().is_some_and(|w| w.is_empty()) {
            words.pop();
        }
        words
    }
}

/// The CJK ideograph blocks BERT splits into single characters (llama.cpp's
/// `is_chinese_char`, with Hugging Face's 0x2B920 start of the fifth extension range).
fn is_cjk(cp: u32) -> bool {
    matches!(
        cp,
        0x4E00..=0x9FFF
            | 0x3400..=0x4DBF
            | 0x20000..=0x2A6DF
            | 0x2A700..=0x2B73F
            | 0x2B740..=0x2B81F
            | 0x2B920..=0x2CEAF
            | 0xF900..=0xFAFF
            | 0x2F800..=0x2FA1F
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(tokens: &[&str]) -> (Vocab, WpmModel) {
        let vocab =
            Vocab::new(tokens.iter().map(|t| t.to_string()).collect(), None, None).expect("vocab");
        let wpm = WpmModel::new(&vocab, true, true);
        (vocab, wpm)
    }

    #[test]
    fn normalizes_with_nfd_first_and_lowercase() {
        let (_, wpm) = model(&["[UNK]"]);
        // NFD keeps the base letter, the combining mark of "e\u{301}" is dropped, İ is i.
        assert_eq!(wpm.words("Café E\u{301}TÉ İx"), ["cafe", "ete", "ix"]);
        // Controls, NUL and U+FFFD vanish; any whitespace separates.
        assert_eq!(wpm.words(" a\u{200B}b\0\u{FFFD}c\u{3000}d\n"), ["abc", "d"]);
        let keep = WpmModel {
            lowercase: false,
            strip_accents: false,
            ..wpm
        };
        assert_eq!(keep.words("Café"), ["Café"]);
    }

    #[test]
    fn splits_punctuation_ascii_symbols_and_cjk() {
        let (_, wpm) = model(&["[UNK]"]);
        assert_eq!(
            wpm.words("Hello, world!!"),
            ["hello", ",", "world", "!", "!"]
        );
        // ASCII symbols stand alone; other symbols (€, ©) stay in the word.
        assert_eq!(wpm.words("a+b=c€©"), ["a", "+", "b", "=", "c€©"]);
        assert_eq!(wpm.words("x中文y"), ["x", "中", "文", "y"]);
        assert!(wpm.words("  ").is_empty());
    }

    #[test]
    fn longest_match_and_unknown_words() {
        let (vocab, wpm) = model(&[
            "[UNK]", "▁un", "▁unaff", "able", "aff", "▁a", "▁,", "▁!", "▁hello",
        ]);
        let enc = |text: &str| {
            let mut out = Vec::new();
            wpm.encode(&vocab, Some(0), text, &mut out);
            out
        };
        // "▁unaff" + "able", not "▁un" + "aff" + "able".
        assert_eq!(enc("Unaffable"), [2, 3]);
        assert_eq!(enc("hello, a!"), [8, 6, 5, 7]);
        // One piece that is no token turns the whole word into [UNK].
        assert_eq!(enc("unaffablex hello"), [0, 8]);
        assert_eq!(enc("zzz"), [0]);
        assert!(enc("").is_empty());
    }
}
