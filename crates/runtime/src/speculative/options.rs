//! The speculative options of a request (the JS API's and the server's `speculative: { type,
//! ... }`): llama.cpp's `--spec-type` and its options by their JSON names, with llama.cpp's
//! defaults for absent fields. Deserializable with the `serde` feature.

use super::{SpecError, SpecParams, SpecType};

/// `speculative: { type, ngram_size_n, ngram_size_m, ngram_check_rate, ngram_min_hits,
/// draft_max, draft_min }` (defaults 12, 48, 1, 1, 16, 0).
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default))]
pub struct SpeculativeOptions {
    /// "none", "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-cache" or "draft".
    #[cfg_attr(feature = "serde", serde(rename = "type"))]
    pub spec_type: Option<String>,
    pub ngram_size_n: Option<usize>,
    pub ngram_size_m: Option<usize>,
    pub ngram_check_rate: Option<usize>,
    pub ngram_min_hits: Option<usize>,
    pub draft_max: Option<usize>,
    pub draft_min: Option<usize>,
}

impl SpeculativeOptions {
    /// The checked parameters.
    pub fn to_params(&self) -> Result<SpecParams, SpecError> {
        let d = SpecParams::default();
        let spec_type = match &self.spec_type {
            None => SpecType::None,
            Some(name) => name.parse::<SpecType>()?,
        };
        let params = SpecParams {
            spec_type,
            n_max: self.draft_max.unwrap_or(d.n_max),
            n_min: self.draft_min.unwrap_or(d.n_min),
            ngram_size_n: self.ngram_size_n.unwrap_or(d.ngram_size_n),
            ngram_size_m: self.ngram_size_m.unwrap_or(d.ngram_size_m),
            ngram_check_rate: self.ngram_check_rate.unwrap_or(d.ngram_check_rate),
            ngram_min_hits: self.ngram_min_hits.unwrap_or(d.ngram_min_hits),
            ..d
        };
        params.validate()?;
        Ok(params)
    }
}
