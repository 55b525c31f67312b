//! A browser chat request's plan between `chatPrompt` and `begin` (the tool calls' grammar,
//! how the answer is read), and the answer read as it streams: the page gets OpenAI's deltas
//! (`content`, `reasoning_content`, `tool_calls`) and, at the end, the whole message.

use tessera_runtime::chat_output::{ChatOutput, Delta, OutputFormat, ParseOptions, StreamParser};
use tessera_runtime::constraint::Grammar;
use tessera_runtime::generate::GenerateParams;
use tessera_runtime::request::PreparedChat;

/// One engine's chat answers.
#[derive(Default)]
pub struct ChatReading {
    /// The last chat prompt's plan, kept for the `begin` of that prompt.
    planned: Option<Plan>,
    parser: Option<StreamParser>,
    /// Answers read so far: calls the model gives no id are `call_{answer}_{index}`.
    answers: u64,
}

struct Plan {
    prompt: Vec<u32>,
    grammar: Option<Grammar>,
    output: Option<(OutputFormat, ParseOptions)>,
}

/// What one step's text adds to the message, and the message at the end.
pub struct Read {
    pub delta: Option<Delta>,
    pub message: Option<ChatOutput>,
}

impl ChatReading {
    /// Keeps `prepared`'s plan for the generation of its prompt; the prompt.
    pub fn plan(&mut self, prepared: PreparedChat) -> Vec<u32> {
        self.planned = Some(Plan {
            prompt: prepared.prompt.clone(),
            grammar: prepared.grammar,
            output: prepared.output,
        });
        prepared.prompt
    }

    /// A generation of `prompt` begins: the plan made for that prompt (if the last chat prompt
    /// was this one) gives it its grammar and reader; any other generation is read as text.
    pub fn begin(&mut self, prompt: &[u32], params: &mut GenerateParams) {
        self.parser = None;
        let Some(plan) = self.planned.take().filter(|p| p.prompt == prompt) else {
            return;
        };
        if plan.grammar.is_some() {
            params.grammar = plan.grammar;
        }
        if let Some((format, options)) = plan.output {
            self.answers += 1;
            let n = self.answers;
            self.parser = Some(StreamParser::new(format, options, move |i| {
                format!("call_{n}_{i}")
            }));
        }
    }

    /// Reads a step's text; `done` on the generation's last step.
    pub fn read(&mut self, text: &str, done: bool) -> Read {
        let Some(parser) = self.parser.as_mut() else {
            return Read {
                delta: None,
                message: None,
            };
        };
        let mut delta = parser.push(text);
        if !done {
            return Read {
                delta: Some(delta),
                message: None,
            };
        }
        let (message, last) = self.parser.take().expect("a parser is reading").finish();
        delta.content += &last.content;
        delta.reasoning_content += &last.reasoning_content;
        for call in last.tool_calls {
            match delta.tool_calls.last_mut() {
                // More arguments of the call the step's own delta ended with.
                Some(prev) if prev.index == call.index && call.name.is_none() => {
                    prev.arguments += &call.arguments
                }
                _ => delta.tool_calls.push(call),
            }
        }
        Read {
            delta: Some(delta),
            message: Some(message),
        }
    }
}
