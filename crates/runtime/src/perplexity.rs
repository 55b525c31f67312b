//! Perplexity the way llama.cpp's `llama-perplexity` computes it, so that figures compare:
//!
//! - the whole text is tokenized once (BOS per the model's policy, special-token text NOT parsed);
//! - it is cut into `n_ctx`-token chunks (a partial last chunk is dropped), each evaluated from an
//!   empty KV cache; when the model adds BOS, a chunk's first token is replaced by BOS;
//! - only the second half of each chunk is scored (`first = n_ctx / 2`): position i's logits
//!   predict token i + 1 for i in `first .. n_ctx - 1`;
//! - log-softmax sums in f64; PPL = exp(mean NLL), uncertainty = PPL · sqrt(var(NLL) / (N - 1)).

use tessera_core::context::Context;
use tessera_core::error::EngineError;
use tessera_tokenizer::Tokenizer;

#[derive(Debug, thiserror::Error)]
pub enum PerplexityError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("the text has {n_tokens} tokens; perplexity with a context of {n_ctx} needs at least {} (2 × n_ctx)", 2 * n_ctx)]
    TooFewTokens { n_tokens: usize, n_ctx: usize },
    #[error("context size {0} is too small for perplexity (at least 4)")]
    ContextTooSmall(usize),
}

/// Running sums over scored tokens.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NllAccumulator {
    /// Σ −log p(token)
    pub nll: f64,
    /// Σ (−log p(token))²
    pub nll2: f64,
    pub count: usize,
}

impl NllAccumulator {
    /// Adds −log softmax(logits)\[target\].
    pub fn add(&mut self, logits: &[f32], target: u32) {
        let v = -log_softmax(logits, target as usize);
        self.nll += v;
        self.nll2 += v * v;
        self.count += 1;
    }

    /// exp(mean NLL): the running estimate llama.cpp prints after each chunk.
    pub fn ppl(&self) -> f64 {
        (self.nll / self.count as f64).exp()
    }

    /// llama.cpp's uncertainty of the final estimate (None when the variance is not positive).
    pub fn ppl_uncertainty(&self) -> Option<f64> {
        let n = self.count as f64;
        let mean = self.nll / n;
        let var = self.nll2 / n - mean * mean;
        (var > 0.0 && self.count > 1).then(|| (var / (n - 1.0)).sqrt() * self.ppl())
    }
}

/// log p(target) under softmax(logits); the exponentials are summed in f64 as llama.cpp does.
pub fn log_softmax(logits: &[f32], target: usize) -> f64 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().map(|&l| (l - max).exp() as f64).sum();
    (logits[target] - max) as f64 - sum.ln()
}

/// Tokens of the text the way llama-perplexity tokenizes it.
pub fn tokenize_for_perplexity(tokenizer: &Tokenizer, text: &str) -> Vec<u32> {
    tokenizer.encode(text, true, false)
}

#[derive(Clone, Debug, PartialEq)]
pub struct PerplexityResult {
    pub ppl: f64,
    pub uncertainty: Option<f64>,
    pub n_chunks: usize,
    pub n_tokens: usize,
    /// The running estimate after each chunk.
    pub chunk_estimates: Vec<f64>,
    pub acc: NllAccumulator,
}

/// Perplexity of `tokens` with chunks of `ctx.n_ctx()` tokens. `max_chunks` limits the chunks
/// scored (None: all). `on_chunk(done, total, running_ppl)` is called after each chunk.
pub fn perplexity(
    ctx: &mut Context,
    tokens: &[u32],
    max_chunks: Option<usize>,
    on_chunk: &mut dyn FnMut(usize, usize, f64),
) -> Result<PerplexityResult, PerplexityError> {
    let n_ctx = ctx.n_ctx();
    if n_ctx < 4 {
        return Err(PerplexityError::ContextTooSmall(n_ctx));
    }
    if tokens.len() < 2 * n_ctx {
        return Err(PerplexityError::TooFewTokens {
            n_tokens: tokens.len(),
            n_ctx,
        });
    }
    let model = ctx.model().clone();
    let tokenizer = model.tokenizer();
    let n_vocab = model.n_vocab();
    let bos = tokenizer.bos().filter(|_| tokenizer.add_bos());

    let n_chunks = (tokens.len() / n_ctx).min(max_chunks.unwrap_or(usize::MAX));
    let first = n_ctx / 2;
    let mut acc = NllAccumulator::default();
    let mut chunk_estimates = Vec::with_capacity(n_chunks);
    let mut chunk = Vec::with_capacity(n_ctx);
    for i in 0..n_chunks {
        let start = i * n_ctx;
        chunk.clear();
        chunk.extend_from_slice(&tokens[start..start + n_ctx]);
        if let Some(bos) = bos {
            chunk[0] = bos;
        }
        ctx.clear();
        // Logits of the scored half only (llama-perplexity's batch asks for no others).
        ctx.decode_keeping_last(&chunk, n_ctx - first)?;
        let logits = ctx.all_logits();
        for pos in first..n_ctx - 1 {
            // The original token, not the BOS stand-in (only chunk[0] is replaced, pos + 1 ≥ 1).
            let target = tokens[start + pos + 1];
            let row = pos - first;
            acc.add(&logits[row * n_vocab..(row + 1) * n_vocab], target);
        }
        chunk_estimates.push(acc.ppl());
        on_chunk(i + 1, n_chunks, acc.ppl());
    }
    ctx.clear();
    Ok(PerplexityResult {
        ppl: acc.ppl(),
        uncertainty: acc.ppl_uncertainty(),
        n_chunks,
        n_tokens: tokens.len(),
        chunk_estimates,
        acc,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_softmax_matches_direct_formula() {
        let l = [1.0f32, 2.0, 3.0, -1.0];
        let z: f64 = l.iter().map(|&x| (x as f64).exp()).sum();
        for t in 0..4 {
            let want = (l[t] as f64) - z.ln();
            assert!((log_softmax(&l, t) - want).abs() < 1e-6);
        }
        // Large logits do not overflow.
        assert!((log_softmax(&[1000.0, 1000.0], 0) - (0.5f64).ln()).abs() < 1e-9);
    }

    #[test]
    fn accumulator_ppl_and_uncertainty() {
        let mut a = NllAccumulator::default();
        // Uniform over 4 tokens: every NLL is ln 4, PPL 4, zero variance → no uncertainty.
        for t in 0..4 {
            a.add(&[0.0; 4], t);
        }
        assert!((a.ppl() - 4.0).abs() < 1e-9);
        assert_eq!(a.ppl_uncertainty(), None);
        // Two different NLLs: mean m, var v → ppl = e^m, ± e^m·sqrt(v/(n-1)).
        let mut b = NllAccumulator::default();
        b.add(&[0.0, 0.0], 0); // ln 2
        b.add(&[0.0, 0.0, 0.0, 0.0], 0); // ln 4
        let (x, y) = (2f64.ln(), 4f64.ln());
        let m = (x + y) / 2.0;
        let v = (x * x + y * y) / 2.0 - m * m;
        assert!((b.ppl() - m.exp()).abs() < 1e-9);
        assert!((b.ppl_uncertainty().unwrap() - m.exp() * (v / 1.0).sqrt()).abs() < 1e-9);
    }
}
