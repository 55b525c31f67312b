//! Attention of the query rows of one KV head (`attend_rows`: `tokens` tokens × `heads` heads,
//! each row against every key) in CPU time of this thread (Linux schedstat), as nanoseconds
//! per key and row. Gemma 3's shape (4 heads of 256 per KV head: whole 128-element steps in
//! emulated f16 arithmetic) and SmolLM2's (3 heads of 64: the sequential f64 sum; and one row,
//! as its decode steps split the heads over threads), 512 keys (256 for the one row),
//! normally distributed keys, values and queries; each with both kernels (ggml's f16
//! arithmetic and the f32 tiled one). The fastest of 9 samples is the figure to compare
//! (another process on the same core inflates CPU time too).
//!
//! `cargo bench -p tessera-backend-cpu --bench attention_cpu_time [-- FILTER]`, FILTER a part
//! of a result line's name (`Ggml`, `heads of  64`, ...).

use half::f16;
use std::hint::black_box;
use tessera_backend_cpu::kv_cache::LayerKv;
use tessera_backend_cpu::ops::attention::{attend_rows, AttentionKernel, QueryRow, RowGroup};
use tessera_backend_cpu::parallel::SharedOut;
use tessera_core::backend::KvLayerLayout;
use tessera_core::graph::{RopeMode, RopeParams};

fn thread_cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("Linux schedstat");
    s.split_whitespace().next().unwrap().parse().unwrap()
}

/// splitmix64 turned into standard normal samples (Box-Muller).
struct Normal(u64);

impl Normal {
    fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
    fn sample(&mut self) -> f32 {
        let (u, v) = (self.uniform().max(1e-300), self.uniform());
        ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
    }
}

fn run(
    filter: &str,
    kernel: AttentionKernel,
    hd: usize,
    heads: usize,
    tokens: usize,
    n_keys: usize,
) {
    let name = format!("{kernel:?}: {tokens} tokens × {heads} heads of {hd:>3}, {n_keys} keys");
    if !name.contains(filter) {
        return;
    }
    let n_rows = heads * tokens;
    let mut rng = Normal(7);
    let kv = LayerKv {
        layout: KvLayerLayout {
            n_head_kv: 1,
            head_dim_k: hd,
            head_dim_v: hd,
            rope: RopeParams {
                n_dims: hd,
                mode: RopeMode::Normal,
                freq_base: 10000.0,
                freq_scale: 1.0,
                freq_factors: None,
                attn_factor: 1.0,
                yarn: None,
            },
        },
        k: (0..n_keys * hd)
            .map(|_| f16::from_f32(rng.sample()))
            .collect(),
        v: (0..n_keys * hd)
            .map(|_| f16::from_f32(0.5 * rng.sample()))
            .collect(),
    };
    let q: Vec<f32> = (0..n_rows * hd).map(|_| rng.sample()).collect();
    let mut out = vec![0.0f32; n_rows * hd];
    let rows: Vec<QueryRow> = (0..n_rows)
        .map(|row| QueryRow {
            row,
            lo: 0,
            hi: n_keys - 1,
            sink: None,
        })
        .collect();
    let scale = 1.0 / (hd as f32).sqrt();
    let mut pass = || {
        attend_rows(&RowGroup {
            q: &q,
            rows: &rows,
            kv: &kv,
            kv_head: 0,
            scale,
            softcap: None,
            out: &SharedOut::new(&mut out),
            kernel,
        });
        black_box(&out);
    };
    pass();
    // Passes between clock reads: reading schedstat costs microseconds of CPU time itself.
    let batch = (1 << 17) / (n_keys * n_rows) + 1;
    let mut samples = Vec::new();
    for _ in 0..9 {
        let start = thread_cpu_ns();
        let mut passes = 0u64;
        while thread_cpu_ns() - start < 100_000_000 {
            for _ in 0..batch {
                pass();
            }
            passes += batch as u64;
        }
        samples.push((thread_cpu_ns() - start) as f64 / (passes * (n_keys * n_rows) as u64) as f64);
    }
    samples.sort_by(f64::total_cmp);
    println!(
        "{name}: {:.1} ns per key and row (fastest of 9; median {:.1})",
        samples[0], samples[4]
    );
}

fn main() {
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_default();
    for kernel in [AttentionKernel::Ggml, AttentionKernel::F32Tiled] {
        run(&filter, kernel, 256, 4, 4, 512);
        run(&filter, kernel, 256, 4, 1, 512);
        run(&filter, kernel, 256, 1, 1, 512);
        run(&filter, kernel, 64, 3, 4, 512);
        run(&filter, kernel, 64, 1, 1, 256);
        // Decode's items: one token × 2 or 3 of SmolLM2's heads, 2 of Gemma 3's.
        run(&filter, kernel, 64, 2, 1, 256);
        run(&filter, kernel, 64, 3, 1, 256);
        run(&filter, kernel, 256, 2, 1, 512);
    }
}
