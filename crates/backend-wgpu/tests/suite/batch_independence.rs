//! On the GPU too a token's logits must not depend on how its sequence was batched: decoded
//! one token at a time, in one batch, or in micro-batches of any size (the matmul kernels for
//! one token and for many must sum in the same order, and attention must not see the batch).

use std::path::PathBuf;
use std::sync::Arc;

use tessera_backend_wgpu::WgpuBackend;
use tessera_core::{Context, ContextParams, Model};

fn load(file: &str) -> Arc<Model> {
    let path = std::env::var_os("TESSERA_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models"))
        .join(file);
    let gguf = tessera_gguf::GgufFile::open(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/fetch-models.sh)", path.display()));
    Arc::new(Model::load(Arc::new(gguf), &mut |_| {}).expect("load model"))
}

fn context(model: &Arc<Model>, n_batch: usize) -> Context {
    let backend = WgpuBackend::new().expect("a WebGPU adapter (lavapipe in CI)");
    let params = ContextParams { n_ctx: 64, n_batch };
    Context::new(model.clone(), params, Box::new(backend)).unwrap()
}

fn check(file: &str, prompt: &[u32]) {
    let model = load(file);
    let n_vocab = model.n_vocab();
    let mut one = context(&model, 64);
    let mut stepwise = Vec::new();
    for &t in prompt {
        one.decode(&[t], false).unwrap();
        stepwise.extend_from_slice(one.logits());
    }
    // One batch, and micro-batches of 4 (a full one and a partial one).
    for n_batch in [64, 4] {
        let mut ctx = context(&model, n_batch);
        ctx.decode(prompt, true).unwrap();
        let all = ctx.all_logits();
        let differing: Vec<usize> = (0..prompt.len())
            .filter(|&i| {
                let (a, b) = (
                    &all[i * n_vocab..][..n_vocab],
                    &stepwise[i * n_vocab..][..n_vocab],
                );
                a.iter().zip(b).any(|(x, y)| x.to_bits() != y.to_bits())
            })
            .collect();
        assert!(
            differing.is_empty(),
            "{file}: positions {differing:?} differ from one-at-a-time decoding (n_batch {n_batch})"
        );
    }
}

#[test]
fn smollm2_logits_do_not_depend_on_batching() {
    check(
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        &[504, 3575, 282, 4649, 314, 7042, 30, 198, 504],
    );
}

#[test]
fn gemma3_logits_do_not_depend_on_batching() {
    check(
        "gemma-3-270m-q4_k_m.gguf",
        &[2, 818, 5279, 529, 7001, 563, 9079],
    );
}
