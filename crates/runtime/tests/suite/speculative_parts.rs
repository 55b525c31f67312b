//! Speculative decoding's parts on small deterministic fake models (no model files): the
//! draft model's translation between vocabularies, and verification keeping the target's
//! output distribution. The generation loop itself (`Generation`) is tested on real models in
//! `speculative_models.rs`.

use tessera_core::sampling::{Sampler, SamplingParams};
use tessera_runtime::speculative::{
    verify_draft, DraftModelSpeculator, SpecContext, SpecError, SpecParams, SpecType, Speculator,
    TextCodec, VocabBridge,
};

const V: usize = 16;

/// A "language model" whose logits depend on the last two tokens and the position parity, so a
/// KV cache that kept a rejected token would change every later row.
fn target_logits(kv: &[u32]) -> Vec<f32> {
    let n = kv.len();
    let a = kv.last().copied().unwrap_or(0) as usize;
    let b = if n >= 2 { kv[n - 2] as usize } else { 0 };
    (0..V)
        .map(|j| {
            let base = (a * 7 + b * 3 + j * 5 + (a * j) % 3 + n % 2) % 13;
            let bonus = if j == (a * 5 + b + 1) % V { 3 } else { 0 };
            (base + bonus) as f32 * 1.5
        })
        .collect()
}

/// A draft model that mostly agrees with the target. Its logits never tie (each token gets its
/// own small offset), so its choices do not depend on how tokens are numbered.
fn draft_logits(kv: &[u32]) -> Vec<f32> {
    let mut l = target_logits(kv);
    if kv.len().is_multiple_of(5) {
        l[(kv.len() * 3) % V] += 10.0;
    }
    for (j, x) in l.iter_mut().enumerate() {
        *x += j as f32 / 1024.0;
    }
    l
}

struct FakeCtx {
    model: fn(&[u32]) -> Vec<f32>,
    /// Vocabulary permutation: this context's token t is the model's token perm[t].
    perm: Option<Vec<u32>>,
    kv: Vec<u32>,
    /// Logits of the last decoded row.
    row: Vec<f32>,
    n_ctx: usize,
    n_batch: usize,
}

impl FakeCtx {
    fn new(model: fn(&[u32]) -> Vec<f32>, n_ctx: usize, n_batch: usize) -> Self {
        FakeCtx {
            model,
            perm: None,
            kv: Vec::new(),
            row: Vec::new(),
            n_ctx,
            n_batch,
        }
    }
}

impl SpecContext for FakeCtx {
    fn decode(&mut self, tokens: &[u32]) -> Result<(), SpecError> {
        if tokens.is_empty()
            || tokens.len() > self.n_batch
            || self.kv.len() + tokens.len() > self.n_ctx
        {
            return Err(SpecError::Context(format!("bad batch of {}", tokens.len())));
        }
        self.kv.extend_from_slice(tokens);
        self.row = match &self.perm {
            None => (self.model)(&self.kv),
            Some(p) => {
                let mapped: Vec<u32> = self.kv.iter().map(|&t| p[t as usize]).collect();
                let l = (self.model)(&mapped);
                (0..V).map(|j| l[p[j] as usize]).collect()
            }
        };
        Ok(())
    }
    fn last_logits(&self) -> &[f32] {
        &self.row
    }
    fn n_past(&self) -> usize {
        self.kv.len()
    }
    fn truncate(&mut self, n: usize) -> Result<(), SpecError> {
        self.kv.truncate(n);
        Ok(())
    }
    fn n_ctx(&self) -> usize {
        self.n_ctx
    }
    fn n_batch(&self) -> usize {
        self.n_batch
    }
}

/// Token t ↔ the letter 'a' + perm[t].
struct Letters(Vec<u32>);
impl TextCodec for Letters {
    fn tokenize(&self, text: &str) -> Result<Vec<u32>, SpecError> {
        text.chars()
            .map(|c| {
                let letter = (c as u32).wrapping_sub('a' as u32);
                self.0
                    .iter()
                    .position(|&p| p == letter)
                    .map(|t| t as u32)
                    .ok_or_else(|| SpecError::Translation(format!("no token for {c:?}")))
            })
            .collect()
    }
    fn detokenize(&self, tokens: &[u32]) -> Result<String, SpecError> {
        Ok(tokens
            .iter()
            .map(|&t| char::from_u32('a' as u32 + self.0[t as usize]).unwrap())
            .collect())
    }
}

fn prompt() -> Vec<u32> {
    // Repetitive, so the n-gram types find matches at once.
    [3u32, 1, 4, 1, 5, 9, 2, 6].repeat(4)
}

/// The target's greedy token after `kv` (ties to the lower id, as the sampler's arg-max).
fn greedy(kv: &[u32]) -> u32 {
    let l = target_logits(kv);
    (0..V)
        .max_by(|&i, &j| l[i].total_cmp(&l[j]).then(j.cmp(&i)))
        .unwrap() as u32
}

#[test]
fn draft_model_with_another_vocabulary_goes_through_text() {
    // The second draft context numbers tokens differently (a permutation), so its drafts are
    // only right after translation through text: they must equal those of the same draft
    // model in the target's numbering, step after step, KV reuse and rollback included.
    let perm: Vec<u32> = (0..V as u32).map(|t| (t * 5 + 3) % V as u32).collect();
    let params = SpecParams {
        spec_type: SpecType::Draft,
        ..SpecParams::default()
    };
    let mut direct = DraftModelSpeculator::new(FakeCtx::new(draft_logits, 512, 64), None, &params);
    let mut dctx = FakeCtx::new(draft_logits, 512, 64);
    dctx.perm = Some(perm.clone());
    let identity: Vec<u32> = (0..V as u32).collect();
    let bridge = VocabBridge::new(Box::new(Letters(identity)), Box::new(Letters(perm)), vec![]);
    let mut translated = DraftModelSpeculator::new(dctx, Some(bridge), &params);
    let mut history = prompt();
    direct.begin(&history).unwrap();
    translated.begin(&history).unwrap();
    let (mut n_drafted, mut n_right) = (0, 0);
    for step in 0..60 {
        let last = greedy(&history);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        direct.draft(&history, last, &mut a).unwrap();
        translated.draft(&history, last, &mut b).unwrap();
        assert_eq!(a, b, "step {step}");
        // Commit what the target's greedy walk accepts of the draft, as verification does.
        history.push(last);
        let accepted = a
            .iter()
            .take_while(|&&d| {
                let right = d == greedy(&history);
                if right {
                    history.push(d);
                }
                right
            })
            .count();
        if accepted > 0 {
            direct.accept(accepted);
            translated.accept(accepted);
        }
        n_drafted += a.len();
        n_right += accepted;
    }
    assert!(
        n_right * 2 > n_drafted,
        "the draft model should mostly agree with the target: {n_right}/{n_drafted}"
    );
}

/// A drafter that knows the target: the greedy next token, then a deliberately wrong one.
struct Oracle;
impl Speculator for Oracle {
    fn kind(&self) -> SpecType {
        SpecType::NgramSimple
    }
    fn begin(&mut self, _: &[u32]) -> Result<(), SpecError> {
        Ok(())
    }
    fn draft(&mut self, history: &[u32], last: u32, out: &mut Vec<u32>) -> Result<(), SpecError> {
        let mut kv = history.to_vec();
        kv.push(last);
        let l = target_logits(&kv);
        let best = (0..V)
            .max_by(|&i, &j| l[i].total_cmp(&l[j]).then(j.cmp(&i)))
            .unwrap() as u32;
        kv.push(best);
        let l = target_logits(&kv);
        let second = (0..V)
            .max_by(|&i, &j| l[i].total_cmp(&l[j]).then(j.cmp(&i)))
            .unwrap() as u32;
        out.extend([best, (second + 1) % V as u32]);
        Ok(())
    }
    fn accept(&mut self, _: usize) {}
}

fn softmax(l: &[f32]) -> Vec<f64> {
    let m = l.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    let e: Vec<f64> = l.iter().map(|&x| ((x - m) as f64).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|x| x / s).collect()
}

#[test]
fn speculative_sampling_keeps_the_target_distribution() {
    // Pure softmax sampling (temperature 1, no filters): the exact probability of every
    // 3-token continuation is computable from the fake model.
    let sampling = |seed| SamplingParams {
        temperature: 1.0,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        seed,
        ..SamplingParams::default()
    };
    let mut exact = std::collections::HashMap::new();
    let base: Vec<u32> = prompt();
    for a in 0..V as u32 {
        for b in 0..V as u32 {
            for c in 0..V as u32 {
                let mut kv = base.clone();
                let pa = softmax(&target_logits(&kv))[a as usize];
                kv.push(a);
                let pb = softmax(&target_logits(&kv))[b as usize];
                kv.push(b);
                let pc = softmax(&target_logits(&kv))[c as usize];
                exact.insert([a, b, c], pa * pb * pc);
            }
        }
    }
    let n = 30_000u64;
    let (mut acc, mut gen) = (0usize, 0usize);
    let mut counts = std::collections::HashMap::new();
    for seed in 0..n {
        // As a generation does it: the first token from the prompt's logits, then drafts for
        // after the last committed token, each verified in one batch of rows.
        let mut sampler = Sampler::new(sampling(seed)).unwrap();
        let mut kv = base.clone();
        let first = sampler.sample(&target_logits(&kv)).unwrap();
        sampler.accept(first);
        let mut out = vec![first];
        while out.len() < 3 {
            let last = *out.last().unwrap();
            let mut draft = Vec::new();
            Oracle.draft(&kv, last, &mut draft).unwrap();
            kv.push(last);
            let mut rows = target_logits(&kv);
            for i in 0..draft.len() {
                let mut seen = kv.clone();
                seen.extend_from_slice(&draft[..=i]);
                rows.extend(target_logits(&seen));
            }
            let verified = verify_draft(&mut sampler, &draft, &rows, V).unwrap();
            gen += draft.len();
            acc += verified.n_accepted;
            kv.extend_from_slice(&verified.tokens[..verified.n_accepted]);
            out.extend_from_slice(&verified.tokens);
        }
        *counts.entry([out[0], out[1], out[2]]).or_insert(0u64) += 1;
    }
    // Both outcomes happen often: the greedy guess is usually right, the other usually wrong.
    assert!(acc > gen / 4 && acc < gen * 3 / 4, "acceptance {acc}/{gen}");
    // Pearson chi-square over outcomes with an expected count ≥ 5 (the rest pooled).
    let (mut chi2, mut dof) = (0.0f64, 0usize);
    let (mut pooled_e, mut pooled_o) = (0.0f64, 0.0f64);
    for (k, &p) in &exact {
        let e = p * n as f64;
        let o = *counts.get(k).unwrap_or(&0) as f64;
        if e >= 5.0 {
            chi2 += (o - e) * (o - e) / e;
            dof += 1;
        } else {
            pooled_e += e;
            pooled_o += o;
        }
    }
    if pooled_e > 0.0 {
        chi2 += (pooled_o - pooled_e).powi(2) / pooled_e;
        dof += 1;
    }
    // For dof ≈ d the statistic is ≈ d ± sqrt(2d); 2d + 30 is far in the tail (p < 1e-6).
    let limit = 2.0 * dof as f64 + 30.0;
    assert!(
        chi2 < limit,
        "chi2 = {chi2:.1} over {dof} cells (limit {limit})"
    );
}
