//! The closed list of kernel variants: every (family, entry point, defines) the op builders of
//! `tessera-backend-wgpu` can ask for, on any device. The Vulkan backend's build script
//! compiles each of them to SPIR-V; at run time a request outside this list is an error, so
//! the builders take their shape-dependent values from the fixed sets here (head dims and
//! uniform sizes are rounded up to a capacity; the exact value is a kernel parameter).
//! Device-dependent choices (f16, subgroups, lavapipe's built-in math) are listed both ways.

use crate::preprocess::Define;

/// One kernel variant as the builders request it (before [`crate::canonical`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Variant {
    pub family: &'static str,
    pub entry: &'static str,
    pub defines: Vec<Define>,
}

/// Every weight type the matmul, expert-matmul and embedding kernels read
/// (`weights::type_define`).
pub const WEIGHT_TYPES: [&str; 11] = [
    "W_F32", "W_F16", "W_Q4_0", "W_Q4_1", "W_Q5_0", "W_Q5_1", "W_Q8_0", "W_Q4_K", "W_Q5_K",
    "W_Q6_K", "W_MXFP4",
];

/// The types whose blocks are whole 32-bit words, which CPU adapters read with `W_ALIGNED`
/// (`weights::alignment_define`; a test there checks this list against the block sizes).
pub const ALIGNED_TYPES: [&str; 5] = ["W_F32", "W_Q4_1", "W_Q5_1", "W_Q4_K", "W_Q5_K"];

/// `mul_mat.wgsl`'s shapes (the measurements behind them are in `ops/mul_mat.rs`).
pub mod mul_mat {
    /// Threads per workgroup: CPU adapters always, GPUs for rows of more than 32 chunks.
    pub const WG: u32 = 64;
    /// GPUs, rows of at most 32 chunks of 32.
    pub const WG_SHORT: u32 = 32;
    /// Columns per workgroup for batches on GPUs (`NC`; decode takes 1).
    pub const BATCH_COLUMNS: u32 = 8;
    /// Weight rows per invocation on CPU adapters for tall weights in decode (`NR`; else 1).
    pub const CPU_ROWS: u32 = 8;
    /// Columns per invocation of the CPU adapters' batch tile (`TILE_COLS`), and of its wide
    /// form for tall weights (`TILE_WIDE`).
    pub const TILE_COLUMNS: u32 = 8;
    pub const WIDE_TILE_COLUMNS: u32 = 16;
}

/// The weight types `mul_mat_q8.wgsl` reads as integers (packed integer dot products), with
/// the activations' quantization each takes (`quantize.wgsl`'s `PACK` variant of it).
pub const INT_DOT_TYPES: [(&str, &str); 7] = [
    ("W_Q4_0", "ACT_Q8_0"),
    ("W_Q4_1", "ACT_Q8_0"),
    ("W_Q5_0", "ACT_Q8_0"),
    ("W_Q5_1", "ACT_Q8_0"),
    ("W_Q8_0", "ACT_Q8_0"),
    ("W_Q4_K", "ACT_Q8_K"),
    ("W_Q5_K", "ACT_Q8_K"),
];

/// `mul_mat_q8.wgsl`'s shapes: (rows, columns) per invocation for decode through small
/// weights, decode through tall ones, and batches (one row: each output keeps ggml's 8 float
/// and 8 integer lanes, so 8 columns are already 200-odd values per invocation).
pub const INT_DOT_SHAPES: [(u32, u32); 3] = [(1, 1), (4, 1), (1, 8)];

/// `attention.wgsl`'s threads per workgroup (keys per tile).
pub const ATTENTION_WG: u32 = 64;

/// Head-dimension capacities of `attention.wgsl` (`HD`: the size of its q tile; the head dim
/// itself is a parameter). Models' head dims (64, 80, 96, 128, 256 ...) round up to one.
pub const HEAD_DIM_CAPACITIES: [u32; 4] = [64, 128, 256, 512];

/// The capacity for a head dim (or a value head dim), if one holds it.
pub fn head_dim_capacity(hd: usize) -> Option<u32> {
    HEAD_DIM_CAPACITIES.into_iter().find(|&c| hd <= c as usize)
}

/// `attention.wgsl`'s `PPT` (output pairs per thread) for a value head dim capacity.
pub fn attention_ppt(dv_capacity: u32) -> u32 {
    (dv_capacity / 2).div_ceil(ATTENTION_WG).max(1)
}

/// Sizes (vec4s) of the uniform activation binding of CPU adapters' decode matmuls
/// (`X_UNIFORM`): the rounded activations' length rounded up to one of these, the buffer
/// allocated at that size. 1024 vec4s are 16 KiB, the least `maxUniformBufferRange` Vulkan
/// allows, 4096 are 64 KiB, lavapipe's and SwiftShader's; longer activations stay in a storage
/// buffer. Two sizes, not a power of two each: every one is ~40 prebuilt matmul variants.
pub const UNIFORM_VEC4S: [u32; 2] = [1024, 4096];

/// The uniform capacity (vec4s) for `vec4s` activations, if one holds them.
pub fn uniform_capacity(vec4s: usize) -> Option<u32> {
    UNIFORM_VEC4S.into_iter().find(|&c| vec4s <= c as usize)
}

/// The element-wise ops of `elementwise.wgsl`, one define each (`tessera_gpu`'s
/// `ops::elementwise` table picks them).
pub const ELEMENTWISE_OPS: [&str; 15] = [
    "OP_ADD",
    "OP_ADD_WEIGHT",
    "OP_MUL_WEIGHT",
    "OP_SCALE",
    "OP_SOFTCAP",
    "OP_SWIGLU",
    "OP_GEGLU",
    "OP_REGLU",
    "OP_SWIGLU_OAI",
    "OP_MOE_SUM",
    "OP_ADD_ID",
    "OP_SLICE",
    "OP_SILU",
    "OP_GELU",
    "OP_RELU",
];

fn v(family: &'static str, entry: &'static str, defines: Vec<Define>) -> Variant {
    Variant {
        family,
        entry,
        defines,
    }
}

/// Every variant a builder can request, each once or more (callers canonicalize and dedupe).
pub fn all() -> Vec<Variant> {
    let mut out = Vec::new();
    for op in ELEMENTWISE_OPS {
        out.push(v("elementwise.wgsl", "main", vec![(op, 1)]));
    }
    for family in ["output_rows.wgsl", "rope.wgsl"] {
        out.push(v(family, "main", vec![]));
    }
    out.push(v("rope.wgsl", "main", vec![("FREQ_FACTORS", 1)]));
    for act in ["ACT_Q8_0", "ACT_Q8_K", "ACT_F16"] {
        out.push(v("quantize.wgsl", "main", vec![(act, 1)]));
    }
    out.push(v("rms_norm.wgsl", "main", vec![]));
    out.push(v("rms_norm.wgsl", "main", vec![("SUBGROUPS", 1)]));
    out.push(v("kv.wgsl", "store", vec![("STORE", 1)]));
    out.push(v("kv.wgsl", "shift", vec![("SHIFT", 1)]));
    out.push(v(
        "kv.wgsl",
        "shift",
        vec![("SHIFT", 1), ("FREQ_FACTORS", 1)],
    ));
    out.push(v("sample.wgsl", "argmax", vec![]));
    out.push(v("sample_chain.wgsl", "sample", vec![]));
    for gating in ["GATING_SOFTMAX", "GATING_SIGMOID", "DELAYED_SOFTMAX"] {
        for normalize in [false, true] {
            for bias in [false, true] {
                let mut d = vec![(gating, 1)];
                d.extend(normalize.then_some(("NORMALIZE", 1)));
                d.extend(bias.then_some(("SELECTION_BIAS", 1)));
                out.push(v("moe_route.wgsl", "main", d));
            }
        }
    }
    attention(&mut out);
    weight_kernels(&mut out);
    int_dot_kernels(&mut out);
    // lavapipe's built-in math: every variant also with it (dropped by `canonical` where the
    // family does not read it).
    let with_math: Vec<Variant> = out
        .iter()
        .map(|x| {
            let mut x = x.clone();
            x.defines.push(("BUILTIN_MATH", 1));
            x
        })
        .collect();
    out.extend(with_math);
    out
}

fn attention(out: &mut Vec<Variant>) {
    for hd in HEAD_DIM_CAPACITIES {
        for dv in HEAD_DIM_CAPACITIES {
            for f16 in [false, true] {
                for sinks in [false, true] {
                    let mut d = vec![("WG", ATTENTION_WG), ("HD", hd), ("PPT", attention_ppt(dv))];
                    d.extend(f16.then_some(("F16", 1)));
                    d.extend(sinks.then_some(("SINKS", 1)));
                    out.push(v("attention.wgsl", "main", d));
                }
            }
        }
    }
}

/// The kernels that read weights: matmul, expert matmul and embedding lookup, per type.
fn weight_kernels(out: &mut Vec<Variant>) {
    use mul_mat::*;
    for ty in WEIGHT_TYPES {
        // CPU adapters read word-aligned types with W_ALIGNED, GPUs never.
        let cpu: Vec<Define> = match ALIGNED_TYPES.contains(&ty) {
            true => vec![(ty, 1), ("W_ALIGNED", 1)],
            false => vec![(ty, 1)],
        };
        for base in [vec![(ty, 1)], cpu.clone()] {
            out.push(v("get_rows.wgsl", "main", base.clone()));
            out.push(v("mul_mat_id.wgsl", "main", base.clone()));
            let mut shared = base;
            shared.push(("N_X_SHARED", 1));
            out.push(v("mul_mat_id.wgsl", "main", shared));
        }
        // GPUs: a workgroup per row.
        for wg in [WG_SHORT, WG] {
            for nc in [1, BATCH_COLUMNS] {
                let d = vec![(ty, 1), ("WG", wg), ("ROW_PER_WORKGROUP", 1), ("NC", nc)];
                out.push(v("mul_mat.wgsl", "main", d));
            }
        }
        // CPU adapters: batch tiles, and decode with NR rows per invocation; the decode
        // input is a uniform buffer where it is rounded (every type but f32) and fits one.
        let mut cpu = cpu;
        cpu.push(("WG", WG));
        let with = |extra: &[Define]| {
            let mut d = cpu.clone();
            d.extend_from_slice(extra);
            v("mul_mat.wgsl", "main", d)
        };
        out.push(with(&[("TILE", 1), ("TILE_COLS", TILE_COLUMNS)]));
        out.push(with(&[
            ("TILE", 1),
            ("TILE_COLS", WIDE_TILE_COLUMNS),
            ("TILE_WIDE", 1),
        ]));
        for nr in [1, CPU_ROWS] {
            out.push(with(&[("NR", nr)]));
            if ty != "W_F32" {
                for xu in UNIFORM_VEC4S {
                    out.push(with(&[("NR", nr), ("X_UNIFORM", xu)]));
                }
            }
        }
    }
}

/// Packed integer dot products: the activations' packing and the integer matmul, per type.
fn int_dot_kernels(out: &mut Vec<Variant>) {
    for act in ["ACT_Q8_0", "ACT_Q8_K"] {
        out.push(v("quantize.wgsl", "main", vec![(act, 1), ("PACK", 1)]));
    }
    for (ty, _) in INT_DOT_TYPES {
        let aligned = ALIGNED_TYPES.contains(&ty);
        for w_aligned in [false, aligned] {
            for exact in [false, true] {
                for (nr, nc) in INT_DOT_SHAPES {
                    let mut d = vec![(ty, 1), ("WG", mul_mat::WG), ("NR", nr), ("NC", nc)];
                    d.extend(w_aligned.then_some(("W_ALIGNED", 1)));
                    d.extend(exact.then_some(("EXACT_FMA", 1)));
                    out.push(v("mul_mat_q8.wgsl", "main", d));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacities_round_up_and_stop() {
        assert_eq!(head_dim_capacity(64), Some(64));
        assert_eq!(head_dim_capacity(80), Some(128));
        assert_eq!(head_dim_capacity(256), Some(256));
        assert_eq!(head_dim_capacity(576), None);
        assert_eq!(attention_ppt(64), 1);
        assert_eq!(attention_ppt(512), 4);
        assert_eq!(uniform_capacity(384), Some(1024));
        assert_eq!(uniform_capacity(1025), Some(4096));
        assert_eq!(uniform_capacity(4097), None);
    }

    #[test]
    fn every_weight_type_has_each_matmul_shape() {
        let all = all();
        for ty in WEIGHT_TYPES {
            let n = all
                .iter()
                .filter(|x| x.family == "mul_mat.wgsl" && x.defines[0].0 == ty)
                .count();
            // 4 GPU shapes, 2 tiles, 2 decode shapes (+2 uniform sizes each but for f32);
            // twice (with and without built-in math).
            let cpu_decode = if ty == "W_F32" { 2 } else { 6 };
            assert_eq!(n, 2 * (4 + 2 + cpu_decode), "{ty}");
        }
    }
}
