//! `tessera run`: generate after one prompt, streaming the text to stdout.

use std::io::Write as _;

use anyhow::{bail, Context as _};
use tessera_runtime::generate::{
    generate, generate_speculative, tokenize_chat, tokenize_prompt, GenerateParams, GenerateStats,
    StopReason,
};
use tessera_tokenizer::chat_template::ChatMessage;

use crate::args::RunArgs;
use crate::clock::StdClock;
use crate::load::{load_model, new_context};
use crate::model_path;

pub fn run(args: RunArgs) -> anyhow::Result<()> {
    let prompt = match (&args.prompt, &args.file, &args.prompt_pos) {
        (Some(p), _, _) | (None, None, Some(p)) => p.clone(),
        (None, Some(f), _) => {
            std::fs::read_to_string(f).with_context(|| format!("cannot read {}", f.display()))?
        }
        (None, None, None) => {
            bail!("no prompt: give it as an argument, with -p TEXT or with -f FILE")
        }
    };
    let sampling = args.sampling.params();
    // Options are checked before the (slower) model load.
    sampling.validate()?;
    args.spec.params()?;
    let grammar = args.grammar.grammar()?;
    let path = model_path::resolve(args.model.model.as_deref())?;
    let model = load_model(&path)?;
    let tokenizer = model.tokenizer();
    let tokens = if args.chat {
        let template = model
            .chat_template()?
            .context("--chat: the model has no chat template")?;
        let mut messages = Vec::new();
        if let Some(system) = &args.system_prompt {
            messages.push(ChatMessage::new("system", system.clone()));
        }
        messages.push(ChatMessage::new("user", prompt));
        tokenize_chat(tokenizer, &template, &messages)?
    } else {
        tokenize_prompt(tokenizer, &prompt)
    };
    let mut ctx = new_context(&model, &args.compute)?;
    let speculation = args.spec.build(&model, &args.compute)?;
    eprintln!("{}", model.describe());
    eprintln!(
        "seed {}, {} prompt tokens, context {}",
        sampling.seed,
        tokens.len(),
        ctx.n_ctx()
    );

    let params = GenerateParams {
        max_tokens: usize::try_from(args.n_predict).ok(),
        sampling,
        stop: args.stop.clone(),
        ignore_eos: args.ignore_eos,
        grammar,
    };
    let mut stdout = std::io::stdout().lock();
    let mut write_err = None;
    let mut on_text = |text: &str| {
        match stdout
            .write_all(text.as_bytes())
            .and_then(|_| stdout.flush())
        {
            Ok(()) => true,
            // A closed pipe (`| head`) ends generation quietly.
            Err(e) => {
                write_err = Some(e);
                false
            }
        }
    };
    let clock = StdClock::new();
    let (stats, speculation) = match speculation {
        Some(mut s) => {
            let (stats, _, chain) =
                generate_speculative(&mut ctx, &tokens, &params, s.chain, &clock, &mut on_text)?;
            s.chain = chain;
            (stats, Some(s))
        }
        None => (
            generate(&mut ctx, &tokens, &params, &clock, &mut on_text)?,
            None,
        ),
    };
    if let Some(e) = write_err {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(e).context("cannot write to stdout");
        }
        return Ok(());
    }
    writeln!(stdout)?;
    print_stats(&stats);
    if let Some(s) = &speculation {
        s.finish()?;
    }
    Ok(())
}

pub fn print_stats(s: &GenerateStats) {
    let stop = match s.stop {
        StopReason::EndOfGeneration(id) => format!("end of generation (token {id})"),
        StopReason::StopString(i) => format!("stop string #{i}"),
        StopReason::MaxTokens => "token limit".into(),
        StopReason::ContextFull => "context full".into(),
        StopReason::Cancelled => "cancelled".into(),
        StopReason::GrammarComplete => "the grammar is complete".into(),
    };
    eprintln!(
        "prompt: {} tokens in {:.3} s ({:.1} t/s) | generated: {} tokens in {:.3} s ({:.1} t/s) | stop: {stop}",
        s.n_prompt_eval,
        s.prompt_s,
        s.prompt_tokens_per_s(),
        s.n_generated,
        s.generate_s,
        s.generate_tokens_per_s(),
    );
}
