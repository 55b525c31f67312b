//! Token sampling: a llama.cpp-like chain over one step's logits.
//!
//! Order (llama.cpp's default chain): repetition/presence/frequency penalties over the last
//! `penalty_last_n` accepted tokens → top-k → top-p → min-p → temperature → seeded draw.
//! As in llama.cpp, top-p and min-p look at the logits *before* temperature, and a temperature
//! ≤ 0 means greedy: the arg-max of the penalized logits (lowest id on ties).
//!
//! The random generator is our own (xoshiro256** seeded through splitmix64) so that a seed gives
//! the same tokens on every platform, wasm included.

use std::collections::{HashMap, VecDeque};

/// Sampling options. `Default` matches llama.cpp's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplingParams {
    /// ≤ 0 → greedy.
    pub temperature: f32,
    /// 0 → disabled.
    pub top_k: i32,
    /// 1 → disabled. Kept: the smallest prefix (by probability) whose mass reaches `top_p`.
    pub top_p: f32,
    /// 0 → disabled. Kept: tokens whose probability is ≥ `min_p` × the best one's.
    pub min_p: f32,
    /// 1 → disabled. Positive logits are divided by it, negative ones multiplied.
    pub repeat_penalty: f32,
    /// Subtracted once from the logit of every token seen in the window.
    pub presence_penalty: f32,
    /// Subtracted per occurrence in the window.
    pub frequency_penalty: f32,
    /// Window of the penalties in tokens; 0 → penalties off, -1 → unbounded (the whole context).
    pub penalty_last_n: i32,
    pub seed: u64,
    /// Added to a token's logit before anything else (-inf bans the token, as llama.cpp's
    /// `--ignore-eos` does with end-of-generation tokens).
    pub logit_bias: Vec<(u32, f32)>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            penalty_last_n: 64,
            seed: 0,
            logit_bias: Vec::new(),
        }
    }
}

impl SamplingParams {
    /// Greedy decoding (arg-max), no penalties.
    pub fn greedy() -> Self {
        SamplingParams {
            temperature: 0.0,
            ..Default::default()
        }
    }

    pub fn validate(&self) -> Result<(), SamplingError> {
        let bad = |name: &'static str, value: f32, expected: &'static str| {
            Err(SamplingError::InvalidOption {
                name,
                value: value.to_string(),
                expected,
            })
        };
        if !self.temperature.is_finite() {
            return bad("temperature", self.temperature, "a finite number");
        }
        if self.top_k < 0 {
            return bad("top_k", self.top_k as f32, "≥ 0 (0 disables it)");
        }
        if !(0.0..=1.0).contains(&self.top_p) {
            return bad("top_p", self.top_p, "in [0, 1]");
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return bad("min_p", self.min_p, "in [0, 1]");
        }
        if !(self.repeat_penalty.is_finite() && self.repeat_penalty > 0.0) {
            return bad("repeat_penalty", self.repeat_penalty, "a finite number > 0");
        }
        if !self.presence_penalty.is_finite() {
            return bad("presence_penalty", self.presence_penalty, "a finite number");
        }
        if !self.frequency_penalty.is_finite() {
            return bad(
                "frequency_penalty",
                self.frequency_penalty,
                "a finite number",
            );
        }
        if let Some(&(_, bias)) = self
            .logit_bias
            .iter()
            .find(|(_, b)| b.is_nan() || *b == f32::INFINITY)
        {
            return bad("logit_bias", bias, "a number or -inf");
        }
        if self.penalty_last_n < -1 {
            return bad("penalty_last_n", self.penalty_last_n as f32, "≥ -1");
        }
        Ok(())
    }

    fn penalties_active(&self) -> bool {
        self.penalty_last_n != 0
            && (self.repeat_penalty != 1.0
                || self.presence_penalty != 0.0
                || self.frequency_penalty != 0.0)
    }
}

#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum SamplingError {
    #[error("invalid sampling option {name} = {value}: expected {expected}")]
    InvalidOption {
        name: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error("no logits to sample from")]
    EmptyLogits,
    #[error("logit of token {token} is NaN")]
    NanLogit { token: u32 },
    #[error("every logit is -inf: nothing can be sampled")]
    AllMasked,
}

/// xoshiro256** (Blackman & Vigna), seeded through splitmix64: small, fast, and identical on
/// every platform.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let mut splitmix = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng {
            s: [splitmix(), splitmix(), splitmix(), splitmix()],
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[derive(Clone, Copy, Debug)]
struct Candidate {
    id: u32,
    logit: f32,
    prob: f32,
}

/// A sampler: options, the RNG, the penalty window, and reusable buffers (no allocation per
/// token once warmed up).
pub struct Sampler {
    params: SamplingParams,
    rng: Rng,
    /// The last accepted tokens (up to the penalty window).
    window: VecDeque<u32>,
    /// Occurrences of each token in `window`.
    counts: HashMap<u32, u32>,
    candidates: Vec<Candidate>,
    /// The draw to use instead of the RNG's (set by [`DeviceSampling::sample_cpu`]).
    draw_u: Option<f64>,
}

/// One sampling step handed to a backend that samples on its device (so only the token id
/// leaves it): the options, the penalty window's counts and the step's uniform draw, taken
/// from the sampler's RNG exactly where [`Sampler::sample`] takes it, so a seed gives the same
/// sequence of draws on every backend.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceSampling {
    pub params: SamplingParams,
    /// (token, occurrences) in the penalty window, by token; empty when penalties are off.
    pub counts: Vec<(u32, u32)>,
    /// The draw in [0, 1) (0 when greedy).
    pub u: f64,
}

impl DeviceSampling {
    /// The reference: what [`Sampler::sample`] picks from `logits` with this step's window
    /// and draw.
    pub fn sample_cpu(&self, logits: &[f32]) -> Result<u32, SamplingError> {
        let mut s = Sampler::new(self.params.clone())?;
        if self.params.penalties_active() {
            s.counts = self.counts.iter().copied().collect();
        }
        s.draw_u = Some(self.u);
        s.sample(logits)
    }

    /// Whether the penalties apply (the window is not empty and a penalty is set).
    pub fn penalties_active(&self) -> bool {
        self.params.penalties_active() && !self.counts.is_empty()
    }

    /// The step as the GPU sampling chains read it (`sample_chain.wgsl`, `sample.cu`): the
    /// [`SPEC_HEADER`] words (top_k, then top_p, min_p, temperature, u, repeat, frequency and
    /// presence penalties as f32 bits, then the numbers of bias entries and of counts), then
    /// (token, bias bits) pairs, then (token, occurrences) pairs. `None` when the step has
    /// more than [`SPEC_EDITS`] edits (it is then sampled on the CPU).
    pub fn spec_words(&self) -> Option<Vec<u32>> {
        let p = &self.params;
        let counts: &[(u32, u32)] = if self.penalties_active() {
            &self.counts
        } else {
            &[]
        };
        if p.logit_bias.len() + counts.len() > SPEC_EDITS {
            return None;
        }
        // f32 of a draw just under 1 can round to 1.0, past every cumulative sum.
        let u = (self.u as f32).min(1.0 - f32::EPSILON);
        let mut w = vec![
            p.top_k.max(0) as u32,
            p.top_p.to_bits(),
            p.min_p.to_bits(),
            p.temperature.to_bits(),
            u.to_bits(),
            p.repeat_penalty.to_bits(),
            p.frequency_penalty.to_bits(),
            p.presence_penalty.to_bits(),
            p.logit_bias.len() as u32,
            counts.len() as u32,
        ];
        for &(t, b) in &p.logit_bias {
            w.extend([t, b.to_bits()]);
        }
        for &(t, c) in counts {
            w.extend([t, c]);
        }
        Some(w)
    }
}

/// What a GPU sampling chain answered, (status, token) as its kernels write them: 0 and the
/// token, 1 (every logit masked), 2 and the index of a NaN logit.
pub fn device_result(status: u32, token: u32) -> Result<u32, SamplingError> {
    match status {
        0 => Ok(token),
        1 => Err(SamplingError::AllMasked),
        _ => Err(SamplingError::NanLogit { token }),
    }
}

/// Words of a GPU sampling spec before its edits ([`DeviceSampling::spec_words`]).
pub const SPEC_HEADER: usize = 10;
/// Logit edits (bias entries plus penalized tokens) a GPU sampling spec holds; a step with
/// more is sampled on the CPU.
pub const SPEC_EDITS: usize = 1024;

impl Sampler {
    pub fn new(params: SamplingParams) -> Result<Self, SamplingError> {
        params.validate()?;
        Ok(Sampler {
            rng: Rng::new(params.seed),
            params,
            window: VecDeque::new(),
            counts: HashMap::new(),
            candidates: Vec::new(),
            draw_u: None,
        })
    }

    /// The next step for a device-side sampler: takes the step's draw from the RNG (when not
    /// greedy) as [`Sampler::sample`] would.
    pub fn device_step(&mut self) -> DeviceSampling {
        let u = if self.params.temperature > 0.0 {
            self.rng.next_f64()
        } else {
            0.0
        };
        let mut counts: Vec<(u32, u32)> = if self.params.penalties_active() {
            self.counts.iter().map(|(&t, &c)| (t, c)).collect()
        } else {
            Vec::new()
        };
        counts.sort_unstable();
        DeviceSampling {
            params: self.params.clone(),
            counts,
            u,
        }
    }

    pub fn params(&self) -> &SamplingParams {
        &self.params
    }

    /// Forgets the penalty window and re-seeds the RNG.
    pub fn reset(&mut self) {
        self.window.clear();
        self.counts.clear();
        self.rng = Rng::new(self.params.seed);
    }

    /// Records a token (prompt or generated) for the penalties, as llama.cpp does with the
    /// prompt and every sampled token.
    pub fn accept(&mut self, token: u32) {
        if self.params.penalty_last_n == 0 {
            return;
        }
        if self.params.penalty_last_n > 0
            && self.window.len() == self.params.penalty_last_n as usize
        {
            if let Some(old) = self.window.pop_front() {
                if let Some(c) = self.counts.get_mut(&old) {
                    *c -= 1;
                    if *c == 0 {
                        self.counts.remove(&old);
                    }
                }
            }
        }
        self.window.push_back(token);
        *self.counts.entry(token).or_insert(0) += 1;
    }

    /// Picks the next token from one position's logits (length = vocabulary size).
    pub fn sample(&mut self, logits: &[f32]) -> Result<u32, SamplingError> {
        self.sample_allowed(logits, None)
    }

    /// [`Sampler::sample`] among the tokens `allowed` sets (a bit per token id, least
    /// significant first: token `t` is bit `t % 32` of word `t / 32`; ids past its end are not
    /// allowed), or among all with `None`. The others are masked before the chain (their logit
    /// is -inf), as llama.cpp's grammar sampler does, so one draw picks among the allowed ones.
    pub fn sample_allowed(
        &mut self,
        logits: &[f32],
        allowed: Option<&[u32]>,
    ) -> Result<u32, SamplingError> {
        if logits.is_empty() {
            return Err(SamplingError::EmptyLogits);
        }
        let p = &self.params;
        if p.temperature <= 0.0 && p.logit_bias.is_empty() && !p.penalties_active() {
            // Plain greedy: nothing changes the logits, so the arg-max of the row itself
            // (Gemma 3's 262144 candidates cost about a millisecond to build per token).
            return match allowed {
                None => greedy(logits),
                Some(mask) => argmax(
                    logits
                        .iter()
                        .enumerate()
                        .filter(|&(i, _)| is_allowed(mask, i))
                        .map(|(i, &l)| (i, l)),
                ),
            };
        }
        if let Some(i) = logits.iter().position(|l| l.is_nan()) {
            return Err(SamplingError::NanLogit { token: i as u32 });
        }
        self.candidates.clear();
        self.candidates
            .extend(logits.iter().enumerate().map(|(i, &logit)| Candidate {
                id: i as u32,
                logit,
                prob: 0.0,
            }));
        for &(token, bias) in &self.params.logit_bias {
            if let Some(c) = self.candidates.get_mut(token as usize) {
                c.logit += bias;
            }
        }
        self.apply_penalties();
        if let Some(mask) = allowed {
            for c in &mut self.candidates {
                if !is_allowed(mask, c.id as usize) {
                    c.logit = f32::NEG_INFINITY;
                }
            }
        }

        if self.params.temperature <= 0.0 {
            return self.argmax();
        }
        // Masked tokens can never be drawn; dropping them also keeps the sorts short.
        self.candidates.retain(|c| c.logit > f32::NEG_INFINITY);
        if self.candidates.is_empty() {
            return Err(SamplingError::AllMasked);
        }
        self.top_k();
        self.top_p();
        self.min_p();
        let inv_t = 1.0 / self.params.temperature;
        for c in &mut self.candidates {
            c.logit *= inv_t;
        }
        Ok(self.draw())
    }

    fn apply_penalties(&mut self) {
        if !self.params.penalties_active() {
            return;
        }
        let p = &self.params;
        // Candidates are still indexed by token id here.
        for (&token, &count) in &self.counts {
            let Some(c) = self.candidates.get_mut(token as usize) else {
                continue;
            };
            if c.logit <= 0.0 {
                c.logit *= p.repeat_penalty;
            } else {
                c.logit /= p.repeat_penalty;
            }
            c.logit -= count as f32 * p.frequency_penalty + p.presence_penalty;
        }
    }

    fn argmax(&self) -> Result<u32, SamplingError> {
        argmax(self.candidates.iter().map(|c| (c.id as usize, c.logit)))
    }

    /// Descending by logit, ascending id on ties (a total, platform-independent order).
    fn sort_desc(cands: &mut [Candidate]) {
        cands.sort_unstable_by(|a, b| b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id)));
    }

    fn top_k(&mut self) {
        let k = self.params.top_k as usize;
        if k == 0 || k >= self.candidates.len() {
            return;
        }
        let cmp = |a: &Candidate, b: &Candidate| b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id));
        self.candidates.select_nth_unstable_by(k - 1, cmp);
        self.candidates.truncate(k);
    }

    /// Fills `prob` with the softmax of the current logits and sorts candidates by it.
    fn softmax_sorted(&mut self) {
        Self::sort_desc(&mut self.candidates);
        let max = self.candidates[0].logit;
        let mut sum = 0.0f64;
        for c in &mut self.candidates {
            c.prob = (c.logit - max).exp();
            sum += c.prob as f64;
        }
        for c in &mut self.candidates {
            c.prob = (c.prob as f64 / sum) as f32;
        }
    }

    fn top_p(&mut self) {
        let p = self.params.top_p;
        if p >= 1.0 {
            return;
        }
        self.softmax_sorted();
        let mut cum = 0.0f64;
        let mut keep = self.candidates.len();
        for (i, c) in self.candidates.iter().enumerate() {
            cum += c.prob as f64;
            if cum >= p as f64 {
                keep = i + 1;
                break;
            }
        }
        self.candidates.truncate(keep.max(1));
    }

    fn min_p(&mut self) {
        let p = self.params.min_p;
        if p <= 0.0 {
            return;
        }
        let max = self
            .candidates
            .iter()
            .map(|c| c.logit)
            .fold(f32::NEG_INFINITY, f32::max);
        // prob_i ≥ p · prob_max  ⇔  logit_i ≥ logit_max + ln p
        let threshold = max + p.ln();
        self.candidates.retain(|c| c.logit >= threshold);
    }

    fn draw(&mut self) -> u32 {
        self.softmax_sorted();
        let u = match self.draw_u.take() {
            Some(u) => u,
            None => self.rng.next_f64(),
        };
        let mut cum = 0.0f64;
        for c in &self.candidates {
            cum += c.prob as f64;
            if u < cum {
                return c.id;
            }
        }
        // Rounding left the total a hair under 1 and u landed in the gap.
        self.candidates.last().map(|c| c.id).unwrap_or(0)
    }
}

/// [`argmax`] of a whole row, and its NaN check, in two passes that vectorize: the maximum
/// (and whether any lane is NaN) over lanes of 16, then the first element equal to it. The
/// one-by-one loop's compare-and-branch per element cost a few percent of Gemma 3's decode in
/// the browser (262144 logits per token).
fn greedy(logits: &[f32]) -> Result<u32, SamplingError> {
    const LANES: usize = 16;
    let mut max = [f32::NEG_INFINITY; LANES];
    let mut nan = [false; LANES];
    let mut chunks = logits.chunks_exact(LANES);
    for c in &mut chunks {
        for i in 0..LANES {
            // `>` never takes a NaN, which `nan` records instead.
            max[i] = if c[i] > max[i] { c[i] } else { max[i] };
            nan[i] |= c[i].is_nan();
        }
    }
    let rest = chunks.remainder();
    let any_nan = nan.iter().any(|&n| n) || rest.iter().any(|l| l.is_nan());
    if any_nan {
        let i = logits.iter().position(|l| l.is_nan()).unwrap_or(0);
        return Err(SamplingError::NanLogit { token: i as u32 });
    }
    let best = max
        .iter()
        .chain(rest)
        .fold(f32::NEG_INFINITY, |m, &x| if x > m { x } else { m });
    if best == f32::NEG_INFINITY {
        return Err(SamplingError::AllMasked);
    }
    // The lowest id among the maxima (`==` also equates -0.0 and 0.0, as `>` does above): whole
    // lanes compared without an exit inside them, then the one that holds it searched.
    let chunk = logits
        .chunks_exact(LANES)
        .position(|c| c.iter().fold(false, |hit, &x| hit | (x == best)))
        .map_or(logits.len() / LANES * LANES, |k| k * LANES);
    let within = logits[chunk..].iter().position(|&x| x == best);
    Ok((chunk + within.unwrap_or(0)) as u32)
}

/// Whether token `id` is set in an allowed-token bit mask ([`Sampler::sample_allowed`]).
fn is_allowed(mask: &[u32], id: usize) -> bool {
    mask.get(id / 32).is_some_and(|w| w >> (id % 32) & 1 == 1)
}

/// The id of the largest logit, the lowest id on ties; `AllMasked` when every logit is -inf.
fn argmax(logits: impl Iterator<Item = (usize, f32)>) -> Result<u32, SamplingError> {
    let mut best: Option<(usize, f32)> = None;
    for (id, logit) in logits {
        // Strictly greater: the lowest id wins ties.
        if best.is_none_or(|(_, b)| logit > b) {
            best = Some((id, logit));
        }
    }
    match best {
        Some((id, logit)) if logit > f32::NEG_INFINITY => Ok(id as u32),
        _ => Err(SamplingError::AllMasked),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_deterministic_and_seed_dependent() {
        let a: Vec<u64> = {
            let mut r = Rng::new(42);
            (0..4).map(|_| r.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut r = Rng::new(42);
            (0..4).map(|_| r.next_u64()).collect()
        };
        let c: Vec<u64> = {
            let mut r = Rng::new(43);
            (0..4).map(|_| r.next_u64()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
        let mut r = Rng::new(7);
        for _ in 0..1000 {
            let x = r.next_f64();
            assert!((0.0..1.0).contains(&x));
        }
    }

    /// The whole-row greedy pick is the one-by-one [`argmax`] after the NaN check, on rows of
    /// every length around the lane count, drawn from a few values so that ties (±0 among them),
    /// masked rows and NaNs all occur.
    #[test]
    fn greedy_matches_the_one_by_one_argmax() {
        let values = [
            0.0,
            -0.0,
            1.5,
            -2.0,
            3.25,
            f32::NEG_INFINITY,
            f32::INFINITY,
            f32::NAN,
        ];
        let mut r = Rng::new(11);
        for trial in 0..20_000 {
            let len = 1 + trial % 70;
            // Mostly finite values; infinities and NaNs rarer so that each outcome occurs.
            let row: Vec<f32> = (0..len)
                .map(|_| {
                    let k = (r.next_u64() % 64) as usize;
                    values[if k < 60 { k % 5 } else { 5 + k % 3 }]
                })
                .collect();
            let masked: Vec<f32> = row.iter().map(|_| f32::NEG_INFINITY).collect();
            for row in [&row, &masked] {
                let want = match row.iter().position(|l| l.is_nan()) {
                    Some(i) => Err(SamplingError::NanLogit { token: i as u32 }),
                    None => argmax(row.iter().copied().enumerate()),
                };
                assert_eq!(greedy(row), want, "row {row:?}");
            }
        }
    }

    #[test]
    fn sample_allowed_picks_only_allowed_tokens() {
        let logits: Vec<f32> = (0..70).map(|i| (i % 7) as f32).collect();
        // Tokens 3, 40 and 65 (bits across three words).
        let mask = [1u32 << 3, 1 << (40 - 32), 1 << (65 - 64)];
        let mut greedy = Sampler::new(SamplingParams::greedy()).unwrap();
        // Logits 3, 5 and 2: the largest allowed is token 40.
        assert_eq!(greedy.sample_allowed(&logits, Some(&mask)), Ok(40));
        assert_eq!(greedy.sample_allowed(&logits, None), Ok(6));
        let none = [0u32; 3];
        assert_eq!(
            greedy.sample_allowed(&logits, Some(&none)),
            Err(SamplingError::AllMasked)
        );
        for seed in 0..50 {
            let params = SamplingParams {
                temperature: 1.0,
                top_k: 0,
                top_p: 1.0,
                min_p: 0.0,
                seed,
                logit_bias: vec![(41, 100.0)],
                ..SamplingParams::default()
            };
            let mut s = Sampler::new(params).unwrap();
            // A bias on a token the mask forbids does not bring it back.
            let t = s.sample_allowed(&logits, Some(&mask)).unwrap();
            assert!([3, 40, 65].contains(&t), "seed {seed}: {t}");
        }
    }
}
