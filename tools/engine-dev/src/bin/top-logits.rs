//! Prints the top-10 log-probabilities after a prompt given as token ids:
//! `cargo run --release -p tessera-engine-dev --bin top-logits -- MODEL.gguf 504 3575 282`
//! (a debugging aid for comparing against other implementations). With `GEN=N` it then prints
//! the next N greedy token ids.

use std::sync::Arc;
use tessera_engine_dev::{load_model, top_log_probs};

use tessera_core::{Context, ContextParams};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: top_logits MODEL.gguf ID...")?;
    let ids: Vec<u32> = args.map(|a| a.parse()).collect::<Result<_, _>>()?;
    let n_gen: usize = std::env::var("GEN").map_or(Ok(0), |v| v.parse())?;
    let model = load_model(&path)?;
    eprintln!("{:?}", model.hparams());
    let mut ctx = Context::new(
        model,
        ContextParams {
            n_ctx: ids.len().max(1) + n_gen,
            ..Default::default()
        },
        Box::new(tessera_backend_cpu::CpuBackend::new(Arc::new(
            tessera_core::SequentialPool,
        ))),
    )?;
    ctx.decode(&ids, false)?;
    let logits = ctx.logits();
    for (i, log_prob) in top_log_probs(logits, 10) {
        println!("{i}\t{:.6}\t{:.6}", logits[i], log_prob);
    }
    if n_gen > 0 {
        let mut gen = Vec::with_capacity(n_gen);
        for _ in 0..n_gen {
            let l = ctx.logits();
            let best = (0..l.len()).fold(0, |b, i| if l[i] > l[b] { i } else { b }) as u32;
            gen.push(best);
            ctx.decode(&[best], false)?;
        }
        let gen: Vec<String> = gen.iter().map(|t| t.to_string()).collect();
        println!("gen {}", gen.join(" "));
    }
    Ok(())
}
