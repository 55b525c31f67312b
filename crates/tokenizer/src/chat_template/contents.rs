//! Where the messages' contents lie in a rendered chat, so that a content's text is tokenized
//! as text even when it spells a control token (`<|im_end|>` typed by a user must not close
//! the turn).
//!
//! Searching the rendering for each content is ambiguous (a content `<|im_end|>` also matches
//! the template's own marker before it), so the template is rendered a second time with each
//! content replaced by a unique placeholder. That skeleton is the template's text with the
//! contents' places marked; the real rendering must be exactly the skeleton with each
//! placeholder replaced by its content, or by the content trimmed (templates often write
//! `content | trim`). A template that does anything else with a content (cuts it, branches on
//! it) gives no spans.

use std::ops::Range;

use super::{ChatContext, ChatMessage, ChatTemplate};

/// Opens and closes a placeholder: private-use characters, which no template writes, and no
/// whitespace, so that trimming leaves a placeholder as it is.
const OPEN: char = '\u{F8F0}';
const CLOSE: char = '\u{F8F1}';

/// A piece of the skeleton: the template's own text, or the place of message `i`'s content.
#[derive(Debug, PartialEq)]
enum Piece<'a> {
    Text(&'a str),
    Content(usize),
}

impl ChatTemplate {
    /// The byte ranges of `rendered` (this template's rendering of `messages`) that are
    /// messages' contents, in order; `None` when the template does not write the contents
    /// verbatim (or trimmed) or fails to render the skeleton.
    pub fn content_spans(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        context: &ChatContext,
        rendered: &str,
    ) -> Option<Vec<Range<usize>>> {
        let marked: Vec<ChatMessage> = messages
            .iter()
            .enumerate()
            .map(|(i, m)| ChatMessage {
                content: placeholder(i),
                ..m.clone()
            })
            .collect();
        // The real input's output cap, so the skeleton never fails where the chat did not.
        let skeleton = self
            .render_bounded(
                &marked,
                add_generation_prompt,
                context,
                super::input_bytes(messages, context),
            )
            .ok()?;
        let contents: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
        match_skeleton(&pieces(&skeleton, messages.len()), &contents, rendered)
    }
}

fn placeholder(i: usize) -> String {
    format!("{OPEN}{i}{CLOSE}")
}

/// Splits the skeleton at its placeholders (of messages below `n`).
fn pieces(skeleton: &str, n: usize) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut text_start = 0;
    let mut at = 0;
    while let Some(open) = skeleton[at..].find(OPEN).map(|o| at + o) {
        let digits_start = open + OPEN.len_utf8();
        let parsed = skeleton[digits_start..].find(CLOSE).and_then(|len| {
            let i = skeleton[digits_start..digits_start + len]
                .parse::<usize>()
                .ok()?;
            (i < n).then_some((i, digits_start + len + CLOSE.len_utf8()))
        });
        match parsed {
            Some((i, end)) => {
                if open > text_start {
                    out.push(Piece::Text(&skeleton[text_start..open]));
                }
                out.push(Piece::Content(i));
                text_start = end;
                at = end;
            }
            None => at = digits_start,
        }
    }
    if text_start < skeleton.len() {
        out.push(Piece::Text(&skeleton[text_start..]));
    }
    out
}

/// Walks `rendered` along the skeleton's pieces: each text must follow exactly, each content
/// as it is or trimmed (the form after which the next text follows).
fn match_skeleton(
    pieces: &[Piece],
    contents: &[&str],
    rendered: &str,
) -> Option<Vec<Range<usize>>> {
    let mut spans = Vec::new();
    let mut at = 0;
    for (k, piece) in pieces.iter().enumerate() {
        match *piece {
            Piece::Text(t) => {
                if !rendered[at..].starts_with(t) {
                    return None;
                }
                at += t.len();
            }
            Piece::Content(i) => {
                let c = contents[i];
                // What must follow the content in the chosen form.
                let fits = |rest: &str| match pieces.get(k + 1) {
                    Some(Piece::Text(t)) => rest.starts_with(t),
                    Some(Piece::Content(_)) => true,
                    None => rest.is_empty(),
                };
                let forms = [c, c.trim_end(), c.trim_start(), c.trim()];
                let form = forms
                    .into_iter()
                    .find(|f| rendered[at..].starts_with(f) && fits(&rendered[at + f.len()..]))?;
                if !form.is_empty() {
                    spans.push(at..at + form.len());
                }
                at += form.len();
            }
        }
    }
    (at == rendered.len()).then_some(spans)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skeleton_pieces() {
        let s = format!("<a>{}</a>{}x{OPEN}9{CLOSE}", placeholder(0), placeholder(1));
        assert_eq!(
            pieces(&s, 2),
            vec![
                Piece::Text("<a>"),
                Piece::Content(0),
                Piece::Text("</a>"),
                Piece::Content(1),
                Piece::Text(&format!("x{OPEN}9{CLOSE}")),
            ]
        );
    }

    #[test]
    fn contents_are_matched_verbatim_or_trimmed() {
        let p = [
            Piece::Text("<s>"),
            Piece::Content(0),
            Piece::Text("</s><s>"),
            Piece::Content(1),
            Piece::Text("</s>"),
        ];
        let r = "<s></s></s><s>hi</s>";
        assert_eq!(
            match_skeleton(&p, &["</s>", " hi "], r),
            Some(vec![3..7, 14..16])
        );
        // A content the template changed otherwise: no spans.
        assert_eq!(match_skeleton(&p, &["</s>", "HI"], r), None);
        assert_eq!(
            match_skeleton(&p, &["</s>", "hi"], "<s></s></s><s>hi</s>!"),
            None
        );
    }
}
