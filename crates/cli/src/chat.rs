//! `tessera chat`: an interactive conversation on stdin with the model's chat template.
//! Each turn re-renders the whole history; the KV cache keeps the common prefix, so only the
//! new part is processed.

use std::io::{BufRead as _, Write as _};

use anyhow::Context as _;
use tessera_runtime::generate::{generate, tokenize_chat, GenerateError, GenerateParams};
use tessera_tokenizer::chat_template::ChatMessage;

use crate::args::ChatArgs;
use crate::clock::StdClock;
use crate::load::{load_model, new_context};
use crate::model_path;
use crate::run::print_stats;

pub fn chat(args: ChatArgs) -> anyhow::Result<()> {
    let sampling = args.sampling.params();
    sampling.validate()?;
    let grammar = args.grammar.grammar()?;
    let path = model_path::resolve(args.model.model.as_deref())?;
    let model = load_model(&path)?;
    let tokenizer = model.tokenizer();
    let template = model
        .chat_template()?
        .context("the model has no chat template")?;
    let mut ctx = new_context(&model, &args.compute)?;
    eprintln!("{}", model.describe());
    eprintln!(
        "seed {}; type a message, or /reset to start over; Ctrl-D ends",
        sampling.seed
    );

    let system: Vec<ChatMessage> = args
        .system_prompt
        .iter()
        .map(|s| ChatMessage::new("system", s.clone()))
        .collect();
    let mut history = system.clone();
    let params = GenerateParams {
        max_tokens: usize::try_from(args.n_predict).ok(),
        sampling,
        stop: Vec::new(),
        ignore_eos: false,
        grammar,
    };
    let clock = StdClock::new();
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    loop {
        eprint!("\n> ");
        std::io::stderr().flush()?;
        let Some(line) = lines.next() else { break };
        let line = line.context("cannot read stdin")?;
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        if text == "/reset" {
            history = system.clone();
            ctx.clear();
            eprintln!("(conversation cleared)");
            continue;
        }
        history.push(ChatMessage::new("user", text));
        let tokens = tokenize_chat(tokenizer, &template, &history)?;
        let mut answer = String::new();
        let mut stdout = std::io::stdout().lock();
        let result = generate(&mut ctx, &tokens, &params, &clock, &mut |piece| {
            answer.push_str(piece);
            stdout
                .write_all(piece.as_bytes())
                .and_then(|_| stdout.flush())
                .is_ok()
        });
        writeln!(stdout)?;
        match result {
            Ok(stats) => print_stats(&stats),
            Err(e @ GenerateError::PromptTooLong { .. }) => {
                history.pop();
                eprintln!("error: {e}; /reset starts a new conversation");
                continue;
            }
            Err(e) => return Err(e.into()),
        }
        history.push(ChatMessage::new("assistant", answer));
    }
    eprintln!();
    Ok(())
}
