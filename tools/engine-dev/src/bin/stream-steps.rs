//! Concurrent greedy streams, as a server's slots run them: `-s` generations of `-n` tokens
//! each, stepped round by round, first each in its own context (one forward pass per stream per
//! round: the weights read once per stream), then as sequences of one context stepped together
//! (`step_together`: one forward pass per round). Prints the aggregate generated tokens/s of
//! both and checks that every stream's tokens are the same.
//! `cargo run --profile ci -p tessera-engine-dev --bin stream-steps -- MODEL.gguf [-s 4] [-n 64]
//! [-t 2]`

use std::sync::Arc;
use std::time::Instant;

use tessera_backend_cpu::CpuBackend;
use tessera_core::sampling::SamplingParams;
use tessera_core::{Context, ContextParams, Model};
use tessera_runtime::generate::{tokenize_prompt, GenerateParams, NoClock};
use tessera_runtime::generation::{step_together, Generation, GenerationOptions, Step};

use tessera_engine_dev::{load_model, usize_flag};
use tessera_testkit::RayonPool;

const PROMPTS: [&str; 4] = [
    "Once upon a time",
    "The capital of France is",
    "Here is a list of fruits:",
    "def fibonacci(n):",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args
        .first()
        .ok_or("usage: streams MODEL.gguf [-s N] [-n N] [-t N]")?;
    let opt = |flag: &str, default: usize| usize_flag(&args, flag, default);
    let (n_streams, n_gen, threads) = (opt("-s", 4), opt("-n", 64), opt("-t", 2));
    let model = load_model(path)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    pool.install(|| {
        let (apart, t_apart) = run(&model, n_streams, n_gen, threads, false);
        let (shared, t_shared) = run(&model, n_streams, n_gen, threads, true);
        assert_eq!(
            apart, shared,
            "a stream's tokens differ between the two ways"
        );
        let n: usize = shared.iter().map(Vec::len).sum();
        println!(
            "{n_streams} streams x {n_gen} tokens, {threads} threads: a context per stream \
             {:.1} tok/s, one batch per round {:.1} tok/s ({:.2}x)",
            n as f64 / t_apart,
            n as f64 / t_shared,
            t_apart / t_shared
        );
    });
    Ok(())
}

/// Every stream's tokens and the seconds all took.
fn run(
    model: &Arc<Model>,
    n_streams: usize,
    n_gen: usize,
    threads: usize,
    together: bool,
) -> (Vec<Vec<u32>>, f64) {
    let params = ContextParams {
        n_ctx: 256,
        n_batch: 512,
    };
    let backend = || Box::new(CpuBackend::new(Arc::new(RayonPool(threads))));
    let mut contexts: Vec<Context> = if together {
        vec![Context::with_sequences(model.clone(), params, n_streams, backend()).unwrap()]
    } else {
        (0..n_streams)
            .map(|_| Context::new(model.clone(), params.clone(), backend()).unwrap())
            .collect()
    };
    let gen_params = GenerateParams {
        max_tokens: Some(n_gen),
        sampling: SamplingParams::greedy(),
        stop: vec![],
        ignore_eos: true,
        grammar: None,
    };
    let t = Instant::now();
    let mut generations: Vec<(usize, Generation)> = (0..n_streams)
        .map(|i| {
            let (c, seq) = if together { (0, i) } else { (i, 0) };
            contexts[c].select(seq).unwrap();
            let prompt = tokenize_prompt(model.tokenizer(), PROMPTS[i % PROMPTS.len()]);
            let g = Generation::start(
                &mut contexts[c],
                prompt,
                gen_params.clone(),
                GenerationOptions::default(),
                &NoClock,
            )
            .unwrap();
            (c, g)
        })
        .collect();
    let mut tokens = vec![Vec::new(); n_streams];
    while generations.iter().any(|(_, g)| !g.is_finished()) {
        for (c, ctx) in contexts.iter_mut().enumerate() {
            let mut mine: Vec<&mut Generation> = generations
                .iter_mut()
                .filter(|(gc, g)| *gc == c && !g.is_finished())
                .map(|(_, g)| g)
                .collect();
            let seqs: Vec<usize> = mine.iter().map(|g| g.sequence() + c).collect();
            for (seq, step) in seqs
                .into_iter()
                .zip(step_together(ctx, &mut mine, &NoClock))
            {
                match step.map(Result::unwrap) {
                    Some(Step::Tokens { ids, .. }) => tokens[seq].extend(ids),
                    Some(Step::Done { stats, .. }) => tokens[seq] = stats.tokens,
                    _ => {}
                }
            }
        }
    }
    (tokens, t.elapsed().as_secs_f64())
}
