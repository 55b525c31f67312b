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
    /// Qwen3.5 / Qwen3-Coder XML: `<tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n`
    /// `</parameter>\n</function>\n</tool_call>`.
    QwenXml,
    /// DeepSeek: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n`
    /// `` ```json\n{...}```<｜tool▁call▁end｜>... ``.
    DeepSeek,
    /// Llama 3.1-3.3: the answer is `{"name": ..., "parameters": {...}}`.
    Llama3,
    /// Mistral: `[TOOL_CALLS]NAME[ARGS]{...}` (Small 3.2 adds `[CALL_ID]ID`; Nemo writes a
    /// JSON array).
    Mistral,
    /// gpt-oss harmony: messages on channels, calls addressed `to=functions.NAME`.
    GptOss,
    /// Gemma 4: `<|tool_call>call:NAME{key:value,...}<tool_call|>`, thinking on
    /// `<|channel>thought`.
    Gemma4,
    /// The template knows no tools: [`super::generic`]'s JSON answer.
    Generic,
}

impl ToolSyntax {
    /// The marker of a call that also ends a thinking block left open (Qwen3.5 may call a
    /// tool straight from its thinking; DeepSeek R1 likewise).
    pub(crate) fn call_ends_thinking(self) -> Option<&'static str> {
        match self {
            ToolSyntax::QwenXml => Some(super::qwen_xml::CALL_OPEN),
            ToolSyntax::DeepSeek => Some(super::deepseek::CALLS_BEGIN),
            _ => None,
        }
    }
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
        let tags = |open: &str, close: &str| {
            Some(ThinkTags {
                open: open.into(),
                close: close.into(),
            })
        };
        let think = if has("[THINK]") {
            tags("[THINK]", "[/THINK]")
        } else if has("<|channel>") {
            tags(super::gemma4::THOUGHT, super::gemma4::CHANNEL_CLOSE)
        } else if has("<think>") {
            tags("<think>", "</think>")
        } else {
            None
        };
        // The most specific markers first: several templates also mention `<tool_call>` or
        // `<function=` in another sense (Seed-OSS wraps XML calls in its own tag, functionary
        // writes JSON after `<function=`).
        let xml_call = has("<tool_call>\\n<function=") || has("<tool_call>\n<function=");
        let tools = if has("<|channel|>") && has("<|start|>") {
            ToolSyntax::GptOss
        } else if has("<|tool_call>") {
            ToolSyntax::Gemma4
        } else if has("tool▁calls▁begin") {
            ToolSyntax::DeepSeek
        } else if has("[TOOL_CALLS]") {
            ToolSyntax::Mistral
        } else if xml_call && has("<parameter=") {
            ToolSyntax::QwenXml
        } else if has("<function=") {
            ToolSyntax::Unknown
        } else if has("<tool_call>") {
            ToolSyntax::Hermes
        } else if has("<|start_header_id|>") && has("\"parameters\"") {
            ToolSyntax::Llama3
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
