//! The engine's `Context` and `Tokenizer` behind the speculative traits, and the draft-model
//! speculator built from a draft context.

use std::sync::Arc;

use super::{DraftModelSpeculator, SpecContext, SpecError, SpecParams, TextCodec, VocabBridge};
use tessera_core::context::Context;
use tessera_core::model::Model;
use tessera_tokenizer::Tokenizer;

impl SpecContext for Context {
    fn decode(&mut self, tokens: &[u32]) -> Result<(), SpecError> {
        Ok(Context::decode(self, tokens, false)?)
    }
    fn last_logits(&self) -> &[f32] {
        self.logits()
    }
    fn n_past(&self) -> usize {
        Context::n_past(self)
    }
    fn truncate(&mut self, n: usize) -> Result<(), SpecError> {
        Context::truncate(self, n);
        Ok(())
    }
    fn n_ctx(&self) -> usize {
        Context::n_ctx(self)
    }
    fn n_batch(&self) -> usize {
        Context::n_batch(self)
    }
}

/// A model's tokenizer as text ↔ tokens (no BOS added, special tokens parsed and rendered).
pub struct ModelCodec(pub Arc<Model>);

impl TextCodec for ModelCodec {
    fn tokenize(&self, text: &str) -> Result<Vec<u32>, SpecError> {
        Ok(self.0.tokenizer().encode(text, false, true))
    }
    fn detokenize(&self, tokens: &[u32]) -> Result<String, SpecError> {
        Ok(self.0.tokenizer().decode(tokens, true))
    }
}

/// True when token ids mean the same in both tokenizers (same size, texts, BOS and EOS), so
/// draft tokens can be used as target tokens directly.
pub fn vocabularies_match(a: &Tokenizer, b: &Tokenizer) -> bool {
    a.vocab_size() == b.vocab_size()
        && a.bos() == b.bos()
        && a.eos() == b.eos()
        && (0..a.vocab_size() as u32).all(|id| a.token_text(id) == b.token_text(id))
}

/// The `draft` speculator on `draft_ctx`, translating through text (with
/// `params.replacements`) when the draft model's vocabulary differs from the target's.
pub fn draft_model_speculator(
    target: &Arc<Model>,
    draft_ctx: Context,
    params: &SpecParams,
) -> Result<DraftModelSpeculator<Context>, SpecError> {
    params.validate()?;
    let draft_model = draft_ctx.model().clone();
    let bridge = if vocabularies_match(target.tokenizer(), draft_model.tokenizer()) {
        None
    } else {
        Some(VocabBridge::new(
            Box::new(ModelCodec(target.clone())),
            Box::new(ModelCodec(draft_model)),
            params.replacements.clone(),
        ))
    };
    Ok(DraftModelSpeculator::new(draft_ctx, bridge, params))
}
