//! Vec-dot throughput measured in CPU time of the benchmarking thread (Linux schedstat), so the
//! figures hold on a loaded machine where wall-clock criterion numbers do not: GB/s of weight
//! bytes for the scalar reference, the dispatched single-row kernel and the x4 kernel.
//!
//! `cargo bench -p tessera-quant --bench vec_dot_cpu_time [-- FILTER]`

#[path = "../tests/suite/vec_dot_support/mod.rs"]
mod vec_dot_support;

mod cpu_time;

use std::hint::black_box;
use tessera_quant::vec_dot::{kernel_isa, vec_dot, vec_dot_x4};
use vec_dot_support::*;

/// Columns of the benchmark matrices (a multiple of 256, like most model widths).
const K: usize = 2048;

/// Nanoseconds this thread has run on a CPU.
/// Runs `f` (one pass over `bytes` weight bytes) for about `budget_ns` of CPU time; GB/s.
fn measure(bytes: usize, budget_ns: u64, f: impl FnMut()) -> f64 {
    bytes as f64 / cpu_time::cpu_ns_per_run(budget_ns, f)
}

fn run<W: WeightBlock, A: ActBlock>(pair: &Pair<W, A>, matrix_bytes: usize, filter: &str) {
    let name = format!("{}/{}KiB", W::TYPE, matrix_bytes >> 10);
    if !name.contains(filter) {
        return;
    }
    let nb = K / pair.block_size;
    let mut rng = rng(1);
    let rows_n = matrix_bytes.div_ceil(nb * std::mem::size_of::<W>());
    let rows: Vec<Vec<W>> = (0..rows_n)
        .map(|_| generate_row(&mut rng, nb, |r| W::generate(r, Mode::Random)))
        .collect();
    let acts: Vec<Vec<A>> = (0..4)
        .map(|_| generate_row(&mut rng, nb, |r| A::generate(r, Mode::Random)))
        .collect();
    let a: Vec<&[u8]> = acts.iter().map(|a| bytemuck::cast_slice(a)).collect();
    let bytes = rows_n * nb * std::mem::size_of::<W>();
    let budget = 400_000_000;
    let scalar = measure(bytes, budget / 2, || {
        for r in &rows {
            black_box((pair.reference)(K, black_box(r), black_box(&acts[0])));
        }
    });
    let x1 = measure(bytes, budget, || {
        for r in &rows {
            black_box(vec_dot(
                W::TYPE,
                K,
                bytemuck::cast_slice(black_box(r)),
                black_box(a[0]),
            ));
        }
    });
    let x4 = measure(bytes, budget, || {
        for r in &rows {
            let w = bytemuck::cast_slice(black_box(r));
            black_box(vec_dot_x4(W::TYPE, K, w, [a[0], a[1], a[2], a[3]]));
        }
    });
    println!(
        "{name:<14} scalar {scalar:6.2} GB/s   {isa} x1 {x1:6.2} GB/s   {isa} x4 {x4:6.2} GB/s weights ({:6.2} row-GB/s)",
        x4 * 4.0,
        isa = kernel_isa()
    );
}

fn main() {
    // `cargo bench` passes `--bench`; anything else is a substring filter on the case name.
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .unwrap_or_default();
    for size in [256 << 10, 64 << 20] {
        run(&Q4_0, size, &filter);
        run(&Q4_1, size, &filter);
        run(&Q5_0, size, &filter);
        run(&Q5_1, size, &filter);
        run(&Q8_0, size, &filter);
        run(&Q2_K, size, &filter);
        run(&Q3_K, size, &filter);
        run(&Q4_K, size, &filter);
        run(&Q5_K, size, &filter);
        run(&Q6_K, size, &filter);
    }
}
