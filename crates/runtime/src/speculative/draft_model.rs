//! `draft`: a small model with its own context drafts greedily while it is confident.
//!
//! When the draft model's vocabulary differs from the target's, tokens cross over as text:
//! target tokens → text → `--spec-replace` substitutions (target string → draft string) → draft
//! tokens, and the draft back the same way with the substitutions reversed.

use super::{SpecError, SpecParams, SpecType, Speculator};

/// What the draft model's context must offer (the engine's `Context` implements it; tests use
/// small fake models).
pub trait SpecContext: Send {
    /// Evaluates `tokens` after the current KV contents (at most `n_batch` of them), keeping
    /// the last row's logits.
    fn decode(&mut self, tokens: &[u32]) -> Result<(), SpecError>;
    /// Logits of the last row of the last `decode`.
    fn last_logits(&self) -> &[f32];
    /// Tokens in the KV cache.
    fn n_past(&self) -> usize;
    /// Drops KV entries from position `n` on.
    fn truncate(&mut self, n: usize) -> Result<(), SpecError>;
    fn n_ctx(&self) -> usize;
    fn n_batch(&self) -> usize;
}

/// The draft is ranked like llama.cpp's draft sampler: top-k 10, the best candidate's
/// probability taken among those 10.
const DRAFT_TOP_K: usize = 10;

/// Text ↔ tokens for one vocabulary.
pub trait TextCodec: Send {
    /// Tokens of `text`, no BOS/EOS added, special-token text parsed as special tokens.
    fn tokenize(&self, text: &str) -> Result<Vec<u32>, SpecError>;
    /// Text of `tokens`, special tokens rendered.
    fn detokenize(&self, tokens: &[u32]) -> Result<String, SpecError>;
}

/// Translates token sequences between a target and a draft vocabulary through text.
pub struct VocabBridge {
    target: Box<dyn TextCodec>,
    draft: Box<dyn TextCodec>,
    /// (target string, draft string) pairs, applied in order.
    replacements: Vec<(String, String)>,
}

impl VocabBridge {
    pub fn new(
        target: Box<dyn TextCodec>,
        draft: Box<dyn TextCodec>,
        replacements: Vec<(String, String)>,
    ) -> Self {
        VocabBridge {
            target,
            draft,
            replacements,
        }
    }

    pub fn to_draft(&self, target_tokens: &[u32]) -> Result<Vec<u32>, SpecError> {
        let mut text = self.target.detokenize(target_tokens)?;
        for (t, d) in &self.replacements {
            text = text.replace(t.as_str(), d);
        }
        self.draft.tokenize(&text)
    }

    pub fn to_target(&self, draft_tokens: &[u32]) -> Result<Vec<u32>, SpecError> {
        let mut text = self.draft.detokenize(draft_tokens)?;
        for (t, d) in &self.replacements {
            text = text.replace(d.as_str(), t);
        }
        self.target.tokenize(&text)
    }
}

/// The best token of `logits` (lowest id on ties) and its probability among the top
/// `DRAFT_TOP_K` logits.
pub fn top_token_confidence(logits: &[f32]) -> Option<(u32, f32)> {
    let mut top: Vec<(f32, u32)> = Vec::with_capacity(DRAFT_TOP_K + 1);
    for (i, &l) in logits.iter().enumerate() {
        if l.is_nan() {
            continue;
        }
        // Keep `top` sorted descending by logit, ascending id on ties.
        if top.len() == DRAFT_TOP_K && l <= top[DRAFT_TOP_K - 1].0 {
            continue;
        }
        let at = top.partition_point(|&(tl, _)| tl >= l);
        top.insert(at, (l, i as u32));
        top.truncate(DRAFT_TOP_K);
    }
    let &(best, id) = top.first()?;
    if best == f32::NEG_INFINITY {
        return None;
    }
    let sum: f64 = top.iter().map(|&(l, _)| ((l - best) as f64).exp()).sum();
    Some((id, (1.0 / sum) as f32))
}

/// Drafts with a model context of its own.
pub struct DraftModelSpeculator<C: SpecContext> {
    ctx: C,
    bridge: Option<VocabBridge>,
    n_max: usize,
    p_min: f32,
    /// Tokens (draft vocabulary) in the draft context's KV cache.
    evaluated: Vec<u32>,
}

impl<C: SpecContext> DraftModelSpeculator<C> {
    /// `bridge` is `None` when the two vocabularies are the same.
    pub fn new(ctx: C, bridge: Option<VocabBridge>, params: &SpecParams) -> Self {
        DraftModelSpeculator {
            ctx,
            bridge,
            n_max: params.n_max,
            p_min: params.p_min,
            evaluated: Vec::new(),
        }
    }

    /// Brings the draft KV cache to `tokens` (reusing the common prefix) plus `last`.
    fn sync(&mut self, tokens: &[u32], last: u32) -> Result<(), SpecError> {
        let common = self
            .evaluated
            .iter()
            .zip(tokens)
            .take_while(|(a, b)| a == b)
            .count();
        if common < self.evaluated.len() || self.ctx.n_past() != common {
            self.ctx.truncate(common)?;
            self.evaluated.truncate(common);
        }
        let n_batch = self.ctx.n_batch().max(1);
        for chunk in tokens[common..].chunks(n_batch) {
            self.ctx.decode(chunk)?;
            self.evaluated.extend_from_slice(chunk);
        }
        self.ctx.decode(&[last])?;
        self.evaluated.push(last);
        Ok(())
    }
}

impl<C: SpecContext> Speculator for DraftModelSpeculator<C> {
    fn kind(&self) -> SpecType {
        SpecType::Draft
    }

    fn begin(&mut self, _prompt: &[u32]) -> Result<(), SpecError> {
        Ok(())
    }

    fn draft(&mut self, history: &[u32], last: u32, out: &mut Vec<u32>) -> Result<(), SpecError> {
        let translated;
        let (tokens, last) = match &self.bridge {
            None => (history, last),
            Some(bridge) => {
                // Translate history and last together, so token boundaries (a word's leading
                // space) come out as the draft tokenizer would make them.
                let mut all = Vec::with_capacity(history.len() + 1);
                all.extend_from_slice(history);
                all.push(last);
                translated = bridge.to_draft(&all)?;
                let Some((&last_d, hist_d)) = translated.split_last() else {
                    return Ok(());
                };
                (hist_d, last_d)
            }
        };
        // The draft context must hold the history, `last` and the draft.
        if tokens.len() + 1 + self.n_max > self.ctx.n_ctx() {
            return Ok(());
        }
        self.sync(tokens, last)?;
        let mut drafted = Vec::with_capacity(self.n_max);
        while drafted.len() < self.n_max {
            let Some((t, p)) = top_token_confidence(self.ctx.last_logits()) else {
                break;
            };
            drafted.push(t);
            if drafted.len() == self.n_max || p < self.p_min {
                break;
            }
            self.ctx.decode(&[t])?;
            self.evaluated.push(t);
        }
        match &self.bridge {
            None => out.extend(drafted),
            Some(bridge) => {
                let mut back = bridge.to_target(&drafted)?;
                back.truncate(self.n_max);
                out.extend(back);
            }
        }
        Ok(())
    }

    fn accept(&mut self, _n_accepted: usize) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confidence_is_among_the_top_10() {
        let mut logits = vec![f32::NEG_INFINITY; 50];
        logits[7] = 2.0;
        logits[3] = 2.0; // tie: the lower id wins
        let (t, p) = top_token_confidence(&logits).unwrap();
        assert_eq!((t, p), (3, 0.5));
        // 20 equal logits: only 10 count → p = 0.1.
        let flat = vec![1.0f32; 20];
        let (t, p) = top_token_confidence(&flat).unwrap();
        assert_eq!(t, 0);
        assert!((p - 0.1).abs() < 1e-6);
        assert!(top_token_confidence(&[f32::NEG_INFINITY; 4]).is_none());
    }

    /// Characters as tokens; the draft vocabulary is offset by 1000.
    struct Chars(u32);
    impl TextCodec for Chars {
        fn tokenize(&self, text: &str) -> Result<Vec<u32>, SpecError> {
            Ok(text.chars().map(|c| c as u32 + self.0).collect())
        }
        fn detokenize(&self, tokens: &[u32]) -> Result<String, SpecError> {
            tokens
                .iter()
                .map(|&t| {
                    char::from_u32(t - self.0).ok_or_else(|| SpecError::Translation("bad".into()))
                })
                .collect()
        }
    }

    #[test]
    fn bridge_applies_replacements_both_ways() {
        let b = VocabBridge::new(
            Box::new(Chars(0)),
            Box::new(Chars(1000)),
            vec![("<t>".into(), "<d>".into())],
        );
        let target: Vec<u32> = "a<t>b".chars().map(|c| c as u32).collect();
        let draft = b.to_draft(&target).unwrap();
        assert_eq!(
            draft,
            "a<d>b".chars().map(|c| c as u32 + 1000).collect::<Vec<_>>()
        );
        assert_eq!(b.to_target(&draft).unwrap(), target);
    }
}
