//! A parsed GBNF [`Grammar`] as Lark text for the grammar engine.
//!
//! Every GBNF rule becomes a Lark rule (lowercase, so never a terminal: terminals are regular
//! languages lexed greedily, which GBNF rules are not); `root` becomes `start`, and other names
//! are lowercased and made unique. Items become lexemes of one character each: a literal
//! `"ab"` is `"a" "b"`, a class is `/[...]/`. A repeated set of characters (`[a-z]*`,
//! `[^"]{1,8}`, `(" " | "\t")+`) becomes a single lexeme `/[a-z]+/?` where that is exact:
//! when no character of the set may follow the repetition (computed from the grammar's
//! first/follow sets), or when the count is fixed. Then the greedy lexer ends the run exactly
//! where GBNF's would. The one case this misses: text read two ways up to where the run starts,
//! one way going on with the run and the other needing it cut short (`[a-z]* "!" | "a" "b" "?"`
//! does not match `ab?`: the lexer has taken `ab` into the run). Telling these apart needs the
//! parse, not the grammar, so they are left as they are: rare, and never a wrong acceptance of
//! text outside the grammar.
//!
//! Groups nest in parentheses up to [`MAX_LARK_NESTING`] deep (the Lark reader allows 30);
//! deeper ones become rules of their own.

use std::cell::Cell;
use std::collections::HashSet;

use super::charset::CharSet;
use super::{Alternatives, Grammar, Item, TokenRef};

/// Deepest parenthesized group written inline; deeper groups become rules.
const MAX_LARK_NESTING: usize = 20;

/// Passes the first/follow computation may take, and work (items visited and ranges merged)
/// it may do: past either (only a contrived grammar needs more), no repetition becomes a
/// single lexeme, which is exact, only slower.
const MAX_ANALYSIS_PASSES: usize = 64;
const MAX_ANALYSIS_WORK: u64 = 10_000_000;

/// How deep a repeated rule's definition is followed to see whether it is a character set,
/// and how many ranges such a set may have (it is written out wherever the rule is repeated).
const MAX_SET_DEPTH: usize = 8;
const MAX_INLINE_RANGES: usize = 32;

/// Most text the runs made single lexemes may take in all (a rule's set written out at each of
/// its repetitions could otherwise make the output many times the input).
const MAX_RUN_BYTES: usize = 256 << 10;

pub fn emit(grammar: &Grammar) -> String {
    let mut used = HashSet::new();
    let mut names = vec![String::new(); grammar.rules.len()];
    names[grammar.root] = unique(&mut used, "start");
    for (i, rule) in grammar.rules.iter().enumerate() {
        if i != grammar.root {
            names[i] = unique(&mut used, &lark_name(&rule.name));
        }
    }
    let mut emitter = Emitter {
        grammar,
        sets: Sets::compute(grammar),
        names,
        used,
        lifted: Vec::new(),
        rule_sets: vec![RuleSet::Unknown; grammar.rules.len()],
        run_bytes: 0,
    };
    let mut out = String::new();
    let order = std::iter::once(grammar.root)
        .chain((0..grammar.rules.len()).filter(|&i| i != grammar.root));
    for i in order {
        let follow = emitter.sets.as_ref().map(|s| s.follow[i].clone());
        let name = emitter.names[i].clone();
        let at = At {
            follow: follow.as_ref(),
            depth: 0,
            rule: &name,
        };
        let body = emitter.alternatives(&grammar.rules[i].body, at);
        out.push_str(&format!("{}: {}\n", emitter.names[i], body));
    }
    for (name, body) in &emitter.lifted {
        out.push_str(&format!("{name}: {body}\n"));
    }
    out
}

/// A GBNF rule name as a Lark rule name (`[a-z][a-z0-9-]*`).
fn lark_name(gbnf: &str) -> String {
    let lower = gbnf.to_ascii_lowercase();
    if lower.starts_with(|c: char| c.is_ascii_lowercase()) {
        lower
    } else {
        format!("r-{lower}")
    }
}

/// `base`, or `base-2`, `base-3`, ... whichever is not yet used.
fn unique(used: &mut HashSet<String>, base: &str) -> String {
    let mut name = base.to_owned();
    let mut n = 2;
    while used.contains(&name) {
        name = format!("{base}-{n}");
        n += 1;
    }
    used.insert(name.clone());
    name
}

/// Each rule's first characters, whether it may match nothing, and the characters that may
/// follow it.
struct Sets {
    first: Vec<(CharSet, bool)>,
    follow: Vec<CharSet>,
    /// Work done so far (see [`MAX_ANALYSIS_WORK`]).
    work: Cell<u64>,
}

impl Sets {
    /// None if the sets did not settle within [`MAX_ANALYSIS_PASSES`] and
    /// [`MAX_ANALYSIS_WORK`].
    fn compute(grammar: &Grammar) -> Option<Sets> {
        let n = grammar.rules.len();
        let mut sets = Sets {
            first: vec![(CharSet::empty(), false); n],
            follow: vec![CharSet::empty(); n],
            work: Cell::new(0),
        };
        let within_budget = |sets: &Sets| sets.work.get() <= MAX_ANALYSIS_WORK;
        let settled = (0..MAX_ANALYSIS_PASSES).any(|_| {
            let mut changed = false;
            for i in 0..n {
                let (set, nullable) = sets.first_of(&grammar.rules[i].body);
                sets.charge(&set);
                let entry = &mut sets.first[i];
                changed |= entry.0.add(&set);
                if nullable && !entry.1 {
                    entry.1 = true;
                    changed = true;
                }
            }
            !changed || !within_budget(&sets)
        });
        if !settled || !within_budget(&sets) {
            return None;
        }
        let settled = (0..MAX_ANALYSIS_PASSES).any(|_| {
            let mut follow = sets.follow.clone();
            for (i, rule) in grammar.rules.iter().enumerate() {
                sets.follow_alternatives(&rule.body, &sets.follow[i], &mut follow);
            }
            let changed = follow != sets.follow;
            sets.follow = follow;
            !changed || !within_budget(&sets)
        });
        (settled && within_budget(&sets)).then_some(sets)
    }

    /// Counts the work of merging `set` into another.
    fn charge(&self, set: &CharSet) {
        self.work
            .set(self.work.get() + 1 + set.ranges().len() as u64);
    }

    /// Adds `other` to `set`, counting the work (past the budget, the sets are given up, so
    /// nothing more is merged).
    fn add(&self, set: &mut CharSet, other: &CharSet) {
        if self.work.get() > MAX_ANALYSIS_WORK {
            return;
        }
        self.charge(set);
        self.charge(other);
        set.add(other);
    }

    fn first_of(&self, alternatives: &Alternatives) -> (CharSet, bool) {
        let mut set = CharSet::empty();
        let mut nullable = false;
        for sequence in alternatives {
            let (s, n) = self.first_of_sequence(sequence);
            self.add(&mut set, &s);
            nullable |= n;
        }
        (set, nullable)
    }

    fn first_of_sequence(&self, items: &[Item]) -> (CharSet, bool) {
        let mut set = CharSet::empty();
        for item in items {
            let (s, nullable) = self.first_of_item(item);
            self.add(&mut set, &s);
            if !nullable {
                return (set, false);
            }
        }
        (set, true)
    }

    fn first_of_item(&self, item: &Item) -> (CharSet, bool) {
        self.work.set(self.work.get() + 1);
        match item {
            Item::Char(set) => (set.clone(), false),
            Item::Literal(chars) => match chars.first() {
                Some(&c) => (CharSet::single(c), false),
                None => (CharSet::empty(), true),
            },
            Item::Rule(r) => self.first[*r].clone(),
            Item::Token { .. } => (CharSet::empty(), false),
            Item::Group(alternatives) => self.first_of(alternatives),
            Item::Repeat { item, min, max } => {
                if *max == Some(0) {
                    return (CharSet::empty(), true);
                }
                let (set, nullable) = self.first_of_item(item);
                (set, nullable || *min == 0)
            }
        }
    }

    /// Adds to `out` what may follow each rule named in `alternatives`, `after` following
    /// `alternatives` itself.
    fn follow_alternatives(
        &self,
        alternatives: &Alternatives,
        after: &CharSet,
        out: &mut [CharSet],
    ) {
        for sequence in alternatives {
            let mut next = after.clone();
            for item in sequence.iter().rev() {
                self.follow_item(item, &next, out);
                next = self.after_item(item, next);
            }
        }
    }

    fn follow_item(&self, item: &Item, after: &CharSet, out: &mut [CharSet]) {
        match item {
            Item::Rule(r) => {
                self.add(&mut out[*r], after);
            }
            Item::Group(alternatives) => self.follow_alternatives(alternatives, after, out),
            Item::Repeat { item, .. } => {
                let inner = self.after_repeated(item, after);
                self.follow_item(item, &inner, out);
            }
            Item::Char(_) | Item::Literal(_) | Item::Token { .. } => {}
        }
    }

    /// What may follow the start of `item`, given `after` follows its end.
    fn after_item(&self, item: &Item, mut after: CharSet) -> CharSet {
        let (first, nullable) = self.first_of_item(item);
        if nullable {
            self.add(&mut after, &first);
            after
        } else {
            first
        }
    }

    /// What may follow one repetition of `item` (another repetition, or what follows all).
    fn after_repeated(&self, item: &Item, after: &CharSet) -> CharSet {
        let mut inner = after.clone();
        self.add(&mut inner, &self.first_of_item(item).0);
        inner
    }
}

struct Emitter<'g> {
    grammar: &'g Grammar,
    /// None where the first/follow sets did not settle: no repetition is made one lexeme.
    sets: Option<Sets>,
    names: Vec<String>,
    used: HashSet<String>,
    /// Rules made of groups nested too deep to write inline.
    lifted: Vec<(String, String)>,
    rule_sets: Vec<RuleSet>,
    /// Text written so far for runs made single lexemes (see [`MAX_RUN_BYTES`]).
    run_bytes: usize,
}

/// Where a part of a rule is written.
#[derive(Clone, Copy)]
struct At<'a> {
    /// The characters that may follow it (None: unknown, so no run becomes one lexeme).
    follow: Option<&'a CharSet>,
    /// How many parentheses are around it.
    depth: usize,
    /// The Lark rule it is in (lifted groups are named after it).
    rule: &'a str,
}

impl Emitter<'_> {
    fn alternatives(&mut self, alternatives: &Alternatives, at: At) -> String {
        let parts: Vec<String> = alternatives
            .iter()
            .map(|sequence| {
                let text = self.sequence(sequence, at);
                if text.is_empty() {
                    "\"\"".to_owned()
                } else {
                    text
                }
            })
            .collect();
        parts.join(" | ")
    }

    fn sequence(&mut self, items: &[Item], at: At) -> String {
        let mut parts = Vec::with_capacity(items.len());
        let mut next = at.follow.cloned();
        for item in items.iter().rev() {
            let (text, _) = self.item(
                item,
                At {
                    follow: next.as_ref(),
                    ..at
                },
            );
            if !text.is_empty() {
                parts.push(text);
            }
            next = match (&self.sets, next) {
                (Some(sets), Some(after)) => Some(sets.after_item(item, after)),
                _ => None,
            };
        }
        parts.reverse();
        parts.join(" ")
    }

    /// `item` in Lark (empty if it matches only the empty text), and whether that text is a
    /// single atom (a repetition operator may follow it).
    fn item(&mut self, item: &Item, at: At) -> (String, bool) {
        match item {
            Item::Char(set) => (char_lexeme(set), true),
            Item::Literal(chars) => {
                let parts: Vec<String> = chars.iter().map(|&c| string_literal(c)).collect();
                (parts.join(" "), parts.len() == 1)
            }
            Item::Rule(r) => (self.names[*r].clone(), true),
            Item::Token { token, negated } => (token_text(token, *negated), true),
            Item::Group(alternatives) => {
                if let [sequence] = &alternatives[..] {
                    if let [only] = &sequence[..] {
                        return self.item(only, at);
                    }
                }
                if at.depth + 1 >= MAX_LARK_NESTING {
                    return (
                        self.lift(at.rule, |e, rule| {
                            e.alternatives(
                                alternatives,
                                At {
                                    depth: 0,
                                    rule,
                                    ..at
                                },
                            )
                        }),
                        true,
                    );
                }
                let inner = self.alternatives(
                    alternatives,
                    At {
                        depth: at.depth + 1,
                        ..at
                    },
                );
                (format!("({inner})"), true)
            }
            Item::Repeat { item, min, max } => self.repeat(item, *min, *max, at),
        }
    }

    /// `item` repeated `min` to `max` times (no maximum if None).
    fn repeat(&mut self, item: &Item, min: u32, max: Option<u32>, at: At) -> (String, bool) {
        if max == Some(0) {
            return (String::new(), true);
        }
        if let (Some(follow), true) = (at.follow, max != Some(1)) {
            if let Some(set) = self.char_set(item, 0) {
                if !set.is_empty()
                    && (max == Some(min) || !set.intersects(follow))
                    && self.run_bytes < MAX_RUN_BYTES
                {
                    let lexeme = run_lexeme(&set, min, max);
                    self.run_bytes += lexeme.len();
                    let atom = !lexeme.ends_with('?');
                    return (lexeme, atom);
                }
            }
        }
        let inner_follow = match (&self.sets, at.follow) {
            (Some(sets), Some(after)) => Some(sets.after_repeated(item, after)),
            _ => None,
        };
        let inner = At {
            follow: inner_follow.as_ref(),
            ..at
        };
        let text = if at.depth + 1 >= MAX_LARK_NESTING {
            self.lift(at.rule, |e, rule| {
                e.item(
                    item,
                    At {
                        depth: 0,
                        rule,
                        ..inner
                    },
                )
                .0
            })
        } else {
            match self.item(
                item,
                At {
                    depth: at.depth + 1,
                    ..inner
                },
            ) {
                (text, true) => text,
                (text, false) => format!("({text})"),
            }
        };
        if text.is_empty() {
            return (String::new(), true);
        }
        let op = match (min, max) {
            (0, None) => "*".to_owned(),
            (1, None) => "+".to_owned(),
            (0, Some(1)) => "?".to_owned(),
            (m, None) => format!("{{{m},}}"),
            (m, Some(n)) if m == n => format!("{{{m}}}"),
            (m, Some(n)) => format!("{{{m},{n}}}"),
        };
        (format!("{text}{op}"), false)
    }

    /// A new rule, named after `rule`, whose body `body` writes (given the new name).
    fn lift(&mut self, rule: &str, body: impl FnOnce(&mut Self, &str) -> String) -> String {
        let name = unique(&mut self.used, &format!("{rule}-group"));
        let text = body(self, &name);
        let text = if text.is_empty() {
            "\"\"".to_owned()
        } else {
            text
        };
        self.lifted.push((name.clone(), text));
        name
    }

    /// The characters `item` matches if it matches exactly one character (of a set small
    /// enough to write out wherever the rule is repeated).
    fn char_set(&mut self, item: &Item, depth: usize) -> Option<CharSet> {
        match item {
            Item::Char(set) => Some(set.clone()),
            Item::Literal(chars) => match chars[..] {
                [c] => Some(CharSet::single(c)),
                _ => None,
            },
            Item::Rule(r) => self.rule_char_set(*r, depth),
            Item::Group(alternatives) if depth < MAX_SET_DEPTH => {
                self.alternatives_char_set(alternatives, depth + 1)
            }
            _ => None,
        }
    }

    /// [`Emitter::char_set`] of rule `r`, worked out once.
    fn rule_char_set(&mut self, r: usize, depth: usize) -> Option<CharSet> {
        match &self.rule_sets[r] {
            RuleSet::Known(set) => return set.clone(),
            RuleSet::Pending => return None,
            RuleSet::Unknown if depth >= MAX_SET_DEPTH => return None,
            RuleSet::Unknown => {}
        }
        self.rule_sets[r] = RuleSet::Pending;
        let grammar = self.grammar;
        let set = self
            .alternatives_char_set(&grammar.rules[r].body, depth + 1)
            .filter(|set| set.ranges().len() <= MAX_INLINE_RANGES);
        self.rule_sets[r] = RuleSet::Known(set.clone());
        set
    }

    fn alternatives_char_set(
        &mut self,
        alternatives: &Alternatives,
        depth: usize,
    ) -> Option<CharSet> {
        let mut set = CharSet::empty();
        for sequence in alternatives {
            let [only] = &sequence[..] else {
                return None;
            };
            set.add(&self.char_set(only, depth)?);
        }
        Some(set)
    }
}

/// Whether a rule matches one character of a set, as far as worked out.
#[derive(Clone)]
enum RuleSet {
    Unknown,
    /// Being worked out (a rule reached again through itself is not a set).
    Pending,
    Known(Option<CharSet>),
}

/// One character of `set`.
fn char_lexeme(set: &CharSet) -> String {
    match set.as_single() {
        Some(c) => string_literal(c),
        None => format!("/{}/", regex_class(set)),
    }
}

/// A run of `min` to `max` characters of `set` as one lexeme (a Lark lexeme must not match the
/// empty text: a run that may be empty is an optional lexeme).
fn run_lexeme(set: &CharSet, min: u32, max: Option<u32>) -> String {
    let class = regex_class(set);
    let (lo, optional) = if min == 0 { (1, "?") } else { (min, "") };
    let count = match max {
        None if lo == 1 => "+".to_owned(),
        None => format!("{{{lo},}}"),
        Some(n) if n == lo => format!("{{{lo}}}"),
        Some(n) => format!("{{{lo},{n}}}"),
    };
    format!("/{class}{count}/{optional}")
}

/// A regex matching one character of `set`.
fn regex_class(set: &CharSet) -> String {
    if set.is_any() {
        return "(?s:.)".to_owned();
    }
    if set.is_empty() {
        // Matches nothing, as llama.cpp's class with nothing in it.
        return r"[^\x{0}-\x{10FFFF}]".to_owned();
    }
    let mut out = String::from("[");
    for &(lo, hi) in set.ranges() {
        out.push_str(&regex_char(lo));
        if hi > lo {
            out.push('-');
            out.push_str(&regex_char(hi));
        }
    }
    out.push(']');
    out
}

/// `c` inside a regex class: letters and digits as they are, anything else escaped by value
/// (never a `/`, which would end the Lark regex).
fn regex_char(c: u32) -> String {
    match char::from_u32(c) {
        Some(ch) if ch.is_ascii_alphanumeric() => ch.to_string(),
        _ => format!(r"\x{{{c:X}}}"),
    }
}

/// `c` as a Lark string literal (JSON string syntax).
fn string_literal(c: u32) -> String {
    let ch = char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER);
    match ch {
        '"' => r#""\"""#.to_owned(),
        '\\' => r#""\\""#.to_owned(),
        c if (c as u32) < 0x20 || c == '\x7f' => format!(r#""\u{:04x}""#, c as u32),
        c => format!("\"{c}\""),
    }
}

fn token_text(token: &TokenRef, negated: bool) -> String {
    match (token, negated) {
        (TokenRef::Id(id), false) => format!("<[{id}]>"),
        (TokenRef::Id(id), true) => format!("<[^{id}]>"),
        // The parser refuses a negated token named by its text.
        (TokenRef::Text(text), _) => text.clone(),
    }
}
