//! Cases of the single ops (embedding lookup, matmul, the row ops, rope, greedy ids) against
//! the CPU backend.

use std::collections::HashMap;

use tessera_core::backend::{Backend, KvLayout};
use tessera_core::graph::{GraphBuilder, NodeId, RopeMode, RopeParams, Yarn};
use tessera_core::weights::{WeightId, WeightStore};
use tessera_core::EngineError;
use tessera_gguf::GgmlType;

use crate::data::{file, MUL_MAT_LIMIT, TABLE_ROWS, WEIGHT_TYPES};
use crate::harness::{batch, compute, cpu_backend, graph, segment, simple, step, w};
use crate::UnderTest;

pub async fn get_rows<U: UnderTest>(under_test: &U) {
    for ty in WEIGHT_TYPES {
        let name = format!("emb.{ty:?}");
        let build = move |b: &mut GraphBuilder, ids: &HashMap<String, WeightId>| {
            Ok(b.get_rows(ids[&format!("emb.{ty:?}")]))
        };
        simple(
            under_test,
            format!("get_rows {ty:?}"),
            vec![w(&name, &[256, 40])],
            vec![step(&[3, 39, 0, 17, 3], 0)],
            1e-12,
            &build,
        )
        .await;
    }
}

/// The `ty` weight `weight` (256 × `rows`) times `n` activation rows of `inp256`.
async fn mul_mat_k256<U: UnderTest>(
    under_test: &U,
    ty: GgmlType,
    weight: String,
    rows: usize,
    n: usize,
) {
    let name = weight.clone();
    let build = move |b: &mut GraphBuilder, ids: &HashMap<String, WeightId>| {
        let x = b.get_rows(ids["inp256"]);
        b.mul_mat(ids[&name], x)
    };
    let tokens: Vec<u32> = (0..n as u32)
        .map(|i| (i * 7 + 3) % TABLE_ROWS as u32)
        .collect();
    simple(
        under_test,
        format!("mul_mat {ty:?} k256 m{rows} n{n}"),
        vec![w("inp256", &[256, TABLE_ROWS]), w(&weight, &[256, rows])],
        vec![step(&tokens, 0)],
        MUL_MAT_LIMIT,
        &build,
    )
    .await;
}

pub async fn mul_mat<U: UnderTest>(under_test: &U) {
    for ty in WEIGHT_TYPES {
        for n in [1usize, 5, 17] {
            mul_mat_k256(under_test, ty, format!("w.{ty:?}.256"), 72, n).await;
        }
    }
    // Weights as tall as an output projection (at least 16384 rows) take their own kernel
    // variants on CPU adapters (8 rows per invocation in decode, 16 columns per batch tile);
    // 16411 rows leave partial row groups, 17 tokens a partial column group.
    for ty in [GgmlType::Q8_0, GgmlType::Q4_K] {
        for n in [1usize, 17] {
            mul_mat_k256(under_test, ty, format!("tall.{ty:?}"), 16411, n).await;
        }
    }
    // Rows that are not a whole number of 32-element chunks (float types only).
    for ty in [GgmlType::F32, GgmlType::F16] {
        let wn = format!("w.{ty:?}.40");
        let build = move |b: &mut GraphBuilder, ids: &HashMap<String, WeightId>| {
            let x = b.get_rows(ids["inp40"]);
            b.mul_mat(ids[&format!("w.{ty:?}.40")], x)
        };
        simple(
            under_test,
            format!("mul_mat {ty:?} k40 m72 n3"),
            vec![w("inp40", &[40, TABLE_ROWS]), w(&wn, &[40, 72])],
            vec![step(&[1, 2, 3], 0)],
            1e-10,
            &build,
        )
        .await;
    }
}

/// An op on two f32 inputs `a`, `c` (rows of the `inp{k}` tables) and a norm weight `n`.
type Op2 = fn(&mut GraphBuilder, NodeId, NodeId, WeightId) -> Result<NodeId, EngineError>;

/// `op` on 4 tokens of rows of 64 and of 576, within NMSE `limit`.
async fn row_op<U: UnderTest>(under_test: &U, name: &str, limit: f64, op: Op2) {
    for k in [64usize, 576] {
        let inp = format!("inp{k}");
        let inpb = format!("inp{k}b");
        let norm = format!("norm{k}");
        let weights = vec![
            w(&inp, &[k, TABLE_ROWS]),
            w(&inpb, &[k, TABLE_ROWS]),
            w(&norm, &[k]),
        ];
        let (i1, i2, nn) = (inp.clone(), inpb.clone(), norm.clone());
        let build = move |b: &mut GraphBuilder, ids: &HashMap<String, WeightId>| {
            let a = b.get_rows(ids[&i1]);
            let c = b.get_rows(ids[&i2]);
            op(b, a, c, ids[&nn])
        };
        let mut st = vec![step(&[5, 9, 63, 0], 0)];
        if name == "output_rows" {
            st[0].outputs = vec![1, 3];
        }
        simple(
            under_test,
            format!("{name} k{k}"),
            weights,
            st,
            limit,
            &build,
        )
        .await;
    }
}

pub async fn rms_norm<U: UnderTest>(under_test: &U) {
    row_op(under_test, "rms_norm", 1e-10, |b, a, _, _| {
        Ok(b.rms_norm(a, 1e-6))
    })
    .await;
}

pub async fn mul_weight<U: UnderTest>(under_test: &U) {
    row_op(under_test, "mul_weight", 1e-12, |b, a, _, n| {
        b.mul_weight(a, n)
    })
    .await;
}

pub async fn add_weight<U: UnderTest>(under_test: &U) {
    row_op(under_test, "add_weight", 1e-12, |b, a, _, n| {
        b.add_weight(a, n)
    })
    .await;
}

pub async fn add<U: UnderTest>(under_test: &U) {
    row_op(under_test, "add", 1e-12, |b, a, c, _| b.add(a, c)).await;
}

pub async fn scale<U: UnderTest>(under_test: &U) {
    row_op(
        under_test,
        "scale",
        1e-12,
        |b, a, _, _| Ok(b.scale(a, 0.37)),
    )
    .await;
}

pub async fn swiglu<U: UnderTest>(under_test: &U) {
    row_op(under_test, "swiglu", 1e-10, |b, a, c, _| b.swiglu(a, c)).await;
}

pub async fn geglu<U: UnderTest>(under_test: &U) {
    row_op(under_test, "geglu", 1e-6, |b, a, c, _| b.geglu(a, c)).await;
}

pub async fn softcap<U: UnderTest>(under_test: &U) {
    row_op(under_test, "softcap", 1e-10, |b, a, _, _| {
        Ok(b.softcap(a, 2.5))
    })
    .await;
}

pub async fn reglu<U: UnderTest>(under_test: &U) {
    row_op(under_test, "reglu", 1e-12, |b, a, c, _| b.reglu(a, c)).await;
}

pub async fn swiglu_oai<U: UnderTest>(under_test: &U) {
    row_op(under_test, "swiglu_oai", 1e-10, |b, a, c, _| {
        b.swiglu_oai(a, c, 1.702, 2.0)
    })
    .await;
}

/// Rows 1 and 3 of the batch kept.
pub async fn output_rows<U: UnderTest>(under_test: &U) {
    row_op(under_test, "output_rows", 0.0, |b, a, _, _| {
        Ok(b.output_rows(a))
    })
    .await;
}

/// The second quarter of each row.
pub async fn slice<U: UnderTest>(under_test: &U) {
    row_op(under_test, "slice", 0.0, |b, a, _, _| {
        let width = b.ne(a)[0];
        b.slice(a, width / 4, width / 2)
    })
    .await;
}

/// Every activation of a gateless feed-forward.
pub async fn activation<U: UnderTest>(under_test: &U) {
    use tessera_core::graph::Activation::{Gelu, Relu, Silu};
    row_op(under_test, "activation silu", 1e-10, |b, a, _, _| {
        Ok(b.activation(a, Silu))
    })
    .await;
    row_op(under_test, "activation gelu", 1e-6, |b, a, _, _| {
        Ok(b.activation(a, Gelu))
    })
    .await;
    row_op(under_test, "activation relu", 0.0, |b, a, _, _| {
        Ok(b.activation(a, Relu))
    })
    .await;
}

pub async fn rope<U: UnderTest>(under_test: &U) {
    // (mode, rotated dims, frequency factors, YaRN with an attention factor)
    for (mode, n_dims, factors, yarn) in [
        (RopeMode::Normal, 64usize, false, false),
        (RopeMode::Normal, 32, false, false),
        (RopeMode::Neox, 64, false, false),
        (RopeMode::Neox, 32, false, false),
        (RopeMode::Normal, 64, true, false),
        (RopeMode::Neox, 32, true, false),
        (RopeMode::Normal, 64, false, true),
        (RopeMode::Neox, 32, true, true),
    ] {
        let factors_name = format!("factors{}", n_dims / 2);
        let mut weights = vec![w("inp256", &[256, TABLE_ROWS])];
        if factors {
            weights.push(w(&factors_name, &[n_dims / 2]));
        }
        let build = move |b: &mut GraphBuilder, ids: &HashMap<String, WeightId>| {
            let p = RopeParams {
                n_dims,
                mode,
                freq_base: 10000.0,
                freq_scale: if yarn { 0.25 } else { 1.0 },
                freq_factors: factors.then(|| ids[&factors_name]),
                attn_factor: if yarn { 1.19 } else { 1.0 },
                yarn: yarn.then(|| Yarn::new(n_dims, 64, 10000.0)),
            };
            let x = b.get_rows(ids["inp256"]);
            let x = b.reshape(x, [64, 4, b.n_tokens, 1])?;
            b.rope(x, p)
        };
        simple(
            under_test,
            format!("rope {mode:?} n_dims {n_dims} factors {factors} yarn {yarn}"),
            weights,
            vec![step(&[1, 2, 3], 0), step(&[4, 5], 300)],
            // cos/sin precision differs between adapters (SwiftShader: ~1e-8).
            1e-7,
            &build,
        )
        .await;
    }
}

/// Greedy ids picked on the device equal the argmax of its logits and of the CPU's.
pub async fn argmax_on_the_gpu_matches_the_logits<U: UnderTest>(under_test: &U) {
    let build = |b: &mut GraphBuilder, ids: &HashMap<String, WeightId>| {
        let x = b.get_rows(ids["inp256"]);
        let y = b.mul_mat(ids["w.Q4_K.256"], x)?;
        Ok(b.output_rows(y))
    };
    let mut store = WeightStore::new(file());
    let mut ids = HashMap::new();
    for (name, ne) in [w("inp256", &[256, TABLE_ROWS]), w("w.Q4_K.256", &[256, 72])] {
        ids.insert(name.clone(), store.require(&name, &ne).unwrap());
    }
    let mut tested = under_test.backend();
    let mut cpu = cpu_backend();
    cpu.set_reference_matmul(true);
    let kv = KvLayout {
        n_ctx: 64,
        n_seq: 1,
        layers: vec![],
    };
    tested.init_kv(&kv).unwrap();
    cpu.init_kv(&kv).unwrap();
    for tokens in [vec![4u32], vec![1, 2, 3, 60, 61]] {
        let st = step(&tokens, 0);
        let g = graph(&store, &ids, &st, &build);
        let segments = segment(&st);
        let batch = batch(&st, &segments);
        let mut logits = vec![0.0; 72 * tokens.len()];
        let mut want = vec![0.0; 72 * tokens.len()];
        compute::<U>(&mut tested, &g, &batch, &store, &mut logits)
            .await
            .unwrap();
        assert!(cpu
            .compute(&g, &batch, &store, &mut want)
            .unwrap()
            .is_ready());
        let mut got = vec![u32::MAX; tokens.len()];
        U::until_ready(&mut tested, |b| {
            b.compute_greedy(&g, &batch, &store, &mut got)
        })
        .await
        .unwrap();
        for r in 0..tokens.len() {
            let row = &logits[r * 72..(r + 1) * 72];
            let best = (0..72).fold(0, |b, i| if row[i] > row[b] { i } else { b });
            assert_eq!(got[r] as usize, best, "row {r}");
            let cpu_row = &want[r * 72..(r + 1) * 72];
            let cpu_best = (0..72).fold(0, |b, i| if cpu_row[i] > cpu_row[b] { i } else { b });
            assert_eq!(got[r] as usize, cpu_best, "row {r} vs CPU");
        }
    }
}
