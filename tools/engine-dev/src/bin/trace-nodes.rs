//! Prints a summary (first values, sum of squares) of every node output for a prompt of token
//! ids: `cargo run --release -p tessera-engine-dev --bin trace-nodes -- MODEL.gguf MAX_NODES ID...`
//! A debugging aid for locating where two implementations part. With `DUMP_DIR=dir` set, every
//! node's output is also written there as raw little-endian f32 (`NNNN_Op_ne0xne1.f32`), for
//! comparing with another implementation's per-node dumps.

use std::sync::Arc;
use tessera_engine_dev::{load_model, top_log_probs};

use tessera_backend_cpu::CpuBackend;
use tessera_core::{Context, ContextParams, SequentialPool};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: trace_nodes MODEL.gguf MAX_NODES ID...")?;
    let max_nodes: usize = args.next().ok_or("MAX_NODES")?.parse()?;
    let ids: Vec<u32> = args.map(|a| a.parse()).collect::<Result<_, _>>()?;
    let model = load_model(&path)?;
    let mut backend = CpuBackend::new(Arc::new(SequentialPool));
    backend.set_reference_matmul(std::env::var_os("REFERENCE_MATMUL").is_some());
    let dump = std::env::var_os("DUMP_DIR").map(std::path::PathBuf::from);
    backend.set_trace(Some(Box::new(move |i, node, out| {
        if let Some(dir) = &dump {
            let op = format!("{:?}", node.op);
            let op: String = op.chars().take_while(|c| c.is_alphanumeric()).collect();
            let name = format!("{i:04}_{op}_{}x{}.f32", node.ne[0], node.ne[1]);
            let bytes: Vec<u8> = out.iter().flat_map(|x| x.to_le_bytes()).collect();
            std::fs::write(dir.join(name), bytes).expect("write dump");
        }
        if i < max_nodes {
            let ss: f64 = out.iter().map(|&x| (x as f64).powi(2)).sum();
            let head: Vec<String> = out.iter().take(4).map(|x| format!("{x:.5}")).collect();
            let tail: Vec<String> = out
                .iter()
                .rev()
                .take(2)
                .map(|x| format!("{x:.5}"))
                .collect();
            println!(
                "{i:4} {:?} {:?} ss={ss:.5} head=[{}] tail=[{}]",
                node.ne,
                std::mem::discriminant(&node.op),
                head.join(","),
                tail.join(",")
            );
            let _ = &node.op;
        }
    })));
    let params = ContextParams {
        n_ctx: ids.len(),
        ..Default::default()
    };
    let mut ctx = Context::new(model, params, Box::new(backend))?;
    ctx.decode(&ids, false)?;
    let logits = ctx.logits();
    for (i, log_prob) in top_log_probs(logits, 10) {
        println!("{i}\t{:.4}", log_prob);
    }
    Ok(())
}
