//! The decode roofline (`tessera bench --roofline`): this machine's memory read bandwidth,
//! measured with the bench's own threads, against the bytes a decode step reads.
//!
//! A decode step reads every weight once (tied embeddings included: the output matmul reads the
//! whole table), so bytes per token ≈ the model's tensor bytes; the KV cache adds little at the
//! bench's lengths. The roofline is then bandwidth / bytes per token.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tessera_core::threading::ThreadPool;

/// Bytes read per measurement: far beyond any cache.
const BUFFER_BYTES: usize = 512 << 20;

/// The best of 5 timed passes summing a 512 MiB buffer split over the pool's threads, in
/// bytes per second.
pub fn read_bandwidth(pool: &dyn ThreadPool) -> f64 {
    // Filled with ones, so every page is resident before the timing.
    let buf = vec![1u64; BUFFER_BYTES / 8];
    let n = pool.n_threads().max(1);
    let chunk = buf.len() / n;
    let sink = AtomicU64::new(0);
    let mut best = 0.0f64;
    for _ in 0..5 {
        let start = Instant::now();
        pool.run(n, &|i| {
            let part = &buf[i * chunk..(i + 1) * chunk];
            let s = part.iter().fold(0u64, |a, &x| a.wrapping_add(x));
            sink.fetch_add(s, Ordering::Relaxed);
        });
        let secs = start.elapsed().as_secs_f64();
        best = best.max((chunk * n * 8) as f64 / secs);
    }
    // The sum keeps the reads from being optimised away.
    assert_eq!(sink.load(Ordering::Relaxed), 5 * (chunk * n) as u64);
    best
}

/// One line for a decode result: achieved bytes/s and its share of the measured bandwidth.
pub fn line(test: &str, model_bytes: u64, tokens_per_s: f64, bandwidth: f64) -> String {
    let achieved = model_bytes as f64 * tokens_per_s;
    format!(
        "roofline {test}: {:.1} MB/token × {tokens_per_s:.1} t/s = {:.2} GB/s of {:.2} GB/s read bandwidth ({:.0} %); roofline {:.1} t/s",
        model_bytes as f64 / 1e6,
        achieved / 1e9,
        bandwidth / 1e9,
        100.0 * achieved / bandwidth,
        bandwidth / model_bytes as f64
    )
}
