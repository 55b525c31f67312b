//! `ngram-cache`: n-gram → next-token counts at three levels, drafting greedily while the
//! statistics are confident.
//!
//! - context: built from this generation's tokens (prompt and output), n-grams of 1..=4 tokens;
//! - dynamic: carried across runs (loaded from a file, merged with the context and saved again);
//! - static: built once from a corpus (`tessera lookup-create`), 2-grams only.
//!
//! Each draft step looks at the longest context n-gram first, then shorter ones, each candidate
//! weighted by how often the static cache saw it after the last 2 tokens; then the dynamic cache
//! with stricter thresholds; then the static cache alone. No confident candidate ends the draft.
//!
//! File format (llama.cpp's, little endian, no header): repeated records of
//! `[4 × i32 n-gram tokens, -1 for unused][i32 k][k × (i32 token, i32 count)]`.

use std::collections::HashMap;

use super::{SpecError, SpecParams, SpecType, Speculator};

/// Shortest and longest n-gram of the context and dynamic caches.
pub const NGRAM_MIN: usize = 1;
pub const NGRAM_MAX: usize = 4;
/// N-gram length of the static cache.
pub const NGRAM_STATIC: usize = 2;

/// Marks unused n-gram slots (-1 as i32 in the file).
const EMPTY: u32 = u32::MAX;

/// Per n-gram size (index = size - 1): a candidate needs this many observations and this share
/// (in percent) of them. Context ("lax") and dynamic ("strict") caches.
const MIN_SAMPLES_LAX: [u64; NGRAM_MAX] = [2, 2, 1, 1];
const MIN_PERCENT_LAX: [u64; NGRAM_MAX] = [66, 50, 50, 50];
const MIN_SAMPLES_STRICT: [u64; NGRAM_MAX] = [4, 3, 2, 2];
const MIN_PERCENT_STRICT: [u64; NGRAM_MAX] = [75, 66, 66, 66];

/// Up to `NGRAM_MAX` tokens; unused slots hold `EMPTY`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ngram([u32; NGRAM_MAX]);

impl Ngram {
    /// `tokens.len()` must be in 1..=NGRAM_MAX (callers slice it so).
    fn new(tokens: &[u32]) -> Self {
        let mut t = [EMPTY; NGRAM_MAX];
        t[..tokens.len()].copy_from_slice(tokens);
        Ngram(t)
    }
}

/// Next-token counts per n-gram.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NgramCache {
    map: HashMap<Ngram, HashMap<u32, u32>>,
}

impl NgramCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of distinct n-grams.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Counts of the tokens seen after `ngram` (1..=4 tokens).
    pub fn counts(&self, ngram: &[u32]) -> Option<&HashMap<u32, u32>> {
        if ngram.is_empty() || ngram.len() > NGRAM_MAX {
            return None;
        }
        self.map.get(&Ngram::new(ngram))
    }

    /// Counts, for every n-gram size in `sizes`, the token after each n-gram that ends in the
    /// last `n_new` positions of `tokens` (so n-grams spanning old and new tokens count once).
    pub fn update(&mut self, tokens: &[u32], n_new: usize, sizes: std::ops::RangeInclusive<usize>) {
        let len = tokens.len();
        for size in sizes {
            if size == 0 || size > NGRAM_MAX {
                continue;
            }
            for i in len.saturating_sub(n_new).max(size)..len {
                let next = tokens[i];
                let c = self
                    .map
                    .entry(Ngram::new(&tokens[i - size..i]))
                    .or_default()
                    .entry(next)
                    .or_insert(0);
                *c = c.saturating_add(1);
            }
        }
    }

    /// The static cache of a corpus (`lookup-create`): 2-gram statistics of every position.
    pub fn from_corpus(tokens: &[u32]) -> Self {
        let mut c = NgramCache::new();
        c.update(tokens, tokens.len(), NGRAM_STATIC..=NGRAM_STATIC);
        c
    }

    /// Adds every count of `other`.
    pub fn merge(&mut self, other: &NgramCache) {
        for (ngram, part) in &other.map {
            let mine = self.map.entry(*ngram).or_default();
            for (&token, &count) in part {
                let c = mine.entry(token).or_insert(0);
                *c = c.saturating_add(count);
            }
        }
    }

    /// The file bytes; records sorted by n-gram and token so equal caches give equal files.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut ngrams: Vec<&Ngram> = self.map.keys().collect();
        ngrams.sort();
        let mut out = Vec::new();
        for ngram in ngrams {
            let part = &self.map[ngram];
            let mut tokens: Vec<(u32, u32)> = part.iter().map(|(&t, &c)| (t, c)).collect();
            tokens.sort();
            for t in ngram.0 {
                out.extend_from_slice(&t.to_le_bytes());
            }
            out.extend_from_slice(&(tokens.len() as u32).to_le_bytes());
            for (t, c) in tokens {
                out.extend_from_slice(&t.to_le_bytes());
                // Counts are i32 in the file.
                out.extend_from_slice(&c.min(i32::MAX as u32).to_le_bytes());
            }
        }
        out
    }

    /// Parses a cache file; every length is checked against the bytes actually present.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, SpecError> {
        let mut cache = NgramCache::new();
        let mut at = 0usize;
        let err = |offset: usize, reason: &str| SpecError::CacheFormat {
            offset,
            reason: reason.to_string(),
        };
        let read_u32 = |at: usize| -> u32 {
            u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        while at < bytes.len() {
            if bytes.len() - at < 4 * NGRAM_MAX + 4 {
                return Err(err(at, "truncated record"));
            }
            let mut t = [EMPTY; NGRAM_MAX];
            for (i, slot) in t.iter_mut().enumerate() {
                *slot = read_u32(at + 4 * i);
            }
            let used = t.iter().take_while(|&&x| x != EMPTY).count();
            if used == 0 || t[used..].iter().any(|&x| x != EMPTY) {
                return Err(err(
                    at,
                    "n-gram tokens must be a non-empty prefix of 4 slots",
                ));
            }
            if t[..used].iter().any(|&x| x > i32::MAX as u32) {
                return Err(err(at, "negative token id in n-gram"));
            }
            at += 4 * NGRAM_MAX;
            let k = read_u32(at) as usize;
            if k == 0 || k > i32::MAX as usize {
                return Err(err(at, "token count must be positive"));
            }
            at += 4;
            if k > (bytes.len() - at) / 8 {
                return Err(err(at, "token list runs past the end of the file"));
            }
            let part = cache.map.entry(Ngram(t)).or_default();
            for _ in 0..k {
                let (token, count) = (read_u32(at), read_u32(at + 4));
                if token > i32::MAX as u32 {
                    return Err(err(at, "negative token id"));
                }
                if count == 0 || count > i32::MAX as u32 {
                    return Err(err(at + 4, "count must be positive"));
                }
                let c = part.entry(token).or_insert(0);
                *c = c.saturating_add(count);
                at += 8;
            }
        }
        Ok(cache)
    }
}

/// The best candidate after the longest matching n-gram of a primary (context or dynamic)
/// cache, weighted by the static cache's counts after the last 2 tokens.
fn try_primary(
    primary: &NgramCache,
    ngrams: &[Ngram],
    static_part: Option<&HashMap<u32, u32>>,
    min_samples: &[u64; NGRAM_MAX],
    min_percent: &[u64; NGRAM_MAX],
) -> Option<u32> {
    // `ngrams[i]` has i + 1 tokens; the longest goes first.
    for (i, ngram) in ngrams.iter().enumerate().rev() {
        let Some(part) = primary.map.get(ngram) else {
            continue;
        };
        let mut best: Option<(u32, u64, u64)> = None; // (token, primary count, static weight)
        let mut sum = 0u64;
        for (&token, &count) in part {
            let weight = static_part
                .and_then(|s| s.get(&token))
                .map_or(1, |&c| 100 * c as u64);
            let count = count as u64;
            sum += count;
            let better = match best {
                None => true,
                Some((bt, bc, bw)) => {
                    let (score, best_score) = (count * weight, bc * bw);
                    score > best_score || (score == best_score && token < bt)
                }
            };
            if better {
                best = Some((token, count, weight));
            }
        }
        let Some((token, count, _)) = best else {
            continue;
        };
        if sum < min_samples[i] || 100 * count < min_percent[i] * sum {
            continue;
        }
        return Some(token);
    }
    None
}

/// The most frequent token after a 2-gram in the static cache alone, if confident enough.
fn try_static(static_cache: &NgramCache, ngram: &Ngram) -> Option<u32> {
    let part = static_cache.map.get(ngram)?;
    let (mut best, mut max, mut sum) = (EMPTY, 0u64, 0u64);
    for (&token, &count) in part {
        let count = count as u64;
        sum += count;
        if count > max || (count == max && token < best) {
            (best, max) = (token, count);
        }
    }
    let i = NGRAM_STATIC - 1;
    if sum < MIN_SAMPLES_LAX[i] || 100 * max < MIN_PERCENT_LAX[i] * sum {
        return None;
    }
    Some(best)
}

/// Drafts up to `n_draft` tokens continuing `inp` (history ++ [sampled]).
pub fn draft_from_caches(
    inp: &[u32],
    n_draft: usize,
    context: &NgramCache,
    dynamic: &NgramCache,
    static_cache: &NgramCache,
) -> Vec<u32> {
    let mut draft: Vec<u32> = Vec::new();
    if inp.len() < NGRAM_STATIC {
        return draft;
    }
    let mut tail: Vec<u32> = Vec::with_capacity(NGRAM_MAX);
    while draft.len() < n_draft {
        // The last NGRAM_MAX tokens of inp ++ draft.
        tail.clear();
        let total = inp.len() + draft.len();
        for j in total.saturating_sub(NGRAM_MAX)..total {
            tail.push(if j < inp.len() {
                inp[j]
            } else {
                draft[j - inp.len()]
            });
        }
        let ngram_static = Ngram::new(&tail[tail.len() - NGRAM_STATIC..]);
        let static_part = static_cache.map.get(&ngram_static);
        let ngrams: Vec<Ngram> = (NGRAM_MIN..=tail.len())
            .map(|size| Ngram::new(&tail[tail.len() - size..]))
            .collect();
        let next = try_primary(
            context,
            &ngrams,
            static_part,
            &MIN_SAMPLES_LAX,
            &MIN_PERCENT_LAX,
        )
        .or_else(|| {
            try_primary(
                dynamic,
                &ngrams,
                static_part,
                &MIN_SAMPLES_STRICT,
                &MIN_PERCENT_STRICT,
            )
        })
        .or_else(|| try_static(static_cache, &ngram_static));
        match next {
            Some(t) => draft.push(t),
            None => break,
        }
    }
    draft
}

/// The `ngram-cache` speculator.
#[derive(Clone, Debug)]
pub struct NgramCacheSpeculator {
    n_draft: usize,
    context: NgramCache,
    dynamic: NgramCache,
    static_cache: NgramCache,
    /// Tokens of `history ++ [last]` already counted in the context cache.
    n_counted: usize,
}

impl NgramCacheSpeculator {
    /// `static_cache` / `dynamic` are the loaded files (empty when none was given).
    pub fn new(n_draft: usize, static_cache: NgramCache, dynamic: NgramCache) -> Self {
        NgramCacheSpeculator {
            n_draft,
            context: NgramCache::new(),
            dynamic,
            static_cache,
            n_counted: 0,
        }
    }

    pub fn from_params(p: &SpecParams, static_cache: NgramCache, dynamic: NgramCache) -> Self {
        Self::new(p.n_max, static_cache, dynamic)
    }

    pub fn context(&self) -> &NgramCache {
        &self.context
    }
}

impl Speculator for NgramCacheSpeculator {
    fn kind(&self) -> SpecType {
        SpecType::NgramCache
    }

    fn begin(&mut self, _prompt: &[u32]) -> Result<(), SpecError> {
        // Fold the finished sequence into the dynamic cache before starting a new one.
        self.dynamic.merge(&self.context);
        self.context = NgramCache::new();
        self.n_counted = 0;
        Ok(())
    }

    fn draft(&mut self, history: &[u32], last: u32, out: &mut Vec<u32>) -> Result<(), SpecError> {
        let mut inp = Vec::with_capacity(history.len() + 1);
        inp.extend_from_slice(history);
        inp.push(last);
        if self.n_counted < inp.len() {
            self.context
                .update(&inp, inp.len() - self.n_counted, NGRAM_MIN..=NGRAM_MAX);
            self.n_counted = inp.len();
        }
        out.extend(draft_from_caches(
            &inp,
            self.n_draft,
            &self.context,
            &self.dynamic,
            &self.static_cache,
        ));
        Ok(())
    }

    fn accept(&mut self, _n_accepted: usize) {}

    fn dynamic_cache(&self) -> Option<NgramCache> {
        let mut d = self.dynamic.clone();
        d.merge(&self.context);
        Some(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_counts_every_ngram_once_across_chunks() {
        let tokens = [1u32, 2, 3, 1, 2, 3, 1, 2];
        let mut whole = NgramCache::new();
        whole.update(&tokens, tokens.len(), 1..=4);
        let mut chunked = NgramCache::new();
        chunked.update(&tokens[..3], 3, 1..=4);
        chunked.update(&tokens[..5], 2, 1..=4);
        chunked.update(&tokens, 3, 1..=4);
        assert_eq!(whole, chunked);
        // [1, 2] is followed by 3 twice; [2] by 3 twice; [3, 1, 2] by 3 once.
        assert_eq!(whole.counts(&[1, 2]).unwrap()[&3], 2);
        assert_eq!(whole.counts(&[2]).unwrap()[&3], 2);
        assert_eq!(whole.counts(&[3, 1, 2]).unwrap()[&3], 1);
        assert!(whole.counts(&[2, 1]).is_none());
    }

    #[test]
    fn files_round_trip_and_are_deterministic() {
        let mut c = NgramCache::new();
        c.update(&[5, 6, 7, 5, 6, 8, 5, 6, 7], 9, 1..=4);
        let bytes = c.to_bytes();
        let back = NgramCache::from_bytes(&bytes).unwrap();
        assert_eq!(back, c);
        assert_eq!(back.to_bytes(), bytes);
        assert!(NgramCache::from_bytes(&[]).unwrap().is_empty());
    }

    #[test]
    fn malformed_files_are_rejected() {
        let mut c = NgramCache::new();
        c.update(&[5, 6, 7], 3, 2..=2);
        let good = c.to_bytes();
        // Truncated anywhere.
        for cut in 1..good.len() {
            assert!(
                NgramCache::from_bytes(&good[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        let patch = |offset: usize, v: u32| {
            let mut b = good.clone();
            b[offset..offset + 4].copy_from_slice(&v.to_le_bytes());
            NgramCache::from_bytes(&b)
        };
        assert!(patch(0, u32::MAX).is_err()); // empty n-gram
        assert!(patch(12, 9).is_err()); // token after an unused slot
        assert!(patch(16, 0).is_err()); // zero tokens
        assert!(patch(16, 1 << 30).is_err()); // more tokens than bytes
        assert!(patch(24, 0).is_err()); // zero count
        assert!(patch(20, 0x8000_0000).is_err()); // negative token
    }

    #[test]
    fn context_cache_drafts_a_repeated_continuation() {
        // "1 2 3 4 5" seen twice; after "... 1 2" the context predicts 3 4 5 1 2 ...
        let inp: Vec<u32> = [9, 1, 2, 3, 4, 5, 8, 1, 2, 3, 4, 5, 7, 1, 2].to_vec();
        let mut ctx = NgramCache::new();
        ctx.update(&inp, inp.len(), 1..=4);
        let d = draft_from_caches(&inp, 3, &ctx, &NgramCache::new(), &NgramCache::new());
        assert_eq!(d, vec![3, 4, 5]);
        // After 5 the context saw 8 once and 7 once: the 4-gram [3 4 5]... is ambiguous too
        // (50% each, 1 sample each for sizes 3/4 → lax thresholds 1 sample / 50 % pass, the
        // lower token id wins the tie).
        let d = draft_from_caches(&inp, 5, &ctx, &NgramCache::new(), &NgramCache::new());
        assert_eq!(d[..3], [3, 4, 5]);
    }

    #[test]
    fn thresholds_stop_the_draft() {
        // Unigram [7] followed by 1 and 2 once each: 1 sample per token, 50 % < 66 % for size 1.
        let inp: Vec<u32> = vec![7, 1, 7, 2, 7];
        let mut ctx = NgramCache::new();
        ctx.update(&inp, inp.len(), 1..=1);
        assert!(
            draft_from_caches(&inp, 4, &ctx, &NgramCache::new(), &NgramCache::new()).is_empty()
        );
        // With a third "7 1" the unigram passes (2 of 3 = 66 %).
        let inp: Vec<u32> = vec![7, 1, 7, 2, 7, 1, 7];
        let mut ctx = NgramCache::new();
        ctx.update(&inp, inp.len(), 1..=1);
        assert_eq!(
            draft_from_caches(&inp, 1, &ctx, &NgramCache::new(), &NgramCache::new()),
            vec![1]
        );
    }

    #[test]
    fn dynamic_uses_strict_thresholds_and_static_breaks_ties() {
        let inp: Vec<u32> = vec![40, 41, 42];
        let empty = NgramCache::new();
        // Dynamic: [41, 42] → 50 ×3 and 51 ×1: 75 % ≥ 66 %, 4 samples ≥ 3 → 50.
        let mut dynamic = NgramCache::new();
        for next in [50, 50, 50, 51] {
            dynamic.update(&[41, 42, next], 1, 2..=2);
        }
        assert_eq!(
            draft_from_caches(&inp, 1, &empty, &dynamic, &empty),
            vec![50]
        );
        // 50 ×1, 51 ×1: 2 samples < 3 → nothing.
        let mut d2 = NgramCache::new();
        for next in [50, 51] {
            d2.update(&[41, 42, next], 1, 2..=2);
        }
        assert!(draft_from_caches(&inp, 1, &empty, &d2, &empty).is_empty());
        // Static alone: [41, 42] → 60 ×2 → 60 (2 samples, 100 %).
        let mut st = NgramCache::new();
        st.update(&[41, 42, 60, 41, 42, 60], 6, 2..=2);
        assert_eq!(draft_from_caches(&inp, 1, &empty, &empty, &st), vec![60]);
        // Static weighting (×100 per static count) makes the dynamic cache pick 51 over the more
        // frequent 50, but the percent rule uses 51's own count (1 of 4 = 25 %) → rejected;
        // the static cache alone then proposes 51.
        let mut st51 = NgramCache::new();
        st51.update(&[41, 42, 51, 41, 42, 51], 6, 2..=2);
        assert_eq!(
            draft_from_caches(&inp, 1, &empty, &dynamic, &st51),
            vec![51]
        );
    }

    #[test]
    fn speculator_counts_history_incrementally_and_saves_dynamic() {
        let mut s = NgramCacheSpeculator::new(4, NgramCache::new(), NgramCache::new());
        s.begin(&[]).unwrap();
        let seq: Vec<u32> = [1, 2, 3, 4].repeat(4);
        let mut out = Vec::new();
        for len in 1..seq.len() {
            out.clear();
            s.draft(&seq[..len - 1], seq[len - 1], &mut out).unwrap();
        }
        let mut whole = NgramCache::new();
        whole.update(&seq[..seq.len() - 1], seq.len() - 1, 1..=4);
        assert_eq!(s.context(), &whole);
        assert_eq!(out, vec![4, 1, 2, 3]);
        let saved = s.dynamic_cache().unwrap();
        assert_eq!(saved, whole);
        // A new sequence starts with an empty context; the old one went to the dynamic cache.
        s.begin(&[]).unwrap();
        assert!(s.context().is_empty());
        assert_eq!(s.dynamic_cache().unwrap(), whole);
    }
}
