//! A backend whose logits are NaN: generation fails with the sampler's typed error, greedy or
//! not, instead of emitting an arbitrary token.

use std::sync::Arc;
use std::task::Poll;

use tessera_backend_cpu::CpuBackend;
use tessera_core::backend::{Backend, Batch, KvLayout};
use tessera_core::graph::Graph;
use tessera_core::sampling::{SamplingError, SamplingParams};
use tessera_core::weights::WeightStore;
use tessera_core::{Context, ContextParams, EngineError, SequentialPool};
use tessera_runtime::generate::{
    generate, tokenize_prompt, GenerateError, GenerateParams, NoClock,
};
use tessera_testkit::*;

/// The CPU backend with every output value replaced by NaN.
struct NanBackend(CpuBackend);

impl Backend for NanBackend {
    fn name(&self) -> &'static str {
        "nan"
    }
    fn init_kv(&mut self, layout: &KvLayout) -> Result<(), EngineError> {
        self.0.init_kv(layout)
    }
    fn compute(
        &mut self,
        graph: &Graph,
        batch: &Batch,
        weights: &WeightStore,
        out: &mut [f32],
    ) -> Result<Poll<()>, EngineError> {
        let done = self.0.compute(graph, batch, weights, out)?;
        out.fill(f32::NAN);
        Ok(done)
    }
    fn kv_n_ctx(&self) -> usize {
        self.0.kv_n_ctx()
    }
    fn kv_shift_checked(
        &mut self,
        weights: &WeightStore,
        seq: usize,
        n_past: usize,
        keep: usize,
        discard: usize,
    ) -> Result<(), EngineError> {
        self.0.kv_shift_checked(weights, seq, n_past, keep, discard)
    }
}

#[test]
fn nan_logits_are_a_sampling_error() {
    let model = load_model(SMOLLM2);
    let prompt = tokenize_prompt(model.tokenizer(), "Hello");
    for sampling in [SamplingParams::greedy(), SamplingParams::default()] {
        let backend = Box::new(NanBackend(CpuBackend::new(Arc::new(SequentialPool))));
        let params = ContextParams {
            n_ctx: 64,
            n_batch: 64,
        };
        let mut ctx = Context::new(model.clone(), params, backend).unwrap();
        let params = GenerateParams {
            max_tokens: Some(4),
            sampling,
            ..GenerateParams::default()
        };
        let r = generate(&mut ctx, &prompt, &params, &NoClock, &mut |_| true);
        assert!(
            matches!(
                r,
                Err(GenerateError::Sampling(SamplingError::NanLogit { .. }))
            ),
            "{r:?}"
        );
    }
}
