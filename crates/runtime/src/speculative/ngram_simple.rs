//! `ngram-simple`: propose what followed the most recent earlier occurrence of the last n tokens.

use super::{SpecError, SpecParams, SpecType, Speculator};

/// Self-speculation from the token history, no model and no tables.
///
/// Rules (llama.cpp's): look up only every `check_rate` tokens; need more than `n + m + 1`
/// history tokens; the pattern is the last `n - 1` history tokens plus the sampled token; search
/// backwards from position `len - n - 1` down to 1 (position 0 is never a match); propose up to
/// `m` tokens following the match, and nothing when fewer than `n` would be proposed.
#[derive(Clone, Debug)]
pub struct NgramSimple {
    n: usize,
    m: usize,
    check_rate: usize,
    /// History length at the last lookup.
    last_check: usize,
}

impl NgramSimple {
    pub fn new(n: usize, m: usize, check_rate: usize) -> Result<Self, SpecError> {
        SpecParams {
            ngram_size_n: n,
            ngram_size_m: m,
            ngram_check_rate: check_rate,
            ..SpecParams::default()
        }
        .validate()?;
        Ok(NgramSimple {
            n,
            m,
            check_rate,
            last_check: 0,
        })
    }

    pub fn from_params(p: &SpecParams) -> Result<Self, SpecError> {
        Self::new(p.ngram_size_n, p.ngram_size_m, p.ngram_check_rate)
    }

    /// The draft for `history ++ [last]` (empty when there is none); updates the check position.
    pub fn propose(&mut self, history: &[u32], last: u32) -> Vec<u32> {
        let len = history.len();
        let (n, m) = (self.n, self.m);
        // Skip until `check_rate` tokens have arrived since the last lookup (a shorter history
        // than last time means a new sequence: look up).
        if self.last_check + self.check_rate > len && len > self.last_check {
            return Vec::new();
        }
        if len <= n + m + 1 {
            return Vec::new();
        }
        self.last_check = len;

        let pattern_head = &history[len - (n - 1)..];
        let matches_at =
            |j: usize| history[j..j + n - 1] == *pattern_head && history[j + n - 1] == last;
        let Some(pos) = (1..=len - n - 1).rev().find(|&j| matches_at(j)) else {
            return Vec::new();
        };
        let count = m.min(len - (pos + n));
        if count < n {
            return Vec::new();
        }
        history[pos + n..pos + n + count].to_vec()
    }
}

impl Speculator for NgramSimple {
    fn kind(&self) -> SpecType {
        SpecType::NgramSimple
    }

    fn begin(&mut self, _prompt: &[u32]) -> Result<(), SpecError> {
        self.last_check = 0;
        Ok(())
    }

    fn draft(&mut self, history: &[u32], last: u32, out: &mut Vec<u32>) -> Result<(), SpecError> {
        out.extend(self.propose(history, last));
        Ok(())
    }

    fn accept(&mut self, _n_accepted: usize) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sequence with no repeated n-gram of length ≥ 2 (distinct tokens).
    fn fresh(start: u32, len: usize) -> Vec<u32> {
        (start..start + len as u32).collect()
    }

    #[test]
    fn proposes_what_followed_the_latest_earlier_occurrence() {
        let (n, m) = (3, 4);
        let mut s = NgramSimple::new(n, m, 1).unwrap();
        // [0] filler, then A B C x1..x6, filler, A B C y1..y6, filler, A B | sampled C
        let mut h = vec![900];
        h.extend([1, 2, 3, 10, 11, 12, 13, 14, 15]);
        h.extend(fresh(100, 3));
        h.extend([1, 2, 3, 20, 21, 22, 23, 24, 25]);
        h.extend(fresh(200, 3));
        h.extend([1, 2]);
        let d = s.propose(&h, 3);
        // The most recent occurrence wins: y1..y4 (m = 4 tokens).
        assert_eq!(d, vec![20, 21, 22, 23]);
    }

    #[test]
    fn position_zero_is_never_a_match() {
        let (n, m) = (2, 2);
        let mut s = NgramSimple::new(n, m, 1).unwrap();
        // Pattern [7, 8] occurs only at position 0.
        let mut h = vec![7, 8, 1, 2];
        h.extend(fresh(100, 4));
        h.push(7);
        assert_eq!(s.propose(&h, 8), Vec::<u32>::new());
        // The same pattern at position 1 matches.
        let mut h = vec![0, 7, 8, 1, 2];
        h.extend(fresh(100, 4));
        h.push(7);
        assert_eq!(s.propose(&h, 8), vec![1, 2]);
    }

    #[test]
    fn search_starts_at_len_minus_n_minus_1() {
        // n = 2, m = 2. The only earlier occurrence of [5, 5] starts at len - n - 1 - 0 (allowed)
        // or at len - n (excluded: it overlaps the current pattern position).
        let mut s = NgramSimple::new(2, 2, 1).unwrap();
        let h = vec![0, 1, 2, 3, 9, 9, 5]; // len 7: start = 4 → [9, 5]? pattern [5, 5]
        assert!(s.propose(&h, 5).is_empty()); // [5,5] nowhere at j ≤ 4
        let mut s = NgramSimple::new(2, 2, 1).unwrap();
        let h = vec![0, 1, 2, 4, 5, 5, 5]; // len 7: j = 4 → [5, 5] matches; copy = min(2, 7-6)=1 < n
        assert!(s.propose(&h, 5).is_empty());
        let mut s = NgramSimple::new(2, 2, 1).unwrap();
        let h = vec![0, 1, 5, 5, 8, 9, 5]; // j = 2 matches, copy = min(2, 7-4) = 2 ≥ n
        assert_eq!(s.propose(&h, 5), vec![8, 9]);
    }

    #[test]
    fn needs_more_than_n_plus_m_plus_1_tokens() {
        let (n, m) = (2, 3);
        // len = 6 = n + m + 1: refused even though [1, 2] repeats.
        let h = vec![0, 1, 2, 7, 8, 1];
        assert!(NgramSimple::new(n, m, 1).unwrap().propose(&h, 2).is_empty());
        // len = 7: accepted.
        let h = vec![0, 1, 2, 7, 8, 9, 1];
        assert_eq!(
            NgramSimple::new(n, m, 1).unwrap().propose(&h, 2),
            vec![7, 8, 9]
        );
    }

    #[test]
    fn draft_shorter_than_n_is_dropped() {
        // n = 3, m = 8: the match leaves only 2 following tokens → nothing.
        let mut h = fresh(100, 10);
        h.extend([1, 2, 3, 1, 2]);
        assert!(NgramSimple::new(3, 8, 1).unwrap().propose(&h, 3).is_empty());
        // With 3 following tokens (= n) the draft is proposed.
        let mut h = fresh(100, 10);
        h.extend([1, 2, 3, 50, 1, 2]);
        assert_eq!(
            NgramSimple::new(3, 8, 1).unwrap().propose(&h, 3),
            vec![50, 1, 2]
        );
    }

    #[test]
    fn check_rate_skips_lookups() {
        let mut s = NgramSimple::new(1, 1, 3).unwrap();
        // Periodic history: every lookup would match.
        let h: Vec<u32> = (0..40).map(|i| i % 4).collect();
        let mut looked = Vec::new();
        for len in 10..20 {
            let d = s.propose(&h[..len], h[len]);
            looked.push(!d.is_empty());
        }
        // Lookups at len 10, 13, 16, 19 (last_check + 3 ≤ len).
        let expected: Vec<bool> = (10..20).map(|l| (l - 10) % 3 == 0).collect();
        assert_eq!(looked, expected);
        // A shorter history (new sequence) looks up at once.
        assert!(!s.propose(&h[..12], h[12]).is_empty());
    }

    /// In text repeating with period p, the most recent match is one period back with p - 1
    /// tokens after it: n < p drafts the rest of the period, n ≥ p never drafts (the reason
    /// `--spec-ngram-size-n 6` drafted almost nothing on Gemma 3's 6-token output loop).
    #[test]
    fn a_loop_drafts_only_when_n_is_below_its_period() {
        let p = 6;
        let mut h = fresh(100, 60);
        h.extend((0..60).map(|i| 1 + (i % p) as u32));
        let last = 1 + (60 % p) as u32;
        for n in 2..p {
            let d = NgramSimple::new(n, 48, 1).unwrap().propose(&h, last);
            let want: Vec<u32> = (1..p).map(|i| 1 + ((60 + i) % p) as u32).collect();
            assert_eq!(d, want, "n = {n}");
        }
        for n in p..p + 3 {
            assert!(
                NgramSimple::new(n, 48, 1)
                    .unwrap()
                    .propose(&h, last)
                    .is_empty(),
                "n = {n}"
            );
        }
    }

    #[test]
    fn below_length_threshold_does_not_consume_the_check() {
        let mut s = NgramSimple::new(1, 1, 2).unwrap();
        let h: Vec<u32> = (0..20).map(|i| i % 2).collect();
        assert!(s.propose(&h[..3], h[3]).is_empty()); // len 3 ≤ n + m + 1
        assert!(!s.propose(&h[..4], h[4]).is_empty()); // first real lookup
        assert!(s.propose(&h[..5], h[5]).is_empty()); // rate 2 → skipped
        assert!(!s.propose(&h[..6], h[6]).is_empty());
    }
}
