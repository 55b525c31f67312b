//! Speculative-decoding options: the `--spec-type` names and llama.cpp's defaults and ranges.

use std::fmt;
use std::str::FromStr;

use super::SpecError;

/// The speculative-decoding implementations (`--spec-type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum SpecType {
    /// No draftless type (a draft model, when given, is still used).
    #[default]
    None,
    /// A small draft model with its own context.
    Draft,
    /// The most recent earlier occurrence of the last n tokens proposes what followed it.
    NgramSimple,
    /// A table of key n-grams proposing the m-gram that followed (key only).
    NgramMapK,
    /// Like `NgramMapK` with up to 4 counted values per key (experimental upstream).
    NgramMapK4v,
    /// 3-level n-gram statistics (context, dynamic, static).
    NgramCache,
}

impl SpecType {
    /// Every type, in `--spec-type` order.
    pub const ALL: [SpecType; 6] = [
        SpecType::None,
        SpecType::Draft,
        SpecType::NgramSimple,
        SpecType::NgramMapK,
        SpecType::NgramMapK4v,
        SpecType::NgramCache,
    ];

    /// The `--spec-type` value.
    pub fn cli_name(self) -> &'static str {
        match self {
            SpecType::None => "none",
            SpecType::Draft => "draft",
            SpecType::NgramSimple => "ngram-simple",
            SpecType::NgramMapK => "ngram-map-k",
            SpecType::NgramMapK4v => "ngram-map-k4v",
            SpecType::NgramCache => "ngram-cache",
        }
    }

    /// The name in statistics lines (`statistics ngram_simple: ...`), as llama.cpp prints it.
    pub fn stats_name(self) -> &'static str {
        match self {
            SpecType::None => "none",
            SpecType::Draft => "draft",
            SpecType::NgramSimple => "ngram_simple",
            SpecType::NgramMapK => "ngram_map_k",
            SpecType::NgramMapK4v => "ngram_map_k4v",
            SpecType::NgramCache => "ngram_cache",
        }
    }

    /// True for the types that need no draft model.
    pub fn is_draftless(self) -> bool {
        matches!(
            self,
            SpecType::NgramSimple
                | SpecType::NgramMapK
                | SpecType::NgramMapK4v
                | SpecType::NgramCache
        )
    }
}

impl fmt::Display for SpecType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.cli_name())
    }
}

impl FromStr for SpecType {
    type Err = SpecError;

    /// Accepts the CLI names and the statistics names (`ngram-simple` and `ngram_simple`).
    fn from_str(s: &str) -> Result<Self, SpecError> {
        let wanted = s.trim().replace('_', "-");
        if wanted == "eagle3" {
            return Err(SpecError::InvalidArgument(
                "--spec-type eagle3 is not supported by Tessera".into(),
            ));
        }
        SpecType::ALL
            .into_iter()
            .find(|t| t.cli_name() == wanted)
            .ok_or_else(|| {
                let names: Vec<&str> = SpecType::ALL.iter().map(|t| t.cli_name()).collect();
                SpecError::InvalidArgument(format!(
                    "unknown --spec-type '{s}' (expected one of: {})",
                    names.join(", ")
                ))
            })
    }
}

/// Speculative-decoding options. `Default` is llama.cpp's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct SpecParams {
    pub spec_type: SpecType,
    /// `--draft-max`: the most draft tokens verified in one step.
    pub n_max: usize,
    /// `--draft-min`: drafts shorter than this are dropped.
    pub n_min: usize,
    /// `--draft-p-min`: the draft model stops drafting after a token it is less sure of.
    pub p_min: f32,
    /// `--spec-ngram-size-n`: length of the key n-gram (the last token being the sampled one).
    pub ngram_size_n: usize,
    /// `--spec-ngram-size-m`: length of the proposed m-gram.
    pub ngram_size_m: usize,
    /// `--spec-ngram-check-rate`: look up only every R tokens.
    pub ngram_check_rate: usize,
    /// `--spec-ngram-min-hits`: a key must have been seen this often before it drafts.
    pub ngram_min_hits: usize,
    /// `--spec-replace TARGET DRAFT`: string replacements for translating between vocabularies.
    pub replacements: Vec<(String, String)>,
}

impl Default for SpecParams {
    fn default() -> Self {
        SpecParams {
            spec_type: SpecType::None,
            n_max: 16,
            n_min: 0,
            p_min: 0.75,
            ngram_size_n: 12,
            ngram_size_m: 48,
            ngram_check_rate: 1,
            ngram_min_hits: 1,
            replacements: Vec::new(),
        }
    }
}

/// Upper bound of the n-gram sizes (llama.cpp's range).
pub const NGRAM_SIZE_MAX: usize = 1024;

impl SpecParams {
    /// Checks every range; the error names the option.
    pub fn validate(&self) -> Result<(), SpecError> {
        let bad = |msg: String| Err(SpecError::InvalidArgument(msg));
        if !(1..=NGRAM_SIZE_MAX).contains(&self.ngram_size_n) {
            return bad(format!(
                "--spec-ngram-size-n must be between 1 and {NGRAM_SIZE_MAX} inclusive (got {})",
                self.ngram_size_n
            ));
        }
        if !(1..=NGRAM_SIZE_MAX).contains(&self.ngram_size_m) {
            return bad(format!(
                "--spec-ngram-size-m must be between 1 and {NGRAM_SIZE_MAX} inclusive (got {})",
                self.ngram_size_m
            ));
        }
        if self.ngram_check_rate < 1 {
            return bad(format!(
                "--spec-ngram-check-rate must be at least 1 (got {})",
                self.ngram_check_rate
            ));
        }
        if self.ngram_min_hits < 1 {
            return bad(format!(
                "--spec-ngram-min-hits must be at least 1 (got {})",
                self.ngram_min_hits
            ));
        }
        if self.n_min > self.n_max {
            return bad(format!(
                "--draft-min ({}) must not exceed --draft-max ({})",
                self.n_min, self.n_max
            ));
        }
        if !(0.0..=1.0).contains(&self.p_min) {
            return bad(format!(
                "--draft-p-min must be between 0 and 1 (got {})",
                self.p_min
            ));
        }
        for (target, draft) in &self.replacements {
            if target.is_empty() || draft.is_empty() {
                return bad("--spec-replace strings must not be empty".into());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_llama_cpp_defaults() {
        let p = SpecParams::default();
        assert_eq!((p.n_max, p.n_min), (16, 0));
        assert_eq!(p.p_min, 0.75);
        assert_eq!((p.ngram_size_n, p.ngram_size_m), (12, 48));
        assert_eq!((p.ngram_check_rate, p.ngram_min_hits), (1, 1));
        p.validate().unwrap();
    }

    #[test]
    fn ranges_are_validated() {
        let ok = SpecParams::default();
        let cases: Vec<(SpecParams, &str)> = vec![
            (
                SpecParams {
                    ngram_size_n: 0,
                    ..ok.clone()
                },
                "--spec-ngram-size-n",
            ),
            (
                SpecParams {
                    ngram_size_n: 1025,
                    ..ok.clone()
                },
                "--spec-ngram-size-n",
            ),
            (
                SpecParams {
                    ngram_size_m: 0,
                    ..ok.clone()
                },
                "--spec-ngram-size-m",
            ),
            (
                SpecParams {
                    ngram_size_m: 1025,
                    ..ok.clone()
                },
                "--spec-ngram-size-m",
            ),
            (
                SpecParams {
                    ngram_check_rate: 0,
                    ..ok.clone()
                },
                "--spec-ngram-check-rate",
            ),
            (
                SpecParams {
                    ngram_min_hits: 0,
                    ..ok.clone()
                },
                "--spec-ngram-min-hits",
            ),
            (
                SpecParams {
                    n_min: 17,
                    ..ok.clone()
                },
                "--draft-min",
            ),
            (
                SpecParams {
                    p_min: 1.5,
                    ..ok.clone()
                },
                "--draft-p-min",
            ),
        ];
        for (p, name) in cases {
            let err = p.validate().unwrap_err().to_string();
            assert!(err.starts_with("invalid argument: "), "{err}");
            assert!(err.contains(name), "{err} should name {name}");
        }
        for edge in [1, 1024] {
            SpecParams {
                ngram_size_n: edge,
                ngram_size_m: edge,
                ..ok.clone()
            }
            .validate()
            .unwrap();
        }
    }

    #[test]
    fn type_names_round_trip() {
        for t in SpecType::ALL {
            assert_eq!(t.cli_name().parse::<SpecType>().unwrap(), t);
            assert_eq!(t.stats_name().parse::<SpecType>().unwrap(), t);
        }
        assert!("ngram".parse::<SpecType>().is_err());
        assert!("eagle3"
            .parse::<SpecType>()
            .unwrap_err()
            .to_string()
            .contains("not supported"));
    }
}
