//! Code-point classes the pre-tokenizers need, and GPT-2's byte <-> character mapping.
//!
//! llama.cpp classifies each code point by its Unicode general category (letter, number, mark,
//! punctuation, symbol, separator, other) plus the `White_Space` property, and every
//! pre-tokenizer decision is made on those flags. We do the same, taking the categories from
//! `unicode-general-category` (exact tables, `no_std`, builds for wasm32).
//!
//! The WordPiece normalizer's lowercase and NFD maps use llama.cpp's own tables
//! (`unicode_data.rs`, generated from them), as its NFD is not standard: it keeps only the
//! first code point of a decomposition.

use unicode_general_category::{get_general_category, GeneralCategory as Gc};

/// The classes of one code point. The zero value means "no code point here" (outside the
/// fragment being split), which is how llama.cpp's splitters see past-the-end positions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpFlags(u16);

impl CpFlags {
    pub const NUMBER: u16 = 1 << 0;
    pub const LETTER: u16 = 1 << 1;
    pub const SEPARATOR: u16 = 1 << 2;
    pub const MARK: u16 = 1 << 3;
    pub const PUNCTUATION: u16 = 1 << 4;
    pub const SYMBOL: u16 = 1 << 5;
    /// Cc, Cf, Cs, Co and unassigned code points (Python's `regex` puts Cn under `\p{C}`).
    pub const OTHER: u16 = 1 << 6;
    pub const WHITESPACE: u16 = 1 << 7;

    pub fn of(cp: u32) -> CpFlags {
        let Some(c) = char::from_u32(cp) else {
            // Surrogates never reach us from a &str; treat them as "other".
            return CpFlags(Self::OTHER);
        };
        let cat = match get_general_category(c) {
            Gc::UppercaseLetter
            | Gc::LowercaseLetter
            | Gc::TitlecaseLetter
            | Gc::ModifierLetter
            | Gc::OtherLetter => Self::LETTER,
            Gc::NonspacingMark | Gc::SpacingMark | Gc::EnclosingMark => Self::MARK,
            Gc::DecimalNumber | Gc::LetterNumber | Gc::OtherNumber => Self::NUMBER,
            Gc::ConnectorPunctuation
            | Gc::DashPunctuation
            | Gc::OpenPunctuation
            | Gc::ClosePunctuation
            | Gc::InitialPunctuation
            | Gc::FinalPunctuation
            | Gc::OtherPunctuation => Self::PUNCTUATION,
            Gc::MathSymbol | Gc::CurrencySymbol | Gc::ModifierSymbol | Gc::OtherSymbol => {
                Self::SYMBOL
            }
            Gc::SpaceSeparator | Gc::LineSeparator | Gc::ParagraphSeparator => Self::SEPARATOR,
            // Cc, Cf, Cs, Co, Cn (and any category a later table adds).
            _ => Self::OTHER,
        };
        let ws = if is_white_space(cp) {
            Self::WHITESPACE
        } else {
            0
        };
        CpFlags(cat | ws)
    }

    /// True for a real code point (false only for the past-the-end zero value).
    pub fn present(self) -> bool {
        self.0 != 0
    }
    pub fn is_letter(self) -> bool {
        self.0 & Self::LETTER != 0
    }
    pub fn is_number(self) -> bool {
        self.0 & Self::NUMBER != 0
    }
    pub fn is_whitespace(self) -> bool {
        self.0 & Self::WHITESPACE != 0
    }
    pub fn is_punctuation(self) -> bool {
        self.0 & Self::PUNCTUATION != 0
    }
    pub fn is_mark(self) -> bool {
        self.0 & Self::MARK != 0
    }
    pub fn is_symbol(self) -> bool {
        self.0 & Self::SYMBOL != 0
    }
    /// `[^\s\p{L}\p{N}]` for a present code point.
    pub fn is_other_than_space_letter_number(self) -> bool {
        self.present() && !(self.is_whitespace() || self.is_letter() || self.is_number())
    }
}

/// The Unicode `White_Space` property (what Python's `regex` module matches with `\s`, from
/// which llama.cpp generated its whitespace table).
pub fn is_white_space(cp: u32) -> bool {
    matches!(
        cp,
        0x09..=0x0D
            | 0x20
            | 0x85
            | 0xA0
            | 0x1680
            | 0x2000..=0x200A
            | 0x2028
            | 0x2029
            | 0x202F
            | 0x205F
            | 0x3000
    )
}

/// llama.cpp's "control" class, `\p{C}` without unassigned code points: Cc, Cf, Co, Cs.
pub fn is_control(c: char) -> bool {
    matches!(
        get_general_category(c),
        Gc::Control | Gc::Format | Gc::PrivateUse | Gc::Surrogate
    )
}

/// llama.cpp's `unicode_tolower`: the simple (one code point) lowercase mapping of UnicodeData,
/// so `İ` gives `i`; `c` itself where there is none.
pub fn to_lower(c: char) -> char {
    let cp = c as u32;
    let runs = &super::unicode_data::LOWERCASE_RUNS;
    let i = runs.partition_point(|&(first, ..)| first <= cp);
    match i.checked_sub(1).map(|i| runs[i]) {
        Some((first, last, step, delta)) if cp <= last && (cp - first).is_multiple_of(step) => {
            char::from_u32(cp.wrapping_add_signed(delta)).unwrap_or(c)
        }
        _ => c,
    }
}

/// llama.cpp's NFD normalization of one code point: the first code point of its canonical
/// decomposition (`é` gives `e`, the accent is dropped, not kept as a second code point).
pub fn nfd_first(c: char) -> char {
    let cp = c as u32;
    let ranges = &super::unicode_data::NFD_RANGES;
    let i = ranges.partition_point(|&(first, ..)| first <= cp);
    match i.checked_sub(1).map(|i| ranges[i]) {
        Some((_, last, nfd)) if cp <= last => char::from_u32(nfd).unwrap_or(c),
        _ => c,
    }
}

/// Code points and their flags for a whole text, computed once per encode.
pub struct CodePoints {
    pub cps: Vec<u32>,
    pub flags: Vec<CpFlags>,
}

impl CodePoints {
    pub fn new(text: &str) -> CodePoints {
        let cps: Vec<u32> = text.chars().map(|c| c as u32).collect();
        let flags = cps.iter().map(|&cp| flags_cached(cp)).collect();
        CodePoints { cps, flags }
    }
}

/// ASCII is by far the most common input; look it up in a table built once.
fn flags_cached(cp: u32) -> CpFlags {
    static ASCII: std::sync::OnceLock<[CpFlags; 128]> = std::sync::OnceLock::new();
    if cp < 128 {
        let table = ASCII.get_or_init(|| std::array::from_fn(|i| CpFlags::of(i as u32)));
        table[cp as usize]
    } else {
        CpFlags::of(cp)
    }
}

/// GPT-2's reversible map from bytes to printable characters: printable Latin-1 bytes map to
/// themselves, the other 68 bytes to U+0100.. in byte order.
pub fn byte_to_char_table() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..256u32 {
        let keeps =
            (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
        let cp = if keeps {
            b
        } else {
            let cp = next;
            next += 1;
            cp
        };
        // Every value here is below 0x144: always a valid char.
        table[b as usize] = char::from_u32(cp).unwrap_or('\u{FFFD}');
    }
    table
}

/// The inverse of [`byte_to_char_table`]: `Some(byte)` for the 256 mapped characters.
pub fn char_to_byte(c: char) -> Option<u8> {
    let cp = c as u32;
    match cp {
        0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF => Some(cp as u8),
        0x100..=0x143 => {
            // The n-th unmapped byte (in byte order) went to U+0100 + n.
            let n = cp - 0x100;
            (0u32..256)
                .filter(|b| {
                    !((0x21..=0x7E).contains(b)
                        || (0xA1..=0xAC).contains(b)
                        || (0xAE..=0xFF).contains(b))
                })
                .nth(n as usize)
                .map(|b| b as u8)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_map_round_trips() {
        let table = byte_to_char_table();
        for b in 0..=255u8 {
            assert_eq!(char_to_byte(table[b as usize]), Some(b), "byte {b}");
        }
        assert_eq!(table[b' ' as usize], '\u{120}');
        assert_eq!(table[b'\n' as usize], '\u{10A}');
        assert_eq!(char_to_byte('a'), Some(b'a'));
        assert_eq!(char_to_byte('\u{144}'), None);
    }

    #[test]
    fn categories() {
        assert!(CpFlags::of('a' as u32).is_letter());
        assert!(CpFlags::of('é' as u32).is_letter());
        assert!(CpFlags::of('7' as u32).is_number());
        assert!(CpFlags::of('²' as u32).is_number());
        assert!(CpFlags::of(' ' as u32).is_whitespace());
        assert!(CpFlags::of(0x3000).is_whitespace());
        assert!(!CpFlags::of(0x1C).is_whitespace());
        assert!(CpFlags::of(',' as u32).is_punctuation());
        assert!(CpFlags::of('+' as u32).is_other_than_space_letter_number());
        assert!(!CpFlags::default().present());
        assert!(CpFlags::of('$' as u32).is_symbol());
        assert!(is_control('\u{200B}') && is_control('\u{7}') && is_control('\u{E000}'));
        // Unassigned code points are not control characters for llama.cpp.
        assert!(!is_control('\u{378}') && !is_control('a'));
    }

    #[test]
    fn lowercase_and_nfd_like_llama_cpp() {
        assert_eq!(to_lower('A'), 'a');
        assert_eq!(to_lower('a'), 'a');
        assert_eq!(to_lower('Ā'), 'ā');
        assert_eq!(to_lower('ā'), 'ā');
        assert_eq!(to_lower('İ'), 'i'); // simple mapping, not "i̇"
        assert_eq!(to_lower('Σ'), 'σ');
        assert_eq!(to_lower('Ж'), 'ж');
        assert_eq!(to_lower('\u{1E921}'), '\u{1E943}'); // the last mapping
        assert_eq!(to_lower('7'), '7');
        assert_eq!(nfd_first('é'), 'e');
        assert_eq!(nfd_first('Å'), 'A');
        assert_eq!(nfd_first('ǖ'), 'u'); // decomposed all the way down
        assert_eq!(nfd_first('한'), '\u{1112}'); // Hangul: the leading jamo
        assert_eq!(nfd_first('\u{2FA1D}'), '\u{2A600}'); // the last range
        assert_eq!(nfd_first('a'), 'a');
        assert_eq!(nfd_first('\0'), '\0');
    }
}
