//! Per-implementation draft statistics and the lines llama.cpp prints at the end.

use super::SpecType;

/// Counters of one speculative implementation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpecStats {
    pub kind: SpecType,
    /// Times the implementation was asked for a draft.
    pub n_calls: usize,
    /// Drafts it produced (non-empty after the `n_max` / `n_min` limits).
    pub n_gen_drafts: usize,
    /// Drafts of which at least one token was accepted.
    pub n_acc_drafts: usize,
    /// Draft tokens it produced and the target verified, rejected ones included.
    pub n_gen_tokens: usize,
    /// Draft tokens the target accepted.
    pub n_acc_tokens: usize,
}

impl SpecStats {
    pub fn new(kind: SpecType) -> Self {
        SpecStats {
            kind,
            ..Default::default()
        }
    }

    /// `statistics ngram_simple: #calls = 15, #gen drafts = 5, #acc drafts = 5, #gen tokens = 187, #acc tokens = 73`
    pub fn line(&self) -> String {
        format!(
            "statistics {}: #calls = {}, #gen drafts = {}, #acc drafts = {}, #gen tokens = {}, #acc tokens = {}",
            self.kind.stats_name(),
            self.n_calls,
            self.n_gen_drafts,
            self.n_acc_drafts,
            self.n_gen_tokens,
            self.n_acc_tokens
        )
    }
}

/// `draft acceptance rate = 0.57576 (  171 accepted /   297 generated)`; the rate is 0 when
/// nothing was drafted.
pub fn format_acceptance(accepted: usize, generated: usize) -> String {
    let rate = if generated == 0 {
        0.0
    } else {
        accepted as f64 / generated as f64
    };
    format!("draft acceptance rate = {rate:.5} ({accepted:5} accepted / {generated:5} generated)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_match_llama_cpp_format() {
        assert_eq!(
            format_acceptance(171, 297),
            "draft acceptance rate = 0.57576 (  171 accepted /   297 generated)"
        );
        assert_eq!(
            format_acceptance(0, 0),
            "draft acceptance rate = 0.00000 (    0 accepted /     0 generated)"
        );
        let s = SpecStats {
            kind: SpecType::NgramSimple,
            n_calls: 15,
            n_gen_drafts: 5,
            n_acc_drafts: 5,
            n_gen_tokens: 187,
            n_acc_tokens: 73,
        };
        assert_eq!(
            s.line(),
            "statistics ngram_simple: #calls = 15, #gen drafts = 5, #acc drafts = 5, #gen tokens = 187, #acc tokens = 73"
        );
    }
}
