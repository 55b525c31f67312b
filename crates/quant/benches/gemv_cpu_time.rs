//! Decode's matrix-vector product: the repacked kernels (8-row groups, the default on x86; also
//! in GB/s of weights read), `gemm` with one activation row on file-layout weights (four weight
//! rows per kernel call where a `rows4` kernel exists) vs one `vec_dot` call per row, in CPU time of this
//! thread (Linux schedstat, so it holds on a loaded machine). Shapes like Gemma 3 270M's
//! (640-wide rows); `m` rows of weights, 65536 by default (more than the L3 for Q8_0, as the
//! 262144-row output matrix is), or `GEMV_ROWS`.
//!
//! `cargo bench -p tessera-quant --bench gemv_cpu_time [-- FILTER]`

#[path = "../tests/suite/vec_dot_support/mod.rs"]
mod vec_dot_support;

mod cpu_time;

use std::hint::black_box;
use tessera_quant::vec_dot::{gemm, vec_dot};
use vec_dot_support::*;

/// Nanoseconds of CPU per weight row over passes worth `budget_ns` of CPU.
fn measure(rows: usize, budget_ns: u64, f: impl FnMut()) -> f64 {
    cpu_time::cpu_ns_per_run(budget_ns, f) / rows as f64
}

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
    let a: Vec<A> = generate_row(&mut rng, nb, |r| A::generate(r, Mode::Random));
    let (wb, ab): (&[u8], &[u8]) = (bytemuck::cast_slice(&w), bytemuck::cast_slice(&a));
    let wr = wb.len() / m;
    let mut out = vec![0.0f32; m];
    let budget = 200_000_000;
    let mut rows = 0.0;
    let mut rows_avx2 = 0.0;
    let mut single = 0.0;
    let mut repacked = 0.0;
    let packed = tessera_quant::repack::RepackedMatrix::new(W::TYPE, k, m, wb).expect("valid");
    let mut sums = Vec::new();
    if packed.as_ref().is_some_and(|p| p.needs_act_sums()) {
        tessera_quant::repack::act_block_sums(ab, &mut sums);
    }
    // Alternate the two, three times, to spread a loaded machine's noise over both.
    for _ in 0..3 {
        if let Some(p) = &packed {
            // 256 rows per call, as the CPU backend calls it for one token.
            let groups = p.n_groups();
            let mut tile = vec![0.0f32; 256];
            repacked += measure(m, budget, || {
                for g0 in (0..groups).step_by(32) {
                    let g1 = (g0 + 32).min(groups);
                    p.gemm(g0..g1, ab, 1, &sums, &mut tile[..(g1 - g0) * 8]);
                    black_box(&tile);
                }
            });
        }
        rows += measure(m, budget, || {
            gemm(W::TYPE, k, wb, m, ab, 1, &mut out);
            black_box(&out);
        });
        // The same at the AVX2 level (where the CPU has more, its kernels are compared).
        tessera_quant::isa::force_level(Some(tessera_quant::isa::Level::Avx2)).ok();
        rows_avx2 += measure(m, budget, || {
            gemm(W::TYPE, k, wb, m, ab, 1, &mut out);
            black_box(&out);
        });
        tessera_quant::isa::force_level(None).ok();
        single += measure(m, budget, || {
            for (r, o) in out.iter_mut().enumerate() {
                *o = vec_dot(W::TYPE, k, &wb[r * wr..(r + 1) * wr], ab);
            }
            black_box(&out);
        });
    }
    if packed.is_some() {
        let ns = repacked / 3.0;
        println!(
            "{name:6} k={k} m={m}: repacked {ns:6.1} ns/row = {:5.1} GB/s",
            wr as f64 / ns
        );
    }
    println!(
        "{name:6} k={k} m={m}: gemm(n_acts=1) {:6.1} ns/row (at the AVX2 level {:6.1})   vec_dot per row {:6.1} ns/row",
        rows / 3.0,
        rows_avx2 / 3.0,
        single / 3.0
    );
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
    run(&Q5_1, 640, m, &filter);
    run(&Q4_K, 1024, m / 2, &filter);
    run(&Q6_K, 2048, m / 4, &filter);
    run(&Q8_0, 640, m, &filter);
}
