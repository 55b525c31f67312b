//! Handing out committed tokens as text, and the end of a generation.

use tessera_tokenizer::{StreamDecoder, Tokenizer};

use super::params::{Clock, GenerateStats, StopReason};
use super::{Generation, Phase, Step};

impl Generation {
    /// Hands out a committed token (already accepted by the sampler), ending the generation
    /// if it ends it; otherwise the token is decoded next (unless tokens of a verified draft,
    /// already in the KV cache, are still to be handed out: then the last of those is).
    pub(super) fn emit(&mut self, token: u32, clock: &dyn Clock) -> Step {
        let model = self.model.clone();
        let tokenizer = model.tokenizer();
        self.tokens.push(token);
        if tokenizer.is_eog(token) && !self.params.ignore_eos {
            return self.done(StopReason::EndOfGeneration(token), String::new(), clock);
        }
        let piece = decode_utf8(tokenizer, &mut self.partial_char, token);
        let out = self.stops.push(&piece);
        if let Some(i) = out.stopped {
            return self.done(StopReason::StopString(i), out.text, clock);
        }
        if self.max_tokens_reached() {
            return self.done(StopReason::MaxTokens, out.text, clock);
        }
        self.phase = Phase::Decode(token);
        Step::Tokens {
            ids: vec![token],
            text: out.text,
        }
    }

    pub(super) fn done(&mut self, reason: StopReason, text: String, clock: &dyn Clock) -> Step {
        let (text, stats) = self.finish(reason, text, clock);
        Step::Done {
            text,
            stats,
            speculative: self.spec.as_ref().map(|s| s.report()),
        }
    }

    /// Flushes held-back text (unless a stop string or the caller ended it), computes the
    /// stats and ends the generation.
    pub(super) fn finish(
        &mut self,
        reason: StopReason,
        mut text: String,
        clock: &dyn Clock,
    ) -> (String, GenerateStats) {
        if !matches!(reason, StopReason::StopString(_) | StopReason::Cancelled) {
            let mut decoder = StreamDecoder::new(self.model.tokenizer(), false);
            decoder.push_bytes(&std::mem::take(&mut self.partial_char));
            let rest = self.stops.push(&decoder.finish());
            text.push_str(&rest.text);
            if rest.stopped.is_none() {
                text.push_str(&self.stops.finish());
            }
        }
        let now = clock.now_s();
        let prefilled = !matches!(self.phase, Phase::Prefill(_)) || reason == StopReason::Cancelled;
        let (prompt_s, generate_s) = if prefilled {
            (self.t_prompt_done - self.t_start, now - self.t_prompt_done)
        } else {
            (0.0, 0.0)
        };
        self.phase = Phase::Finished;
        self.verified.clear();
        let stats = GenerateStats {
            n_prompt_eval: self.prompt.len() - self.kept,
            n_prompt: self.prompt.len(),
            n_generated: self.tokens.len(),
            prompt_s,
            generate_s,
            stop: reason,
            tokens: std::mem::take(&mut self.tokens),
        };
        (text, stats)
    }
}

/// The text `token` completes, carrying an incomplete UTF-8 character over in `partial`
/// (a `StreamDecoder` whose state lives in the generation between steps).
fn decode_utf8(tokenizer: &Tokenizer, partial: &mut Vec<u8>, token: u32) -> String {
    let mut decoder = StreamDecoder::new(tokenizer, false);
    let mut text = decoder.push_bytes(partial);
    text.push_str(&decoder.push(token));
    *partial = decoder.pending().to_vec();
    text
}
