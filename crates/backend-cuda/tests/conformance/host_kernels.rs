//! Kernel math checked without a GPU, the CUDA headers compiled as host C++ (g++) by the
//! harnesses in `tests/host/`:
//! - `dequant.cuh` dequantizes random blocks of every weight type bit for bit like the quant
//!   crate (ggml's arithmetic), and `ggml_order.cuh`'s dot products equal the CPU backend's
//!   vec_dot (ggml's x86 float order) bit for bit;
//! - `rope.cuh` rotates like the CPU backend (the modes, rotated dims, frequency factors and
//!   YaRN of the conformance suite's rope cases);
//! - `moe.cuh` routes like the CPU backend (every gating, selection bias, normalisation).
//!
//! Skipped without a C++ compiler. Inputs and the NMSE measure are the conformance suite's.

use std::path::{Path, PathBuf};
use std::process::Command;

use tessera_conformance::data::{encode, file, values, TABLE_ROWS, WEIGHT_TYPES};
use tessera_conformance::harness::{cpu_backend, nmse};
use tessera_core::backend::{Backend, Batch, KvLayout, Segment};
use tessera_core::graph::{
    Gating, Graph, GraphBuilder, MoeRouteParams, RopeMode, RopeParams, Yarn,
};
use tessera_core::weights::{WeightId, WeightStore};
use tessera_gguf::GgmlType;

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
    let mut cpu = cpu_backend();
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

/// Activations of `k` elements quantized as the CPU backend quantizes them for `ty`'s vec_dot
/// (Q8_0, Q8_1 or Q8_K blocks), and the same numbers in quantize.cu's layout: `k` int8 quants,
/// then per 32 elements (d, s) as f32 (Q8_K: the 256-block's d, repeated).
fn activations(ty: GgmlType, data: &[f32]) -> (Vec<u8>, Vec<u8>) {
    let act_ty = tessera_quant::vec_dot_type(ty).unwrap();
    let k = data.len();
    let mut blocks = vec![0u8; tessera_quant::row_bytes(act_ty, k).unwrap()];
    tessera_quant::quantize_row(act_ty, data, &mut blocks).unwrap();
    let f16 = |b: &[u8]| half::f16::from_le_bytes([b[0], b[1]]).to_f32();
    let (mut q, mut ds) = (Vec::new(), Vec::new());
    match act_ty {
        GgmlType::Q8_0 => {
            for b in blocks.chunks(34) {
                q.extend_from_slice(&b[2..]);
                ds.extend([f16(b), 0.0]);
            }
        }
        GgmlType::Q8_1 => {
            for b in blocks.chunks(36) {
                q.extend_from_slice(&b[4..]);
                ds.extend([f16(b), f16(&b[2..])]);
            }
        }
        GgmlType::Q8_K => {
            // f32 d, 256 quants, 16 i16 bsums (recomputed from the quants by the kernels).
            for b in blocks.chunks(4 + 256 + 32) {
                q.extend_from_slice(&b[4..260]);
                let d = f32::from_le_bytes(b[..4].try_into().unwrap());
                for _ in 0..8 {
                    ds.extend([d, 0.0]);
                }
            }
        }
        other => panic!("no quantized activations for {other:?}"),
    }
    q.extend(ds.iter().flat_map(|v| v.to_le_bytes()));
    (blocks, q)
}

/// dequant.cuh decodes every type bit for bit like the quant crate, and ggml_order.cuh's dot
/// products (its 8 lanes emulated one after the other) equal the CPU backend's vec_dot bit for
/// bit. Row lengths: 544 (17 blocks: MXFP4's odd tail) or 512 for the K-quants.
#[test]
fn dequant_and_ggml_order_cuh_match_the_quant_crate_bit_for_bit() {
    let dir = scratch_dir("dequant");
    let Some(exe) = harness(&dir, "dequant_harness") else {
        return;
    };
    for (i, ty) in WEIGHT_TYPES.into_iter().enumerate() {
        let k = if ty.block_size() == 256 { 512 } else { 544 };
        let data = values(k * ROWS, 100 + i as u64, 3.0);
        let bytes = encode(ty, k, &data);
        let rb = bytes.len() / ROWS;
        std::fs::write(dir.join("w.bin"), &bytes).unwrap();
        let quantized = !matches!(ty, GgmlType::F32 | GgmlType::F16);
        let act_data = values(k, 7 + i as u64, 1.0);
        let (act_blocks, acts) = if quantized {
            activations(ty, &act_data)
        } else {
            (Vec::new(), vec![0u8; k + k / 32 * 8])
        };
        std::fs::write(dir.join("acts.bin"), &acts).unwrap();
        let out = dir.join("out.bin");
        let ok = Command::new(&exe)
            .args([ty.id(), k as u32, ROWS as u32, rb as u32].map(|v| v.to_string()))
            .args([dir.join("w.bin"), dir.join("acts.bin"), out.clone()])
            .status()
            .unwrap();
        assert!(ok.success(), "{ty:?}: harness failed");
        let got = read_floats(&out);
        assert_eq!(got.len(), k * ROWS + ROWS, "{ty:?}");
        for r in 0..ROWS {
            let w_row = &bytes[r * rb..(r + 1) * rb];
            let mut want = vec![0.0f32; k];
            tessera_quant::dequantize_row(ty, w_row, &mut want).unwrap();
            let row = &got[r * k..(r + 1) * k];
            for (j, (g, w)) in row.iter().zip(&want).enumerate() {
                assert_eq!(
                    g.to_bits(),
                    w.to_bits(),
                    "{ty:?} row {r} element {j}: {g} vs {w}"
                );
            }
            if quantized {
                let want = tessera_quant::vec_dot(ty, k, w_row, &act_blocks);
                let g = got[k * ROWS + r];
                assert_eq!(
                    g.to_bits(),
                    want.to_bits(),
                    "{ty:?} row {r}: dot {g} vs {want}"
                );
            }
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
