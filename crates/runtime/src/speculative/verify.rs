//! Verification of a draft against the target's own sampling.
//!
//! The target evaluates `[last, d0, d1, …]` in one batch; row `i` of the logits is the target's
//! distribution after `d0..d(i-1)`. The target samples row 0 exactly as plain decoding would;
//! if that equals `d0` the draft token is accepted and row 1 is sampled, and so on. The first
//! mismatch (or the row after the last draft token) yields the target's own token, so every step
//! commits at least one token.
//!
//! Greedy: sampling is the arg-max, so the committed tokens are exactly those of plain decoding
//! (given batch-independent logits).
//!
//! Temperature > 0: every drafter here proposes one token per position with certainty (a point
//! mass q = δ_d). Standard speculative sampling then accepts d with probability
//! min(1, p(d)/q(d)) = p(d) and on rejection draws from the residual max(0, p − q), i.e. from p
//! with d removed and renormalised. Drawing x ~ p and accepting iff x = d is that same
//! procedure: P(accept) = p(d), and given x ≠ d, x is distributed as p(·)/(1 − p(d)) over the
//! other tokens. So the committed tokens follow the target's distribution exactly, with the
//! sampler's full chain (penalties, top-k, top-p, min-p, temperature) as the definition of p.

use super::SpecError;
use tessera_core::sampling::Sampler;

/// The outcome of verifying one draft.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// Draft tokens accepted (a prefix of the draft).
    pub n_accepted: usize,
    /// The committed tokens: the accepted draft tokens, then the target's next token.
    pub tokens: Vec<u32>,
}

/// Verifies `draft` against `rows` (`draft.len() + 1` rows of `n_vocab` logits); every committed
/// token is passed to `sampler.accept` in order, as plain decoding does.
pub fn verify_draft(
    sampler: &mut Sampler,
    draft: &[u32],
    rows: &[f32],
    n_vocab: usize,
) -> Result<Verified, SpecError> {
    if n_vocab == 0 || rows.len() < (draft.len() + 1) * n_vocab {
        return Err(SpecError::Context(format!(
            "verification needs {} rows of {n_vocab} logits, got {} values",
            draft.len() + 1,
            rows.len()
        )));
    }
    let mut tokens = Vec::with_capacity(draft.len() + 1);
    for (i, row) in rows.chunks_exact(n_vocab).take(draft.len() + 1).enumerate() {
        let t = sampler.sample(row)?;
        sampler.accept(t);
        tokens.push(t);
        if draft.get(i) != Some(&t) {
            break;
        }
    }
    Ok(Verified {
        n_accepted: tokens.len() - 1,
        tokens,
    })
}
