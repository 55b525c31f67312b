//! llama.cpp's GBNF grammars (`root ::= "yes" | "no"`), converted to the Lark dialect the
//! grammar engine reads, matching the same text.
//!
//! The language is llama.cpp's (its `grammars/README.md` and the parser in
//! `src/llama-grammar.cpp`): rules `name ::= ...` whose names are letters, digits and `-`;
//! string literals and character classes (`[a-z]`, `[^\n]`) with the escapes `\xHH`, `\uHHHH`,
//! `\UHHHHHHHH`, `\t`, `\r`, `\n`, `\\`, `\"`, `\[`, `\]`, `\-`; `.` for any character; groups;
//! `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}`; tokens `<[id]>`, `<text>` and their negations
//! `!<...>`; `#` comments. A rule ends at the end of its line, except inside parentheses and
//! after `|`. `root` is where the text starts.
//!
//! Matching the same text in Lark takes care: the grammar engine splits text into lexemes and
//! ends a lexeme only where the next character cannot continue it (greedy), while GBNF has no
//! lexemes. So every lexeme of the output matches exactly one character (then no lexeme can
//! continue another and the split is never wrong), except a repeated character class whose
//! characters cannot follow the repetition: that whole run is one lexeme, which is what keeps
//! free text (`[^\n]*`) fast. See [`lark`] for the details.

mod charset;
mod lark;
mod parse;
#[cfg(test)]
mod tests;

use charset::CharSet;

/// Deepest nesting of parentheses a grammar may have (deeper ones are refused, never followed
/// into recursion without bound).
pub const MAX_NESTING: usize = 256;

/// Most repetitions `{m}`/`{m,n}` may ask for, as llama.cpp: a larger minimum is refused, a
/// larger maximum means no maximum.
pub const MAX_REPETITIONS: u32 = 2000;

/// A GBNF grammar that cannot be read: where (1-based line and column, the column counted in
/// characters) and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("GBNF line {line}, column {column}: {message}")]
pub struct GbnfError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// `src` (GBNF) as an equivalent Lark grammar for the grammar engine.
pub fn gbnf_to_lark(src: &str) -> Result<String, GbnfError> {
    let grammar = parse::parse(src)?;
    Ok(lark::emit(&grammar))
}

/// Whether `text` is written in GBNF: its first rule, past blank lines and `#` comments, is
/// `name ::=` (Lark's rules are `name:`, and its options start with `%`).
pub fn looks_like_gbnf(text: &str) -> bool {
    for line in text.lines() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let name_end = line
            .find(|c: char| !parse::is_name_char(c))
            .unwrap_or(line.len());
        return name_end > 0 && line[name_end..].trim_start().starts_with("::=");
    }
    false
}

/// A parsed grammar: its rules (`root` among them, every reference defined).
struct Grammar {
    rules: Vec<Rule>,
    root: usize,
}

struct Rule {
    name: String,
    body: Alternatives,
}

/// Alternatives, each a sequence of items.
type Alternatives = Vec<Vec<Item>>;

enum Item {
    /// One character of the set (a character class, `.`, or one character of a literal).
    Char(CharSet),
    /// A string literal's characters in order.
    Literal(Vec<u32>),
    /// Rule number n.
    Rule(usize),
    /// A token, by id or by its text, or (negated) any token but that one.
    Token {
        token: TokenRef,
        negated: bool,
    },
    Group(Alternatives),
    Repeat {
        item: Box<Item>,
        min: u32,
        /// None: no maximum.
        max: Option<u32>,
    },
}

enum TokenRef {
    Id(u32),
    /// The text between `<` and `>`.
    Text(String),
}
