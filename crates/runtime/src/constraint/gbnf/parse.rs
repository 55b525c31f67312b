//! GBNF text to a [`Grammar`], following llama.cpp's parser (`src/llama-grammar.cpp`) in what
//! it accepts; its error messages say where, in lines and columns.

use std::collections::HashMap;

use super::charset::{CharSet, MAX_CHAR};
use super::{Alternatives, GbnfError, Grammar, Item, Rule, TokenRef, MAX_NESTING, MAX_REPETITIONS};

/// Whether `c` may be part of a rule name (llama.cpp: ASCII letters, digits and `-`).
pub fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-'
}

pub fn parse(src: &str) -> Result<Grammar, GbnfError> {
    let mut parser = Parser {
        src,
        pos: 0,
        ids: HashMap::new(),
        names: Vec::new(),
        bodies: Vec::new(),
        first_use: Vec::new(),
    };
    parser.skip_space(true);
    while !parser.at_end() {
        parser.rule()?;
    }
    parser.finish()
}

struct Parser<'a> {
    src: &'a str,
    /// Byte offset of the next character.
    pos: usize,
    ids: HashMap<&'a str, usize>,
    names: Vec<&'a str>,
    /// Each rule's definition (the last one, as llama.cpp keeps it), None until defined.
    bodies: Vec<Option<Alternatives>>,
    /// Where each rule was first named (for the error if it is never defined).
    first_use: Vec<usize>,
}

impl<'a> Parser<'a> {
    fn finish(self) -> Result<Grammar, GbnfError> {
        let Some(&root) = self.ids.get("root") else {
            return Err(self.error_at(0, "the grammar has no rule named 'root'"));
        };
        if let Some(undefined) = self.bodies.iter().position(Option::is_none) {
            let name = self.names[undefined];
            return Err(self.error_at(
                self.first_use[undefined],
                format!("rule '{name}' is used but never defined"),
            ));
        }
        let rules = self
            .names
            .iter()
            .zip(self.bodies)
            .map(|(name, body)| Rule {
                name: (*name).to_owned(),
                body: body.unwrap_or_default(),
            })
            .collect();
        Ok(Grammar { rules, root })
    }

    fn rule(&mut self) -> Result<(), GbnfError> {
        let start = self.pos;
        let name = self.name()?;
        let id = self.rule_id(name, start);
        self.skip_space(false);
        if !self.rest().starts_with("::=") {
            return Err(self.error("expected '::=' after the rule name"));
        }
        self.pos += 3;
        self.skip_space(true);
        let body = self.alternatives(false, 0)?;
        self.bodies[id] = Some(body);
        match self.peek() {
            Some('\r') => {
                self.pos += 1;
                if self.peek() == Some('\n') {
                    self.pos += 1;
                }
            }
            Some('\n') => self.pos += 1,
            None => {}
            Some(c) => {
                return Err(self.error(format!("unexpected {c:?}: expected the end of the line")))
            }
        }
        self.skip_space(true);
        Ok(())
    }

    fn alternatives(&mut self, nested: bool, depth: usize) -> Result<Alternatives, GbnfError> {
        let mut alternatives = vec![self.sequence(nested, depth)?];
        while self.peek() == Some('|') {
            self.pos += 1;
            self.skip_space(true);
            alternatives.push(self.sequence(nested, depth)?);
        }
        Ok(alternatives)
    }

    fn sequence(&mut self, nested: bool, depth: usize) -> Result<Vec<Item>, GbnfError> {
        let mut items: Vec<Item> = Vec::new();
        // How many repetitions the last item already has (`x**` nests one in another).
        let mut stacked = 0;
        while let Some(c) = self.peek() {
            let start = self.pos;
            match c {
                '"' => {
                    self.pos += 1;
                    let mut chars = Vec::new();
                    loop {
                        match self.peek() {
                            None => return Err(self.error_at(start, "unterminated string literal")),
                            Some('"') => break,
                            Some(_) => chars.push(self.literal_char()?),
                        }
                    }
                    self.pos += 1;
                    items.push(Item::Literal(chars));
                }
                '[' => {
                    self.pos += 1;
                    items.push(Item::Char(self.class(start)?));
                }
                '<' | '!' => items.push(self.token()?),
                '(' => {
                    if depth + 1 >= MAX_NESTING {
                        return Err(self.error(format!(
                            "parentheses nested deeper than {MAX_NESTING} levels"
                        )));
                    }
                    self.pos += 1;
                    self.skip_space(true);
                    let group = self.alternatives(true, depth + 1)?;
                    if self.peek() != Some(')') {
                        return Err(self.error("expected ')'"));
                    }
                    self.pos += 1;
                    items.push(Item::Group(group));
                }
                '.' => {
                    self.pos += 1;
                    items.push(Item::Char(CharSet::any()));
                }
                '*' | '+' | '?' | '{' => {
                    let (min, max) = self.repetition(nested)?;
                    let Some(item) = items.pop() else {
                        return Err(
                            self.error_at(start, format!("'{c}' must follow something to repeat"))
                        );
                    };
                    stacked += 1;
                    if depth + stacked >= MAX_NESTING {
                        return Err(self.error_at(
                            start,
                            format!("repetitions nested deeper than {MAX_NESTING} levels"),
                        ));
                    }
                    items.push(repeat(item, min, max));
                    self.skip_space(nested);
                    continue;
                }
                c if is_name_char(c) => {
                    let name = self.name()?;
                    items.push(Item::Rule(self.rule_id(name, start)));
                }
                _ => break,
            }
            stacked = 0;
            self.skip_space(nested);
        }
        Ok(items)
    }

    /// `*`, `+`, `?` or `{m}`, `{m,}`, `{m,n}`: the least and most repetitions.
    fn repetition(&mut self, nested: bool) -> Result<(u32, Option<u32>), GbnfError> {
        let start = self.pos;
        let c = self.peek();
        self.pos += 1;
        match c {
            Some('*') => return Ok((0, None)),
            Some('+') => return Ok((1, None)),
            Some('?') => return Ok((0, Some(1))),
            _ => {}
        }
        // `{`: spaces may surround the numbers (line ends too inside parentheses), as
        // llama.cpp reads them.
        self.skip_space(nested);
        let min = self.count()?;
        self.skip_space(nested);
        let max = match self.peek() {
            Some('}') => Some(min),
            Some(',') => {
                self.pos += 1;
                self.skip_space(nested);
                let max = match self.peek() {
                    Some(c) if c.is_ascii_digit() => Some(self.count()?),
                    _ => None,
                };
                self.skip_space(nested);
                if self.peek() != Some('}') {
                    return Err(self.error("expected '}'"));
                }
                max
            }
            _ => return Err(self.error("expected ',' or '}'")),
        };
        self.pos += 1;
        if min > MAX_REPETITIONS {
            return Err(self.error_at(
                start,
                format!("at most {MAX_REPETITIONS} repetitions may be required"),
            ));
        }
        if max.is_some_and(|max| max < min) {
            let max = max.unwrap_or(0);
            return Err(self.error_at(
                start,
                format!("the most repetitions ({max}) is below the least ({min})"),
            ));
        }
        let max = max.filter(|&m| m <= MAX_REPETITIONS);
        Ok((min, max))
    }

    /// A decimal count (saturating: any count past [`MAX_REPETITIONS`] reads as too many).
    fn count(&mut self) -> Result<u32, GbnfError> {
        let digits = self.rest().bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(self.error("expected a number"));
        }
        let text = &self.rest()[..digits];
        self.pos += digits;
        Ok(text.parse().unwrap_or(u32::MAX))
    }

    /// A character class, after its `[` (at `start`).
    fn class(&mut self, start: usize) -> Result<CharSet, GbnfError> {
        let negated = self.peek() == Some('^');
        if negated {
            self.pos += 1;
        }
        if self.peek() == Some(']') {
            // llama.cpp reads `[]` as nothing at all, which it then cannot repeat.
            return Err(self.error_at(start, "empty character class"));
        }
        let mut ranges = Vec::new();
        loop {
            match self.peek() {
                None => return Err(self.error_at(start, "unterminated character class")),
                Some(']') => break,
                Some(_) => {}
            }
            let lo = self.class_char(start)?;
            let rest = self.rest().as_bytes();
            let hi = if rest.first() == Some(&b'-') && rest.get(1).is_some_and(|&b| b != b']') {
                self.pos += 1;
                self.class_char(start)?
            } else {
                lo
            };
            ranges.push((lo, hi));
        }
        self.pos += 1;
        let set = CharSet::from_ranges(&ranges);
        Ok(if negated { set.complement() } else { set })
    }

    /// One character of the class starting at `start`: any code point (ranges may reach past
    /// what text holds).
    fn class_char(&mut self, start: usize) -> Result<u32, GbnfError> {
        match self.peek() {
            None => Err(self.error_at(start, "unterminated character class")),
            Some('\\') => self.escape(),
            Some(c) => {
                self.pos += c.len_utf8();
                Ok(c as u32)
            }
        }
    }

    /// One character of a string literal: a character text can hold.
    fn literal_char(&mut self) -> Result<u32, GbnfError> {
        let start = self.pos;
        let c = match self.peek() {
            Some('\\') => self.escape()?,
            Some(c) => {
                self.pos += c.len_utf8();
                c as u32
            }
            None => return Err(self.error("unterminated string literal")),
        };
        if char::from_u32(c).is_none() {
            return Err(self.error_at(
                start,
                format!("U+{c:04X} is not a character (a surrogate or past U+10FFFF)"),
            ));
        }
        Ok(c)
    }

    fn escape(&mut self) -> Result<u32, GbnfError> {
        let start = self.pos;
        self.pos += 1;
        let Some(c) = self.peek() else {
            return Err(self.error_at(start, "'\\' at the end of the grammar"));
        };
        self.pos += c.len_utf8();
        let hex_digits = match c {
            'x' => 2,
            'u' => 4,
            'U' => 8,
            't' => return Ok('\t' as u32),
            'r' => return Ok('\r' as u32),
            'n' => return Ok('\n' as u32),
            '\\' | '"' | '[' | ']' | '-' => return Ok(c as u32),
            _ => return Err(self.error_at(start, format!("unknown escape '\\{c}'"))),
        };
        let digits = self
            .rest()
            .get(..hex_digits)
            .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()));
        let Some(digits) = digits else {
            return Err(self.error_at(
                start,
                format!("'\\{c}' takes exactly {hex_digits} hexadecimal digits"),
            ));
        };
        self.pos += hex_digits;
        let value = u32::from_str_radix(digits, 16).unwrap_or(u32::MAX);
        if value > MAX_CHAR && c == 'U' {
            return Err(self.error_at(start, format!("U+{value:X} is past U+10FFFF")));
        }
        Ok(value)
    }

    /// `<[id]>`, `<text>`, or either after `!`.
    fn token(&mut self) -> Result<Item, GbnfError> {
        let start = self.pos;
        let negated = self.peek() == Some('!');
        if negated {
            self.pos += 1;
        }
        if self.peek() != Some('<') {
            return Err(self.error("expected '<' (a token) after '!'"));
        }
        self.pos += 1;
        let token = if self.peek() == Some('[') {
            self.pos += 1;
            let digits = self.rest().bytes().take_while(u8::is_ascii_digit).count();
            let id = self.rest()[..digits].parse::<u32>();
            let Ok(id) = id else {
                return Err(self.error("expected a token id (a number up to 4294967295)"));
            };
            self.pos += digits;
            if !self.rest().starts_with("]>") {
                return Err(self.error("expected ']>' after the token id"));
            }
            self.pos += 2;
            TokenRef::Id(id)
        } else {
            let Some(len) = self.rest().find('>') else {
                return Err(self.error("expected '>' to end the token"));
            };
            let text = &self.rest()[..len];
            // The grammar engine names a token by its text only without spaces or '<', and
            // cannot negate a token named so.
            if text.is_empty() || text.contains(|c: char| c.is_whitespace() || c == '<') {
                return Err(self.error(
                    "a token named by its text may not be empty or hold spaces or '<': name it by id, <[id]>",
                ));
            }
            if negated {
                return Err(self.error_at(
                    start,
                    "'!' before a token named by its text is not supported: name it by id, !<[id]>",
                ));
            }
            self.pos += len + 1;
            // `<` and `>` are part of the token's text.
            TokenRef::Text(format!("<{text}>"))
        };
        Ok(Item::Token { token, negated })
    }

    fn name(&mut self) -> Result<&'a str, GbnfError> {
        let rest = &self.src[self.pos..];
        let len = rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len());
        if len == 0 {
            return Err(self.error("expected a rule name"));
        }
        self.pos += len;
        Ok(&rest[..len])
    }

    fn rule_id(&mut self, name: &'a str, at: usize) -> usize {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.names.len();
        self.ids.insert(name, id);
        self.names.push(name);
        self.bodies.push(None);
        self.first_use.push(at);
        id
    }

    /// Skips spaces, tabs and comments, and line ends where `newlines` allows them.
    fn skip_space(&mut self, newlines: bool) {
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' => self.pos += 1,
                '\r' | '\n' if newlines => self.pos += 1,
                '#' => {
                    let rest = self.rest();
                    self.pos += rest.find(['\r', '\n']).unwrap_or(rest.len());
                }
                _ => break,
            }
        }
    }

    fn rest(&self) -> &'a str {
        &self.src[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn at_end(&self) -> bool {
        self.pos >= self.src.len()
    }

    fn error(&self, message: impl Into<String>) -> GbnfError {
        self.error_at(self.pos, message)
    }

    fn error_at(&self, at: usize, message: impl Into<String>) -> GbnfError {
        let before = &self.src[..at.min(self.src.len())];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        GbnfError {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
            message: message.into(),
        }
    }
}

fn repeat(item: Item, min: u32, max: Option<u32>) -> Item {
    Item::Repeat {
        item: Box::new(item),
        min,
        max,
    }
}
