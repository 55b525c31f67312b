//! The speculative loop on small deterministic fake models (no model files): greedy identity for
//! every type, KV rollback, limits, and the output distribution of speculative sampling.

use tessera_core::sampling::{Sampler, SamplingParams};
use tessera_runtime::speculative::{
    generate, DraftModelSpeculator, GenerateOptions, Generated, SpecContext, SpecError, SpecParams,
    SpecType, Speculator, SpeculatorChain, TextCodec, VocabBridge,
};
use tessera_runtime::StopReason;

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

/// A draft model that mostly agrees with the target.
fn draft_logits(kv: &[u32]) -> Vec<f32> {
    let mut l = target_logits(kv);
    if kv.len() % 5 == 0 {
        l[(kv.len() * 3) % V] += 10.0;
    }
    l
}

struct FakeCtx {
    model: fn(&[u32]) -> Vec<f32>,
    /// Vocabulary permutation: this context's token t is the model's token perm[t].
    perm: Option<Vec<u32>>,
    kv: Vec<u32>,
    rows: Vec<f32>,
    n_ctx: usize,
    n_batch: usize,
    decode_calls: usize,
}

impl FakeCtx {
    fn new(model: fn(&[u32]) -> Vec<f32>, n_ctx: usize, n_batch: usize) -> Self {
        FakeCtx {
            model,
            perm: None,
            kv: Vec::new(),
            rows: Vec::new(),
            n_ctx,
            n_batch,
            decode_calls: 0,
        }
    }
}

impl SpecContext for FakeCtx {
    fn decode(&mut self, tokens: &[u32], all_logits: bool) -> Result<(), SpecError> {
        if tokens.is_empty()
            || tokens.len() > self.n_batch
            || self.kv.len() + tokens.len() > self.n_ctx
        {
            return Err(SpecError::Context(format!("bad batch of {}", tokens.len())));
        }
        self.decode_calls += 1;
        self.rows.clear();
        for (i, &t) in tokens.iter().enumerate() {
            self.kv.push(t);
            if all_logits || i + 1 == tokens.len() {
                let logits = match &self.perm {
                    None => (self.model)(&self.kv),
                    Some(p) => {
                        let mapped: Vec<u32> = self.kv.iter().map(|&t| p[t as usize]).collect();
                        let l = (self.model)(&mapped);
                        (0..V).map(|j| l[p[j] as usize]).collect()
                    }
                };
                self.rows.extend(logits);
            }
        }
        Ok(())
    }
    fn last_logits(&self) -> &[f32] {
        &self.rows[self.rows.len() - V..]
    }
    fn all_logits(&self) -> &[f32] {
        &self.rows
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
    fn n_vocab(&self) -> usize {
        V
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

/// The greedy walk of the fake model enters a 14-token cycle after ~36 tokens; token 10 first
/// appears in the cycle (index 42), so it serves as an end-of-generation token there.
fn run_eog(
    spec: Option<&mut SpeculatorChain>,
    sampling: SamplingParams,
    n_predict: usize,
    n_ctx: usize,
    eog: Option<u32>,
) -> (Generated, FakeCtx) {
    let mut ctx = FakeCtx::new(target_logits, n_ctx, 64);
    let mut sampler = Sampler::new(sampling).unwrap();
    let g = generate(
        &mut ctx,
        &mut sampler,
        spec,
        &prompt(),
        &GenerateOptions { n_predict },
        |t| Some(t) == eog,
        |_| true,
    )
    .unwrap();
    (g, ctx)
}

fn run(
    spec: Option<&mut SpeculatorChain>,
    sampling: SamplingParams,
    n_predict: usize,
    n_ctx: usize,
) -> (Generated, FakeCtx) {
    run_eog(spec, sampling, n_predict, n_ctx, None)
}

fn small_ngram_params(t: SpecType) -> SpecParams {
    SpecParams {
        spec_type: t,
        ngram_size_n: 3,
        ngram_size_m: 8,
        ..SpecParams::default()
    }
}

fn chain_for(t: SpecType) -> SpeculatorChain {
    let params = small_ngram_params(t);
    let draft: Option<Box<dyn Speculator>> = if t == SpecType::Draft {
        let ctx = FakeCtx::new(draft_logits, 512, 64);
        Some(Box::new(DraftModelSpeculator::new(ctx, None, &params)))
    } else {
        None
    };
    SpeculatorChain::from_params(&params, None, None, draft).unwrap()
}

#[test]
fn greedy_output_is_identical_for_every_type() {
    let (plain, _) = run(None, SamplingParams::greedy(), 150, 512);
    assert!(
        plain.tokens.len() > 20,
        "the fake model should not stop at once: {plain:?}"
    );
    for t in [
        SpecType::NgramSimple,
        SpecType::NgramMapK,
        SpecType::NgramMapK4v,
        SpecType::NgramCache,
        SpecType::Draft,
    ] {
        let mut chain = chain_for(t);
        let (spec, ctx) = run(Some(&mut chain), SamplingParams::greedy(), 150, 512);
        assert_eq!(spec.tokens, plain.tokens, "{t}");
        assert_eq!(spec.stop, plain.stop, "{t}");
        let (acc, gen) = chain.acceptance();
        assert!(gen > 0, "{t} never drafted");
        assert!(acc > 0, "{t} never had a token accepted");
        assert_eq!((acc, gen), (spec.n_accepted, spec.n_drafted), "{t}");
        // Fewer target steps than tokens: speculation did something.
        assert!(
            spec.n_target_steps < plain.n_target_steps,
            "{t}: {} vs {}",
            spec.n_target_steps,
            plain.n_target_steps
        );
        // The KV cache holds exactly prompt + generated tokens except the last one.
        let expected_kv = prompt().len() + spec.tokens.len() - 1;
        assert!(
            ctx.kv.len() == expected_kv || spec.stop != StopReason::MaxTokens,
            "{t}"
        );
        let s = chain.stats();
        assert_eq!(s[0].n_acc_tokens, acc, "{t}");
        assert_eq!(s[0].n_gen_tokens, gen, "{t}");
    }
}

#[test]
fn limits_stop_at_the_same_token_as_plain_decoding() {
    let cases = [
        (1, 512, None),
        (2, 512, None),
        (7, 512, None),
        (300, 61, None),
        (300, 90, None),
        (300, 512, Some(10)),
    ];
    for (n_predict, n_ctx, eog) in cases {
        let (plain, _) = run_eog(None, SamplingParams::greedy(), n_predict, n_ctx, eog);
        let expected_stop = match (eog, n_ctx) {
            (Some(_), _) => StopReason::EndOfGeneration(10),
            (None, c) if c < 100 => StopReason::ContextFull,
            _ => StopReason::MaxTokens,
        };
        assert_eq!(
            plain.stop, expected_stop,
            "n_predict {n_predict} n_ctx {n_ctx}"
        );
        for t in [
            SpecType::NgramSimple,
            SpecType::NgramMapK,
            SpecType::NgramCache,
            SpecType::Draft,
        ] {
            let mut chain = chain_for(t);
            let (spec, ctx) = run_eog(
                Some(&mut chain),
                SamplingParams::greedy(),
                n_predict,
                n_ctx,
                eog,
            );
            assert_eq!(
                spec.tokens, plain.tokens,
                "{t} n_predict {n_predict} n_ctx {n_ctx}"
            );
            assert_eq!(
                spec.stop, plain.stop,
                "{t} n_predict {n_predict} n_ctx {n_ctx}"
            );
            assert!(ctx.kv.len() <= n_ctx);
        }
    }
}

#[test]
fn draft_model_with_another_vocabulary_goes_through_text() {
    // The draft context numbers tokens differently (a permutation), so its drafts are only
    // useful after translation through text.
    let perm: Vec<u32> = (0..V as u32).map(|t| (t * 5 + 3) % V as u32).collect();
    let params = SpecParams {
        spec_type: SpecType::Draft,
        ..SpecParams::default()
    };
    let mut dctx = FakeCtx::new(draft_logits, 512, 64);
    dctx.perm = Some(perm.clone());
    let identity: Vec<u32> = (0..V as u32).collect();
    let bridge = VocabBridge::new(Box::new(Letters(identity)), Box::new(Letters(perm)), vec![]);
    let draft = DraftModelSpeculator::new(dctx, Some(bridge), &params);
    let mut chain =
        SpeculatorChain::from_params(&params, None, None, Some(Box::new(draft))).unwrap();
    let (plain, _) = run(None, SamplingParams::greedy(), 120, 512);
    let (spec, _) = run(Some(&mut chain), SamplingParams::greedy(), 120, 512);
    assert_eq!(spec.tokens, plain.tokens);
    let (acc, gen) = chain.acceptance();
    assert!(
        acc * 2 > gen,
        "translated drafts should mostly be accepted: {acc}/{gen}"
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
    let mut chain = SpeculatorChain::with_limits(16, 0);
    chain.push(Box::new(Oracle));
    let mut counts = std::collections::HashMap::new();
    for seed in 0..n {
        let mut ctx = FakeCtx::new(target_logits, 512, 64);
        let mut sampler = Sampler::new(sampling(seed)).unwrap();
        let g = generate(
            &mut ctx,
            &mut sampler,
            Some(&mut chain),
            &base,
            &GenerateOptions { n_predict: 4 },
            |_| false,
            |_| true,
        )
        .unwrap();
        *counts
            .entry([g.tokens[0], g.tokens[1], g.tokens[2]])
            .or_insert(0u64) += 1;
    }
    let (acc, gen) = chain.acceptance();
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
