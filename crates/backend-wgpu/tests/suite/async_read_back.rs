//! The browser's read-back protocol, run natively: in asynchronous read-back mode a step only
//! submits and answers `Poll::Pending`; once the read-back signal is ready the same call
//! returns the result. Results must be bit-identical to the synchronous mode's, a pending step
//! must commit nothing, and a step abandoned for another one must not disturb what follows.

use std::path::PathBuf;
use std::sync::Arc;
use std::task::Poll;

use tessera_backend_wgpu::{Gpu, WgpuBackend};
use tessera_core::sampling::{Sampler, SamplingParams};
use tessera_core::{Context, ContextParams, EngineError, Model};

fn model() -> Arc<Model> {
    let dir = std::env::var_os("TESSERA_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models"));
    let path = dir.join("SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(
        path.exists(),
        "{} is missing: run scripts/fetch-models.sh",
        path.display()
    );
    let gguf = tessera_gguf::GgufFile::open(&path).expect("open model");
    Arc::new(Model::load(Arc::new(gguf), &mut |_| {}).expect("load model"))
}

fn context(model: &Arc<Model>, asynchronous: bool) -> (Context, Gpu) {
    let mut backend = WgpuBackend::new().expect("a wgpu adapter");
    backend.set_async_read_back(asynchronous);
    let gpu = backend.gpu().clone();
    let params = ContextParams {
        n_ctx: 64,
        n_batch: 16,
    };
    let ctx = Context::new(model.clone(), params, Box::new(backend)).unwrap();
    (ctx, gpu)
}

/// Runs `f` until it stops answering `Poll::Pending`, polling the device in between (the
/// browser awaits the signal's future instead). Returns the result and the pending count.
fn settle<T>(
    gpu: &Gpu,
    mut f: impl FnMut() -> Result<Poll<T>, EngineError>,
) -> (Result<T, EngineError>, usize) {
    let mut pending = 0;
    loop {
        match f() {
            Ok(Poll::Pending) => {
                pending += 1;
                assert!(pending < 10_000, "the read-back never completed");
                let signal = gpu.read_back_signal();
                while !signal.is_ready() {
                    gpu.wait().unwrap();
                }
            }
            Ok(Poll::Ready(v)) => return (Ok(v), pending),
            Err(e) => return (Err(e), pending),
        }
    }
}

#[test]
fn async_steps_match_sync_steps_bit_for_bit() {
    let model = model();
    let prompt = model
        .tokenizer()
        .encode("The capital of France is", true, true);
    let (mut sync_ctx, _) = context(&model, false);
    let (mut async_ctx, gpu) = context(&model, true);

    // Logits of the prompt.
    sync_ctx.decode(&prompt, false).unwrap();
    let (r, pending) = settle(&gpu, || async_ctx.poll_decode(&prompt, false));
    r.unwrap();
    assert_eq!(pending, 1, "one submission, one wait");
    assert_eq!(async_ctx.n_past(), prompt.len());
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(async_ctx.logits()), bits(sync_ctx.logits()));

    // Greedy steps sampled on the GPU.
    let mut token = tessera_core::backend::argmax(sync_ctx.logits()) as u32;
    for _ in 0..2 {
        let want = sync_ctx.decode_greedy(&[token], false).unwrap();
        let (got, pending) = settle(&gpu, || async_ctx.poll_decode_greedy(&[token], false));
        assert_eq!(got.unwrap(), want);
        assert_eq!(pending, 1);
        token = want[0];
    }

    // Steps sampled by the GPU chain (llama.cpp's defaults, a seed, a repeat penalty and a
    // bias): each step's draw is taken once, and the repeated call returns the same token.
    let params = SamplingParams {
        seed: 42,
        repeat_penalty: 1.3,
        logit_bias: vec![(token, -2.0)],
        ..SamplingParams::default()
    };
    let (mut sync_sampler, mut async_sampler) = (
        Sampler::new(params.clone()).unwrap(),
        Sampler::new(params).unwrap(),
    );
    for _ in 0..3 {
        let want = sync_ctx
            .decode_sampled(&[token], &sync_sampler.device_step())
            .unwrap()
            .unwrap();
        let step = async_sampler.device_step();
        let (got, pending) = settle(&gpu, || async_ctx.poll_decode_sampled(&[token], &step));
        assert_eq!(got.unwrap().expect("sampling"), want);
        assert_eq!(pending, 1);
        sync_sampler.accept(want);
        async_sampler.accept(want);
        token = want;
    }
    assert_eq!(async_ctx.tokens(), sync_ctx.tokens());
}

#[test]
fn a_pending_step_commits_nothing_and_can_be_abandoned() {
    let model = model();
    let prompt = model.tokenizer().encode("Once upon a time", true, true);
    let (mut sync_ctx, _) = context(&model, false);
    let (mut async_ctx, gpu) = context(&model, true);

    assert!(matches!(
        async_ctx.poll_decode(&prompt, false),
        Ok(Poll::Pending)
    ));
    assert_eq!(async_ctx.n_past(), 0, "a pending step commits no token");
    // Another call (a new request) abandons the step in flight without waiting for it.
    let other = &prompt[..2];
    let (r, _) = settle(&gpu, || async_ctx.poll_decode_greedy(other, false));
    let want = sync_ctx.decode_greedy(other, false).unwrap();
    assert_eq!(r.unwrap(), want);
    assert_eq!(async_ctx.tokens(), other);
    // And the context carries on exactly like the synchronous one.
    let (r, _) = settle(&gpu, || async_ctx.poll_decode_greedy(&prompt[2..], false));
    assert_eq!(
        r.unwrap(),
        sync_ctx.decode_greedy(&prompt[2..], false).unwrap()
    );
}
