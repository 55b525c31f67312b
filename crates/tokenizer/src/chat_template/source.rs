//! Checks on a template's source before minijinja compiles it: compiling is not free either.
//! minijinja's parser builds an operator chain (`a ~ b ~ c ...`) as a tree as deep as the
//! chain, which its compiler and destructor then walk recursively, so a long enough chain in
//! one tag overflows the stack; and it folds constant expressions while compiling, so
//! `'x' * 99999999` allocates 100 MB before anything runs. Each tag (`{{ ... }}`, `{% ... %}`)
//! may hold at most [`MAX_TAG_TOKENS`] tokens, and the constants the template's tags could fold
//! into at most [`MAX_FOLDED_BYTES`] bytes in all.

use minijinja::machinery::{tokenize, Token, WhitespaceConfig};

use super::limits::MAX_SOURCE_BYTES;
use super::ChatTemplateError;

/// Most tokens in one tag. The longest tag of llama.cpp's 70 real templates has 56; 500 keeps
/// an expression's depth far from the stack's limits (a chain of 2,000 operators fits in
/// 512 KiB; the browser's wasm stack is 1 MiB).
pub const MAX_TAG_TOKENS: usize = 500;

/// Most bytes of constants the template may fold while compiling (a bound worked out from the
/// tags' literals: their strings' bytes times their integers, for tags that multiply).
pub const MAX_FOLDED_BYTES: u64 = 16 << 20;

/// The source's size, each tag's length and the constants the tags could fold, checked with
/// minijinja's own lexer (as `ChatTemplate` configures it). A source the lexer rejects is left
/// to the compiler, which reports the syntax error.
pub(super) fn check(source: &str) -> Result<(), ChatTemplateError> {
    if source.len() > MAX_SOURCE_BYTES {
        return Err(limit(format!(
            "the template is {} bytes (at most {MAX_SOURCE_BYTES})",
            source.len()
        )));
    }
    let ws = WhitespaceConfig {
        keep_trailing_newline: false,
        lstrip_blocks: true,
        trim_blocks: true,
    };
    let mut tag = Tag::default();
    let mut folded = 0u64;
    for token in tokenize(source, false, Default::default(), ws) {
        let Ok((token, span)) = token else {
            return Ok(());
        };
        match token {
            Token::VariableStart | Token::BlockStart => tag = Tag::default(),
            Token::VariableEnd | Token::BlockEnd => {
                folded = folded.saturating_add(tag.folded_bound());
                if folded > MAX_FOLDED_BYTES {
                    return Err(limit(format!(
                        "the template's constant expressions could make more than {MAX_FOLDED_BYTES} bytes (line {})",
                        span.start_line
                    )));
                }
            }
            Token::TemplateData(_) => {}
            token => {
                tag.add(&token);
                if tag.tokens > MAX_TAG_TOKENS {
                    return Err(limit(format!(
                        "a tag of more than {MAX_TAG_TOKENS} tokens (line {})",
                        span.start_line
                    )));
                }
            }
        }
    }
    Ok(())
}

fn limit(msg: String) -> ChatTemplateError {
    ChatTemplateError::Limit(msg)
}

/// What one tag holds that bounds the constants it folds.
#[derive(Default)]
struct Tag {
    tokens: usize,
    string_bytes: u64,
    int_sum: u64,
    multiplications: u32,
    powers: u32,
    lists: u64,
}

impl Tag {
    fn add(&mut self, token: &Token) {
        self.tokens += 1;
        match token {
            Token::Str(s) => self.string_bytes += s.len() as u64,
            Token::String(s) => self.string_bytes += s.len() as u64,
            Token::Int(n) => self.int_sum = self.int_sum.saturating_add(*n),
            Token::Int128(_) => self.int_sum = u64::MAX,
            // A float repeats as its integer (`'x' * 1e8` is `'x' * 100000000`); `as` saturates.
            Token::Float(f) if *f > 0.0 => self.int_sum = self.int_sum.saturating_add(*f as u64),
            // A list literal (or a subscript: counted alike, harmlessly) that a multiplication
            // can repeat: folding `[] * n` makes a list minijinja steps through n times.
            Token::BracketOpen => self.lists += 1,
            Token::Mul => self.multiplications += 1,
            Token::Pow => self.powers += 1,
            _ => {}
        }
    }

    /// Strings and lists grow only by repetition (`*`); concatenation only adds. A repeat
    /// count is at most the sum of the tag's numbers raised to its number of multiplications,
    /// and anything once a power is involved. A list counts one per literal, whatever it
    /// holds: repeating even an empty one costs a step per repetition.
    fn folded_bound(&self) -> u64 {
        let repeatable = self.string_bytes.saturating_add(self.lists);
        let strings = repeatable.max(1);
        if self.multiplications + self.powers == 0 || repeatable == 0 {
            return strings;
        }
        if self.powers > 0 && self.int_sum > 1 {
            return u64::MAX;
        }
        strings.saturating_mul(self.int_sum.max(1).saturating_pow(self.multiplications))
    }
}
