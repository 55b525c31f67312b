//! Speculative decoding's verify batches: `gemm` with 1..16 activation rows over a weight
//! matrix larger than the L3 (like Gemma 3 270M's 262144-row output matrix), in CPU time of this
//! thread (Linux schedstat, so it holds on a loaded machine). Prints ns per weight row for each
//! batch size and its cost relative to one token (b=1, decode's `rows4` path): a batch that
//! streams the weights once with compute hidden under the memory time costs about 1.
//! `m` rows, 65536 by default, or `GEMV_ROWS`.
//!
//! `cargo bench -p tessera-quant --bench gemm_small_batch_cpu_time [-- FILTER]`

#[path = "../tests/suite/vec_dot_support/mod.rs"]
mod vec_dot_support;

mod cpu_time;

use std::hint::black_box;
use tessera_quant::vec_dot::gemm;
use vec_dot_support::*;

/// Nanoseconds of CPU per weight row over passes worth `budget_ns` of CPU.
fn measure(rows: usize, budget_ns: u64, f: impl FnMut()) -> f64 {
    cpu_time::cpu_ns_per_run(budget_ns, f) / rows as f64
}

const BATCHES: [usize; 9] = [1, 2, 3, 4, 5, 8, 9, 13, 16];

fn run<W: WeightBlock, A: ActBlock>(pair: &Pair<W, A>, k: usize, m: usize, filter: &str) {
    let name = format!("{}", W::TYPE);
    if !name.contains(filter) {
        return;
    }
    let nb = k / pair.block_size;
    let mut rng = rng(1);
    let w: Vec<W> = (0..m)
        .flat_map(|_| generate_row(&mut rng, nb, |r| W::generate(r, Mode::Random)))
        .collect();
    let a: Vec<A> = (0..16)
        .flat_map(|_| generate_row(&mut rng, nb, |r| A::generate(r, Mode::Random)))
        .collect();
    let (wb, ab): (&[u8], &[u8]) = (bytemuck::cast_slice(&w), bytemuck::cast_slice(&a));
    let ar = ab.len() / 16;
    let mut out = vec![0.0f32; m * 16];
    let budget = 150_000_000;
    let mut ns = [0.0; BATCHES.len()];
    // Alternate the batch sizes, twice, to spread a loaded machine's noise over all of them.
    for _ in 0..2 {
        for (i, &b) in BATCHES.iter().enumerate() {
            ns[i] += measure(m, budget, || {
                gemm(W::TYPE, k, wb, m, &ab[..b * ar], b, &mut out);
                black_box(&out);
            }) / 2.0;
        }
    }
    print!(
        "{name:6} k={k} m={m}: b=1 {:.1} ns/row; cost in b=1 steps:",
        ns[0]
    );
    for (i, &b) in BATCHES.iter().enumerate().skip(1) {
        print!(" b={b}: {:.2}", ns[i] / ns[0]);
    }
    println!();
}

fn main() {
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_default();
    let m = std::env::var("GEMV_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(65536);
    run(&Q8_0, 640, m, &filter);
    run(&Q5_0, 640, m, &filter);
    run(&Q4_0, 640, m, &filter);
    run(&Q4_1, 576, m, &filter);
    run(&Q4_K, 2048, m / 4, &filter);
    run(&Q6_K, 2048, m / 4, &filter);
}
