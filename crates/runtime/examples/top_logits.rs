//! Prints the top-10 log-probabilities after a prompt given as token ids:
//! `cargo run --release -p tessera-runtime --example top_logits -- MODEL.gguf 504 3575 282`
//! (a debugging aid for comparing against other implementations). With `GEN=N` it then prints
//! the next N greedy token ids.

use std::sync::Arc;

use tessera_core::{Context, ContextParams, Model};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: top_logits MODEL.gguf ID...")?;
    let ids: Vec<u32> = args.map(|a| a.parse()).collect::<Result<_, _>>()?;
    let n_gen: usize = std::env::var("GEN").map_or(Ok(0), |v| v.parse())?;
    let model = Arc::new(Model::load(
        Arc::new(tessera_gguf::GgufFile::open(&path)?),
        &mut |_| {},
    )?);
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
    let m = logits.iter().cloned().fold(f32::NEG_INFINITY, f32::max) as f64;
    let lz = m + logits
        .iter()
        .map(|&x| (x as f64 - m).exp())
        .sum::<f64>()
        .ln();
    let mut idx: Vec<usize> = (0..logits.len()).collect();
    idx.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
    for &i in &idx[..10] {
        println!("{i}\t{:.6}\t{:.6}", logits[i], logits[i] as f64 - lz);
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
