//! Times single ops of a model on the WebGPU backend (a profiling aid):
//! `cargo run --profile ci -p tessera-backend-wgpu --example op_time -- MODEL.gguf [TOKENS,..] [NAME]`
//! (token counts, default `1,16`; only weights whose name contains NAME).

use std::sync::Arc;
use std::time::Instant;

use tessera_backend_wgpu::WgpuBackend;
use tessera_core::backend::{Backend, Batch, KvLayout, Segment};
use tessera_core::graph::GraphBuilder;
use tessera_core::weights::WeightStore;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .expect("usage: op_time MODEL.gguf [TOKENS,..] [NAME]");
    let token_counts: Vec<usize> = args
        .next()
        .unwrap_or_else(|| "1,16".into())
        .split(',')
        .map(|t| t.parse().expect("token counts"))
        .collect();
    let only = args.next().unwrap_or_default();
    let file = Arc::new(tessera_gguf::GgufFile::open(&path).expect("open"));
    let mut store = WeightStore::new(file.clone());
    let names: Vec<(String, Vec<u64>)> = file
        .header()
        .tensors
        .iter()
        .filter(|t| t.name.starts_with("blk.0.") || t.name == "token_embd.weight")
        .filter(|t| t.name.contains(&only) || t.name == "token_embd.weight")
        .map(|t| (t.name.clone(), t.dims.clone()))
        .collect();
    let mut ids = Vec::new();
    for (name, dims) in &names {
        let ne: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
        ids.push((name.clone(), store.require(name, &ne).unwrap()));
    }
    let emb = ids
        .iter()
        .find(|(n, _)| n == "token_embd.weight")
        .unwrap()
        .1;
    let mut backend = WgpuBackend::new().unwrap();
    backend
        .init_kv(&KvLayout {
            n_ctx: 64,
            n_seq: 1,
            layers: vec![],
        })
        .unwrap();
    for &n_tokens in &token_counts {
        for (name, id) in &ids {
            let d = store.desc(*id);
            if d.n_rows() == 1 {
                continue;
            }
            let mut b = GraphBuilder::new(&store, n_tokens, n_tokens);
            let x = b.get_rows(emb);
            let k = d.ne[0];
            let n_embd = store.desc(emb).ne[0];
            if k != n_embd {
                continue;
            }
            let y = b.mul_mat(*id, x).unwrap();
            let g = b.finish(y);
            let tokens: Vec<u32> = (0..n_tokens as u32).collect();
            let rows: Vec<usize> = (0..n_tokens).collect();
            let batch = Batch {
                tokens: &tokens,
                segments: &[Segment {
                    seq: 0,
                    pos0: 0,
                    len: tokens.len(),
                }],
                output_rows: &rows,
            };
            let mut out = vec![0.0; d.ne[1] * n_tokens];
            assert!(backend
                .compute(&g, &batch, &store, &mut out)
                .unwrap()
                .is_ready());
            let t = Instant::now();
            for _ in 0..3 {
                assert!(backend
                    .compute(&g, &batch, &store, &mut out)
                    .unwrap()
                    .is_ready());
            }
            let ms = t.elapsed().as_secs_f64() * 1000.0 / 3.0;
            let gmacs = (d.ne[0] * d.ne[1] * n_tokens) as f64 / ms / 1e6;
            println!(
                "n={n_tokens:3} {name:32} {:?} {:?}: {ms:8.2} ms {gmacs:6.3} GMAC/s",
                d.ty, d.ne
            );
        }
    }
}
