//! The configured speculators in order of preference, the common draft limits and statistics.

use super::{
    format_acceptance, NgramCache, NgramCacheSpeculator, NgramMap, NgramSimple, SpecError,
    SpecParams, SpecStats, SpecType, Speculator,
};

/// Speculators tried in order (draftless types before a draft model) until one drafts.
pub struct SpeculatorChain {
    impls: Vec<(Box<dyn Speculator>, SpecStats)>,
    n_max: usize,
    n_min: usize,
    /// The implementation whose draft is being verified.
    current: Option<usize>,
    n_drafted: usize,
    n_accepted: usize,
}

impl SpeculatorChain {
    /// An empty chain with the draft limits of `params` (no validation of the n-gram options).
    pub fn with_limits(n_max: usize, n_min: usize) -> Self {
        SpeculatorChain {
            impls: Vec::new(),
            n_max,
            n_min,
            current: None,
            n_drafted: 0,
            n_accepted: 0,
        }
    }

    /// Appends an implementation (tried after the ones already there).
    pub fn push(&mut self, speculator: Box<dyn Speculator>) {
        let stats = SpecStats::new(speculator.kind());
        self.impls.push((speculator, stats));
    }

    /// The chain llama.cpp builds: the draftless `params.spec_type` (if any), then the draft
    /// model (if given, and the type is `draft`, `none` or a draftless one).
    ///
    /// `static_cache` / `dynamic_cache` feed `ngram-cache` (loaded by the host; `None` = empty).
    pub fn from_params(
        params: &SpecParams,
        static_cache: Option<NgramCache>,
        dynamic_cache: Option<NgramCache>,
        draft_model: Option<Box<dyn Speculator>>,
    ) -> Result<Self, SpecError> {
        params.validate()?;
        let mut chain = Self::with_limits(params.n_max, params.n_min);
        match params.spec_type {
            SpecType::None | SpecType::Draft => {}
            SpecType::NgramSimple => chain.push(Box::new(NgramSimple::from_params(params)?)),
            SpecType::NgramMapK => chain.push(Box::new(NgramMap::from_params(params, true)?)),
            SpecType::NgramMapK4v => chain.push(Box::new(NgramMap::from_params(params, false)?)),
            SpecType::NgramCache => chain.push(Box::new(NgramCacheSpeculator::from_params(
                params,
                static_cache.unwrap_or_default(),
                dynamic_cache.unwrap_or_default(),
            ))),
        }
        match draft_model {
            Some(d) => chain.push(d),
            None if params.spec_type == SpecType::Draft => {
                return Err(SpecError::InvalidArgument(
                    "--spec-type draft needs a draft model (-md/--model-draft)".into(),
                ))
            }
            None => {}
        }
        Ok(chain)
    }

    pub fn is_empty(&self) -> bool {
        self.impls.is_empty()
    }

    /// The kinds in the order they are tried.
    pub fn kinds(&self) -> Vec<SpecType> {
        self.impls.iter().map(|(s, _)| s.kind()).collect()
    }

    pub fn begin(&mut self, prompt: &[u32]) -> Result<(), SpecError> {
        self.current = None;
        for (s, _) in &mut self.impls {
            s.begin(prompt)?;
        }
        Ok(())
    }

    /// The first non-empty draft (at most `min(n_max, room)` tokens; drafts shorter than
    /// `n_min` are dropped and the next implementation is asked).
    pub fn draft(
        &mut self,
        history: &[u32],
        last: u32,
        room: usize,
    ) -> Result<Vec<u32>, SpecError> {
        self.current = None;
        let limit = self.n_max.min(room);
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        for (i, (s, stats)) in self.impls.iter_mut().enumerate() {
            out.clear();
            stats.n_calls += 1;
            s.draft(history, last, &mut out)?;
            out.truncate(limit);
            if out.is_empty() || out.len() < self.n_min {
                continue;
            }
            stats.n_gen_drafts += 1;
            stats.n_gen_tokens += out.len();
            self.n_drafted += out.len();
            self.current = Some(i);
            return Ok(out);
        }
        out.clear();
        Ok(out)
    }

    /// `n_accepted` tokens of the last draft were accepted (0 is counted but not passed on, as
    /// in llama.cpp: an implementation only hears of drafts that were at least partly accepted).
    pub fn accept(&mut self, n_accepted: usize) {
        let Some(i) = self.current.take() else {
            return;
        };
        self.n_accepted += n_accepted;
        if n_accepted == 0 {
            return;
        }
        let (s, stats) = &mut self.impls[i];
        stats.n_acc_drafts += 1;
        stats.n_acc_tokens += n_accepted;
        s.accept(n_accepted);
    }

    /// Per-implementation counters, in chain order.
    pub fn stats(&self) -> Vec<SpecStats> {
        self.impls.iter().map(|(_, s)| *s).collect()
    }

    /// (accepted, drafted) draft tokens over every implementation.
    pub fn acceptance(&self) -> (usize, usize) {
        (self.n_accepted, self.n_drafted)
    }

    /// The lines printed at the end: the acceptance rate, then one per implementation.
    pub fn stats_lines(&self) -> Vec<String> {
        let mut lines = vec![format_acceptance(self.n_accepted, self.n_drafted)];
        lines.extend(self.impls.iter().map(|(_, s)| s.line()));
        lines
    }

    /// The dynamic n-gram cache to save (only with `ngram-cache`).
    pub fn dynamic_cache(&self) -> Option<NgramCache> {
        self.impls.iter().find_map(|(s, _)| s.dynamic_cache())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drafts a fixed sequence and records what it was told.
    struct Fixed {
        kind: SpecType,
        draft: Vec<u32>,
        accepted: Vec<usize>,
    }

    impl Speculator for Fixed {
        fn kind(&self) -> SpecType {
            self.kind
        }
        fn begin(&mut self, _: &[u32]) -> Result<(), SpecError> {
            Ok(())
        }
        fn draft(&mut self, _: &[u32], _: u32, out: &mut Vec<u32>) -> Result<(), SpecError> {
            out.extend(&self.draft);
            Ok(())
        }
        fn accept(&mut self, n: usize) {
            self.accepted.push(n);
        }
    }

    fn fixed(kind: SpecType, draft: Vec<u32>) -> Box<dyn Speculator> {
        Box::new(Fixed {
            kind,
            draft,
            accepted: vec![],
        })
    }

    #[test]
    fn draftless_type_comes_before_the_draft_model() {
        let params = SpecParams {
            spec_type: SpecType::NgramSimple,
            ..Default::default()
        };
        let chain =
            SpeculatorChain::from_params(&params, None, None, Some(fixed(SpecType::Draft, vec![])))
                .unwrap();
        assert_eq!(chain.kinds(), vec![SpecType::NgramSimple, SpecType::Draft]);
        let none = SpecParams::default();
        let chain =
            SpeculatorChain::from_params(&none, None, None, Some(fixed(SpecType::Draft, vec![])))
                .unwrap();
        assert_eq!(chain.kinds(), vec![SpecType::Draft]);
        let draft = SpecParams {
            spec_type: SpecType::Draft,
            ..Default::default()
        };
        assert!(SpeculatorChain::from_params(&draft, None, None, None).is_err());
        let bad = SpecParams {
            ngram_size_n: 0,
            ..params
        };
        assert!(SpeculatorChain::from_params(&bad, None, None, None).is_err());
    }

    #[test]
    fn limits_fallthrough_and_statistics() {
        let mut chain = SpeculatorChain::with_limits(4, 2);
        chain.push(fixed(SpecType::NgramSimple, vec![1])); // too short for n_min = 2
        chain.push(fixed(SpecType::Draft, vec![1, 2, 3, 4, 5, 6]));
        let d = chain.draft(&[], 0, 100).unwrap();
        assert_eq!(d, vec![1, 2, 3, 4]); // n_max = 4
        chain.accept(3);
        let d = chain.draft(&[], 0, 3).unwrap(); // room 3
        assert_eq!(d.len(), 3);
        chain.accept(0);
        assert!(chain.draft(&[], 0, 1).unwrap().is_empty()); // room 1 < n_min
        chain.accept(5); // no current draft: ignored
        let s = chain.stats();
        assert_eq!((s[0].n_calls, s[0].n_gen_drafts), (3, 0));
        assert_eq!(
            (
                s[1].n_calls,
                s[1].n_gen_drafts,
                s[1].n_acc_drafts,
                s[1].n_gen_tokens,
                s[1].n_acc_tokens
            ),
            (3, 2, 1, 7, 3)
        );
        assert_eq!(chain.acceptance(), (3, 7));
        let lines = chain.stats_lines();
        assert_eq!(
            lines[0],
            "draft acceptance rate = 0.42857 (    3 accepted /     7 generated)"
        );
        assert_eq!(
            lines[2],
            "statistics draft: #calls = 3, #gen drafts = 2, #acc drafts = 1, #gen tokens = 7, #acc tokens = 3"
        );
    }
}
