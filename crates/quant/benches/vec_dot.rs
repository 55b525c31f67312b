//! Vec-dot throughput in GB/s of weight bytes: scalar reference vs the dispatched kernel (AVX2
//! where available), single row and x4, over a weight matrix that fits in L2 and one that does
//! not (decode streams the whole model from memory once per token).
//!
//! `cargo bench -p tessera-quant --bench vec_dot`

#[path = "../tests/suite/vec_dot_support/mod.rs"]
mod vec_dot_support;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use std::time::Duration;
use tessera_gguf::GgmlType;
use tessera_quant::vec_dot::{kernel_isa, vec_dot, vec_dot_x4};
use vec_dot_support::*;

/// Columns of the benchmark matrices (a multiple of 256, like most model widths).
const K: usize = 2048;

struct Matrix<W, A> {
    rows: Vec<Vec<W>>,
    acts: [Vec<A>; 4],
}

fn matrix<W: WeightBlock, A: ActBlock>(pair: &Pair<W, A>, bytes: usize) -> Matrix<W, A> {
    let nb = K / pair.block_size;
    let row_bytes = nb * std::mem::size_of::<W>();
    let mut rng = rng(1);
    let rows = (0..bytes.div_ceil(row_bytes))
        .map(|_| generate_row(&mut rng, nb, |r| W::generate(r, Mode::Random)))
        .collect();
    let acts =
        std::array::from_fn(|_| generate_row(&mut rng, nb, |r| A::generate(r, Mode::Random)));
    Matrix { rows, acts }
}

fn bench_pair<W: WeightBlock, A: ActBlock>(c: &mut Criterion, pair: &Pair<W, A>, big: bool) {
    let bytes = if big { 64 << 20 } else { 256 << 10 };
    let m = matrix(pair, bytes);
    let total: usize = m.rows.iter().map(|r| std::mem::size_of_val(&r[..])).sum();
    let size = if big { "64MiB" } else { "256KiB" };
    let mut g = c.benchmark_group(format!("vec_dot/{}/{size}", W::TYPE));
    g.throughput(Throughput::Bytes(total as u64));
    let a0: &[u8] = bytemuck::cast_slice(&m.acts[0]);
    if !big {
        g.bench_function("scalar", |b| {
            b.iter(|| {
                let mut s = 0.0;
                for r in &m.rows {
                    s += (pair.reference)(K, black_box(r), black_box(&m.acts[0]));
                }
                s
            })
        });
    }
    g.bench_function(BenchmarkId::new(kernel_isa(), "x1"), |b| {
        b.iter(|| {
            let mut s = 0.0;
            for r in &m.rows {
                s += vec_dot(
                    W::TYPE,
                    K,
                    bytemuck::cast_slice(black_box(r)),
                    black_box(a0),
                );
            }
            s
        })
    });
    // x4 does four rows' work per weight read: reported bytes are weight bytes read once.
    let acts: Vec<&[u8]> = m.acts.iter().map(|a| bytemuck::cast_slice(a)).collect();
    g.bench_function(BenchmarkId::new(kernel_isa(), "x4"), |b| {
        b.iter(|| {
            let mut s = [0.0f32; 4];
            for r in &m.rows {
                let v = vec_dot_x4(
                    W::TYPE,
                    K,
                    bytemuck::cast_slice(black_box(r)),
                    [acts[0], acts[1], acts[2], acts[3]],
                );
                for i in 0..4 {
                    s[i] += v[i];
                }
            }
            s
        })
    });
    g.finish();
}

fn bench_f16(c: &mut Criterion) {
    use half::f16;
    let rows: Vec<Vec<f16>> = (0..64)
        .map(|i| {
            (0..K)
                .map(|j| f16::from_f32(((i * j) % 7) as f32 - 3.0))
                .collect()
        })
        .collect();
    let act: Vec<f16> = (0..K)
        .map(|j| f16::from_f32((j % 5) as f32 * 0.25))
        .collect();
    let mut g = c.benchmark_group("vec_dot/F16/256KiB");
    g.throughput(Throughput::Bytes((64 * K * 2) as u64));
    g.bench_function("scalar", |b| {
        b.iter(|| {
            rows.iter()
                .map(|r| tessera_quant::vec_dot::scalar::vec_dot_f16_f16(K, black_box(r), &act))
                .sum::<f32>()
        })
    });
    g.bench_function(BenchmarkId::new(kernel_isa(), "x1"), |b| {
        b.iter(|| {
            rows.iter()
                .map(|r| {
                    vec_dot(
                        GgmlType::F16,
                        K,
                        bytemuck::cast_slice(black_box(r)),
                        bytemuck::cast_slice(&act),
                    )
                })
                .sum::<f32>()
        })
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    bench_pair(c, &Q4_0, false);
    bench_pair(c, &Q4_1, false);
    bench_pair(c, &Q5_0, false);
    bench_pair(c, &Q5_1, false);
    bench_pair(c, &Q8_0, false);
    bench_pair(c, &Q2_K, false);
    bench_pair(c, &Q3_K, false);
    bench_pair(c, &Q4_K, false);
    bench_pair(c, &Q5_K, false);
    bench_pair(c, &Q6_K, false);
    bench_f16(c);
    bench_pair(c, &Q4_1, true);
    bench_pair(c, &Q4_K, true);
    bench_pair(c, &Q6_K, true);
}

criterion_group! {
    name = vec_dot_benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    targets = benches
}
criterion_main!(vec_dot_benches);
