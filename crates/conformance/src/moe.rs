//! Conformance cases of the mixture-of-experts ops: the router, the experts' matmul and the
//! weighted sum, against the CPU backend.

use std::collections::HashMap;

use tessera_core::graph::{Gating, GraphBuilder, MoeRouteParams};
use tessera_core::weights::WeightId;
use tessera_gguf::GgmlType;

use crate::data::TABLE_ROWS;
use crate::harness::{simple, step, w};
use crate::UnderTest;

/// Expert tensors in the test file: `experts.{ty}` of 4 experts × 32 rows of 256 (MXFP4: how
/// gpt-oss stores its experts).
pub const EXPERT_TYPES: [GgmlType; 5] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::MXFP4,
];
pub const N_EXPERT: usize = 4;
pub const EXPERT_ROWS: usize = 32;

fn route(gating: Gating, normalize: bool, bias: Option<WeightId>, scale: f32) -> MoeRouteParams {
    MoeRouteParams {
        n_used: 2,
        gating,
        selection_bias: bias,
        normalize,
        scale,
    }
}

/// Every gating, with and without the selection bias, normalisation and scale: the chosen
/// experts must be the CPU's exactly (a different choice is a large error).
pub async fn moe_route<U: UnderTest>(under_test: &U) {
    let variants = [
        ("softmax, normalized", Gating::Softmax, true, false, 1.0),
        ("sigmoid, bias, scaled", Gating::Sigmoid, true, true, 2.5),
        (
            "delayed softmax",
            Gating::SoftmaxAfterTopK,
            false,
            false,
            1.0,
        ),
    ];
    for (name, gating, normalize, biased, scale) in variants {
        let build = move |b: &mut GraphBuilder, ids: &HashMap<String, WeightId>| {
            let logits = b.get_rows(ids["inp64"]);
            let bias = biased.then(|| ids["norm64"]);
            b.moe_route(logits, route(gating, normalize, bias, scale))
        };
        simple(
            under_test,
            format!("moe_route {name}"),
            vec![w("inp64", &[64, TABLE_ROWS]), w("norm64", &[64])],
            vec![step(&[5, 9, 63, 0, 17], 0)],
            1e-10,
            &build,
        )
        .await;
    }
}

/// The experts' matmul for every expert type, with one input row per token (gate/up) and one
/// per chosen expert (down).
pub async fn mul_mat_id<U: UnderTest>(under_test: &U) {
    for ty in EXPERT_TYPES {
        let experts = format!("experts.{ty:?}");
        for shared_x in [true, false] {
            let e = experts.clone();
            let build = move |b: &mut GraphBuilder, ids: &HashMap<String, WeightId>| {
                let x = b.get_rows(ids["inp512"]);
                let t = b.n_tokens;
                let logits = b.slice(x, 0, N_EXPERT)?;
                let route = b.moe_route(logits, route(Gating::Softmax, true, None, 1.0))?;
                let x = if shared_x { b.slice(x, 0, 256)? } else { x };
                let x = b.reshape(x, [256, if shared_x { 1 } else { 2 }, t, 1])?;
                b.mul_mat_id(ids[&e], x, route)
            };
            simple(
                under_test,
                format!("mul_mat_id {ty:?} shared input {shared_x}"),
                vec![
                    w("inp512", &[512, TABLE_ROWS]),
                    w(&experts, &[256, EXPERT_ROWS, N_EXPERT]),
                ],
                vec![step(&[5, 9, 63, 0, 17, 33], 0), step(&[7], 6)],
                1e-5,
                &build,
            )
            .await;
        }
    }
}

/// The chosen experts' biases: 2 of 64 experts per token, biases `[256, 64]`.
pub async fn add_id<U: UnderTest>(under_test: &U) {
    let build = |b: &mut GraphBuilder, ids: &HashMap<String, WeightId>| {
        let x = b.get_rows(ids["inp512"]);
        let t = b.n_tokens;
        let logits = b.get_rows(ids["inp64"]);
        let route = b.moe_route(logits, route(Gating::SoftmaxAfterTopK, false, None, 1.0))?;
        let x = b.reshape(x, [256, 2, t, 1])?;
        b.add_id(x, ids["inp256"], route)
    };
    simple(
        under_test,
        "add_id".into(),
        vec![
            w("inp512", &[512, TABLE_ROWS]),
            w("inp64", &[64, TABLE_ROWS]),
            w("inp256", &[256, TABLE_ROWS]),
        ],
        vec![step(&[5, 9, 63, 0], 0)],
        0.0,
        &build,
    )
    .await;
}

pub async fn moe_sum<U: UnderTest>(under_test: &U) {
    let build = |b: &mut GraphBuilder, ids: &HashMap<String, WeightId>| {
        let x = b.get_rows(ids["inp256"]);
        let t = b.n_tokens;
        let logits = b.get_rows(ids["inp64"]);
        let p = MoeRouteParams {
            n_used: 4,
            ..route(Gating::Softmax, true, None, 1.0)
        };
        let route = b.moe_route(logits, p)?;
        let x = b.reshape(x, [64, 4, t, 1])?;
        b.moe_sum(x, route)
    };
    simple(
        under_test,
        "moe_sum".into(),
        vec![
            w("inp256", &[256, TABLE_ROWS]),
            w("inp64", &[64, TABLE_ROWS]),
        ],
        vec![step(&[5, 9, 63, 0], 0)],
        1e-12,
        &build,
    )
    .await;
}
