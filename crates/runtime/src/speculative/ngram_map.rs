//! `ngram-map-k` and `ngram-map-k4v`: a table of key n-grams seen in the history.
//!
//! Both find the most recent earlier occurrence of the key (the last `n - 1` history tokens plus
//! the sampled token) and keep per-key statistics:
//! - `k` (key only): the hit count and how many draft tokens were accepted last time; the draft
//!   is the m-gram after the latest occurrence, no longer than that limit.
//! - `k4v`: additionally up to 4 distinct m-gram values per key with occurrence counts; it drafts
//!   the most frequent value only when it occurs at least 3× as often as all others together.

use std::collections::HashMap;

use super::{SpecError, SpecParams, SpecType, Speculator};

/// Counts saturate here (llama.cpp keeps them in 16 bits).
pub const MAX_COUNT: usize = 16380;
/// Value slots per key in `k4v` mode.
pub const MAX_VALUES: usize = 4;

#[derive(Clone, Copy, Debug)]
struct ValueSlot {
    /// Where this m-gram starts in the history.
    start: usize,
    /// Occurrences seen after the key.
    count: usize,
    /// Draft tokens accepted the last time this value was drafted (starts at m).
    n_accepted: usize,
}

#[derive(Clone, Debug)]
struct KeyStats {
    hits: usize,
    /// History positions below this were already scanned for values (k4v).
    scanned_to: usize,
    values: [Option<ValueSlot>; MAX_VALUES],
    /// Key-only mode: accepted-last-time of the single value (starts at m).
    key_only_accepted: usize,
}

/// The n-gram map speculator (`ngram-map-k` when `key_only`, else `ngram-map-k4v`).
#[derive(Clone, Debug)]
pub struct NgramMap {
    n: usize,
    m: usize,
    key_only: bool,
    check_rate: usize,
    min_hits: usize,
    last_check: usize,
    keys: HashMap<Vec<u32>, KeyStats>,
    /// The key and value slot (None: key-only value) of the draft made by the last call.
    last_draft: Option<(Vec<u32>, Option<usize>)>,
}

impl NgramMap {
    pub fn new(
        n: usize,
        m: usize,
        key_only: bool,
        check_rate: usize,
        min_hits: usize,
    ) -> Result<Self, SpecError> {
        SpecParams {
            ngram_size_n: n,
            ngram_size_m: m,
            ngram_check_rate: check_rate,
            ngram_min_hits: min_hits,
            ..SpecParams::default()
        }
        .validate()?;
        Ok(NgramMap {
            n,
            m,
            key_only,
            check_rate,
            min_hits,
            last_check: 0,
            keys: HashMap::new(),
            last_draft: None,
        })
    }

    pub fn from_params(p: &SpecParams, key_only: bool) -> Result<Self, SpecError> {
        Self::new(
            p.ngram_size_n,
            p.ngram_size_m,
            key_only,
            p.ngram_check_rate,
            p.ngram_min_hits,
        )
    }

    /// Hit count of a key (tests, diagnostics).
    pub fn hits(&self, key: &[u32]) -> usize {
        self.keys.get(key).map_or(0, |k| k.hits)
    }

    /// The draft for `history ++ [last]` (empty when there is none).
    pub fn propose(&mut self, history: &[u32], last: u32) -> Vec<u32> {
        self.last_draft = None;
        let len = history.len();
        let (n, m) = (self.n, self.m);
        if len < 2 * n + m {
            return Vec::new();
        }
        if self.last_check + self.check_rate > len && len > self.last_check {
            return Vec::new();
        }
        self.last_check = len;

        let mut key = history[len - (n - 1)..].to_vec();
        key.push(last);
        // The latest occurrence that still has a full m-gram after it and is not the key itself.
        let Some(pos) = (1..=len - n - m - 1)
            .rev()
            .find(|&j| history[j..j + n] == key[..])
        else {
            return Vec::new();
        };

        let stats = self.keys.entry(key.clone()).or_insert_with(|| KeyStats {
            hits: 0,
            scanned_to: 0,
            values: [None; MAX_VALUES],
            key_only_accepted: m,
        });
        stats.hits = (stats.hits + 1).min(MAX_COUNT);
        if stats.hits < self.min_hits {
            return Vec::new();
        }

        if self.key_only {
            let count = m.min(stats.key_only_accepted);
            self.last_draft = Some((key, None));
            return history[pos + n..pos + n + count].to_vec();
        }

        // Record the value after every occurrence of the key not scanned yet, up to `pos`.
        for i in stats.scanned_to..=pos {
            if history[i..i + n] != key[..] {
                continue;
            }
            let value = &history[i + n..i + n + m];
            let slot = stats.values.iter().position(|v| match v {
                None => true,
                Some(s) => history[s.start..s.start + m] == *value,
            });
            // All 4 slots hold other values: this occurrence is not counted.
            let Some(slot) = slot else { continue };
            let v = stats.values[slot].get_or_insert(ValueSlot {
                start: i + n,
                count: 0,
                n_accepted: m,
            });
            v.count = (v.count + 1).min(MAX_COUNT);
        }
        stats.scanned_to = pos + 1;

        // The most frequent value (first slot on ties) against all the others together.
        let counts: Vec<usize> = stats
            .values
            .iter()
            .map(|v| v.map_or(0, |v| v.count))
            .collect();
        let (best, &max) =
            counts.iter().enumerate().fold(
                (0, &0),
                |acc, (i, c)| if *c > *acc.1 { (i, c) } else { acc },
            );
        let others: usize = counts.iter().sum::<usize>() - max;
        if max == 0 || (others > 0 && max < 3 * others) {
            return Vec::new();
        }
        let value = stats.values[best].expect("a counted slot is filled");
        let count = m.min(value.n_accepted);
        self.last_draft = Some((key, Some(best)));
        history[value.start..value.start + count].to_vec()
    }

    /// Remembers how many tokens of the last draft were accepted: later drafts from the same
    /// key (and value) propose no more than that.
    pub fn record_accepted(&mut self, n_accepted: usize) {
        let Some((key, slot)) = self.last_draft.take() else {
            return;
        };
        let Some(stats) = self.keys.get_mut(&key) else {
            return;
        };
        match slot {
            None => stats.key_only_accepted = n_accepted,
            Some(s) => {
                if let Some(v) = stats.values[s].as_mut() {
                    v.n_accepted = n_accepted;
                }
            }
        }
    }
}

impl Speculator for NgramMap {
    fn kind(&self) -> SpecType {
        if self.key_only {
            SpecType::NgramMapK
        } else {
            SpecType::NgramMapK4v
        }
    }

    /// The table indexes the history, so a new sequence starts empty.
    fn begin(&mut self, _prompt: &[u32]) -> Result<(), SpecError> {
        self.keys.clear();
        self.last_check = 0;
        self.last_draft = None;
        Ok(())
    }

    fn draft(&mut self, history: &[u32], last: u32, out: &mut Vec<u32>) -> Result<(), SpecError> {
        out.extend(self.propose(history, last));
        Ok(())
    }

    fn accept(&mut self, n_accepted: usize) {
        self.record_accepted(n_accepted);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh(start: u32, len: usize) -> Vec<u32> {
        (start..start + len as u32).collect()
    }

    /// filler(5) K V1 filler K V1 filler K V2 filler K' — with key K = [1, 2], m = 3.
    fn history_with_values(values: &[[u32; 3]]) -> Vec<u32> {
        let mut h = fresh(500, 5);
        for (i, v) in values.iter().enumerate() {
            h.extend([1, 2]);
            h.extend(v);
            h.extend(fresh(600 + 10 * i as u32, 2));
        }
        h.push(1); // the key's first token; the sampled token (2) completes it
        h
    }

    #[test]
    fn key_only_proposes_the_latest_m_gram_and_respects_length_threshold() {
        let (n, m) = (2, 3);
        let h = history_with_values(&[[10, 11, 12], [20, 21, 22]]);
        let mut map = NgramMap::new(n, m, true, 1, 1).unwrap();
        assert_eq!(map.propose(&h, 2), vec![20, 21, 22]);
        assert_eq!(map.hits(&[1, 2]), 1);
        // Needs len ≥ 2n + m.
        let short = vec![1, 2, 7, 8, 9, 3]; // len 6 < 7
        assert!(NgramMap::new(n, m, true, 1, 1)
            .unwrap()
            .propose(&short, 1)
            .is_empty());
    }

    #[test]
    fn search_starts_at_len_minus_n_minus_m_minus_1() {
        // n = 1, m = 2, len = 8: the latest allowed start is 8 - 1 - 2 - 1 = 4.
        let h = vec![0, 9, 9, 9, 9, 7, 8, 1];
        // Key [7] only at 5 > 4: no draft.
        assert!(NgramMap::new(1, 2, true, 1, 1)
            .unwrap()
            .propose(&h, 7)
            .is_empty());
        // Key [9] at 4 (allowed) → [7, 8].
        assert_eq!(
            NgramMap::new(1, 2, true, 1, 1).unwrap().propose(&h, 9),
            vec![7, 8]
        );
    }

    #[test]
    fn accepted_last_time_limits_the_next_draft() {
        let h = history_with_values(&[[10, 11, 12], [20, 21, 22]]);
        let mut map = NgramMap::new(2, 3, true, 1, 1).unwrap();
        assert_eq!(map.propose(&h, 2).len(), 3);
        map.record_accepted(1);
        assert_eq!(map.propose(&h, 2), vec![20]);
        assert_eq!(map.hits(&[1, 2]), 2);
        map.record_accepted(2);
        assert_eq!(map.propose(&h, 2), vec![20, 21]);
        // A call without a draft forgets the pending draft: accept() then changes nothing.
        let _ = map.propose(&h[..5], 0);
        map.record_accepted(3);
        assert_eq!(map.propose(&h, 2), vec![20, 21]);
    }

    #[test]
    fn min_hits_gates_the_draft() {
        let h = history_with_values(&[[10, 11, 12], [20, 21, 22]]);
        for key_only in [true, false] {
            let mut map = NgramMap::new(2, 3, key_only, 1, 3).unwrap();
            assert!(map.propose(&h, 2).is_empty());
            assert!(map.propose(&h, 2).is_empty());
            // Third hit: drafts (k4v: values V1, V2 are tied → still no draft, see below).
            let d = map.propose(&h, 2);
            assert_eq!(d.is_empty(), !key_only, "key_only = {key_only}");
        }
    }

    #[test]
    fn hits_saturate() {
        let h = history_with_values(&[[10, 11, 12]]);
        let mut map = NgramMap::new(2, 3, true, 1, 1).unwrap();
        for _ in 0..MAX_COUNT + 5 {
            map.propose(&h, 2);
        }
        assert_eq!(map.hits(&[1, 2]), MAX_COUNT);
    }

    #[test]
    fn check_rate_applies_to_maps() {
        let h: Vec<u32> = (0..60).map(|i| i % 5).collect();
        let mut map = NgramMap::new(2, 3, true, 4, 1).unwrap();
        let looked: Vec<bool> = (20..30)
            .map(|l| !map.propose(&h[..l], h[l]).is_empty())
            .collect();
        let expected: Vec<bool> = (20..30).map(|l| (l - 20) % 4 == 0).collect();
        assert_eq!(looked, expected);
    }

    #[test]
    fn k4v_drafts_only_a_dominant_value() {
        let v1 = [10, 11, 12];
        let v2 = [20, 21, 22];
        // 3× V1 vs 1× V2: max (3) ≥ 3 × others (1) → drafts V1 although V2 is the latest.
        let h = history_with_values(&[v1, v1, v2, v1]);
        let mut map = NgramMap::new(2, 3, false, 1, 1).unwrap();
        assert_eq!(map.propose(&h, 2), v1.to_vec());
        // 2× V1 vs 1× V2: 2 < 3 → no draft.
        let h = history_with_values(&[v1, v2, v1]);
        let mut map = NgramMap::new(2, 3, false, 1, 1).unwrap();
        assert!(map.propose(&h, 2).is_empty());
        // A single value (others = 0) drafts at once.
        let h = history_with_values(&[v2, v2]);
        let mut map = NgramMap::new(2, 3, false, 1, 1).unwrap();
        assert_eq!(map.propose(&h, 2), v2.to_vec());
    }

    #[test]
    fn k4v_scans_each_occurrence_once() {
        let v1 = [10, 11, 12];
        let v2 = [20, 21, 22];
        // Counts after the first call: V1 = 2, V2 = 1 → no draft (2 < 3).
        let mut h = history_with_values(&[v1, v2, v1]);
        let mut map = NgramMap::new(2, 3, false, 1, 1).unwrap();
        assert!(map.propose(&h, 2).is_empty());
        // Repeating the lookup must not count the same occurrences again.
        assert!(map.propose(&h, 2).is_empty());
        // One more V1 occurrence (V1 = 3, V2 = 1) makes V1 dominant.
        h.pop();
        h.extend([1, 2]);
        h.extend(v1);
        h.extend(fresh(700, 2));
        h.push(1);
        assert_eq!(map.propose(&h, 2), v1.to_vec());
    }

    #[test]
    fn k4v_keeps_at_most_four_values_and_limits_by_accepted() {
        let vals: Vec<[u32; 3]> = (0..5)
            .map(|i| [10 * i + 11, 10 * i + 12, 10 * i + 13])
            .collect();
        // Five distinct values once each, then the first value 14 more times: counts 15,1,1,1
        // (the fifth value finds no slot). 15 ≥ 3 × 3 → drafts the first value.
        let mut seq: Vec<[u32; 3]> = vals.clone();
        seq.extend(std::iter::repeat_n(vals[0], 14));
        let h = history_with_values(&seq);
        let mut map = NgramMap::new(2, 3, false, 1, 1).unwrap();
        assert_eq!(map.propose(&h, 2), vals[0].to_vec());
        map.record_accepted(2);
        assert_eq!(map.propose(&h, 2), vals[0][..2].to_vec());
        // The fifth value was never counted: 3 others stay at 1 each.
        let stats = map.keys.get(&vec![1, 2]).unwrap();
        let counts: Vec<usize> = stats.values.iter().map(|v| v.unwrap().count).collect();
        assert_eq!(counts, vec![15, 1, 1, 1]);
    }
}
