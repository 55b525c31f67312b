//! Pre-tokenizers for byte-level BPE: split text into words before merging, exactly the way
//! llama.cpp's `unicode_regex_split` does for each `tokenizer.ggml.pre` value.
//!
//! A pre-tokenizer is a list of steps. Each step re-splits every fragment the previous step
//! produced; text a regex step does not match stays as its own fragment. llama.cpp runs some
//! regexes through hand-written matchers (GPT-2, Llama 3, Qwen 2 patterns: their quirks at
//! fragment ends are part of the result) and the rest through `std::regex` on a "collapsed" text
//! where each non-ASCII code point stands for its category; both are reproduced here on
//! code-point flags.

use super::unicode::{CodePoints, CpFlags};

/// One splitting step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)` (llama.cpp's
    /// hand-written matcher, which also takes `\s+` at the end).
    Gpt2,
    /// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
    Llama3,
    /// Like [`Step::Llama3`] with single digits (`\p{N}` instead of `\p{N}{1,3}`).
    Qwen2,
    /// The o200k (GPT-4o) pattern with its upper/lower-case letter runs and contractions.
    Gpt4o,
    /// Qwen 3.5's pattern: Qwen 2's with combining marks in words and single digits.
    Qwen35,
    /// A regex matching exactly one code point of a class (e.g. `\p{N}`).
    EachOf(Class),
    /// A regex matching a run of one class (e.g. `\p{N}+`).
    RunOf(Class),
    /// An optional whitespace code point, then a run of one class (e.g. `\s?\p{L}+`).
    SpaceThenRunOf(Class),
    /// The same where llama.cpp matches with `std::wregex` (a pattern with non-ASCII
    /// characters): `\s` is then ASCII whitespace only.
    AsciiSpaceThenRunOf(Class),
    /// `\s+$` (`std::wregex`): the ASCII whitespace that ends a fragment.
    TrailingAsciiSpace,
    /// `[^\n]+|[\n]+`: runs of newlines and of everything else (Gemma 4).
    NewlineRuns,
    /// `[0-9][0-9][0-9]`
    ThreeAsciiDigits,
}

/// Character classes used by regex steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// `\p{N}`
    Number,
    /// `[\p{P}\$\+<=>\^~\|]`
    PunctOrMathAscii,
    /// `[\p{P}\$\+<=>\^~\|`]` (Falcon)
    PunctOrMathAsciiBacktick,
    /// `\p{L}`
    Letter,
    /// `\p{P}`
    Punctuation,
    /// `[\r\n]`
    LineBreak,
    /// `[一-龥ࠀ-一가-퟿]` (U+0800..=U+9FA5, U+AC00..=U+D7FF): CJK ideographs, the blocks from
    /// U+0800 up to them, Hangul (DeepSeek's pre-tokenizers; matched on the code points, not
    /// their categories).
    DeepseekCjk,
    /// DeepSeek LLM's letters: the cased letters its pattern lists (`DEEPSEEK_LETTERS`).
    DeepseekLetter,
    /// `[!-/:-~！-／：-～‘-‟　-。]`: ASCII punctuation and letters, their full-width forms, quotes,
    /// ideographic space and punctuation (DeepSeek LLM).
    DeepseekPunct,
}

/// The letter class of DeepSeek LLM's pre-tokenizer pattern (its tokenizer.json), as llama.cpp
/// lists it: single characters and `a-b` ranges.
const DEEPSEEK_LETTERS: &str = "A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃";

/// [`DEEPSEEK_LETTERS`] as sorted inclusive ranges.
fn deepseek_letters() -> &'static [(u32, u32)] {
    static RANGES: std::sync::OnceLock<Vec<(u32, u32)>> = std::sync::OnceLock::new();
    RANGES.get_or_init(|| {
        let cps: Vec<u32> = DEEPSEEK_LETTERS.chars().map(|c| c as u32).collect();
        let mut ranges = Vec::new();
        let mut i = 0;
        while i < cps.len() {
            if i + 2 < cps.len() && cps[i + 1] == '-' as u32 {
                ranges.push((cps[i], cps[i + 2]));
                i += 3;
            } else {
                ranges.push((cps[i], cps[i]));
                i += 1;
            }
        }
        ranges.sort_unstable();
        ranges
    })
}

/// `\s` of `std::wregex` in the C locale.
fn is_ascii_space(cp: u32) -> bool {
    matches!(cp, 0x09..=0x0D | 0x20)
}

impl Class {
    fn matches(self, cp: u32, flags: CpFlags) -> bool {
        match self {
            Class::Number => flags.is_number(),
            Class::PunctOrMathAscii => {
                flags.is_punctuation()
                    || matches!(cp, 0x24 | 0x2B | 0x3C | 0x3D | 0x3E | 0x5E | 0x7E | 0x7C)
            }
            Class::PunctOrMathAsciiBacktick => {
                Class::PunctOrMathAscii.matches(cp, flags) || cp == 0x60
            }
            Class::Letter => flags.is_letter(),
            Class::Punctuation => flags.is_punctuation(),
            Class::LineBreak => matches!(cp, 0x0A | 0x0D),
            Class::DeepseekLetter => {
                let ranges = deepseek_letters();
                let i = ranges.partition_point(|&(lo, _)| lo <= cp);
                i > 0 && cp <= ranges[i - 1].1
            }
            Class::DeepseekPunct => matches!(
                cp,
                0x21..=0x2F | 0x3A..=0x7E | 0xFF01..=0xFF0F | 0xFF1A..=0xFF5E | 0x2018..=0x201F
                    | 0x3000..=0x3002
            ),
            Class::DeepseekCjk => {
                matches!(cp, 0x0800..=0x9FA5 | 0xAC00..=0xD7FF)
            }
        }
    }
}

/// A half-open range of code-point indices.
pub type Span = (usize, usize);

/// Split `text` into words (code-point spans) with `steps`, in order.
pub fn split(cp: &CodePoints, steps: &[Step]) -> Vec<Span> {
    let mut spans = if cp.cps.is_empty() {
        Vec::new()
    } else {
        vec![(0, cp.cps.len())]
    };
    for &step in steps {
        let mut out = Vec::with_capacity(spans.len() * 2);
        for &(ini, end) in &spans {
            let frag = Fragment { cp, ini, end };
            match step {
                Step::Gpt2 => frag.split_gpt2(&mut out),
                Step::Llama3 => frag.split_llama3(&mut out, false),
                Step::Qwen2 => frag.split_llama3(&mut out, true),
                Step::Gpt4o => frag.split_regex(&mut out, |f, pos| f.match_gpt4o(pos)),
                Step::Qwen35 => frag.split_regex(&mut out, |f, pos| f.match_qwen35(pos)),
                Step::EachOf(class) => frag.split_regex(&mut out, |f, pos| {
                    class.matches(f.cp(pos), f.fl(pos)).then_some(pos + 1)
                }),
                Step::RunOf(class) => frag.split_regex(&mut out, |f, pos| f.run_of(class, pos)),
                Step::SpaceThenRunOf(class) => frag.split_regex(&mut out, |f, pos| {
                    let space = f.fl(pos).is_whitespace() && f.run_of(class, pos).is_none();
                    f.run_of(class, if space { pos + 1 } else { pos })
                }),
                Step::AsciiSpaceThenRunOf(class) => frag.split_regex(&mut out, |f, pos| {
                    let space = is_ascii_space(f.cp(pos)) && f.run_of(class, pos).is_none();
                    f.run_of(class, if space { pos + 1 } else { pos })
                }),
                Step::NewlineRuns => frag.split_regex(&mut out, |f, pos| {
                    let newline = f.cp(pos) == 0x0A;
                    let mut e = pos;
                    while e < f.end && (f.cp(e) == 0x0A) == newline {
                        e += 1;
                    }
                    Some(e)
                }),
                Step::TrailingAsciiSpace => frag.split_regex(&mut out, |f, pos| {
                    (pos < f.end && (pos..f.end).all(|p| is_ascii_space(f.cp(p)))).then_some(f.end)
                }),
                Step::ThreeAsciiDigits => frag.split_regex(&mut out, |f, pos| {
                    (pos + 3 <= f.end && (pos..pos + 3).all(|p| (0x30..=0x39).contains(&f.cp(p))))
                        .then_some(pos + 3)
                }),
            }
        }
        spans = out;
    }
    spans
}

const OUT_OF_RANGE: u32 = u32::MAX;

struct Fragment<'a> {
    cp: &'a CodePoints,
    ini: usize,
    end: usize,
}

impl Fragment<'_> {
    /// The end of the run of `class` starting at `pos`, `None` for an empty run.
    fn run_of(&self, class: Class, pos: usize) -> Option<usize> {
        let mut e = pos;
        while e < self.end && class.matches(self.cp(e), self.fl(e)) {
            e += 1;
        }
        (e > pos).then_some(e)
    }

    /// The code point at `pos`, or [`OUT_OF_RANGE`] outside this fragment.
    fn cp(&self, pos: usize) -> u32 {
        if pos >= self.ini && pos < self.end {
            self.cp.cps[pos]
        } else {
            OUT_OF_RANGE
        }
    }

    /// The flags at `pos`, or the empty flags outside this fragment.
    fn fl(&self, pos: usize) -> CpFlags {
        if pos >= self.ini && pos < self.end {
            self.cp.flags[pos]
        } else {
            CpFlags::default()
        }
    }

    /// `'s|'t|'re|'ve|'m|'ll|'d` at `pos`, optionally case-insensitive: the match length.
    fn contraction(&self, pos: usize, fold_case: bool) -> Option<usize> {
        if self.cp(pos) != '\'' as u32 || pos + 1 >= self.end {
            return None;
        }
        let lower = |c: u32| {
            if fold_case && (0x41..=0x5A).contains(&c) {
                c + 32
            } else {
                c
            }
        };
        let c1 = lower(self.cp(pos + 1));
        if [b's', b't', b'm', b'd'].iter().any(|&b| c1 == b as u32) {
            return Some(2);
        }
        if pos + 2 < self.end {
            let c2 = lower(self.cp(pos + 2));
            let pair = |a: u8, b: u8| c1 == a as u32 && c2 == b as u32;
            if pair(b'r', b'e') || pair(b'v', b'e') || pair(b'l', b'l') {
                return Some(3);
            }
        }
        None
    }

    /// llama.cpp's hand-written GPT-2 splitter.
    fn split_gpt2(&self, out: &mut Vec<Span>) {
        let mut words = Words {
            out,
            prev_end: self.ini,
        };
        let mut pos = self.ini;
        while pos < self.end {
            let cpt = self.cp(pos);
            let flags = self.fl(pos);
            if let Some(n) = self.contraction(pos, false) {
                pos += n;
                words.add(pos);
                continue;
            }
            let space = cpt == ' ' as u32;
            let mut flags2 = if space { self.fl(pos + 1) } else { flags };
            if flags2.is_letter() || flags2.is_number() {
                let letter = flags2.is_letter();
                let same = |f: CpFlags| if letter { f.is_letter() } else { f.is_number() };
                pos += space as usize;
                while same(flags2) {
                    pos += 1;
                    flags2 = self.fl(pos);
                }
                words.add(pos);
                continue;
            }
            if flags2.is_other_than_space_letter_number() {
                pos += space as usize;
                while flags2.is_other_than_space_letter_number() {
                    pos += 1;
                    flags2 = self.fl(pos);
                }
                words.add(pos);
                continue;
            }
            let n_ws = self.count_whitespace(pos);
            if n_ws > 1 && self.cp(pos + n_ws) != OUT_OF_RANGE {
                pos += n_ws - 1;
                words.add(pos);
                continue;
            }
            if n_ws > 0 {
                pos += n_ws;
                words.add(pos);
                continue;
            }
            pos += 1;
            words.add(pos);
        }
    }

    /// llama.cpp's hand-written Llama 3 splitter; `single_digits` gives the Qwen 2 variant.
    fn split_llama3(&self, out: &mut Vec<Span>, single_digits: bool) {
        let mut words = Words {
            out,
            prev_end: self.ini,
        };
        let mut pos = self.ini;
        let is_rn = |c: u32| c == '\r' as u32 || c == '\n' as u32;
        while pos < self.end {
            let cpt = self.cp(pos);
            let flags = self.fl(pos);
            if let Some(n) = self.contraction(pos, true) {
                pos += n;
                words.add(pos);
                continue;
            }
            // [^\r\n\p{L}\p{N}]?\p{L}+
            if !(is_rn(cpt) || flags.is_number())
                && (flags.is_letter() || self.fl(pos + 1).is_letter())
            {
                pos += 1;
                while self.fl(pos).is_letter() {
                    pos += 1;
                }
                words.add(pos);
                continue;
            }
            // \p{N}{1,3} (or \p{N})
            if flags.is_number() {
                if single_digits {
                    pos += 1;
                    words.add(pos);
                    continue;
                }
                let mut ini = pos;
                while self.fl(pos).is_number() {
                    pos += 1;
                    if pos - ini >= 3 {
                        words.add(pos);
                        ini = pos;
                    }
                }
                words.add(pos);
                continue;
            }
            // <space>?[^\s\p{L}\p{N}]+[\r\n]*  (llama.cpp tests `flags`, not `flags2`, for presence)
            let mut flags2 = if cpt == ' ' as u32 {
                self.fl(pos + 1)
            } else {
                flags
            };
            if !(flags2.is_whitespace() || flags2.is_letter() || flags2.is_number())
                && flags.present()
            {
                pos += (cpt == ' ' as u32) as usize;
                while flags2.is_other_than_space_letter_number() {
                    pos += 1;
                    flags2 = self.fl(pos);
                }
                while is_rn(self.cp(pos)) {
                    pos += 1;
                }
                words.add(pos);
                continue;
            }
            let mut n_ws = 0;
            let mut last_rn_end = 0;
            while self.fl(pos + n_ws).is_whitespace() {
                if is_rn(self.cp(pos + n_ws)) {
                    last_rn_end = pos + n_ws + 1;
                }
                n_ws += 1;
            }
            // \s*[\r\n]+
            if last_rn_end > 0 {
                pos = last_rn_end;
                words.add(pos);
                continue;
            }
            // \s+(?!\S)
            if n_ws > 1 && self.cp(pos + n_ws) != OUT_OF_RANGE {
                pos += n_ws - 1;
                words.add(pos);
                continue;
            }
            // \s+
            if n_ws > 0 {
                pos += n_ws;
                words.add(pos);
                continue;
            }
            pos += 1;
            words.add(pos);
        }
    }

    fn count_whitespace(&self, pos: usize) -> usize {
        let mut n = 0;
        while self.fl(pos + n).is_whitespace() {
            n += 1;
        }
        n
    }

    /// `std::regex_iterator` semantics: every match is a word, and so is each run of
    /// unmatched text between matches. `matcher(pos)` returns the end of a (non-empty) match
    /// starting at `pos`.
    fn split_regex(&self, out: &mut Vec<Span>, matcher: impl Fn(&Self, usize) -> Option<usize>) {
        let mut gap_start = self.ini;
        let mut pos = self.ini;
        while pos < self.end {
            match matcher(self, pos) {
                Some(end) => {
                    if pos > gap_start {
                        out.push((gap_start, pos));
                    }
                    out.push((pos, end));
                    pos = end;
                    gap_start = end;
                }
                None => pos += 1,
            }
        }
        if gap_start < self.end {
            out.push((gap_start, self.end));
        }
    }

    /// The o200k pattern, as an ECMAScript (backtracking, ordered alternation) regex would
    /// match it on llama.cpp's collapsed text:
    /// `[^\r\n\p{L}\p{N}]?U*L+C?|[^\r\n\p{L}\p{N}]?U+L*C?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
    /// where U is a letter other than a-z, L a letter other than A-Z (non-ASCII letters are
    /// both) and C an optional `'s|'t|'re|'ve|'m|'ll|'d` in either case.
    fn match_gpt4o(&self, pos: usize) -> Option<usize> {
        let is_rn = |c: u32| c == '\r' as u32 || c == '\n' as u32;
        let is_upper = |p: usize| self.fl(p).is_letter() && !(0x61..=0x7A).contains(&self.cp(p));
        let is_lower = |p: usize| self.fl(p).is_letter() && !(0x41..=0x5A).contains(&self.cp(p));
        let with_contraction = |e: usize| e + self.contraction(e, true).unwrap_or(0);
        let cpt = self.cp(pos);
        let flags = self.fl(pos);
        let prefix_ok = flags.present() && !(is_rn(cpt) || flags.is_letter() || flags.is_number());
        let starts: &[usize] = if prefix_ok { &[1, 0] } else { &[0] };
        // Alternative 1: prefix? U* L+ C?
        for &skip in starts {
            let s = pos + skip;
            let mut upper_end = s;
            while is_upper(upper_end) {
                upper_end += 1;
            }
            // Backtrack U* until L+ can start.
            let mut k = upper_end;
            loop {
                if is_lower(k) {
                    let mut e = k;
                    while is_lower(e) {
                        e += 1;
                    }
                    return Some(with_contraction(e));
                }
                if k == s {
                    break;
                }
                k -= 1;
            }
        }
        // Alternative 2: prefix? U+ L* C?
        for &skip in starts {
            let s = pos + skip;
            if is_upper(s) {
                let mut e = s;
                while is_upper(e) {
                    e += 1;
                }
                while is_lower(e) {
                    e += 1;
                }
                return Some(with_contraction(e));
            }
        }
        // \p{N}{1,3}
        if flags.is_number() {
            let mut e = pos;
            while e < pos + 3 && self.fl(e).is_number() {
                e += 1;
            }
            return Some(e);
        }
        // ' ?[^\s\p{L}\p{N}]+[\r\n/]*'
        let other_start =
            if cpt == ' ' as u32 && self.fl(pos + 1).is_other_than_space_letter_number() {
                Some(pos + 1)
            } else if flags.is_other_than_space_letter_number() {
                Some(pos)
            } else {
                None
            };
        if let Some(mut e) = other_start {
            while self.fl(e).is_other_than_space_letter_number() {
                e += 1;
            }
            while matches!(self.cp(e), 0x0D | 0x0A | 0x2F) {
                e += 1;
            }
            return Some(e);
        }
        self.match_whitespace(pos)
    }

    /// Qwen 3.5's pattern, as an ECMAScript regex matches it on llama.cpp's collapsed text:
    /// `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
    fn match_qwen35(&self, pos: usize) -> Option<usize> {
        if let Some(n) = self.contraction(pos, true) {
            return Some(pos + n);
        }
        let word = |p: usize| self.fl(p).is_letter() || self.fl(p).is_mark();
        let word_end = |s: usize| {
            let mut e = s;
            while word(e) {
                e += 1;
            }
            e
        };
        let (cpt, flags) = (self.cp(pos), self.fl(pos));
        let is_rn = |c: u32| c == 0x0D || c == 0x0A;
        // [^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+ : with the prefix first, then without.
        if flags.present() && !(is_rn(cpt) || flags.is_letter() || flags.is_number()) {
            let e = word_end(pos + 1);
            if e > pos + 1 {
                return Some(e);
            }
        }
        let e = word_end(pos);
        if e > pos {
            return Some(e);
        }
        if flags.is_number() {
            return Some(pos + 1);
        }
        // ' ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*'
        let other = |p: usize| {
            let f = self.fl(p);
            f.present() && !(f.is_whitespace() || f.is_letter() || f.is_mark() || f.is_number())
        };
        let start = if cpt == 0x20 && other(pos + 1) {
            Some(pos + 1)
        } else if other(pos) {
            Some(pos)
        } else {
            None
        };
        if let Some(mut e) = start {
            while other(e) {
                e += 1;
            }
            while is_rn(self.cp(e)) {
                e += 1;
            }
            return Some(e);
        }
        self.match_whitespace(pos)
    }

    /// The whitespace alternatives several patterns end with: `\s*[\r\n]+|\s+(?!\S)|\s+`.
    fn match_whitespace(&self, pos: usize) -> Option<usize> {
        let is_rn = |c: u32| c == '\r' as u32 || c == '\n' as u32;
        let n_ws = self.count_whitespace(pos);
        if n_ws == 0 {
            return None;
        }
        // \s*[\r\n]+ : backtracking ends right after the last \r or \n of the run.
        if let Some(last) = (pos..pos + n_ws).rev().find(|&p| is_rn(self.cp(p))) {
            return Some(last + 1);
        }
        // \s+(?!\S)
        if self.cp(pos + n_ws) == OUT_OF_RANGE {
            return Some(pos + n_ws);
        }
        if n_ws > 1 {
            return Some(pos + n_ws - 1);
        }
        // \s+
        Some(pos + n_ws)
    }
}

/// Collects words the way llama.cpp's `_add_token` does: from the previous end to `end`,
/// skipping empty ones.
struct Words<'a> {
    out: &'a mut Vec<Span>,
    prev_end: usize,
}

impl Words<'_> {
    fn add(&mut self, end: usize) {
        if end > self.prev_end {
            self.out.push((self.prev_end, end));
        }
        self.prev_end = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str, steps: &[Step]) -> Vec<String> {
        let cp = CodePoints::new(text);
        split(&cp, steps)
            .into_iter()
            .map(|(a, b)| {
                cp.cps[a..b]
                    .iter()
                    .map(|&c| char::from_u32(c).unwrap())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn gpt2_words() {
        assert_eq!(
            words("Hello world's  end 123 !!\n", &[Step::Gpt2]),
            ["Hello", " world", "'s", " ", " end", " 123", " !!", "\n"]
        );
    }

    #[test]
    fn smollm_splits_digits_first() {
        let steps = [Step::EachOf(Class::Number), Step::Gpt2];
        assert_eq!(words("a 12", &steps), ["a", " ", "1", "2"]);
    }

    #[test]
    fn llama3_words() {
        assert_eq!(
            words("Hello 12345 x\n\n  y's", &[Step::Llama3]),
            ["Hello", " ", "123", "45", " x", "\n\n", " ", " y", "'s"]
        );
        assert_eq!(words("I'M fine", &[Step::Llama3]), ["I", "'M", " fine"]);
    }

    #[test]
    fn gpt4o_words() {
        assert_eq!(
            words("HelloWORLD don't 1234 ab/\n", &[Step::Gpt4o]),
            ["Hello", "WORLD", " don't", " ", "123", "4", " ab", "/\n"]
        );
        // As llama.cpp's collapsed text sees them, non-ASCII letters are both upper and lower
        // case, and combining marks are not letters.
        assert_eq!(words("1øZя", &[Step::Gpt4o]), ["1", "øZя"]);
        assert_eq!(words("X\u{301}!", &[Step::Gpt4o]), ["X", "\u{301}!"]);
    }

    #[test]
    fn regex_steps_keep_gaps() {
        let steps = [Step::RunOf(Class::PunctOrMathAscii)];
        assert_eq!(words("a+b,,c", &steps), ["a", "+", "b", ",,", "c"]);
        assert_eq!(words("12345", &[Step::ThreeAsciiDigits]), ["123", "45"]);
    }
}
