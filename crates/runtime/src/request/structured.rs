//! Structured output in a request: OpenAI's `response_format` and llama-server's `json_schema`
//! and `grammar`, turned into the one [`Grammar`] a generation follows.
//!
//! A `grammar` is Lark (llguidance's dialect) or llama.cpp's GBNF, converted to Lark
//! ([`crate::constraint::gbnf_to_lark`]).
//!
//! A schema or grammar is code from the client: a schema is built only while it stays under
//! [`MAX_GRAMMAR_BYTES`] (a larger one is read and skipped, then refused), and compiling it is
//! bounded by the grammar engine's own limits ([`crate::constraint`]).

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::asked::bounded;
use super::fields;
use super::RequestError;
use crate::constraint::{gbnf_to_lark, looks_like_gbnf, Grammar};

/// Largest schema (scalars, keys, elements and characters of its strings) or grammar text
/// (bytes): 64 Ki. Real schemas are a few kilobytes, and the grammar engine's compile time and
/// memory grow with the size.
pub const MAX_GRAMMAR_BYTES: usize = 64 << 10;

/// A schema as the request gave it: its tree while it is at most [`MAX_GRAMMAR_BYTES`], else
/// only the fact that it is larger.
#[derive(Clone, Debug, PartialEq)]
pub enum Schema {
    Kept(Value),
    TooLarge,
}

impl<'de> Deserialize<'de> for Schema {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Schema, D::Error> {
        Ok(bounded(d, MAX_GRAMMAR_BYTES)?.map_or(Schema::TooLarge, Schema::Kept))
    }
}

/// OpenAI's `response_format`.
#[derive(Deserialize, Debug, Clone)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ResponseFormat {
    Text,
    /// Any JSON object, or (llama-server's extension) one following `schema`.
    JsonObject {
        schema: Option<Schema>,
    },
    JsonSchema {
        json_schema: JsonSchemaFormat,
    },
}

/// `response_format.json_schema`: `schema` is what the answer follows; `name` and `strict` are
/// accepted (OpenAI requires a name; every answer here follows its schema strictly).
#[derive(Deserialize, Debug, Clone)]
pub struct JsonSchemaFormat {
    #[allow(dead_code)]
    pub name: Option<String>,
    pub schema: Option<Schema>,
    #[allow(dead_code)]
    pub strict: Option<bool>,
}

/// The grammar the request's `response_format`, `json_schema` and `grammar` ask for (at most
/// one of them may ask for one).
pub fn grammar(
    response_format: Option<&ResponseFormat>,
    json_schema: Option<&Schema>,
    grammar: Option<&str>,
) -> Result<Option<Grammar>, RequestError> {
    let from_format = match response_format {
        None | Some(ResponseFormat::Text) => None,
        Some(ResponseFormat::JsonObject { schema }) => Some((
            "response_format.schema",
            match schema {
                Some(s) => schema_value("response_format.schema", s)?,
                None => serde_json::json!({"type": "object"}),
            },
        )),
        Some(ResponseFormat::JsonSchema { json_schema }) => {
            let field = "response_format.json_schema.schema";
            let schema = json_schema
                .schema
                .as_ref()
                .ok_or_else(|| RequestError::new(field, format!("'{field}' is missing")))?;
            Some((field, schema_value(field, schema)?))
        }
    };
    let from_schema = match json_schema {
        Some(s) if *s != Schema::Kept(Value::Null) => {
            Some(("json_schema", schema_value("json_schema", s)?))
        }
        _ => None,
    };
    let from_grammar = match grammar {
        Some(g) if !g.is_empty() => Some(lark(g)?),
        _ => None,
    };
    let asked = [
        from_format.as_ref().map(|(f, _)| *f),
        from_schema.as_ref().map(|(f, _)| *f),
        from_grammar.as_ref().map(|_| fields::GRAMMAR.name),
    ];
    let mut names = asked.iter().flatten();
    if let (Some(a), Some(b)) = (names.next(), names.next()) {
        return Err(RequestError::new(
            *b,
            format!("'{a}' and '{b}' both constrain the answer: give one"),
        ));
    }
    Ok(from_format
        .or(from_schema)
        .map(|(_, schema)| Grammar::JsonSchema(schema))
        .or(from_grammar))
}

/// A schema's tree, if it is small enough. An empty schema (`{}`) asks for a JSON object, as
/// llama-server reads it.
fn schema_value(field: &str, schema: &Schema) -> Result<Value, RequestError> {
    let value = match schema {
        Schema::Kept(v) => v,
        Schema::TooLarge => {
            return Err(RequestError::new(
                field,
                format!(
                    "'{field}' is larger than {MAX_GRAMMAR_BYTES} scalars, keys and characters"
                ),
            ))
        }
    };
    match value {
        Value::Object(o) if o.is_empty() => Ok(serde_json::json!({"type": "object"})),
        Value::Object(_) | Value::Bool(true) => Ok(value.clone()),
        _ => Err(RequestError::new(
            field,
            format!("'{field}' must be a JSON schema (an object)"),
        )),
    }
}

/// `grammar` as a Lark grammar: Lark (llguidance's dialect, `start: ...`, or anything starting
/// with `%llguidance`) as it is, llama.cpp's GBNF (`root ::= ...`) converted.
fn lark(text: &str) -> Result<Grammar, RequestError> {
    let name = fields::GRAMMAR.name;
    if text.len() > MAX_GRAMMAR_BYTES {
        return Err(RequestError::new(
            name,
            format!("'{name}' is longer than {MAX_GRAMMAR_BYTES} bytes"),
        ));
    }
    // `%llguidance {...}` and Lark's `start: ...` are not GBNF's `name ::=`.
    if !looks_like_gbnf(text) {
        return Ok(Grammar::Lark(text.to_owned()));
    }
    gbnf_to_lark(text)
        .map(Grammar::Lark)
        .map_err(|e| RequestError::new(name, format!("'{name}': {e}")))
}
