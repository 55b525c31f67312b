//! A chat answer read into OpenAI's message parts (when the request offered tools, or the
//! model thinks): `content`, `reasoning_content` and `tool_calls`, whole or as stream deltas.

use tessera_runtime::chat_output::{self, ChatOutput, OutputFormat, ParseOptions, StreamParser};
use tessera_runtime::constraint::Grammar;
use tessera_runtime::generate::StopReason;

/// What a chat request adds to its generation: the tool calls' grammar, and how its answer
/// is read (`None`: plain content).
#[derive(Default)]
pub struct ChatPlan {
    pub grammar: Option<Grammar>,
    pub output: Option<(OutputFormat, ParseOptions)>,
}

/// How one answer is read, and the number that names its calls.
pub struct Reading {
    pub format: OutputFormat,
    pub options: ParseOptions,
    /// The response's number: a call the model gives no id is `call_{number}_{index}`.
    pub number: u64,
}

impl Reading {
    pub fn stream(&self) -> StreamParser {
        let n = self.number;
        StreamParser::new(self.format.clone(), self.options.clone(), move |i| {
            format!("call_{n}_{i}")
        })
    }

    pub fn whole(&self, text: &str) -> ChatOutput {
        let n = self.number;
        chat_output::whole(&self.format, &self.options, text, |i| {
            format!("call_{n}_{i}")
        })
    }
}

/// OpenAI's finish reason: `tool_calls` when an answer that ended by itself called tools.
pub fn finish_reason(stop: StopReason, called_tools: bool) -> &'static str {
    match stop {
        StopReason::MaxTokens | StopReason::ContextFull => "length",
        _ if called_tools => "tool_calls",
        StopReason::EndOfGeneration(_)
        | StopReason::StopString(_)
        | StopReason::Cancelled
        | StopReason::GrammarComplete => "stop",
    }
}
