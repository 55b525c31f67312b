//! Exports for `ab.mjs`: the quantized gemm in the engine's call pattern (prompt batches and
//! decode) and the f16 attention kernels, on random data, with no imports (plain
//! `WebAssembly.instantiate`). Built for wasm32 with SIMD128 (and relaxed SIMD, as the browser
//! package's -relaxed builds).

#![cfg(target_arch = "wasm32")]

use std::cell::RefCell;
use tessera_gguf::GgmlType;
use tessera_quant::isa::Simd128;
use tessera_quant::vec_dot::gemm;

struct Matmul {
    ty: GgmlType,
    k: usize,
    rows: usize,
    acts: usize,
    w: Vec<u8>,
    a: Vec<u8>,
    out: Vec<f32>,
    /// The weights repacked (feature `repacked`) and the activations' block sums.
    packed: Option<(tessera_quant::repack::RepackedMatrix, Vec<i32>)>,
}

/// Random f16-exact keys, a query and accumulators for the attention kernels.
struct Attention {
    keys: Vec<Vec<f32>>,
    q: Vec<f32>,
    acc: [Vec<f32>; 4],
}

thread_local! {
    static MATMUL: RefCell<Option<Matmul>> = const { RefCell::new(None) };
    static ATTENTION: RefCell<Option<Attention>> = const { RefCell::new(None) };
}

/// Uniform floats in [-1, 1) from a linear congruential generator (no OS entropy on wasm).
fn floats(seed: &mut u64, n: usize) -> Vec<f32> {
    (0..n)
        .map(|_| {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn weight_type(t: u32) -> GgmlType {
    match t {
        0 => GgmlType::Q5_0,
        1 => GgmlType::Q4_K,
        2 => GgmlType::Q6_K,
        3 => GgmlType::Q8_0,
        _ => GgmlType::Q4_1,
    }
}

/// 1 where the kernels take the fused form of the relaxed dot product
/// (`isa::CpuFeatures::fused_dot`), else 0.
#[no_mangle]
pub extern "C" fn fused_dot() -> u32 {
    tessera_quant::isa::detected().fused_dot as u32
}

/// `rows` weight rows of type `t` (see `weight_type`) and `k` elements, `acts` activations.
#[no_mangle]
pub extern "C" fn setup_matmul(t: u32, rows: u32, k: u32, acts: u32) {
    let ty = weight_type(t);
    let (rows, k, acts) = (rows as usize, k as usize, acts as usize);
    let act_ty = tessera_quant::vec_dot_type(ty).expect("a quantized type");
    let (w_row, a_row) = (
        tessera_quant::row_bytes(ty, k).expect("whole blocks"),
        tessera_quant::row_bytes(act_ty, k).expect("whole blocks"),
    );
    let mut seed = 7;
    let mut quantized = |ty, n_rows, row_bytes| {
        let mut bytes = vec![0u8; row_bytes * n_rows];
        for row in bytes.chunks_exact_mut(row_bytes) {
            tessera_quant::quantize_row(ty, &floats(&mut seed, k), row).expect("quantize");
        }
        bytes
    };
    let w = quantized(ty, rows, w_row);
    let a = quantized(act_ty, acts, a_row);
    let out = vec![0.0; rows * acts];
    // Types without a repacked layout here keep the file layout.
    let packed = cfg!(feature = "repacked")
        .then(|| tessera_quant::repack::RepackedMatrix::new(ty, k, rows, &w).expect("whole blocks"))
        .flatten()
        .map(|p| {
            let mut sums = Vec::new();
            if p.needs_act_sums() {
                tessera_quant::repack::act_block_sums(&a, &mut sums);
            }
            (p, sums)
        });
    MATMUL.set(Some(Matmul {
        ty,
        k,
        rows,
        acts,
        w,
        a,
        out,
        packed,
    }));
}

/// `reps` passes over all weight rows, `call_rows` rows per `gemm` call (the engine passes 16
/// for prompt batches, up to 256 for decode).
#[no_mangle]
pub extern "C" fn run_matmul(reps: u32, call_rows: u32) -> f32 {
    MATMUL.with_borrow_mut(|m| {
        let m = m.as_mut().expect("setup_matmul first");
        let w_row = m.w.len() / m.rows;
        let mut sum = 0.0;
        if let Some((p, sums)) = &m.packed {
            // The engine's call pattern: `call_rows / 8` groups per call, out[t * rows + row].
            let groups = (call_rows as usize / 8).max(1);
            for _ in 0..reps {
                for g0 in (0..p.n_groups()).step_by(groups) {
                    let g1 = (g0 + groups).min(p.n_groups());
                    let out = &mut m.out[..(g1 - g0) * 8 * m.acts];
                    p.gemm(g0..g1, &m.a, m.acts, sums, out);
                }
                sum += m.out[0];
            }
            return sum;
        }
        for _ in 0..reps {
            for r0 in (0..m.rows).step_by(call_rows as usize) {
                let nr = (call_rows as usize).min(m.rows - r0);
                let out = &mut m.out[r0 * m.acts..(r0 + nr) * m.acts];
                gemm(
                    m.ty,
                    m.k,
                    &m.w[r0 * w_row..(r0 + nr) * w_row],
                    nr,
                    &m.a,
                    m.acts,
                    out,
                );
            }
            sum += m.out[0];
        }
        sum
    })
}

#[no_mangle]
pub extern "C" fn setup_attention() {
    let mut seed = 3;
    let mut row = || -> Vec<f32> {
        floats(&mut seed, 256)
            .into_iter()
            .map(|x| half::f16::from_f32(x).to_f32())
            .collect()
    };
    let keys = (0..256).map(|_| row()).collect();
    let q = row();
    let acc = std::array::from_fn(|_| vec![0.0f32; 256]);
    ATTENTION.set(Some(Attention { keys, q, acc }));
}

/// `reps` × 256 keys of head size 256 against one query, four keys per call.
#[no_mangle]
pub extern "C" fn run_attention_dot(reps: u32) -> f32 {
    use tessera_backend_cpu::ops::attention::f16_arith::dot_steps_x4;
    ATTENTION.with_borrow(|a| {
        let a = a.as_ref().expect("setup_attention first");
        let mut s = 0.0;
        for _ in 0..reps {
            for k in a.keys.chunks_exact(4) {
                s += dot_steps_x4(Simd128, [&k[0], &k[1], &k[2], &k[3]], &a.q)[0];
            }
        }
        s
    })
}

/// `reps` × 256 V rows of 256 added into four accumulator rows (a GQA group of four heads).
#[no_mangle]
pub extern "C" fn run_attention_mad(reps: u32) -> f32 {
    use tessera_backend_cpu::ops::attention::f16_arith::mad_steps;
    ATTENTION.with_borrow_mut(|a| {
        let a = a.as_mut().expect("setup_attention first");
        for _ in 0..reps {
            for (i, v) in a.keys.iter().enumerate() {
                let f = 0.01 * (i % 7) as f32 + 0.001;
                let [r0, r1, r2, r3] = &mut a.acc;
                mad_steps(
                    Simd128,
                    [r0, r1, r2, r3],
                    v,
                    [f, f * 0.5, f * 0.25, f * 0.125],
                );
            }
        }
        a.acc[0][0]
    })
}

/// `reps` × 256 V rows of 64 added into three accumulator rows by ggml's scalar loop (heads
/// under 128 wide: SmolLM2's 64, a GQA group of three heads).
#[no_mangle]
pub extern "C" fn run_attention_mad_tail(reps: u32) -> f32 {
    use tessera_backend_cpu::ops::attention::f16_arith::mad_tail;
    ATTENTION.with_borrow_mut(|a| {
        let a = a.as_mut().expect("setup_attention first");
        for _ in 0..reps {
            for (i, v) in a.keys.iter().enumerate() {
                let f = 0.01 * (i % 7) as f32 + 0.001;
                for (r, acc) in a.acc[..3].iter_mut().enumerate() {
                    mad_tail(
                        Simd128,
                        &mut acc[..64],
                        &v[64 * r..64 * (r + 1)],
                        f / (r + 1) as f32,
                    );
                }
            }
        }
        a.acc[0][0]
    })
}

/// One decode step's attention of one SmolLM2 layer (9 heads of 64 in 3 KV groups, ggml's f16
/// kernel) over `keys` cached positions, `reps` times.
#[no_mangle]
pub extern "C" fn run_attention_decode(reps: u32, keys: u32) -> f32 {
    use tessera_backend_cpu::kv_cache::LayerKv;
    use tessera_backend_cpu::ops::attention::{attention, AttentionKernel};
    use tessera_core::backend::KvLayerLayout;
    use tessera_core::graph::{AttentionParams, RopeMode, RopeParams};
    let (n_head, n_head_kv, hd, n) = (9, 3, 64, keys as usize);
    let mut seed = 11;
    let f16s = |seed: &mut u64, n| -> Vec<half::f16> {
        floats(seed, n)
            .into_iter()
            .map(|x| half::f16::from_f32(2.0 * x))
            .collect()
    };
    let kv = LayerKv {
        layout: KvLayerLayout {
            n_head_kv,
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
        k: f16s(&mut seed, n * n_head_kv * hd),
        v: f16s(&mut seed, n * n_head_kv * hd),
    };
    let q: Vec<f32> = floats(&mut seed, n_head * hd)
        .into_iter()
        .map(|x| 3.0 * x)
        .collect();
    let p = AttentionParams {
        layer: 0,
        n_head,
        n_head_kv,
        head_dim: hd,
        scale: 0.125,
        window: None,
        softcap: None,
        sinks: None,
    };
    let mut out = vec![0.0f32; n_head * hd];
    let mut s = 0.0;
    for _ in 0..reps {
        let pool = tessera_core::threading::SequentialPool;
        attention(
            &pool,
            &q,
            &kv,
            n - 1,
            &p,
            None,
            AttentionKernel::Ggml,
            &mut out,
        );
        s += out[0];
    }
    s
}
