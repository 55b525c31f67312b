//! The suite's inputs: the synthetic model file every case reads its tables and weights
//! from, and the weight types the kernels read.

use std::sync::{Arc, OnceLock};

use tessera_gguf::{GgmlType, GgufFile, GgufWriter};

use crate::moe;

pub const WEIGHT_TYPES: [GgmlType; 11] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    // 17-byte blocks: every byte alignment of a block within a row.
    GgmlType::MXFP4,
];

/// NMSE limit of quantized matmuls (see the crate docs).
pub const MUL_MAT_LIMIT: f64 = 1e-6;

/// Rows of every f32 input table (token ids index them).
pub const TABLE_ROWS: usize = 64;

/// `n` pseudo-random values in [-`scale`, `scale`) from `seed` (xorshift).
pub fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// `data` (rows of `k`) in `ty`'s encoding.
pub fn encode(ty: GgmlType, k: usize, data: &[f32]) -> Vec<u8> {
    match ty {
        GgmlType::F32 => bytemuck::cast_slice(data).to_vec(),
        GgmlType::F16 => data
            .iter()
            .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
            .collect(),
        _ => {
            let rb = tessera_quant::row_bytes(ty, k).unwrap();
            let mut out = vec![0u8; rb * data.len() / k];
            for (src, dst) in data.chunks(k).zip(out.chunks_mut(rb)) {
                tessera_quant::quantize_row_ref(ty, src, dst).unwrap();
            }
            out
        }
    }
}

/// The synthetic model file: `inp{k}` / `inp{k}b` f32 tables, `w.{ty}.{k}` weights of 72
/// rows, `emb.{ty}` tables of 40 rows of 256, `norm{k}` f32 vectors, `factors{n}` rope
/// frequency factors, `sinks{n}` attention sinks.
pub fn file() -> Arc<GgufFile> {
    static FILE: OnceLock<Arc<GgufFile>> = OnceLock::new();
    FILE.get_or_init(|| {
        let mut w = GgufWriter::new();
        let mut seed = 1;
        let mut add =
            |w: &mut GgufWriter, name: String, ty: GgmlType, k: usize, rows: usize, scale: f32| {
                seed += 1;
                let data = values(k * rows, seed, scale);
                let dims: Vec<u64> = if rows == 1 {
                    vec![k as u64]
                } else {
                    vec![k as u64, rows as u64]
                };
                w.add_tensor(name, &dims, ty, encode(ty, k, &data)).unwrap();
            };
        for k in [40, 64, 128, 256, 512, 576] {
            add(&mut w, format!("inp{k}"), GgmlType::F32, k, TABLE_ROWS, 3.0);
            add(
                &mut w,
                format!("inp{k}b"),
                GgmlType::F32,
                k,
                TABLE_ROWS,
                3.0,
            );
            add(&mut w, format!("norm{k}"), GgmlType::F32, k, 1, 1.5);
        }
        for ty in WEIGHT_TYPES {
            add(&mut w, format!("w.{ty:?}.256"), ty, 256, 72, 1.0);
            add(&mut w, format!("emb.{ty:?}"), ty, 256, 40, 1.0);
        }
        for ty in [GgmlType::Q8_0, GgmlType::Q4_K] {
            add(&mut w, format!("tall.{ty:?}"), ty, 256, 16411, 1.0);
        }
        add(&mut w, "w.F32.40".into(), GgmlType::F32, 40, 72, 1.0);
        for (i, ty) in moe::EXPERT_TYPES.into_iter().enumerate() {
            let (k, rows) = (256, moe::EXPERT_ROWS * moe::N_EXPERT);
            let data = values(k * rows, 1000 + i as u64, 1.0);
            let dims = [k as u64, moe::EXPERT_ROWS as u64, moe::N_EXPERT as u64];
            w.add_tensor(format!("experts.{ty:?}"), &dims, ty, encode(ty, k, &data))
                .unwrap();
        }
        // Rope frequency factors (divisors, 1 to ~9, as Llama 3's) for heads of 32 and 64.
        for n in [16, 32] {
            let f: Vec<f32> = (0..n)
                .map(|i| 1.0 + (i * i) as f32 / (n * 4) as f32)
                .collect();
            let bytes = encode(GgmlType::F32, n, &f);
            w.add_tensor(format!("factors{n}"), &[n as u64], GgmlType::F32, bytes)
                .unwrap();
        }
        add(&mut w, "w.F16.40".into(), GgmlType::F16, 40, 72, 1.0);
        // Attention sink logits, some above every score and some below.
        for n in [2, 4] {
            add(&mut w, format!("sinks{n}"), GgmlType::F32, n, 1, 20.0);
        }
        Arc::new(GgufFile::from_bytes(w.to_bytes()).unwrap())
    })
    .clone()
}
