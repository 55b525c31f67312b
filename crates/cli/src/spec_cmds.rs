//! `tessera lookup-create` (a static n-gram cache from a corpus) and `tessera bench-spec`
//! (tokens/s and acceptance of each speculative type against plain decoding on one prompt).

use std::path::PathBuf;

use anyhow::{bail, Context as _};
use clap::Args;
use tessera_core::sampling::SamplingParams;
use tessera_runtime::generate::{
    generate, generate_speculative, tokenize_chat, tokenize_prompt, GenerateParams, GenerateStats,
};
use tessera_runtime::speculative::{format_acceptance, NgramCache, SpecType};
use tessera_tokenizer::chat_template::ChatMessage;

use crate::args::{ComputeArgs, ModelArg};
use crate::clock::StdClock;
use crate::load::{load_model, new_context};
use crate::model_path;
use crate::speculative_args::SpeculativeArgs;

#[derive(Args, Debug)]
pub struct LookupCreateArgs {
    #[command(flatten)]
    pub model: ModelArg,
    /// The corpus (text file).
    #[arg(short = 'f', long = "file")]
    pub file: PathBuf,
    /// Where to write the static cache (also -lcs).
    #[arg(long = "lookup-cache-static", value_name = "FILE")]
    pub lookup_cache_static: PathBuf,
}

/// Tokenizes the corpus with the model's tokenizer and saves its 2-gram statistics.
pub fn lookup_create(args: LookupCreateArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let path = model_path::resolve(args.model.model.as_deref())?;
    let model = load_model(&path)?;
    let tokens = model.tokenizer().encode(&text, true, true);
    let cache = NgramCache::from_corpus(&tokens);
    std::fs::write(&args.lookup_cache_static, cache.to_bytes())
        .with_context(|| format!("cannot write {}", args.lookup_cache_static.display()))?;
    eprintln!(
        "{} tokens → {} n-grams written to {}",
        tokens.len(),
        cache.len(),
        args.lookup_cache_static.display()
    );
    Ok(())
}

#[derive(Args, Debug)]
pub struct BenchSpecArgs {
    #[command(flatten)]
    pub model: ModelArg,
    /// The prompt file (the rewrite workload: tests/prompts/rewrite_code.txt).
    #[arg(
        short = 'f',
        long = "file",
        default_value = "tests/prompts/rewrite_code.txt"
    )]
    pub file: PathBuf,
    /// Apply the model's chat template (the file becomes the user's message).
    #[arg(long = "chat")]
    pub chat: bool,
    /// Tokens to generate per run.
    #[arg(short = 'n', long = "n-predict", default_value_t = 256)]
    pub n_predict: usize,
    /// Types to compare (comma list; `none` is always run first as the reference).
    #[arg(
        long = "types",
        value_delimiter = ',',
        default_value = "ngram-simple,ngram-map-k,ngram-map-k4v,ngram-cache"
    )]
    pub types: Vec<String>,
    /// Runs per type (the fastest counts).
    #[arg(short = 'r', long = "repetitions", default_value_t = 1)]
    pub repetitions: usize,
    #[command(flatten)]
    pub compute: ComputeArgs,
    /// Options of the speculative types (their --spec-type is ignored).
    #[command(flatten)]
    pub spec: SpeculativeArgs,
}

struct Row {
    name: String,
    tokens: Vec<u32>,
    gen_s: f64,
    steps: usize,
    lines: Vec<String>,
}

impl Row {
    fn new(kind: SpecType, stats: GenerateStats, steps: usize, lines: Vec<String>) -> Row {
        Row {
            name: kind.cli_name().to_string(),
            gen_s: stats.generate_s,
            tokens: stats.tokens,
            steps,
            lines,
        }
    }
}

/// Greedy generation with each type; prints a markdown table and fails if any output differs
/// from plain decoding.
pub fn bench_spec(args: BenchSpecArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let mut kinds = vec![SpecType::None];
    for t in &args.types {
        let kind: SpecType = t.parse()?;
        if kind != SpecType::None {
            kinds.push(kind);
        }
    }
    let path = model_path::resolve(args.model.model.as_deref())?;
    let model = load_model(&path)?;
    let tokenizer = model.tokenizer();
    let prompt = if args.chat {
        let template = model
            .chat_template()?
            .context("--chat: the model has no chat template")?;
        tokenize_chat(tokenizer, &template, &[ChatMessage::new("user", text)])?
    } else {
        tokenize_prompt(tokenizer, &text)
    };
    let mut ctx = new_context(&model, &args.compute)?;
    eprintln!("{}", model.describe());
    eprintln!(
        "{} prompt tokens, {} tokens per run, greedy",
        prompt.len(),
        args.n_predict
    );
    let params = GenerateParams {
        max_tokens: Some(args.n_predict),
        sampling: SamplingParams::greedy(),
        ..GenerateParams::default()
    };
    let clock = StdClock::new();
    let mut rows: Vec<Row> = Vec::new();
    for kind in kinds {
        let mut best: Option<Row> = None;
        for _ in 0..args.repetitions.max(1) {
            let mut spec_args = args.spec.clone();
            spec_args.spec_type = kind.cli_name().to_string();
            if kind == SpecType::None {
                spec_args.model_draft = None;
            }
            let speculation = spec_args.build(&model, &args.compute)?;
            // Each run decodes the whole prompt (no prefix reuse from the run before).
            ctx.truncate(0);
            let row = match speculation {
                Some(mut s) => {
                    let (stats, report, chain) = generate_speculative(
                        &mut ctx,
                        &prompt,
                        &params,
                        s.chain,
                        &clock,
                        &mut |_| true,
                    )?;
                    s.chain = chain;
                    s.finish()?;
                    Row::new(kind, stats, report.n_steps, report.lines)
                }
                None => {
                    let stats = generate(&mut ctx, &prompt, &params, &clock, &mut |_| true)?;
                    // The first token comes from the prompt's logits; each later one took a step.
                    let steps = stats.n_generated.saturating_sub(1);
                    Row::new(kind, stats, steps, vec![format_acceptance(0, 0)])
                }
            };
            if best.as_ref().is_none_or(|b| row.gen_s < b.gen_s) {
                best = Some(row);
            }
        }
        rows.push(best.expect("at least one repetition"));
    }
    let reference = rows[0].tokens.clone();
    let base_tps = rate(&rows[0]);
    println!(
        "| type | tokens | target steps | gen s | tokens/s | speed-up | acceptance | identical |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|---|");
    let mut differs = Vec::new();
    for r in &rows {
        let same = r.tokens == reference;
        if !same {
            differs.push(r.name.clone());
        }
        let acceptance = r.lines[0].trim_start_matches("draft acceptance rate = ");
        println!(
            "| {} | {} | {} | {:.2} | {:.1} | {:.2}× | {} | {} |",
            r.name,
            r.tokens.len(),
            r.steps,
            r.gen_s,
            rate(r),
            rate(r) / base_tps,
            acceptance,
            if same { "yes" } else { "NO" }
        );
    }
    for r in &rows[1..] {
        for line in &r.lines[1..] {
            eprintln!("{line}");
        }
    }
    if !differs.is_empty() {
        bail!(
            "output differs from plain decoding with: {}",
            differs.join(", ")
        );
    }
    Ok(())
}

fn rate(r: &Row) -> f64 {
    if r.gen_s > 0.0 {
        r.tokens.len() as f64 / r.gen_s
    } else {
        0.0
    }
}
