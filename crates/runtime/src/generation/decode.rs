//! Decoding a step's tokens and picking the next token where the backend allows.

use std::task::Poll;

use tessera_core::context::Context;

use super::params::{Clock, GenerateError, GenerateParams};
use super::{Generation, Phase, Step};

/// Where a generation's tokens are picked.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(super) enum Picking {
    /// From the logits, read back, by the generation's sampler.
    Cpu,
    /// The device's arg-max (greedy without penalties or biases: no draw, no options).
    DeviceGreedy,
    /// The device's sampling chain, with the options and draw of the sampler's `device_step`.
    DeviceSampled,
}

impl Picking {
    pub(super) fn choose(params: &GenerateParams, on_device: bool) -> Picking {
        let s = &params.sampling;
        let greedy = s.temperature <= 0.0
            && s.repeat_penalty == 1.0
            && s.presence_penalty == 0.0
            && s.frequency_penalty == 0.0
            && s.logit_bias.is_empty()
            && !params.ignore_eos;
        match (on_device, greedy) {
            (false, _) => Picking::Cpu,
            (true, true) => Picking::DeviceGreedy,
            (true, false) => Picking::DeviceSampled,
        }
    }
}

impl Generation {
    /// Decodes the next slice of the prompt; the last slice also picks the first token.
    pub(super) fn prefill(
        &mut self,
        ctx: &mut Context,
        from: usize,
        clock: &dyn Clock,
    ) -> Result<Step, GenerateError> {
        // One micro-batch per step at most: a pending step must commit nothing.
        let slice = self.prefill_step.min(ctx.n_batch());
        let to = (from + slice).min(self.prompt.len());
        // A copy: the step below also updates the generation.
        let chunk = self.prompt[from..to].to_vec();
        let last = to == self.prompt.len();
        let progress = match self.picking {
            // Earlier slices of a prompt picked on the device: their next token is not
            // wanted, so only an id leaves the device, not the logits.
            Picking::DeviceGreedy | Picking::DeviceSampled if !last => {
                ctx.poll_decode_greedy(&chunk, false)?.map(|_| ())
            }
            _ => self.decode_step(ctx, &chunk)?,
        };
        if progress.is_pending() {
            return Ok(Step::Pending);
        }
        Ok(self.prefilled(to, clock))
    }

    /// The prompt is in the context up to `to`: the first token is picked next once it all is.
    pub(super) fn prefilled(&mut self, to: usize, clock: &dyn Clock) -> Step {
        self.phase = if to == self.prompt.len() {
            self.t_prompt_done = clock.now_s();
            Phase::FirstToken
        } else {
            Phase::Prefill(to)
        };
        Step::Prefilled {
            n_decoded: to,
            n_prompt: self.prompt.len(),
        }
    }

    /// Decodes `tokens` and picks the next token as `self.picking` says: on the device into
    /// `self.next`, or leaves the logits in the context for the sampler. Pending: the same
    /// call must be repeated after the read-back.
    pub(super) fn decode_step(
        &mut self,
        ctx: &mut Context,
        tokens: &[u32],
    ) -> Result<Poll<()>, GenerateError> {
        Ok(match self.picking {
            Picking::Cpu => ctx.poll_decode(tokens, false)?,
            Picking::DeviceGreedy => ctx.poll_decode_greedy(tokens, false)?.map(|ids| {
                self.next = ids.last().copied();
            }),
            Picking::DeviceSampled => {
                let step = self.draw.get_or_insert_with(|| self.sampler.device_step());
                match ctx.poll_decode_sampled(tokens, step)? {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(sampled) => {
                        self.draw = None;
                        self.next = Some(sampled?);
                        Poll::Ready(())
                    }
                }
            }
        })
    }
}
