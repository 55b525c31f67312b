//! Which output format a model writes, told from its chat template.

use tessera_tokenizer::chat_template::{ChatContext, ChatMessage, ChatTemplate, ChatTemplateError};

/// How thinking is marked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThinkTags {
    pub open: String,
    pub close: String,
}

/// How tool calls are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolSyntax {
    /// The template writes tool calls in a format Tessera does not read: none are parsed.
    Unknown,
    /// `<tool_call>{json}</tool_call>`.
    Hermes,
    /// The template knows no tools: [`super::generic`]'s JSON answer.
    Generic,
}

/// A model's output format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputFormat {
    pub think: Option<ThinkTags>,
    pub tools: ToolSyntax,
}

impl OutputFormat {
    /// The format a chat template's model writes (from the markers the template renders).
    pub fn detect(template_source: &str) -> OutputFormat {
        let has = |marker: &str| template_source.contains(marker);
        let think = has("<think>").then(|| ThinkTags {
            open: "<think>".into(),
            close: "</think>".into(),
        });
        // Templates that write calls in syntaxes not read yet (Qwen3.5's XML `<function=`,
        // DeepSeek's `<｜tool▁calls▁begin｜>`) are told apart from Hermes first.
        let tools = if has("<function=") || has("tool▁calls▁begin") {
            ToolSyntax::Unknown
        } else if has("<tool_call>") {
            ToolSyntax::Hermes
        } else if !has("tool") {
            ToolSyntax::Generic
        } else {
            ToolSyntax::Unknown
        };
        OutputFormat { think, tools }
    }
}

impl OutputFormat {
    /// The thinking block the generation prompt leaves open, from its opening tag (Qwen3's
    /// `<think>\n`): the answer starts inside it. The generation prompt is what rendering the
    /// conversation with `add_generation_prompt` adds to rendering it without.
    pub fn opened_reasoning(
        &self,
        template: &ChatTemplate,
        messages: &[ChatMessage],
        context: &ChatContext,
    ) -> Result<Option<String>, ChatTemplateError> {
        let Some(tags) = &self.think else {
            return Ok(None);
        };
        let with = template.render_with(messages, true, context)?;
        let without = template.render_with(messages, false, context)?;
        let common = with
            .char_indices()
            .zip(without.chars())
            .find(|((_, a), b)| a != b)
            .map_or(with.len().min(without.len()), |((i, _), _)| i);
        let tail = &with[common..];
        Ok(tail.rfind(tags.open.as_str()).and_then(|at| {
            let opened = &tail[at..];
            (!opened.contains(tags.close.as_str())).then(|| opened.to_owned())
        }))
    }
}
