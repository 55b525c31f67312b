//! Mistral tool calls, after `[TOOL_CALLS]`: Nemo writes a JSON array of
//! `{"name", "arguments", "id"}`; Small 3.2 writes `NAME[CALL_ID]ID[ARGS]{...}`; Devstral and
//! Ministral 3 write `NAME[ARGS]{...}`. Each call may come under its own `[TOOL_CALLS]`.

use super::hermes::json_call;
use super::json_scan::{array_items, object_members, skip_ws, value_end, End};
use super::{Calls, Markers, ToolCall};

const TOOL_CALLS: &str = "[TOOL_CALLS]";
const CALL_ID: &str = "[CALL_ID]";
const ARGS: &str = "[ARGS]";

pub fn parse(text: &str, partial: bool) -> Calls {
    let mut content = String::new();
    let mut calls = Vec::new();
    let markers = [TOOL_CALLS];
    let mut found = Markers::new(text, &markers);
    let mut pos = 0;
    while let Some((at, _)) = found.text_until(&mut content, pos, partial) {
        let from = skip_ws(text, at + TOOL_CALLS.len());
        let read = if text[from..].starts_with('[') {
            array(text, from, &mut calls)
        } else {
            named(text, from, partial, &mut calls)
        };
        match read {
            Read::Next(end) => pos = end,
            Read::Stop => break,
            Read::NotACall => {
                content.push_str(TOOL_CALLS);
                pos = at + TOOL_CALLS.len();
            }
        }
    }
    Calls { content, calls }
}

enum Read {
    /// The text after the calls starts here.
    Next(usize),
    /// The text ends inside the calls.
    Stop,
    NotACall,
}

/// Nemo's `[{"name": ..., "arguments": {...}, "id": ...}, ...]` at `from`.
fn array(text: &str, from: usize, calls: &mut Vec<ToolCall>) -> Read {
    let (end, upto) = match value_end(text, from) {
        End::At(e) => (Some(e), e),
        End::Cut => (None, text.len()),
        End::Invalid => return Read::NotACall,
    };
    let Ok((items, _)) = array_items(&text[..upto], from) else {
        return Read::NotACall;
    };
    for item in items {
        let Ok((members, item_end)) = object_members(&text[..item.end], item.start) else {
            continue;
        };
        // The id may come last: a call shows once its id is known (or its object is whole).
        let id_known = members.iter().any(|m| m.key == "id" && m.complete);
        if id_known || item_end.is_some() {
            calls.extend(json_call(&text[..item.end], &members));
        }
    }
    end.map_or(Read::Stop, Read::Next)
}

/// `NAME[CALL_ID]ID[ARGS]{...}` or `NAME[ARGS]{...}` at `from`; the call shows once its
/// name and id are whole.
fn named(text: &str, from: usize, partial: bool, calls: &mut Vec<ToolCall>) -> Read {
    let Some(bracket) = text[from..].find('[').map(|i| from + i) else {
        return if partial { Read::Stop } else { Read::NotACall };
    };
    let name = text[from..bracket].trim();
    let mut pos = bracket;
    let mut id = String::new();
    if text[pos..].starts_with(CALL_ID) {
        let id_from = pos + CALL_ID.len();
        let Some(args) = text[id_from..].find(ARGS).map(|i| id_from + i) else {
            return if partial { Read::Stop } else { Read::NotACall };
        };
        id = text[id_from..args].trim().to_owned();
        pos = args;
    }
    if !text[pos..].starts_with(ARGS) {
        let rest = &text[pos..];
        return if partial && (ARGS.starts_with(rest) || CALL_ID.starts_with(rest)) {
            Read::Stop
        } else {
            Read::NotACall
        };
    }
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Read::NotACall;
    }
    let args_from = skip_ws(text, pos + ARGS.len());
    let (arguments, next) = match value_end(text, args_from) {
        End::At(e) => (&text[args_from..e], Read::Next(e)),
        End::Cut => (&text[args_from..], Read::Stop),
        End::Invalid => return Read::NotACall,
    };
    calls.push(ToolCall {
        id,
        name: name.to_owned(),
        arguments: arguments.to_owned(),
    });
    next
}
