//! The repacked kernels (8-row groups, the default on x86) and the tiled gemm on file-layout
//! weights vs the 4-activation vec_dot_x4 loop, in CPU time of this thread (Linux
//! schedstat, so it holds on a loaded machine): GMAC/s for model-like shapes (640 × 1024
//! weights, 64 tokens).
//!
//! `cargo bench -p tessera-quant --bench gemm_cpu_time [-- FILTER]`

#[path = "../tests/suite/vec_dot_support/mod.rs"]
mod vec_dot_support;

mod cpu_time;

use std::hint::black_box;
use tessera_quant::repack::RepackedMatrix;
use tessera_quant::vec_dot::{gemm, vec_dot_x4};
use vec_dot_support::*;

/// GMAC/s (multiply-adds per CPU nanosecond) over passes worth `budget_ns` of CPU.
fn measure(macs: usize, budget_ns: u64, f: impl FnMut()) -> f64 {
    macs as f64 / cpu_time::cpu_ns_per_run(budget_ns, f)
}

fn run<W: WeightBlock, A: ActBlock>(pair: &Pair<W, A>, k: usize, filter: &str) {
    let name = format!("{}", W::TYPE);
    if !name.contains(filter) {
        return;
    }
    let (m, n) = (256usize, 64usize);
    let nb = k / pair.block_size;
    let mut rng = rng(1);
    let w: Vec<W> = (0..m)
        .flat_map(|_| generate_row(&mut rng, nb, |r| W::generate(r, Mode::Random)))
        .collect();
    let a: Vec<A> = (0..n)
        .flat_map(|_| generate_row(&mut rng, nb, |r| A::generate(r, Mode::Random)))
        .collect();
    let (wb, ab): (&[u8], &[u8]) = (bytemuck::cast_slice(&w), bytemuck::cast_slice(&a));
    let (wr, ar) = (wb.len() / m, ab.len() / n);
    let mut out = vec![0.0f32; m * n];
    let macs = m * n * k;
    let budget = 300_000_000;
    let tiled = measure(macs, budget, || {
        for r0 in (0..m).step_by(16) {
            gemm(
                W::TYPE,
                k,
                &wb[r0 * wr..(r0 + 16) * wr],
                16,
                ab,
                n,
                &mut out[..16 * n],
            );
        }
        black_box(&out);
    });
    let x4 = measure(macs, budget, || {
        for r0 in (0..m).step_by(16) {
            for t in (0..n).step_by(4) {
                let acts = std::array::from_fn(|j| &ab[(t + j) * ar..(t + j + 1) * ar]);
                for r in r0..r0 + 16 {
                    let d = vec_dot_x4(W::TYPE, k, &wb[r * wr..(r + 1) * wr], acts);
                    out[t * m + r] = d[0];
                }
            }
        }
        black_box(&out);
    });
    let repacked = match RepackedMatrix::new(W::TYPE, k, m, wb).expect("valid weights") {
        Some(packed) => {
            let mut sums = Vec::new();
            if packed.needs_act_sums() {
                tessera_quant::repack::act_block_sums(ab, &mut sums);
            }
            let groups = packed.n_groups();
            let rate = measure(macs, budget, || {
                // 2 groups (16 rows) per call, as the CPU backend calls it for long batches.
                for g0 in (0..groups).step_by(2) {
                    let g1 = (g0 + 2).min(groups);
                    packed.gemm(g0..g1, ab, n, &sums, &mut out[..(g1 - g0) * 8 * n]);
                }
                black_box(&out);
            });
            format!("{rate:6.2} GMAC/s")
        }
        None => "     - (not repacked)".into(),
    };
    println!(
        "{name:6} k={k}: repacked {repacked}   gemm {tiled:6.2} GMAC/s   x4 loop {x4:6.2} GMAC/s"
    );
}

fn main() {
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_default();
    run(&Q4_0, 640, &filter);
    run(&Q4_1, 576, &filter);
    run(&Q5_0, 640, &filter);
    run(&Q8_0, 640, &filter);
    run(&Q4_K, 1024, &filter);
    run(&Q5_K, 1024, &filter);
    run(&Q6_K, 2048, &filter);
}
