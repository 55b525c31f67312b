//! The decode roofline (`tessera bench --roofline`): this machine's memory read bandwidth,
//! measured with the bench's own threads before each timed repetition, against the bytes a
//! decode step reads.
//!
//! A decode step reads every weight once (tied embeddings included: the output matmul reads the
//! whole table), so bytes per token ≈ the model's tensor bytes; the KV cache adds little at the
//! bench's lengths. The roofline is then bandwidth / bytes per token.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tessera_core::threading::ThreadPool;

/// Bytes read per measurement: far beyond any cache.
const BUFFER_BYTES: usize = 512 << 20;

/// Measures the read bandwidth next to each timed repetition. A shared VM's bandwidth moves
/// between runs (2 threads here read 38-41 GB/s in some minutes and 57-61 in others), so a
/// decode's share of it is only meaningful against a measurement taken at the same time.
pub struct BandwidthProbe {
    /// Filled with ones, so every page is resident before any timing.
    buf: Vec<u64>,
}

impl BandwidthProbe {
    pub fn new() -> BandwidthProbe {
        BandwidthProbe {
            buf: vec![1u64; BUFFER_BYTES / 8],
        }
    }

    /// The best of 3 timed passes summing the buffer split over the pool's threads, in bytes
    /// per second.
    pub fn measure(&self, pool: &dyn ThreadPool) -> f64 {
        let n = pool.n_threads().max(1);
        let chunk = self.buf.len() / n;
        let sink = AtomicU64::new(0);
        let mut best = 0.0f64;
        for _ in 0..3 {
            let start = Instant::now();
            pool.run(n, &|i| {
                let part = &self.buf[i * chunk..(i + 1) * chunk];
                let s = part.iter().fold(0u64, |a, &x| a.wrapping_add(x));
                sink.fetch_add(s, Ordering::Relaxed);
            });
            let secs = start.elapsed().as_secs_f64();
            best = best.max((chunk * n * 8) as f64 / secs);
        }
        // The sum keeps the reads from being optimised away.
        assert_eq!(sink.load(Ordering::Relaxed), 3 * (chunk * n) as u64);
        best
    }
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// One line for a decode result: each repetition's achieved bytes/s as a share of the
/// bandwidth measured just before it (`bandwidths[i]` with `tokens_per_s[i]`); medians.
pub fn line(test: &str, model_bytes: u64, tokens_per_s: &[f64], bandwidths: &[f64]) -> String {
    let shares: Vec<f64> = tokens_per_s
        .iter()
        .zip(bandwidths)
        .map(|(ts, bw)| model_bytes as f64 * ts / bw)
        .collect();
    let (ts, bw) = (median(tokens_per_s), median(bandwidths));
    let (lo, hi) = shares
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &s| (lo.min(s), hi.max(s)));
    format!(
        "roofline {test}: {:.1} MB/token × {ts:.1} t/s = {:.2} GB/s of {:.2} GB/s read bandwidth ({:.0} %, median of {} repetitions each against the bandwidth read just before it: {:.0}-{:.0} %); roofline {:.1} t/s",
        model_bytes as f64 / 1e6,
        model_bytes as f64 * ts / 1e9,
        bw / 1e9,
        100.0 * median(&shares),
        shares.len(),
        100.0 * lo,
        100.0 * hi,
        bw / model_bytes as f64
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_repetition_is_set_against_its_own_bandwidth() {
        // Shares 100 %, 50 %, 150 %: the median pairs, not median t/s over median bandwidth
        // (200 t/s × 100 MB over 20 GB/s would say 100 % too, so the range tells them apart).
        let l = line(
            "tg8",
            100_000_000,
            &[100.0, 200.0, 300.0],
            &[10e9, 40e9, 20e9],
        );
        assert!(
            l.starts_with("roofline tg8: 100.0 MB/token × 200.0 t/s = 20.00 GB/s"),
            "{l}"
        );
        assert!(
            l.contains("of 20.00 GB/s read bandwidth (100 %, median of 3"),
            "{l}"
        );
        assert!(l.contains(": 50-150 %); roofline 200.0 t/s"), "{l}");
    }
}
