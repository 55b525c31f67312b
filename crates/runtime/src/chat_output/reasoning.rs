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
/// `tags` (none: all of it is the rest).
pub fn split(tags: Option<&ThinkTags>, options: &ParseOptions, text: &str, partial: bool) -> Split {
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
    let (reasoning, rest) = match body.find(tags.close.as_str()) {
        Some(i) => (&body[..i], &body[i + tags.close.len()..]),
        None if partial => (
            &body[..body.len() - partial_marker_len(body, &tags.close)],
            "",
        ),
        None => (body, ""),
    };
    Split {
        reasoning: reasoning.trim().to_owned(),
        rest: rest.to_owned(),
        found: true,
    }
}
