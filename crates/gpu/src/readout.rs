//! What a GPU step reads back, for both backends' recordings.

/// What a step reads back: the output rows' logits, their greedy ids, or the last row's token
/// sampled by the GPU chain with these spec words (`ops::sample::spec_words`).
#[derive(Clone, Debug, PartialEq)]
pub enum Readout {
    Logits,
    Greedy,
    Sampled(Vec<u32>),
}
