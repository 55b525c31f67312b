//! Sampling on the GPU (`sample_chain.wgsl`, `WgpuBackend::compute_sampled`) against the
//! engine's CPU sampler: the same draws (`Sampler::device_step`) on the same logits pick the
//! same tokens (up to float summation order at a cut), a seed gives the same tokens every time,
//! the frequencies follow the softmax, greedy stays the arg-max, and bias, penalties, masked
//! and NaN logits behave like the CPU's.
//!
//! Logits come from f32 tables of a synthetic GGUF file, read by a GetRows graph whose output
//! row is the table row itself (bit for bit on both sides).

use std::sync::{Arc, OnceLock};

use tessera_backend_wgpu::{Gpu, WgpuBackend};
use tessera_core::backend::{Backend, Batch, KvLayout, Segment};
use tessera_core::graph::GraphBuilder;
use tessera_core::sampling::{Sampler, SamplingError, SamplingParams};
use tessera_core::weights::{WeightId, WeightStore};
use tessera_gguf::{GgmlType, GgufFile, GgufWriter};

const WIDE: usize = 3000;
const NEG: f32 = f32::NEG_INFINITY;
const SMALL: [[f32; 8]; 4] = [
    [1.0, 2.0, 0.5, 2.0, -1.0, 0.0, 1.5, -0.5],
    [NEG, 3.0, NEG, 1.0, 1.0, 2.5, NEG, 0.0],
    [NEG; 8],
    [0.0, 1.0, 2.0, f32::NAN, 1.0, 0.0, f32::NAN, 0.0],
];

/// Rows of the wide table: random logits (scale 4), the same rounded to quarters (many ties),
/// and a peaked row (one logit far ahead).
fn wide_rows() -> Vec<Vec<f32>> {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * 4.0
    };
    let a: Vec<f32> = (0..WIDE).map(|_| rnd()).collect();
    let b: Vec<f32> = a.iter().map(|v| (v * 4.0).round() / 4.0).collect();
    let mut c: Vec<f32> = (0..WIDE).map(|_| rnd() - 6.0).collect();
    c[1234] = 9.0;
    vec![a, b, c]
}

fn file() -> Arc<GgufFile> {
    static FILE: OnceLock<Arc<GgufFile>> = OnceLock::new();
    FILE.get_or_init(|| {
        let mut w = GgufWriter::new();
        let small: Vec<f32> = SMALL.iter().flatten().copied().collect();
        w.add_tensor(
            "small",
            &[8, SMALL.len() as u64],
            GgmlType::F32,
            bytemuck::cast_slice(&small).to_vec(),
        )
        .unwrap();
        let rows = wide_rows();
        let wide: Vec<f32> = rows.iter().flatten().copied().collect();
        w.add_tensor(
            "wide",
            &[WIDE as u64, rows.len() as u64],
            GgmlType::F32,
            bytemuck::cast_slice(&wide).to_vec(),
        )
        .unwrap();
        Arc::new(GgufFile::from_bytes(w.to_bytes()).unwrap())
    })
    .clone()
}

fn gpu() -> Gpu {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    GPU.get_or_init(|| {
        let gpu = pollster::block_on(Gpu::new()).expect("a WebGPU adapter (lavapipe in CI)");
        eprintln!("adapter: {}", gpu.describe());
        gpu
    })
    .clone()
}

struct Rig {
    store: WeightStore,
    small: WeightId,
    wide: WeightId,
    backend: WgpuBackend,
}

impl Rig {
    fn new() -> Rig {
        let mut store = WeightStore::new(file());
        let small = store.require("small", &[8, SMALL.len()]).unwrap();
        let wide = store.require("wide", &[WIDE, 3]).unwrap();
        let mut backend = WgpuBackend::with_gpu(gpu());
        backend
            .init_kv(&KvLayout {
                n_ctx: 8,
                n_seq: 1,
                layers: vec![],
            })
            .unwrap();
        Rig {
            store,
            small,
            wide,
            backend,
        }
    }

    /// Samples row `row` of `table` on the GPU with `step`.
    fn sample(
        &mut self,
        table: WeightId,
        row: u32,
        step: &tessera_core::sampling::DeviceSampling,
    ) -> Result<u32, SamplingError> {
        let mut b = GraphBuilder::new(&self.store, 1, 1);
        let x = b.get_rows(table);
        let out = b.output_rows(x);
        let graph = b.finish(out);
        let batch = Batch {
            tokens: &[row],
            segments: &[Segment {
                seq: 0,
                pos0: 0,
                len: 1,
            }],
            output_rows: &[0],
        };
        match self
            .backend
            .compute_sampled(&graph, &batch, &self.store, step)
            .unwrap()
        {
            std::task::Poll::Ready(sampled) => {
                sampled.expect("the wgpu backend samples on the device")
            }
            std::task::Poll::Pending => panic!("synchronous read-back: a step is ready at once"),
        }
    }
}

fn params(temperature: f32, top_k: i32, top_p: f32, min_p: f32) -> SamplingParams {
    SamplingParams {
        temperature,
        top_k,
        top_p,
        min_p,
        ..SamplingParams::default()
    }
}

/// Runs `steps` draws of `p` (seeds 0..seeds) on `logits` on both sides; returns the
/// mismatches and the number of distinct tokens the GPU drew.
#[allow(clippy::too_many_arguments)]
fn compare(
    rig: &mut Rig,
    table: WeightId,
    row: u32,
    logits: &[f32],
    p: &SamplingParams,
    accepted: &[u32],
    seeds: u64,
    steps: usize,
) -> (usize, usize) {
    let mut mismatches = 0;
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..seeds {
        let mut s = Sampler::new(SamplingParams { seed, ..p.clone() }).unwrap();
        for &t in accepted {
            s.accept(t);
        }
        for _ in 0..steps {
            let step = s.device_step();
            let want = step.sample_cpu(logits);
            let got = rig.sample(table, row, &step);
            if got != want {
                mismatches += 1;
                eprintln!("{p:?} u={}: GPU {got:?}, CPU {want:?}", step.u);
            }
            if let Ok(t) = got {
                seen.insert(t);
            }
        }
    }
    (mismatches, seen.len())
}

#[test]
fn gpu_sampling_matches_the_cpu_sampler() {
    let mut rig = Rig::new();
    let (wide_id, small_id) = (rig.wide, rig.small);
    let wide = wide_rows();
    let cases = [
        params(0.8, 40, 0.95, 0.05), // llama.cpp's defaults
        params(1.0, 0, 0.9, 0.0),    // top-p over the whole vocabulary
        params(1.5, 5, 1.0, 0.0),    // top-k only
        params(0.7, 0, 1.0, 0.1),    // min-p only
        params(2.0, 1000, 0.5, 0.0),
        params(1.0, 0, 1.0, 0.0), // the plain softmax
        params(1.0, 1, 1.0, 0.0), // top-1
        params(1.0, 0, 0.0, 0.0), // top-p 0 keeps the best one
    ];
    let (mut total, mut bad) = (0, 0);
    for p in &cases {
        for (r, logits) in wide.iter().enumerate() {
            let (m, distinct) = compare(&mut rig, wide_id, r as u32, logits, p, &[], 3, 4);
            total += 12;
            bad += m;
            if p.top_k == 1 || p.top_p == 0.0 || r == 2 {
                continue;
            }
            assert!(distinct > 1, "{p:?} row {r}: one token only");
        }
        for r in 0..2 {
            let (m, _) = compare(&mut rig, small_id, r, &SMALL[r as usize], p, &[], 3, 4);
            total += 12;
            bad += m;
        }
    }
    eprintln!("{bad} of {total} draws differ");
    // A draw can differ only when u falls within float rounding of a cumulative boundary.
    assert!(bad * 200 <= total, "{bad} of {total} draws differ");
}

#[test]
fn bias_and_penalties_like_the_cpu() {
    let mut rig = Rig::new();
    let wide_id = rig.wide;
    let wide = wide_rows();
    let best = tessera_core::backend::argmax(&wide[0]) as u32;
    let mut p = params(0.9, 20, 0.95, 0.0);
    p.logit_bias = vec![(best, NEG), (7, 2.0), (7, 0.5), (WIDE as u32 + 5, 1.0)];
    p.repeat_penalty = 1.3;
    p.frequency_penalty = 0.2;
    p.presence_penalty = 0.1;
    // The window: the best tokens after the banned one, some twice.
    let mut order: Vec<u32> = (0..WIDE as u32).collect();
    order.sort_by(|&a, &b| wide[0][b as usize].total_cmp(&wide[0][a as usize]));
    let accepted: Vec<u32> = order[1..12].iter().chain(&order[1..4]).copied().collect();
    let (m, _) = compare(&mut rig, wide_id, 0, &wide[0], &p, &accepted, 6, 5);
    assert!(m <= 1, "{m} of 30 draws differ");
    // Greedy with the same edits: exactly the CPU's pick, never the banned token.
    p.temperature = 0.0;
    for seed in 0..3 {
        let mut s = Sampler::new(SamplingParams { seed, ..p.clone() }).unwrap();
        for &t in &accepted {
            s.accept(t);
        }
        let step = s.device_step();
        let got = rig.sample(rig.wide, 0, &step).unwrap();
        assert_eq!(Ok(got), step.sample_cpu(&wide[0]));
        assert_ne!(got, best);
    }
}

#[test]
fn same_seed_same_tokens_and_greedy_is_the_argmax() {
    let mut rig = Rig::new();
    let wide = wide_rows();
    let run = |rig: &mut Rig, seed: u64| -> Vec<u32> {
        let mut s = Sampler::new(SamplingParams {
            seed,
            ..params(1.0, 0, 0.95, 0.0)
        })
        .unwrap();
        (0..16)
            .map(|_| rig.sample(rig.wide, 0, &s.device_step()).unwrap())
            .collect()
    };
    let a = run(&mut rig, 11);
    assert_eq!(a, run(&mut rig, 11), "same seed");
    assert_ne!(a, run(&mut rig, 12), "another seed");
    // Greedy: the arg-max (the lowest id among equal maxima), for every row.
    let mut g = Sampler::new(SamplingParams::greedy()).unwrap();
    for (r, logits) in wide.iter().enumerate() {
        let got = rig.sample(rig.wide, r as u32, &g.device_step()).unwrap();
        assert_eq!(
            got as usize,
            tessera_core::backend::argmax(logits),
            "row {r}"
        );
    }
    assert_eq!(rig.sample(rig.small, 0, &g.device_step()), Ok(1));
    assert_eq!(rig.sample(rig.small, 1, &g.device_step()), Ok(1));
}

#[test]
fn frequencies_follow_the_softmax() {
    let mut rig = Rig::new();
    // Row 0 of the small table at temperature 1, no cut: p_i = softmax(logits)_i.
    let logits = SMALL[0];
    let max = logits.iter().copied().fold(NEG, f32::max);
    let w: Vec<f64> = logits.iter().map(|&l| ((l - max) as f64).exp()).collect();
    let z: f64 = w.iter().sum();
    let n = 800;
    let mut s = Sampler::new(SamplingParams {
        seed: 2024,
        ..params(1.0, 0, 1.0, 0.0)
    })
    .unwrap();
    let mut counts = [0usize; 8];
    for _ in 0..n {
        counts[rig.sample(rig.small, 0, &s.device_step()).unwrap() as usize] += 1;
    }
    let chi2: f64 = counts
        .iter()
        .zip(&w)
        .map(|(&c, &wi)| {
            let e = n as f64 * wi / z;
            (c as f64 - e).powi(2) / e
        })
        .sum();
    eprintln!("counts {counts:?}, chi2 {chi2:.2} (7 degrees of freedom)");
    // 24.3: the 0.1 % critical value for 7 degrees of freedom.
    assert!(chi2 < 24.3, "chi2 {chi2:.2}: counts {counts:?}");
}

#[test]
fn masked_and_nan_rows() {
    let mut rig = Rig::new();
    for p in [params(0.8, 40, 0.95, 0.05), SamplingParams::greedy()] {
        let mut s = Sampler::new(p.clone()).unwrap();
        assert_eq!(
            rig.sample(rig.small, 2, &s.device_step()),
            Err(SamplingError::AllMasked)
        );
        assert_eq!(
            rig.sample(rig.small, 3, &s.device_step()),
            Err(SamplingError::NanLogit { token: 3 })
        );
        // Masked tokens are never drawn.
        for _ in 0..20 {
            let t = rig.sample(rig.small, 1, &s.device_step()).unwrap();
            assert!(SMALL[1][t as usize] > NEG, "{p:?}: drew masked {t}");
        }
    }
}
