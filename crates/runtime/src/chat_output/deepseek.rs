//! DeepSeek tool calls. R1 (and its distills) write
//! `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>`,
//! V3.1 `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>`; calls follow one
//! another (a newline between them) up to `<｜tool▁calls▁end｜>`.

use super::json_scan::{skip_ws, value_end, End};
use super::{Calls, Markers, ToolCall};

pub const CALLS_BEGIN: &str = "<｜tool▁calls▁begin｜>";
const CALLS_END: &str = "<｜tool▁calls▁end｜>";
const CALL_BEGIN: &str = "<｜tool▁call▁begin｜>";
const CALL_END: &str = "<｜tool▁call▁end｜>";
const SEP: &str = "<｜tool▁sep｜>";
const FENCE: &str = "```";

pub fn parse(text: &str, partial: bool) -> Calls {
    let mut content = String::new();
    let mut calls = Vec::new();
    let starts = [CALLS_BEGIN, CALL_BEGIN];
    let mut starts_at = Markers::new(text, &starts);
    let mut pos = 0;
    'outer: while let Some((at, which)) = starts_at.text_until(&mut content, pos, partial) {
        // A model may leave out the section's begin marker and start with the first call.
        pos = if which == 0 {
            at + CALLS_BEGIN.len()
        } else {
            at
        };
        // The calls, one after another.
        loop {
            pos = skip_ws(text, pos);
            let rest = &text[pos..];
            if rest.starts_with(CALL_BEGIN) {
                match call(text, pos + CALL_BEGIN.len(), partial) {
                    Some((c, Some(end))) => {
                        calls.push(c);
                        pos = end;
                    }
                    Some((c, None)) => {
                        calls.push(c);
                        break 'outer;
                    }
                    None => break 'outer,
                }
            } else if rest.starts_with(CALLS_END) {
                pos += CALLS_END.len();
                break;
            } else if partial && (CALL_BEGIN.starts_with(rest) || CALLS_END.starts_with(rest)) {
                break 'outer;
            } else {
                break;
            }
        }
    }
    Calls { content, calls }
}

/// The call whose text starts at `at` (after its begin marker), and where the text after it
/// starts (none when the text ends inside it); `None` while its name is not whole.
fn call(text: &str, at: usize, partial: bool) -> Option<(ToolCall, Option<usize>)> {
    let sep = text[at..].find(SEP).map(|i| at + i)?;
    let before = text[at..sep].trim();
    let (name, mut pos) = if before == "function" {
        // R1: the name is the line after the separator.
        let from = sep + SEP.len();
        let line = text[from..].find('\n')?;
        (text[from..from + line].trim(), from + line + 1)
    } else {
        (before, sep + SEP.len())
    };
    let found = |arguments: &str, end| {
        Some((
            ToolCall {
                id: String::new(),
                name: name.to_owned(),
                arguments: arguments.to_owned(),
            },
            end,
        ))
    };
    pos = skip_ws(text, pos);
    // The name is whole: the call shows, its arguments once they start.
    if let Some(lang) = text[pos..].strip_prefix(FENCE) {
        let Some(line) = lang.find('\n') else {
            return found("", None);
        };
        pos = skip_ws(text, pos + FENCE.len() + line + 1);
    } else if partial && FENCE.starts_with(&text[pos..]) && pos < text.len() {
        return found("", None);
    }
    let args_end = match value_end(text, pos) {
        End::At(e) => e,
        End::Cut => return found(&text[pos..], None),
        End::Invalid => {
            // Not JSON: the text up to the call's end.
            let e = text[pos..].find(CALL_END).map_or(text.len(), |i| pos + i);
            let end = (e < text.len()).then_some(e + CALL_END.len());
            return found(text[pos..e].trim(), end);
        }
    };
    let arguments = &text[pos..args_end];
    let mut end = skip_ws(text, args_end);
    if text[end..].starts_with(FENCE) {
        end = skip_ws(text, end + FENCE.len());
    }
    let rest = &text[end..];
    if rest.starts_with(CALL_END) {
        found(arguments, Some(end + CALL_END.len()))
    } else if partial && (rest.is_empty() || FENCE.starts_with(rest) || CALL_END.starts_with(rest))
    {
        found(arguments, None)
    } else {
        found(arguments, Some(end))
    }
}
