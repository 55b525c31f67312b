//! Kernel math checked without a GPU, the CUDA headers compiled as host C++ (g++) by the
//! harnesses in `tests/host/`:
//! - `dequant.cuh` dequantizes random blocks of every weight type bit for bit like the quant
//!   crate (ggml's arithmetic), and its integer (dp4a) dot products match the float dot
//!   product of the dequantized weights;
//! - `rope.cuh` rotates like the CPU backend (the modes, rotated dims, frequency factors and
//!   YaRN of the conformance suite's rope cases);
//! - `moe.cuh` routes like the CPU backend (every gating, selection bias, normalisation).
//!
//! Skipped without a C++ compiler. (In the conformance binary for its data helpers.)

use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;

const K: usize = 512;
const ROWS: usize = 5;

/// A fresh folder for one test's files.
fn scratch_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tessera-cuda-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A `#[repr(C)]` argument struct's bytes, as the harness reads them into the kernel's struct.
fn struct_bytes<T: Copy>(v: &T) -> Vec<u8> {
    // SAFETY: the argument structs are #[repr(C)] structs of u32 and f32 fields.
    unsafe { std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>()) }
        .to_vec()
}

/// `graph`'s output on the CPU backend for `tokens` at positions `pos0 ..`.
fn cpu_output(store: &WeightStore, graph: &Graph, tokens: &[u32], pos0: usize) -> Vec<f32> {
    let mut cpu = CpuBackend::new(Arc::new(SequentialPool));
    cpu.init_kv(&KvLayout {
        n_ctx: 512,
        n_seq: 1,
        layers: vec![],
    })
    .unwrap();
    let segments = [Segment {
        seq: 0,
        pos0,
        len: tokens.len(),
    }];
    let rows: Vec<usize> = (0..tokens.len()).collect();
    let batch = Batch {
        tokens,
        segments: &segments,
        output_rows: &rows,
    };
    let mut out = vec![0.0f32; graph.node(graph.output).n_elements()];
    assert!(cpu
        .compute(graph, &batch, store, &mut out)
        .unwrap()
        .is_ready());
    out
}

/// Rows of f32 table `id` (rows of `k`) as bytes.
fn table_rows(store: &WeightStore, id: WeightId, rows: &[u32], k: usize) -> Vec<u8> {
    let bytes = store.bytes(id);
    rows.iter()
        .flat_map(|&r| bytes[r as usize * k * 4..(r as usize + 1) * k * 4].to_vec())
        .collect()
}

/// The f32s a harness wrote to `path`.
fn read_floats(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap();
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// Harness `name` (`tests/host/{name}.cpp`) built in `dir`, or None without a C++ compiler.
fn harness(dir: &Path, name: &str) -> Option<PathBuf> {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = dir.join(name);
    let status = Command::new(&cxx)
        .args(["-std=c++17", "-O1", "-ffp-contract=off", "-I"])
        .arg(manifest.join("../../shaders/cuda"))
        .arg(manifest.join(format!("tests/host/{name}.cpp")))
        .arg("-o")
        .arg(&exe)
        .status();
    match status {
        Ok(s) if s.success() => Some(exe),
        Ok(s) => panic!("{cxx} failed to compile {name}.cpp (the CUDA headers as host C++): {s}"),
        Err(e) => {
            eprintln!("skipped: no C++ compiler ({cxx}: {e})");
            None
        }
    }
}

#[test]
fn dequant_cuh_decodes_every_type_like_the_quant_crate() {
    let dir = scratch_dir("dequant");
    let Some(exe) = harness(&dir, "dequant_harness") else {
        return;
    };
    // Activations: int8 quants with per-32 (d, s = d · Σq), the layout quantize.cu writes.
    let q: Vec<i8> = values(K, 7, 1.0)
        .iter()
        .map(|v| (v * 127.0).round() as i8)
        .collect();
    let d: Vec<f32> = values(K / 32, 8, 1.0)
        .iter()
        .map(|v| 0.01 + v.abs() * 0.02)
        .collect();
    let mut acts: Vec<u8> = q.iter().map(|&v| v as u8).collect();
    for (c, &dc) in d.iter().enumerate() {
        let sum: i32 = q[c * 32..(c + 1) * 32].iter().map(|&v| v as i32).sum();
        acts.extend(dc.to_le_bytes());
        acts.extend((dc * sum as f32).to_le_bytes());
    }
    std::fs::write(dir.join("acts.bin"), &acts).unwrap();
    for (i, ty) in WEIGHT_TYPES.into_iter().enumerate() {
        let data = values(K * ROWS, 100 + i as u64, 3.0);
        let bytes = encode(ty, K, &data);
        let rb = bytes.len() / ROWS;
        std::fs::write(dir.join("w.bin"), &bytes).unwrap();
        let out = dir.join("out.bin");
        let ok = Command::new(&exe)
            .args([ty.id(), K as u32, ROWS as u32, rb as u32].map(|v| v.to_string()))
            .args([dir.join("w.bin"), dir.join("acts.bin"), out.clone()])
            .status()
            .unwrap();
        assert!(ok.success(), "{ty:?}: harness failed");
        let got = read_floats(&out);
        assert_eq!(got.len(), K * ROWS + ROWS, "{ty:?}");
        for r in 0..ROWS {
            let mut want = vec![0.0f32; K];
            tessera_quant::dequantize_row(ty, &bytes[r * rb..(r + 1) * rb], &mut want).unwrap();
            let row = &got[r * K..(r + 1) * K];
            for (j, (g, w)) in row.iter().zip(&want).enumerate() {
                assert_eq!(
                    g.to_bits(),
                    w.to_bits(),
                    "{ty:?} row {r} element {j}: {g} vs {w}"
                );
            }
            if matches!(ty, GgmlType::F32 | GgmlType::F16) {
                continue;
            }
            // The integer dot product against Σ w · d · q in f64 (a float summation order
            // apart: relative to the sum of magnitudes).
            let (mut dot, mut mag) = (0.0f64, 0.0f64);
            for (j, &w) in want.iter().enumerate() {
                let term = w as f64 * d[j / 32] as f64 * q[j] as f64;
                dot += term;
                mag += term.abs();
            }
            let g = got[K * ROWS + r] as f64;
            assert!(
                (g - dot).abs() <= 1e-5 * mag,
                "{ty:?} row {r}: dp4a dot {g} vs {dot}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rope_cuh_rotates_like_the_cpu_backend() {
    let dir = scratch_dir("rope");
    let Some(exe) = harness(&dir, "rope_harness") else {
        return;
    };
    for (mode, n_dims, factors, yarn) in [
        (RopeMode::Normal, 64usize, false, false),
        (RopeMode::Normal, 32, false, false),
        (RopeMode::Neox, 64, false, false),
        (RopeMode::Neox, 32, true, false),
        (RopeMode::Normal, 64, true, true),
        (RopeMode::Neox, 32, true, true),
    ] {
        let mut store = WeightStore::new(file());
        let table = store.require("inp256", &[256, TABLE_ROWS]).unwrap();
        let factors_name = format!("factors{}", n_dims / 2);
        let factor_id = factors.then(|| store.require(&factors_name, &[n_dims / 2]).unwrap());
        let p = RopeParams {
            n_dims,
            mode,
            freq_base: 10000.0,
            freq_scale: if yarn { 0.25 } else { 1.0 },
            freq_factors: factor_id,
            attn_factor: if yarn { 1.19 } else { 1.0 },
            yarn: yarn.then(|| Yarn::new(n_dims, 64, 10000.0)),
        };
        let (tokens, pos0) = ([4u32, 5, 9], 300usize);
        let mut b = GraphBuilder::new(&store, tokens.len(), tokens.len());
        let x = b.get_rows(table);
        let x = b.reshape(x, [64, 4, tokens.len(), 1]).unwrap();
        let y = b.rope(x, p).unwrap();
        let graph = b.finish(y);
        let want = cpu_output(&store, &graph, &tokens, pos0);
        let x = table_rows(&store, table, &tokens, 256);
        let args = tessera_backend_cuda::ops::RopeArgs::new(&p, 64, 4, tokens.len()).unwrap();
        std::fs::write(dir.join("args.bin"), struct_bytes(&args)).unwrap();
        std::fs::write(dir.join("x.bin"), &x).unwrap();
        let factors_arg = match factor_id {
            Some(f) => {
                std::fs::write(dir.join("f.bin"), table_rows(&store, f, &[0], n_dims / 2)).unwrap();
                dir.join("f.bin")
            }
            None => PathBuf::from("-"),
        };
        let out = dir.join("out.bin");
        let ok = Command::new(&exe)
            .arg(dir.join("args.bin"))
            .arg(pos0.to_string())
            .args([dir.join("x.bin"), factors_arg, out.clone()])
            .status()
            .unwrap();
        assert!(ok.success(), "rope harness failed");
        let got = read_floats(&out);
        let e = nmse(&got, &want);
        eprintln!("rope {mode:?} n_dims {n_dims} factors {factors} yarn {yarn}: nmse {e:.3e}");
        assert!(
            e <= 1e-12,
            "rope {mode:?} {n_dims} {factors} {yarn}: NMSE {e:.3e}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn moe_cuh_routes_like_the_cpu_backend() {
    let dir = scratch_dir("moe");
    let Some(exe) = harness(&dir, "moe_harness") else {
        return;
    };
    for (gating, normalize, biased, scale) in [
        (Gating::Softmax, true, false, 1.0),
        (Gating::Sigmoid, true, true, 2.5),
        (Gating::SoftmaxAfterTopK, false, false, 1.0),
    ] {
        let mut store = WeightStore::new(file());
        let table = store.require("inp64", &[64, TABLE_ROWS]).unwrap();
        let bias = biased.then(|| store.require("norm64", &[64]).unwrap());
        let p = MoeRouteParams {
            n_used: 4,
            gating,
            selection_bias: bias,
            normalize,
            scale,
        };
        let tokens = [5u32, 9, 63, 0, 17];
        let mut b = GraphBuilder::new(&store, tokens.len(), tokens.len());
        let logits = b.get_rows(table);
        let route = b.moe_route(logits, p).unwrap();
        let graph = b.finish(route);
        let want = cpu_output(&store, &graph, &tokens, 0);
        let args = tessera_backend_cuda::ops::RouteArgs::new(64, tokens.len(), &p).unwrap();
        std::fs::write(dir.join("args.bin"), struct_bytes(&args)).unwrap();
        std::fs::write(
            dir.join("logits.bin"),
            table_rows(&store, table, &tokens, 64),
        )
        .unwrap();
        let bias_arg = match bias {
            Some(id) => {
                std::fs::write(dir.join("bias.bin"), table_rows(&store, id, &[0], 64)).unwrap();
                dir.join("bias.bin")
            }
            None => PathBuf::from("-"),
        };
        let out = dir.join("out.bin");
        let ok = Command::new(&exe)
            .args([
                dir.join("args.bin"),
                dir.join("logits.bin"),
                bias_arg,
                out.clone(),
            ])
            .status()
            .unwrap();
        assert!(ok.success(), "moe harness failed");
        let got = read_floats(&out);
        assert_eq!(got.len(), want.len());
        for (t, (g, w)) in got.chunks(8).zip(want.chunks(8)).enumerate() {
            assert_eq!(g[..4], w[..4], "{gating:?}: token {t}'s experts");
        }
        let e = nmse(&got, &want);
        eprintln!("moe_route {gating:?} normalize {normalize} bias {biased}: nmse {e:.3e}");
        assert!(e <= 1e-12, "{gating:?}: NMSE {e:.3e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
