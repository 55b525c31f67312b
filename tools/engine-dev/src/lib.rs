//! The engine's development tools (`src/bin/`: speed checks, the speculative sweep, tracing
//! aids), which a library user does not need. Their flags: `-x N` pairs anywhere after the
//! positional arguments.

use std::sync::Arc;

use tessera_core::Model;

/// The number after `flag` in `args`, or `default` when the flag is absent or not a number.
pub fn usize_flag(args: &[String], flag: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The model of a GGUF file, loaded without progress.
pub fn load_model(path: &str) -> Result<Arc<Model>, Box<dyn std::error::Error>> {
    let file = Arc::new(tessera_gguf::GgufFile::open(path)?);
    Ok(Arc::new(Model::load(file, &mut |_| {})?))
}

/// The `k` likeliest token ids after `logits` with their log-probabilities, likeliest first.
pub fn top_log_probs(logits: &[f32], k: usize) -> Vec<(usize, f64)> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let log_z = max
        + logits
            .iter()
            .map(|&x| (x as f64 - max).exp())
            .sum::<f64>()
            .ln();
    let mut ids: Vec<usize> = (0..logits.len()).collect();
    ids.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
    ids.truncate(k);
    ids.into_iter()
        .map(|i| (i, logits[i] as f64 - log_z))
        .collect()
}
