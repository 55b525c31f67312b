//! Qwen3.5 / Qwen3-Coder XML tool calls (also Nemotron 3 Nano, StepFun 3.5):
//!
//! ```text
//! <tool_call>
//! <function=NAME>
//! <parameter=P>
//! VALUE
//! </parameter>
//! </function>
//! </tool_call>
//! ```
//!
//! Values are plain text, read by the parameter's schema type: a string parameter's value is
//! the text itself (less the newline on each side), any other is JSON when it reads as a
//! value of that type. The first call may come without `<tool_call>`. The arguments' JSON is
//! built as the parameters arrive, so that it only ever grows while streaming.

use serde_json::Value;

use super::json_scan::skip_ws;
use super::{partial_marker_len, Calls, Markers, ToolCall};

pub const CALL_OPEN: &str = "<tool_call>";
const CALL_CLOSE: &str = "</tool_call>";
const FUNCTION_OPEN: &str = "<function=";
const FUNCTION_CLOSE: &str = "</function>";
const PARAM_OPEN: &str = "<parameter=";
const PARAM_CLOSE: &str = "</parameter>";
/// What a value ends with: the newline before its closing tag is not part of it.
const VALUE_END: &str = "\n</parameter>";

pub fn parse(text: &str, tools: &[Value], partial: bool) -> Calls {
    let mut content = String::new();
    let mut calls = Vec::new();
    let starts = [CALL_OPEN, FUNCTION_OPEN];
    let mut starts_at = Markers::new(text, &starts);
    let mut pos = 0;
    while let Some((at, which)) = starts_at.text_until(&mut content, pos, partial) {
        let function = if which == 0 {
            let after = skip_ws(text, at + CALL_OPEN.len());
            if text[after..].starts_with(FUNCTION_OPEN) {
                after
            } else if partial && FUNCTION_OPEN.starts_with(&text[after..]) {
                break;
            } else {
                // Not a call after all: the marker is text.
                content.push_str(CALL_OPEN);
                pos = at + CALL_OPEN.len();
                continue;
            }
        } else {
            at
        };
        match call(text, function, tools, partial) {
            Read::Call(c, end) => {
                calls.push(c);
                match end {
                    Some(end) => pos = end,
                    None => break,
                }
            }
            Read::Pending => break,
            Read::NotACall => {
                content.push_str(&text[function..function + FUNCTION_OPEN.len()]);
                pos = function + FUNCTION_OPEN.len();
            }
        }
    }
    Calls { content, calls }
}

enum Read {
    /// A call, and where the text after it starts (none: the text ends inside it).
    Call(ToolCall, Option<usize>),
    /// The call's name is not whole yet.
    Pending,
    NotACall,
}

/// The call whose `<function=` is at `at`.
fn call(text: &str, at: usize, tools: &[Value], partial: bool) -> Read {
    let name_from = at + FUNCTION_OPEN.len();
    let Some(name_len) = text[name_from..].find('>') else {
        let name_so_far = !text[name_from..].contains(['<', '\n']);
        return if partial && name_so_far {
            Read::Pending
        } else {
            Read::NotACall
        };
    };
    let name = text[name_from..name_from + name_len].trim();
    if name.is_empty() || name.contains(['<', '\n']) {
        return Read::NotACall;
    }
    let schema = parameters_schema(tools, name);
    let mut arguments = String::from("{");
    let mut first = true;
    let mut member = |arguments: &mut String, text: &str| {
        if !first {
            arguments.push(',');
        }
        first = false;
        arguments.push_str(text);
    };
    let mut pos = name_from + name_len + 1;
    let found = |arguments: String| ToolCall {
        id: String::new(),
        name: name.to_owned(),
        arguments,
    };
    loop {
        pos = skip_ws(text, pos);
        let rest = &text[pos..];
        if rest.starts_with(FUNCTION_CLOSE) {
            arguments.push('}');
            let mut end = skip_ws(text, pos + FUNCTION_CLOSE.len());
            if text[end..].starts_with(CALL_CLOSE) {
                end += CALL_CLOSE.len();
            } else if partial && !text[end..].is_empty() && CALL_CLOSE.starts_with(&text[end..]) {
                return Read::Call(found(arguments), None);
            }
            return Read::Call(found(arguments), Some(end));
        }
        if rest.starts_with(PARAM_OPEN) {
            let key_from = pos + PARAM_OPEN.len();
            let Some(key_len) = text[key_from..].find('>') else {
                return Read::Call(found(close_if(arguments, partial)), None);
            };
            let key = text[key_from..key_from + key_len].trim();
            let key_json = serde_json::to_string(key).unwrap_or_default();
            let string_only = is_string_only(schema.and_then(|s| s.get(key)));
            let mut value_from = key_from + key_len + 1;
            if text[value_from..].starts_with('\n') {
                value_from += 1;
            }
            match text[value_from..].find(PARAM_CLOSE) {
                Some(len) => {
                    let raw = &text[value_from..value_from + len];
                    let raw = raw.strip_suffix('\n').unwrap_or(raw);
                    let value = typed_value(raw, schema.and_then(|s| s.get(key)));
                    member(&mut arguments, &format!("{key_json}:{value}"));
                    pos = value_from + len + PARAM_CLOSE.len();
                    continue;
                }
                None if partial => {
                    // A string streams as it comes; another value shows once it is whole.
                    if string_only && value_from <= text.len() {
                        let raw = &text[value_from..];
                        let raw = &raw[..raw.len() - partial_marker_len(raw, VALUE_END)];
                        let quoted = serde_json::to_string(raw).unwrap_or_default();
                        let open = &quoted[..quoted.len() - 1];
                        member(&mut arguments, &format!("{key_json}:{open}"));
                    }
                    return Read::Call(found(arguments), None);
                }
                None => {
                    // Cut off: the value is the rest, up to the function's end if it came.
                    let rest = &text[value_from..];
                    let raw = rest.find(FUNCTION_CLOSE).map_or(rest, |e| &rest[..e]);
                    let raw = raw.trim_end_matches('\n');
                    let value = typed_value(raw, schema.and_then(|s| s.get(key)));
                    member(&mut arguments, &format!("{key_json}:{value}"));
                    arguments.push('}');
                    return Read::Call(found(arguments), None);
                }
            }
        }
        if rest.is_empty()
            || (partial && (PARAM_OPEN.starts_with(rest) || FUNCTION_CLOSE.starts_with(rest)))
        {
            return Read::Call(found(close_if(arguments, partial)), None);
        }
        // Text between parameters is not part of the call: skip to the next tag.
        let next = [PARAM_OPEN, FUNCTION_CLOSE]
            .iter()
            .filter_map(|m| rest.find(m))
            .min();
        match next {
            Some(i) => pos += i,
            None => return Read::Call(found(close_if(arguments, partial)), None),
        }
    }
}

/// The arguments closed, unless the call may still go on.
fn close_if(mut arguments: String, partial: bool) -> String {
    if !partial {
        arguments.push('}');
    }
    arguments
}

/// The `properties` of the named tool's parameters schema.
fn parameters_schema<'a>(tools: &'a [Value], name: &str) -> Option<&'a Value> {
    tools
        .iter()
        .map(|t| t.get("function").unwrap_or(t))
        .find(|f| f.get("name").and_then(Value::as_str) == Some(name))?
        .get("parameters")?
        .get("properties")
}

/// The JSON types a schema allows (empty when it does not say).
fn schema_types(schema: Option<&Value>) -> Vec<&str> {
    let Some(schema) = schema else {
        return Vec::new();
    };
    let mut types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    for key in ["anyOf", "oneOf"] {
        for option in schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            types.extend(schema_types(Some(option)));
        }
    }
    let strings = |v: &Value| v.as_array().is_some_and(|a| a.iter().all(Value::is_string));
    if types.is_empty()
        && (schema.get("enum").is_some_and(strings)
            || schema.get("const").is_some_and(Value::is_string))
    {
        types.push("string");
    }
    types
}

fn is_string_only(schema: Option<&Value>) -> bool {
    let types = schema_types(schema);
    !types.is_empty() && types.iter().all(|t| *t == "string")
}

fn type_fits(value: &Value, ty: &str) -> bool {
    match ty {
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        _ => false,
    }
}

/// A parameter's text as a JSON value of its schema's type: JSON where the text reads as a
/// value the schema allows (or as any value when it says no type), a string otherwise.
fn typed_value(raw: &str, schema: Option<&Value>) -> String {
    let types = schema_types(schema);
    let as_string = || serde_json::to_string(raw).unwrap_or_default();
    if !types.is_empty() && types.iter().all(|t| *t == "string") {
        return as_string();
    }
    match serde_json::from_str::<Value>(raw.trim()) {
        Ok(v) if types.is_empty() || types.iter().any(|t| type_fits(&v, t)) => v.to_string(),
        Ok(v) if !types.contains(&"string") => v.to_string(),
        _ => as_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_follow_the_schema() {
        let s = serde_json::json!({"type": ["string", "null"]});
        assert_eq!(typed_value("null", Some(&s)), "null");
        assert_eq!(typed_value("hello", Some(&s)), "\"hello\"");
        let i = serde_json::json!({"type": "integer"});
        assert_eq!(typed_value("42", Some(&i)), "42");
        let e = serde_json::json!({"enum": ["1", "2"]});
        assert_eq!(typed_value("1", Some(&e)), "\"1\"");
        assert_eq!(typed_value("[1]", None), "[1]");
        assert_eq!(typed_value("{x", None), "\"{x\"");
    }
}
