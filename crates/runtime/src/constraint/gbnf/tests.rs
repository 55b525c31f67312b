//! GBNF to Lark: llama.cpp's example grammars and test cases (as data, in
//! `tests/data/gbnf/`) converted and matched through the grammar engine over a byte-level
//! vocabulary; errors with their positions; no panic on any input.

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie};
use llguidance::{Matcher, ParserFactory};
use proptest::prelude::*;
use serde_json::Value;

use super::{gbnf_to_lark, looks_like_gbnf, GbnfError};

/// Token ids below this are special tokens (`<|t0|>`, ..., id 100 is `<think>`, 101
/// `</think>`); byte b is token `BYTES + b`.
const BYTES: u32 = 256;
const EOS: u32 = 255;

fn factory() -> ParserFactory {
    let mut words: Vec<Vec<u8>> = (0..BYTES)
        .map(|id| {
            let name = match id {
                100 => "<think>".to_owned(),
                101 => "</think>".to_owned(),
                _ => format!("<|t{id}|>"),
            };
            [&[TokTrie::SPECIAL_TOKEN_MARKER], name.as_bytes()].concat()
        })
        .collect();
    words.extend((0..=255u8).map(|b| vec![b]));
    let trie = TokTrie::from(&TokRxInfo::new(words.len() as u32, EOS), &words);
    let env: TokEnv = Arc::new(ApproximateTokEnv::new(trie));
    let mut factory = ParserFactory::new_simple(&env).unwrap();
    factory.quiet().set_stderr_log_level(0);
    factory
}

/// A matcher for `lark`, or the grammar engine's error.
fn compile(factory: &ParserFactory, lark: &str) -> Result<Matcher, String> {
    let grammar = TopLevelGrammar::from_lark(lark.to_owned());
    let matcher = Matcher::new(factory.create_parser(grammar));
    match matcher.get_error() {
        Some(e) => Err(e),
        None => Ok(matcher),
    }
}

/// `text` as token ids: its bytes, and where `tokens` is set, `<[N]>` as token N.
fn token_ids(text: &str, tokens: bool) -> Vec<u32> {
    let mut ids = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        if tokens && rest.starts_with("<[") {
            if let Some(end) = rest.find("]>") {
                if let Ok(id) = rest[2..end].parse::<u32>() {
                    ids.push(id);
                    rest = &rest[end + 2..];
                    continue;
                }
            }
        }
        let c = rest.chars().next().unwrap();
        ids.extend(c.to_string().bytes().map(|b| BYTES + u32::from(b)));
        rest = &rest[c.len_utf8()..];
    }
    ids
}

/// Whether the grammar `lark` matches the whole of `text`.
fn matches(factory: &ParserFactory, lark: &str, text: &str, tokens: bool) -> bool {
    let mut matcher = compile(factory, lark).unwrap();
    let ids = token_ids(text, tokens);
    if matcher.validate_tokens(&ids).unwrap() < ids.len() {
        return false;
    }
    matcher.consume_tokens(&ids).unwrap();
    matcher.is_accepting().unwrap()
}

fn data_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gbnf")
}

/// A grammar test: its name, GBNF text, strings it matches, strings it does not, and whether
/// `<[N]>` in those strings is token N.
type Case<'a> = (&'a str, &'a str, Vec<&'a str>, Vec<&'a str>, bool);

/// Checks each of `cases` (name, GBNF, passing, failing, tokens) and lists what went wrong.
fn check_cases<'a>(cases: impl Iterator<Item = Case<'a>>) -> Vec<String> {
    let factory = factory();
    let mut problems = Vec::new();
    for (name, gbnf, passing, failing, tokens) in cases {
        let lark = match gbnf_to_lark(gbnf) {
            Ok(lark) => lark,
            Err(e) => {
                problems.push(format!("{name}: not converted: {e}"));
                continue;
            }
        };
        if let Err(e) = compile(&factory, &lark) {
            problems.push(format!("{name}: not compiled: {e}\n{lark}"));
            continue;
        }
        for text in passing {
            if !matches(&factory, &lark, text, tokens) {
                problems.push(format!("{name}: {text:?} should match\n{lark}"));
            }
        }
        for text in failing {
            if matches(&factory, &lark, text, tokens) {
                problems.push(format!("{name}: {text:?} should not match\n{lark}"));
            }
        }
    }
    problems
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn llama_cpp_test_cases_match_the_same_strings() {
    let text = std::fs::read_to_string(data_dir().join("llama_cpp_cases.json")).unwrap();
    let data: Value = serde_json::from_str(&text).unwrap();
    let cases = data["cases"].as_array().unwrap();
    assert!(cases.len() >= 30, "{} cases", cases.len());
    let problems = check_cases(cases.iter().map(|c| {
        (
            c["name"].as_str().unwrap(),
            c["grammar"].as_str().unwrap(),
            strings(&c["passing"]),
            strings(&c["failing"]),
            c["tokens"].as_bool().unwrap_or(false),
        )
    }));
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    for case in data["invalid"].as_array().unwrap() {
        let grammar = case["grammar"].as_str().unwrap();
        assert!(gbnf_to_lark(grammar).is_err(), "accepted: {grammar}");
    }
}

#[test]
fn llama_cpp_example_grammars_convert_and_compile() {
    let factory = factory();
    let mut n = 0;
    for entry in std::fs::read_dir(data_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "gbnf") {
            continue;
        }
        let gbnf = std::fs::read_to_string(&path).unwrap();
        assert!(looks_like_gbnf(&gbnf), "{path:?}");
        let lark = gbnf_to_lark(&gbnf).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        compile(&factory, &lark).unwrap_or_else(|e| panic!("{path:?}: {e}\n{lark}"));
        n += 1;
    }
    assert_eq!(n, 8);
}

#[test]
fn example_grammars_match_their_language() {
    let read = |name: &str| std::fs::read_to_string(data_dir().join(name)).unwrap();
    let (json, list, chess, arithmetic) = (
        read("json.gbnf"),
        read("list.gbnf"),
        read("chess.gbnf"),
        read("arithmetic.gbnf"),
    );
    let problems = check_cases(
        [
            (
                "json.gbnf",
                json.as_str(),
                vec![
                    r#"{"a": [1, -2.5e3, true, null, "x\u00e9\n"], "b": {}}"#,
                    "{}",
                ],
                vec![r#"{"a": 01}"#, r#"{"a" 1}"#, "[1]", r#"{"a": "\q"}"#],
                false,
            ),
            (
                "list.gbnf",
                list.as_str(),
                vec!["- one\n- two\n"],
                vec!["- one", "one\n"],
                false,
            ),
            (
                "chess.gbnf",
                chess.as_str(),
                vec!["1. e4 e5\n2. Nf3 Nc6\n"],
                vec!["1. e4 e5\n", "1. e9 e5\n2. Nf3 Nc6\n"],
                false,
            ),
            (
                "arithmetic.gbnf",
                arithmetic.as_str(),
                vec!["1+(2*x)=y\n", "a = 1\nb=2\n"],
                vec!["1+\n", "1=2"],
                false,
            ),
        ]
        .into_iter(),
    );
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn constructs_match_as_in_llama_cpp() {
    let cases: Vec<Case> = vec![
        // Escapes, in literals and classes.
        ("escapes", r#"root ::= "\x41\u00e9\U0001F600\t\r\n\\\"\[\]\-""#, vec!["Aé😀\t\r\n\\\"[]-"], vec!["A"], false),
        ("class escapes", r#"root ::= [\x00-\x1F\]\-]+"#, vec!["\u{1}]-", "\u{0}"], vec!["a", ""], false),
        ("negated class", r#"root ::= [^a-z\n]+"#, vec!["ABC 12é"], vec!["aB", "A\n"], false),
        ("class of nothing", r#"root ::= "a" | [\uD800] "b" | [^\x00-\U0010FFFF]"#, vec!["a"], vec!["b", ""], false),
        ("dash at the end of a class", r#"root ::= [a-]+"#, vec!["a-a"], vec!["b"], false),
        ("any character", "root ::= . . .", vec!["a\né", "😀😀😀"], vec!["ab", "abcd"], false),
        // Names with '-', digits, capitals; a rule named start; lowercase collisions.
        (
            "names",
            "root ::= start Foo foo 9lives a-b\nstart ::= \"s\"\nFoo ::= \"F\"\nfoo ::= \"f\"\n9lives ::= \"9\"\na-b ::= \"-\"",
            vec!["sFf9-"],
            vec!["sff9-"],
            false,
        ),
        // Comments, multi-line rules, `|` at a line's end, CRLF.
        (
            "layout",
            "# a comment\r\nroot ::= (\r\n  \"a\" # here too\r\n  | \"b\"\r\n) tail |\r\n  \"c\"\r\ntail ::= \"!\"\r\n",
            vec!["a!", "b!", "c"],
            vec!["a", "c!"],
            false,
        ),
        // Repetitions of every shape, on characters, literals, groups and rules.
        ("counts", r#"root ::= "ab"{2} [0-9]{1,3} x{2,} "-"{0,2}
x ::= "x""#, vec!["abab1xx", "abab123xxx--"], vec!["ab1xx", "abab1234xx", "abab1x", "abab1xx---"], false),
        ("zero counts", r#"root ::= "a"{0} "b"{0,0} "c""#, vec!["c"], vec!["ac"], false),
        ("nested repetition", r#"root ::= ("a"*)* "b"+? "c"{1,2}{2}"#, vec!["aabcc", "cc", "ccc", "cccc", "bcc"], vec!["c", "ccccc", "aab"], false),
        // A run whose characters may follow it stays one character per lexeme.
        ("run followed by its own characters", r#"root ::= [a-z]* "x" | [0-9]+ [0-9]"#, vec!["abcx", "x", "12"], vec!["abc", "1"], false),
        ("run then what it cannot hold", r#"root ::= [^\n]+ "\n" [a-z]{0,3} "!""#, vec!["hi there\nab!", "x\n!"], vec!["\n!", "x\nabcd!"], false),
        ("runs through rules", "root ::= ws \"a\" ws\nws ::= ([ \\t] | nl)*\nnl ::= \"\\n\"", vec!["a", " \t\na\n "], vec!["a a"], false),
        // A rule defined twice: the last definition counts, as in llama.cpp.
        ("redefined", "root ::= a\na ::= \"x\"\na ::= \"y\"", vec!["y"], vec!["x"], false),
        // Empty alternatives and literals.
        ("empty", "root ::= \"\" | \"a\" ( | \"b\")", vec!["", "a", "ab"], vec!["b"], false),
        // Tokens by id and by text, and negated.
        ("tokens", "root ::= <think> (!<[101]>)* </think> \"x\"", vec!["<[100]>abc<[5]><[101]>x"], vec!["<[100]>ab<[101]><[101]>x", "<think>x"], true),
        ("token ids", "root ::= <[7]> | <[8]> \"a\"", vec!["<[7]>", "<[8]>a"], vec!["<[8]>", "<[9]>"], true),
        // Left recursion (llama.cpp refuses it; the grammar engine follows it).
        ("left recursion", "root ::= root \"a\" | \"b\"", vec!["b", "baa"], vec!["a", "ab"], false),
    ];
    let problems = check_cases(cases.into_iter());
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn names_become_lark_names() {
    let lark = gbnf_to_lark(
        "root ::= start Foo foo 9x\nstart ::= \"s\"\nFoo ::= \"F\"\nfoo ::= \"f\"\n9x ::= \"9\"",
    )
    .unwrap();
    assert_eq!(
        lark,
        "start: start-2 foo foo-2 r-9x\nstart-2: \"s\"\nfoo: \"F\"\nfoo-2: \"f\"\nr-9x: \"9\"\n"
    );
}

#[test]
fn runs_become_one_lexeme_only_where_exact() {
    let lark = gbnf_to_lark(r#"root ::= [^\n]* "\n" [a-z]* [a-z] [0-9]{4}"#).unwrap();
    assert_eq!(lark, "start: /[\\x{0}-\\x{9}\\x{B}-\\x{D7FF}\\x{E000}-\\x{10FFFF}]+/? \"\\u000a\" /[a-z]/* /[a-z]/ /[0-9]{4}/\n");
}

fn error(src: &str) -> GbnfError {
    gbnf_to_lark(src).unwrap_err()
}

#[test]
fn errors_say_where_and_why() {
    let e = error("root ::= a\na ::= \"x\" b");
    assert_eq!((e.line, e.column), (2, 11), "{e}");
    assert!(e.message.contains("'b' is used but never defined"), "{e}");
    assert!(error("a ::= \"x\"")
        .message
        .contains("no rule named 'root'"));
    let e = error("root ::= \"a\"\n  \"b\"");
    assert_eq!((e.line, e.column), (2, 3), "{e}");
    let e = error("root ::= \"a\" )");
    assert_eq!(
        (e.line, e.column, e.message.contains("end of the line")),
        (1, 14, true),
        "{e}"
    );
    for (src, line, column, says) in [
        ("root ::= \"abc", 1, 10, "unterminated string"),
        ("root ::= [abc", 1, 10, "unterminated character class"),
        ("root ::= [a-", 1, 10, "unterminated character class"),
        ("root ::= \"a\" [^]", 1, 14, "empty character class"),
        ("root ::= \"\\q\"", 1, 11, "unknown escape"),
        ("root ::= \"\\x4\"", 1, 11, "exactly 2 hexadecimal"),
        ("root ::= \"\\uD800\"", 1, 11, "not a character"),
        ("root ::= \"\\U00110000\"", 1, 11, "past U+10FFFF"),
        ("root ::= (\"a\"", 1, 14, "expected ')'"),
        ("root ::= * \"a\"", 1, 10, "must follow something"),
        ("root ::= \"a\"{2,1}", 1, 13, "below the least"),
        ("root ::= \"a\"{", 1, 14, "expected a number"),
        ("root = \"a\"", 1, 6, "expected '::='"),
        ("root ::= !<think>", 1, 10, "by id"),
        ("root ::= <a b>", 1, 11, "spaces"),
        ("root ::= <[12x]>", 1, 14, "']>'"),
        ("\n\n  root ::= \"é\" ~", 3, 16, "end of the line"),
    ] {
        let e = error(src);
        assert_eq!((e.line, e.column), (line, column), "{src}: {e}");
        assert!(e.message.contains(says), "{src}: {e}");
    }
}

#[test]
fn nesting_is_bounded() {
    let deep = format!(
        "root ::= {}\"a\"{}",
        "(".repeat(100_000),
        ")".repeat(100_000)
    );
    assert!(error(&deep).message.contains("nested deeper"));
    let stars = format!("root ::= \"a\"{}", "*".repeat(100_000));
    assert!(error(&stars).message.contains("nested deeper"));
    // Deep but allowed: groups past the Lark reader's own nesting limit become rules.
    let ok = format!(
        "root ::= {}\"a\"{}",
        "(\"x\" ".repeat(200),
        ")?".repeat(200)
    );
    let stars = format!("root ::= (\"a\" \"b\"){} \"c\"", "+".repeat(200));
    let factory = factory();
    for ok in [ok, stars] {
        let lark = gbnf_to_lark(&ok).unwrap();
        compile(&factory, &lark).unwrap_or_else(|e| panic!("{e}\n{lark}"));
    }
    let lark = gbnf_to_lark(&format!("root ::= (\"a\" \"b\"){} \"c\"", "+".repeat(200))).unwrap();
    assert!(matches(&factory, &lark, "ababc", false));
    assert!(!matches(&factory, &lark, "abac", false));
}

#[test]
fn contrived_grammars_convert_quickly() {
    // A class of 4,000 ranges, optional 8,000 times: its first/follow sets would take long to
    // merge, so the conversion gives them up (every lexeme stays one character).
    let class: String = (0..4000u32)
        .map(|i| format!("\\u{:04X}", 0x100 + 2 * i))
        .collect();
    let refs = "x? ".repeat(8000);
    let src = format!("root ::= {refs}\nx ::= [{class}]");
    assert!(src.len() < 64 << 10);
    let start = std::time::Instant::now();
    let lark = gbnf_to_lark(&src).unwrap();
    assert!(start.elapsed().as_secs() < 5, "{:?}", start.elapsed());
    assert!(!lark.contains("+/"));
    assert!(lark.len() < 4 * src.len(), "{} bytes", lark.len());
    // A small set written out at each of 20,000 repetitions: only up to a bound.
    let src = format!(
        "root ::= {}\nx ::= [a-z] | [A-Z] | [0-9] | \"_\" | \"-\"",
        "x* \"!\" ".repeat(6000)
    );
    let lark = gbnf_to_lark(&src).unwrap();
    assert!(
        lark.contains("/[\\x{2D}0-9A-Z\\x{5F}a-z]+/?"),
        "{}",
        &lark[..200]
    );
    assert!(lark.len() < 8 * src.len(), "{} bytes", lark.len());
    // Deep groups, each with an item: visited once per level, within the bound.
    let deep = format!(
        "root ::= {}\"a\"{}",
        "(\"x\" ".repeat(250),
        ")*".repeat(250)
    );
    let start = std::time::Instant::now();
    gbnf_to_lark(&deep).unwrap();
    assert!(start.elapsed().as_secs() < 5, "{:?}", start.elapsed());
}

#[test]
fn detects_gbnf() {
    assert!(looks_like_gbnf("root ::= \"a\""));
    assert!(looks_like_gbnf(
        "# comment\n\n  my-rule::= \"a\"\nroot ::= my-rule"
    ));
    assert!(!looks_like_gbnf("start: \"a\""));
    assert!(!looks_like_gbnf("%llguidance {}\nstart: \"a ::= b\""));
    assert!(!looks_like_gbnf("// root ::= x\nstart: \"a\""));
    assert!(!looks_like_gbnf(""));
}

#[test]
fn truncated_and_mutated_grammars_never_panic() {
    for entry in std::fs::read_dir(data_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "gbnf") {
            continue;
        }
        let gbnf = std::fs::read_to_string(&path).unwrap();
        let bytes = gbnf.as_bytes();
        for cut in (0..bytes.len()).filter(|&i| gbnf.is_char_boundary(i)) {
            let _ = gbnf_to_lark(&gbnf[..cut]);
            // One byte replaced by each of the characters that mean something in GBNF.
            if cut % 7 == 0 {
                for b in b"()[]\"\\|*+?{},.<>!#-:=\n^" {
                    let mut m = bytes.to_vec();
                    if m[cut].is_ascii() {
                        m[cut] = *b;
                        let _ = gbnf_to_lark(std::str::from_utf8(&m).unwrap());
                    }
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn any_text_converts_or_errs(src in r#"(root ::= |[a-c]|::=|[()\[\]"\\|*+?{},.<>!#^\n -]|\\[xuU]|[0-9]|é){0,40}"#) {
        if let Err(e) = gbnf_to_lark(&src) {
            prop_assert!(e.line >= 1 && e.column >= 1);
        }
    }
}

#[test]
fn a_run_competing_with_another_alternative_is_the_known_difference() {
    // llama.cpp matches "ab?" through the second alternative; the run `[a-z]*` is one lexeme
    // here (nothing of [a-z] follows it) and the greedy lexer takes "ab" into it.
    let factory = factory();
    let lark = gbnf_to_lark(r#"root ::= [a-z]* "!" | "a" "b" "?""#).unwrap();
    assert!(matches(&factory, &lark, "ab!", false));
    assert!(!matches(&factory, &lark, "ab?", false), "{lark}");
}
