//! A tolerant scan of JSON text that may be cut off (a generation in progress): where each
//! value ends, and the members of an object, without building values. The parsers use it to
//! find a tool call's name and the exact text of its arguments while they stream.

use std::ops::Range;

/// How a value's text ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// The value is complete; its text ends before this byte.
    At(usize),
    /// The text ends inside the value.
    Cut,
    /// Not JSON at this byte.
    Invalid,
}

/// Where the JSON value that starts at `s[from]` (after whitespace) ends. Nesting is tracked
/// with a depth counter per bracket kind, so the work is linear and bounded by the text.
pub fn value_end(s: &str, from: usize) -> End {
    let b = s.as_bytes();
    let mut i = skip_ws(s, from);
    let Some(&first) = b.get(i) else {
        return End::Cut;
    };
    match first {
        b'"' => string_end(b, i),
        b'{' | b'[' => {
            // Brackets seen, innermost last (only `{` and `[`, so one bit each would do; a
            // byte per level keeps it plain).
            let mut stack = Vec::new();
            while i < b.len() {
                match b[i] {
                    b'"' => match string_end(b, i) {
                        End::At(e) => {
                            i = e;
                            continue;
                        }
                        other => return other,
                    },
                    open @ (b'{' | b'[') => stack.push(open),
                    close @ (b'}' | b']') => {
                        let want = if close == b'}' { b'{' } else { b'[' };
                        if stack.pop() != Some(want) {
                            return End::Invalid;
                        }
                        if stack.is_empty() {
                            return End::At(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            End::Cut
        }
        b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => {
            let start = i;
            while i < b.len() && !matches!(b[i], b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t')
            {
                i += 1;
            }
            if i == b.len() {
                // A number may go on; a literal that is whole is whole.
                let word = &s[start..];
                return match word {
                    "true" | "false" | "null" => End::At(i),
                    _ => End::Cut,
                };
            }
            End::At(i)
        }
        _ => End::Invalid,
    }
}

/// Where the string that opens at `b[at]` ends (after its closing quote).
fn string_end(b: &[u8], at: usize) -> End {
    let mut i = at + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return End::At(i + 1),
            _ => i += 1,
        }
    }
    End::Cut
}

pub fn skip_ws(s: &str, mut i: usize) -> usize {
    let b = s.as_bytes();
    while i < b.len() && matches!(b[i], b' ' | b'\n' | b'\r' | b'\t') {
        i += 1;
    }
    i
}

/// One member of an object: its key, and its value's text (to the end of the text when cut).
#[derive(Debug, PartialEq, Eq)]
pub struct Member {
    pub key: String,
    pub value: Range<usize>,
    pub complete: bool,
}

/// The members of the object that opens at `s[from]` (after whitespace), as far as the text
/// goes, and where the object ends (`None` when the text ends first). `Err` when the text is
/// not an object there.
pub fn object_members(s: &str, from: usize) -> Result<(Vec<Member>, Option<usize>), ()> {
    let b = s.as_bytes();
    let mut i = skip_ws(s, from);
    if b.get(i) != Some(&b'{') {
        return if i >= b.len() {
            Ok((Vec::new(), None))
        } else {
            Err(())
        };
    }
    i += 1;
    let mut members = Vec::new();
    loop {
        i = skip_ws(s, i);
        match b.get(i) {
            None => return Ok((members, None)),
            Some(b'}') => return Ok((members, Some(i + 1))),
            Some(b',') if !members.is_empty() => {
                i = skip_ws(s, i + 1);
            }
            _ => {}
        }
        if i >= b.len() {
            return Ok((members, None));
        }
        if b[i] != b'"' {
            return Err(());
        }
        let key_end = match string_end(b, i) {
            End::At(e) => e,
            _ => return Ok((members, None)),
        };
        let key: String = serde_json::from_str(&s[i..key_end]).map_err(|_| ())?;
        i = skip_ws(s, key_end);
        match b.get(i) {
            None => return Ok((members, None)),
            Some(b':') => i += 1,
            Some(_) => return Err(()),
        }
        let start = skip_ws(s, i);
        match value_end(s, start) {
            End::At(e) => {
                members.push(Member {
                    key,
                    value: start..e,
                    complete: true,
                });
                i = e;
            }
            End::Cut => {
                if start < b.len() {
                    members.push(Member {
                        key,
                        value: start..b.len(),
                        complete: false,
                    });
                }
                return Ok((members, None));
            }
            End::Invalid => return Err(()),
        }
    }
}

/// The items of the array that opens at `s[from]` (after whitespace), as far as the text goes
/// (the last one cut when the text ends inside it), and whether the array is closed.
pub fn array_items(s: &str, from: usize) -> Result<(Vec<Range<usize>>, bool), ()> {
    let b = s.as_bytes();
    let mut i = skip_ws(s, from);
    if b.get(i) != Some(&b'[') {
        return if i >= b.len() {
            Ok((Vec::new(), false))
        } else {
            Err(())
        };
    }
    i += 1;
    let mut items = Vec::new();
    loop {
        i = skip_ws(s, i);
        match b.get(i) {
            None => return Ok((items, false)),
            Some(b']') => return Ok((items, true)),
            Some(b',') if !items.is_empty() => i = skip_ws(s, i + 1),
            _ => {}
        }
        if i >= b.len() {
            return Ok((items, false));
        }
        match value_end(s, i) {
            End::At(e) => {
                items.push(i..e);
                i = e;
            }
            End::Cut => {
                items.push(i..b.len());
                return Ok((items, false));
            }
            End::Invalid => return Err(()),
        }
    }
}

/// The text of a JSON string cut anywhere (`"ab\n` and the like), decoded as far as it is
/// whole: what a streamed string shows so far.
pub fn string_prefix(text: &str) -> Option<String> {
    let body = text.strip_prefix('"')?;
    if let Ok(s) = serde_json::from_str::<String>(text) {
        return Some(s);
    }
    // Drop an escape cut short (at most `\uXXXX`: 6 bytes), then close the string.
    (0..=6.min(body.len()))
        .filter(|&n| body.is_char_boundary(body.len() - n))
        .find_map(|n| {
            serde_json::from_str::<String>(&format!("\"{}\"", &body[..body.len() - n])).ok()
        })
}

/// The value of a complete member that is a string.
pub fn string_member(s: &str, members: &[Member], key: &str) -> Option<String> {
    let m = members.iter().find(|m| m.key == key && m.complete)?;
    serde_json::from_str(&s[m.value.clone()]).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_end_where_json_says() {
        assert_eq!(value_end(r#" {"a": [1, "]"]} x"#, 0), End::At(16));
        assert_eq!(value_end(r#"{"a": "x\"}"#, 0), End::Cut);
        assert_eq!(value_end("12", 0), End::Cut);
        assert_eq!(value_end("12,", 0), End::At(2));
        assert_eq!(value_end("true", 0), End::At(4));
        assert_eq!(value_end("{]", 0), End::Invalid);
        assert_eq!(value_end("<x>", 0), End::Invalid);
    }

    #[test]
    fn members_of_whole_and_cut_objects() {
        let s = r#"{"name": "f", "arguments": {"a": 1}}"#;
        let (m, end) = object_members(s, 0).unwrap();
        assert_eq!(end, Some(s.len()));
        assert_eq!(string_member(s, &m, "name").as_deref(), Some("f"));
        assert_eq!(&s[m[1].value.clone()], r#"{"a": 1}"#);
        let cut = r#"{"name": "f", "arguments": {"a": 1"#;
        let (m, end) = object_members(cut, 0).unwrap();
        assert_eq!(end, None);
        assert!(!m[1].complete);
        assert_eq!(&cut[m[1].value.clone()], r#"{"a": 1"#);
        assert!(object_members("[1]", 0).is_err());
        for i in 0..s.len() {
            assert!(object_members(&s[..i], 0).is_ok(), "{}", &s[..i]);
        }
    }
}
