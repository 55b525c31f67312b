//! Every field of a generating request with its limits: the one table the checks read their
//! bounds from and docs/js-api.md and docs/serve.md show (a test keeps the docs equal to
//! [`markdown_table`]).

use std::fmt;

/// The largest value an integer field takes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bound {
    Value(i64),
    /// The model's vocabulary size.
    Vocab,
    /// The context's size (the server's: one slot's).
    Context,
    /// No bound but the type's.
    Unbounded,
}

/// What a field accepts beyond its JSON type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    /// Any value of the type.
    Any,
    /// A number from `min` (excluded when `min_excluded`) to `max`.
    Number {
        min: f64,
        max: f64,
        min_excluded: bool,
    },
    /// An integer from `min` to `max`; `minus_one`, when given, is what -1 means (it passes too).
    Integer {
        min: i64,
        max: Bound,
        minus_one: Option<&'static str>,
    },
    /// At most `strings` non-empty strings of at most `bytes` bytes each.
    Strings { strings: usize, bytes: usize },
    /// Token ids below the vocabulary size, biases from `-bias` to `bias` or -Infinity.
    LogitBias { bias: f64 },
    /// Refused (not implemented yet) unless it asks for nothing: `neutral` lists what passes.
    Refused { neutral: &'static str },
    /// Checked by the code that reads it, as described.
    Described(&'static str),
}

/// One field of the request.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    pub name: &'static str,
    /// The JSON type.
    pub kind: &'static str,
    pub limit: Limit,
    pub doc: &'static str,
}

const fn number(min: f64, max: f64) -> Limit {
    Limit::Number {
        min,
        max,
        min_excluded: false,
    }
}

const fn integer(min: i64, max: Bound) -> Limit {
    Limit::Integer {
        min,
        max,
        minus_one: None,
    }
}

const fn field(name: &'static str, kind: &'static str, limit: Limit, doc: &'static str) -> Field {
    Field {
        name,
        kind,
        limit,
        doc,
    }
}

pub const MESSAGES: Field = field(
    "messages",
    "array",
    Limit::Described("at least one; roles system (or developer), user, assistant, tool; content a string or text parts"),
    "Chat completions: the conversation, with assistant turns' `tool_calls` (and `reasoning_content`) and `tool` turns' results (`tool_call_id`). Text parts are joined with newlines; other parts are refused.",
);
pub const PARSE_SPECIAL_IN_CONTENT: Field = field(
    "parse_special_in_content",
    "boolean",
    Limit::Any,
    "Chat completions: the text of control tokens in the messages (such as `<end_of_turn>`) becomes those tokens, as in llama.cpp. Default false: only the chat template's own markers are control tokens; the messages are text.",
);
pub const PROMPT: Field = field(
    "prompt",
    "string",
    Limit::Any,
    "Text completions: the prompt (the server also takes an array of token ids).",
);
pub const MAX_TOKENS: Field = field(
    "max_tokens",
    "integer",
    Limit::Integer {
        min: 1,
        max: Bound::Context,
        minus_one: Some("no limit"),
    },
    "Most tokens to generate (aliases `max_completion_tokens`, `n_predict`). Default: the browser 256, the server its `-n` cap (one slot's context), which also bounds -1.",
);
pub const TEMPERATURE: Field = field(
    "temperature",
    "number",
    number(0.0, 100.0),
    "Sampling temperature; 0 picks the most likely token. Default 0.8.",
);
pub const TOP_K: Field = field(
    "top_k",
    "integer",
    integer(0, Bound::Vocab),
    "Keep the k most likely tokens; 0 disables it. Default 40.",
);
pub const TOP_P: Field = field(
    "top_p",
    "number",
    number(0.0, 1.0),
    "Nucleus sampling; 1 disables it. Default 0.95.",
);
pub const MIN_P: Field = field(
    "min_p",
    "number",
    number(0.0, 1.0),
    "Drop tokens less likely than min_p times the most likely one. Default 0.05.",
);
pub const REPEAT_PENALTY: Field = field(
    "repeat_penalty",
    "number",
    Limit::Number {
        min: 0.0,
        max: 10.0,
        min_excluded: true,
    },
    "Penalty of tokens seen in the last `repeat_last_n`; 1 disables it. Default 1.",
);
pub const REPEAT_LAST_N: Field = field(
    "repeat_last_n",
    "integer",
    Limit::Integer {
        min: 0,
        max: Bound::Context,
        minus_one: Some("the whole context"),
    },
    "Window of the penalties in tokens; 0 turns them off. Default 64.",
);
pub const PRESENCE_PENALTY: Field = field(
    "presence_penalty",
    "number",
    number(-2.0, 2.0),
    "Subtracted from the logit of every token seen. Default 0.",
);
pub const FREQUENCY_PENALTY: Field = field(
    "frequency_penalty",
    "number",
    number(-2.0, 2.0),
    "Subtracted once per occurrence of a token seen. Default 0.",
);
pub const SEED: Field = field(
    "seed",
    "integer",
    Limit::Integer {
        min: 0,
        max: Bound::Unbounded,
        minus_one: Some("a random seed"),
    },
    "Sampling seed; without one every request samples differently.",
);
pub const STOP: Field = field(
    "stop",
    "string or array",
    Limit::Strings {
        strings: 16,
        bytes: 256,
    },
    "Generation ends before any of these strings; they are not part of the output.",
);
pub const LOGIT_BIAS: Field = field(
    "logit_bias",
    "object or array",
    Limit::LogitBias { bias: 100.0 },
    "`{\"token id\": bias}` (or `[[id, bias], ...]`) added to the logits; -Infinity (JS only) bans a token.",
);
pub const IGNORE_EOS: Field = field(
    "ignore_eos",
    "boolean",
    Limit::Any,
    "Never end at an end-of-generation token (benchmarks). Default false.",
);
pub const SPECULATIVE: Field = field(
    "speculative",
    "object",
    Limit::Described(
        "`type`: none, ngram-simple, ngram-map-k, ngram-map-k4v, ngram-cache (not draft)",
    ),
    "Draftless speculative decoding: the same text in fewer model passes on repetitive output.",
);
pub const STREAM: Field = field(
    "stream",
    "boolean",
    Limit::Any,
    "Stream the answer as chunks. Default false.",
);
pub const N: Field = field(
    "n",
    "integer",
    Limit::Refused { neutral: "1" },
    "Several choices per request.",
);
pub const RESPONSE_FORMAT: Field = field(
    "response_format",
    "object",
    Limit::Described(
        "`{\"type\": \"text\"}`, `json_object` (llama-server: with an optional `schema`) or `json_schema` with `json_schema.schema`; a schema up to 64 KiB",
    ),
    "Structured output: the answer is JSON, following the schema when one is given.",
);
pub const GRAMMAR: Field = field(
    "grammar",
    "string",
    Limit::Described(
        "up to 64 KiB: llama.cpp's GBNF (`root ::= ...`, converted) or a Lark grammar (llguidance's syntax, `start: ...`)",
    ),
    "llama-server's constrained output: the answer follows the grammar.",
);
pub const JSON_SCHEMA: Field = field(
    "json_schema",
    "object",
    Limit::Described("a JSON schema up to 64 KiB"),
    "llama-server's constrained output: the answer is JSON following the schema.",
);
pub const TOOLS: Field = field(
    "tools",
    "array",
    Limit::Described("at most 128 `{\"type\": \"function\", \"function\": {name, description, parameters}}`; names of 1 to 64 letters, digits, `_`, `-`, `.`; each `parameters` schema up to 64 KiB"),
    "Chat: functions the model may call; its calls come back as `tool_calls` (finish reason `tool_calls`).",
);
pub const TOOL_CHOICE: Field = field(
    "tool_choice",
    "string or object",
    Limit::Described("`auto` (default), `none`, `required`, or `{\"type\": \"function\", \"function\": {\"name\": ...}}`"),
    "Whether the model may, must, or must not call tools, or which one it calls (required and named calls follow the tools' schemas).",
);
pub const PARALLEL_TOOL_CALLS: Field = field(
    "parallel_tool_calls",
    "boolean",
    Limit::Any,
    "Several calls in one answer. Default false (llama-server's).",
);
pub const REASONING_FORMAT: Field = field(
    "reasoning_format",
    "string",
    Limit::Described("`auto` (default), `deepseek`, `deepseek-legacy` or `none`"),
    "Chat: where a thinking model's thinking goes: `reasoning_content` (auto, deepseek), or left in `content` (none).",
);
pub const CHAT_TEMPLATE_KWARGS: Field = field(
    "chat_template_kwargs",
    "object",
    Limit::Described("up to 4096 scalars, keys and characters"),
    "Chat: extra variables for the model's chat template (e.g. `{\"enable_thinking\": false}`).",
);
pub const ENABLE_THINKING: Field = field(
    "enable_thinking",
    "boolean",
    Limit::Any,
    "Chat: the thinking switch of templates that have one (Qwen3, SmolLM3).",
);
pub const REASONING_EFFORT: Field = field(
    "reasoning_effort",
    "string",
    Limit::Any,
    "Chat: `low`, `medium` or `high`, for templates that read it (gpt-oss).",
);
pub const FUNCTIONS: Field = field(
    "functions",
    "array",
    Limit::Refused { neutral: "[]" },
    "The older form of `tools`.",
);
pub const LOGPROBS: Field = field(
    "logprobs",
    "boolean",
    Limit::Refused { neutral: "false" },
    "Log-probabilities of the tokens.",
);
pub const TOP_LOGPROBS: Field = field(
    "top_logprobs",
    "integer",
    Limit::Refused { neutral: "0" },
    "Log-probabilities of the most likely alternatives.",
);
pub const N_PROBS: Field = field(
    "n_probs",
    "integer",
    Limit::Refused { neutral: "0" },
    "llama-server's probabilities of the most likely tokens.",
);

/// Every field, in the docs' order.
pub const FIELDS: &[Field] = &[
    MESSAGES,
    PARSE_SPECIAL_IN_CONTENT,
    PROMPT,
    STREAM,
    MAX_TOKENS,
    TEMPERATURE,
    TOP_K,
    TOP_P,
    MIN_P,
    REPEAT_PENALTY,
    REPEAT_LAST_N,
    PRESENCE_PENALTY,
    FREQUENCY_PENALTY,
    SEED,
    STOP,
    LOGIT_BIAS,
    IGNORE_EOS,
    SPECULATIVE,
    N,
    RESPONSE_FORMAT,
    GRAMMAR,
    JSON_SCHEMA,
    TOOLS,
    TOOL_CHOICE,
    PARALLEL_TOOL_CALLS,
    REASONING_FORMAT,
    CHAT_TEMPLATE_KWARGS,
    ENABLE_THINKING,
    REASONING_EFFORT,
    FUNCTIONS,
    LOGPROBS,
    TOP_LOGPROBS,
    N_PROBS,
];

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bound::Value(v) => write!(f, "{v}"),
            Bound::Vocab => f.write_str("the vocabulary size"),
            Bound::Context => f.write_str("the context size"),
            Bound::Unbounded => f.write_str("any"),
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Limit::Any => f.write_str("any"),
            Limit::Number {
                min,
                max,
                min_excluded,
            } => {
                if min_excluded {
                    write!(f, "above {min}, at most {max}")
                } else {
                    write!(f, "from {min} to {max}")
                }
            }
            Limit::Integer {
                min,
                max: Bound::Unbounded,
                minus_one,
            } => {
                write!(f, "≥ {min}")?;
                write_minus_one(f, minus_one)
            }
            Limit::Integer {
                min,
                max,
                minus_one,
            } => {
                write!(f, "{min} to {max}")?;
                write_minus_one(f, minus_one)
            }
            Limit::Strings { strings, bytes } => write!(
                f,
                "at most {strings} non-empty strings of up to {bytes} bytes"
            ),
            Limit::LogitBias { bias } => write!(
                f,
                "token ids below the vocabulary size; biases from -{bias} to {bias}, or -Infinity"
            ),
            Limit::Refused { neutral } => {
                write!(f, "not supported yet; only {neutral} is accepted")
            }
            Limit::Described(text) => f.write_str(text),
        }
    }
}

fn write_minus_one(f: &mut fmt::Formatter<'_>, minus_one: Option<&str>) -> fmt::Result {
    match minus_one {
        Some(meaning) => write!(f, ", or -1 ({meaning})"),
        None => Ok(()),
    }
}

/// [`FIELDS`] as the Markdown table the docs carry.
pub fn markdown_table() -> String {
    let mut out = String::from("| Field | Type | Accepted | Meaning |\n|---|---|---|---|\n");
    for f in FIELDS {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            f.name, f.kind, f.limit, f.doc
        ));
    }
    out
}
