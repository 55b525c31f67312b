//! Stop strings over streamed text.
//!
//! Text arrives in pieces (one token's worth at a time). A piece may end with the beginning of
//! a stop string ("<|" of "<|end|>"), so that tail is held back until the next piece shows
//! whether the stop string really follows. Nothing at or after a stop string is ever emitted.

/// What one `push` lets through.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StopOutput {
    /// Text safe to show now.
    pub text: String,
    /// Index (into the matcher's stop list) of the stop string that ended the text, if any.
    pub stopped: Option<usize>,
}

#[derive(Debug, Clone, Default)]
pub struct StopMatcher {
    stops: Vec<String>,
    /// Text received but not emitted yet: always a possible beginning of a stop string.
    held: String,
    done: bool,
}

impl StopMatcher {
    /// Empty stop strings are ignored (they would match everywhere); indices in
    /// [`StopOutput::stopped`] are positions in `stops` as given.
    pub fn new<S: AsRef<str>>(stops: &[S]) -> Self {
        StopMatcher {
            stops: stops.iter().map(|s| s.as_ref().to_owned()).collect(),
            held: String::new(),
            done: false,
        }
    }

    pub fn stops(&self) -> &[String] {
        &self.stops
    }

    /// True once a stop string was seen; later pushes emit nothing.
    pub fn is_stopped(&self) -> bool {
        self.done
    }

    pub fn push(&mut self, piece: &str) -> StopOutput {
        if self.done {
            return StopOutput::default();
        }
        self.held.push_str(piece);
        if let Some((at, which)) = self.earliest_match() {
            let text = self.held[..at].to_owned();
            self.held.clear();
            self.done = true;
            return StopOutput {
                text,
                stopped: Some(which),
            };
        }
        let keep_from = self.partial_match_start();
        let text = self.held[..keep_from].to_owned();
        self.held.drain(..keep_from);
        StopOutput {
            text,
            stopped: None,
        }
    }

    /// End of generation without a stop string: the held-back tail is real text after all.
    pub fn finish(&mut self) -> String {
        if self.done {
            return String::new();
        }
        std::mem::take(&mut self.held)
    }

    /// The first position where any stop string occurs in `held` (the longest one on a tie).
    fn earliest_match(&self) -> Option<(usize, usize)> {
        let mut best: Option<(usize, usize)> = None;
        for (i, s) in self.stops.iter().enumerate().filter(|(_, s)| !s.is_empty()) {
            if let Some(at) = self.held.find(s.as_str()) {
                let better = match best {
                    None => true,
                    Some((b_at, b_i)) => {
                        at < b_at || (at == b_at && s.len() > self.stops[b_i].len())
                    }
                };
                if better {
                    best = Some((at, i));
                }
            }
        }
        best
    }

    /// The start of the longest tail of `held` that is a proper beginning of some stop string
    /// (`held.len()` when there is none).
    fn partial_match_start(&self) -> usize {
        let held = self.held.as_bytes();
        for start in 0..held.len() {
            if !self.held.is_char_boundary(start) {
                continue;
            }
            let tail = &held[start..];
            if self
                .stops
                .iter()
                .any(|s| s.len() > tail.len() && s.as_bytes().starts_with(tail))
            {
                return start;
            }
        }
        held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stops: &[&str], pieces: &[&str]) -> (String, Option<usize>) {
        let mut m = StopMatcher::new(stops);
        let mut out = String::new();
        for p in pieces {
            let o = m.push(p);
            out.push_str(&o.text);
            if o.stopped.is_some() {
                return (out, o.stopped);
            }
        }
        out.push_str(&m.finish());
        (out, None)
    }

    #[test]
    fn no_stops_passes_everything_through_at_once() {
        let mut m = StopMatcher::new::<&str>(&[]);
        assert_eq!(m.push("abc").text, "abc");
        assert_eq!(m.finish(), "");
    }

    #[test]
    fn stop_split_over_pieces_is_never_emitted() {
        let mut m = StopMatcher::new(&["<|end|>"]);
        assert_eq!(m.push("hello <").text, "hello ");
        assert_eq!(m.push("|en").text, "");
        let o = m.push("d|> trailing");
        assert_eq!(o.text, "");
        assert_eq!(o.stopped, Some(0));
        assert_eq!(m.push("more").text, "");
        assert_eq!(m.finish(), "");
    }

    #[test]
    fn false_start_is_released() {
        assert_eq!(
            run(&["<|end|>"], &["a <", "|e", "x"]),
            ("a <|ex".into(), None)
        );
        assert_eq!(run(&["STOP"], &["ST"]), ("ST".into(), None));
    }

    #[test]
    fn text_before_stop_in_the_same_piece_is_kept() {
        assert_eq!(run(&["\n\n"], &["one\n\ntwo"]), ("one".into(), Some(0)));
    }

    #[test]
    fn empty_stop_strings_are_ignored_and_indices_kept() {
        assert_eq!(run(&["", "b"], &["ab", "c"]), ("a".into(), Some(1)));
    }

    #[test]
    fn earliest_of_several_stops_wins() {
        assert_eq!(
            run(&["world", "lo w"], &["hello world"]),
            ("hel".into(), Some(1))
        );
    }

    #[test]
    fn multibyte_text_stays_whole() {
        assert_eq!(
            run(&["ü!"], &["grü", "ße ü", "!"]),
            ("grüße ".into(), Some(0))
        );
        // A held tail that starts inside a multi-byte char is impossible: only char boundaries.
        assert_eq!(run(&["é"], &["caf", "e"]), ("cafe".into(), None));
    }

    #[test]
    fn overlapping_prefix_keeps_only_what_can_still_match() {
        // "aab" : after "aa" the tail "a" and "aa" could start "aab"; "aa" is kept.
        let mut m = StopMatcher::new(&["aab"]);
        assert_eq!(m.push("xaa").text, "x");
        assert_eq!(m.push("a").text, "a"); // "aaa": only the last "aa" can still start "aab"
        let o = m.push("b");
        assert_eq!((o.text.as_str(), o.stopped), ("", Some(0)));
    }
}
