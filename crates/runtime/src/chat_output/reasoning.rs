//! The thinking block at the start of an answer (`<think>...</think>` and the like).

use super::format::ThinkTags;
use super::{partial_marker_len, ParseOptions, ReasoningFormat};

pub struct Split {
    pub reasoning: String,
    /// What follows the thinking (all of the text when there is none).
    pub rest: String,
    /// Whether a thinking block was read (the parts are then shown trimmed).
    pub found: bool,
}

/// Splits `text` into its thinking and the rest, for a format whose thinking is marked by
/// `tags` (none: all of it is the rest). `ended_by`, when given, is a marker that also ends
/// the thinking (a call made from it); the rest then starts with it.
pub fn split(
    tags: Option<&ThinkTags>,
    ended_by: Option<&str>,
    options: &ParseOptions,
    text: &str,
    partial: bool,
) -> Split {
    let plain = |rest: &str| Split {
        reasoning: String::new(),
        rest: rest.to_owned(),
        found: false,
    };
    let Some(tags) = tags else {
        return plain(text);
    };
    if options.reasoning == ReasoningFormat::None {
        // The thinking stays in the content as written, with the opening the prompt holds.
        let opened = options.prompt_opens_reasoning.as_deref().unwrap_or("");
        return plain(&format!("{opened}{text}"));
    }
    let body = match &options.prompt_opens_reasoning {
        Some(_) => text,
        None => {
            let lead = text.len() - text.trim_start().len();
            let after = &text[lead..];
            if let Some(body) = after.strip_prefix(tags.open.as_str()) {
                body
            } else if partial && tags.open.starts_with(after) {
                // Whitespace, or the start of the opening tag: nothing to show yet.
                return plain("");
            } else {
                return plain(text);
            }
        }
    };
    let close = body.find(tags.close.as_str());
    let call = ended_by.and_then(|marker| body.find(marker));
    let (reasoning, rest) = match (close, call) {
        (Some(i), Some(c)) if c < i => (&body[..c], &body[c..]),
        (Some(i), _) => (&body[..i], &body[i + tags.close.len()..]),
        (None, Some(c)) => (&body[..c], &body[c..]),
        (None, None) if partial => {
            let hold = partial_marker_len(body, &tags.close)
                .max(ended_by.map_or(0, |marker| partial_marker_len(body, marker)));
            (&body[..body.len() - hold], "")
        }
        (None, None) => (body, ""),
    };
    Split {
        reasoning: reasoning.trim().to_owned(),
        rest: rest.to_owned(),
        found: true,
    }
}
