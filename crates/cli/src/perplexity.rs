//! `tessera perplexity`: llama-perplexity's method and output lines.

use std::io::Write as _;

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressStyle};
use tessera_core::ContextParams;
use tessera_runtime::perplexity::{perplexity as compute, tokenize_for_perplexity};

use crate::args::PerplexityArgs;
use crate::load::{context_on, load_model, thread_pool};
use crate::model_path;

pub fn perplexity(args: PerplexityArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let path = model_path::resolve(args.model.model.as_deref())?;
    let model = load_model(&path)?;
    let tokens = tokenize_for_perplexity(model.tokenizer(), &text);
    let params = ContextParams {
        n_ctx: args.ctx_size,
        n_batch: args.batch_size.min(args.ctx_size).max(1),
    };
    let mut ctx = context_on(&model, params, thread_pool(args.threads)?, &args.backend)?;
    let n_chunks_all = tokens.len() / args.ctx_size.max(1);
    eprintln!("{}", model.describe());
    eprintln!(
        "{} tokens, {} chunks of {} (scoring the second half of each), batch {}",
        tokens.len(),
        n_chunks_all,
        args.ctx_size,
        ctx.n_batch()
    );
    let max_chunks = usize::try_from(args.chunks).ok();
    let bar = ProgressBar::new(n_chunks_all.min(max_chunks.unwrap_or(usize::MAX)) as u64)
        .with_style(
            ProgressStyle::with_template(
                "perplexity [{bar:30}] {pos}/{len} chunks, {elapsed} elapsed, ETA {eta}",
            )
            .expect("static template")
            .progress_chars("=> "),
        );
    let mut stdout = std::io::stdout();
    let result = compute(&mut ctx, &tokens, max_chunks, &mut |done, _total, ppl| {
        bar.suspend(|| {
            print!("[{done}]{ppl:.4},");
            let _ = stdout.flush();
        });
        bar.set_position(done as u64);
    })?;
    bar.finish_and_clear();
    println!();
    match result.uncertainty {
        Some(u) => println!("Final estimate: PPL = {:.4} +/- {:.5}", result.ppl, u),
        None => println!(
            "Final estimate: PPL = {:.4} (uncertainty undefined: non-positive variance)",
            result.ppl
        ),
    }
    Ok(())
}
