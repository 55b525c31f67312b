//! The prebuilt SPIR-V covers every kernel variant the graphs request, on every kind of
//! device: both test models' graphs (prefill, decode, all-logits) and every synthetic
//! architecture's are recorded on a stand-in target that only looks each request up in the
//! table (`kernels::find`), for each device class the builders tell apart (CPU adapter or
//! GPU, f16, subgroups, lavapipe's built-in math, a 16 or 64 KiB uniform binding, integer dot
//! products), with the
//! sampling and KV-shift kernels. No device is needed: this checks GPU-class variants too,
//! which lavapipe never requests.

use std::collections::BTreeSet;
use std::sync::Mutex;

use tessera_backend_vulkan::kernels;
use tessera_core::plan::Plan;
use tessera_core::weights::WeightId;
use tessera_core::Model;
use tessera_gpu::graph_walk::{activations_len, record_nodes, uniform_activations, GraphBuffers};
use tessera_gpu::kv::GpuKv;
use tessera_gpu::ops::{kv::shift_keys, sample};
use tessera_gpu::pipelines::PipelineKey;
use tessera_gpu::recorder::Recorder;
use tessera_gpu::weights::{GpuWeight, GpuWeights};
use tessera_gpu::GpuError;
use tessera_gpu::Target;

/// A device class: what the builders ask a target.
#[derive(Clone, Copy, Debug)]
struct Class {
    cpu: bool,
    f16: bool,
    subgroups: bool,
    builtin_math: bool,
    max_uniform: u64,
    int_dot: bool,
}

/// Records nothing: each pipeline request is looked up in the prebuilt table.
struct LookUp {
    class: Class,
    /// The canonical names requested.
    seen: Mutex<BTreeSet<String>>,
}

impl Target for LookUp {
    type Buffer = ();
    type Pipeline = ();

    fn pipeline(&self, key: PipelineKey) -> Result<(), GpuError> {
        let mut defines = key.defines.clone();
        if self.class.builtin_math {
            defines.push(("BUILTIN_MATH", 1)); // as `Target for Gpu` adds it on lavapipe
        }
        let name = kernels::name_of(key.family, key.entry, &defines)
            .map_err(|e| GpuError::Validation(e.to_string()))?;
        kernels::find(&name).map_err(|_| GpuError::NotPrebuilt(name.clone()))?;
        self.seen.lock().unwrap().insert(name);
        Ok(())
    }
    fn is_cpu(&self) -> bool {
        self.class.cpu
    }
    fn f16_kernels(&self) -> bool {
        self.class.f16
    }
    fn max_workgroups_per_dimension(&self) -> u32 {
        65535
    }
    fn uniform_offset_alignment(&self) -> u64 {
        256
    }
    fn max_uniform_binding(&self) -> u64 {
        self.class.max_uniform
    }
    fn profiled(&self) -> bool {
        false
    }
    fn subgroup_kernels(&self) -> bool {
        self.class.subgroups
    }
    fn int_dot_kernels(&self) -> bool {
        self.class.int_dot
    }
    fn exact_fma_kernels(&self) -> bool {
        // Classes with f16 stand in for devices with f64 too: both forms get requested.
        self.class.int_dot && self.class.f16
    }
}

fn classes() -> Vec<Class> {
    let mut out = Vec::new();
    for cpu in [false, true] {
        for f16 in [false, true] {
            for subgroups in [false, true] {
                for builtin_math in [false, cpu] {
                    for max_uniform in [16 << 10, 64 << 10] {
                        for int_dot in [false, true] {
                            out.push(Class {
                                cpu,
                                f16,
                                subgroups,
                                builtin_math,
                                max_uniform,
                                int_dot,
                            });
                        }
                    }
                }
            }
        }
    }
    out
}

/// Every request of `model`'s graphs on `target`; the first variant missing from the table.
fn record_model(model: &Model, target: &LookUp) -> Result<(), GpuError> {
    let store = model.weights();
    let mut weights = Vec::with_capacity(store.len());
    for i in 0..store.len() {
        let id = WeightId(i as u32);
        let (d, bytes) = (store.desc(id), store.bytes(id));
        let n_rows = d.n_rows();
        let row_bytes = bytes.len() / n_rows.max(1);
        weights.push(GpuWeight::split(
            d.ty,
            d.ne[0],
            n_rows,
            row_bytes,
            n_rows.max(1),
            |_| Ok::<(), GpuError>(()),
        )?);
    }
    let weights = GpuWeights {
        source: (0, 0),
        weights,
        bytes: 0,
    };
    let n_ctx = 256;
    let layout = model.kv_layout(n_ctx);
    let kv = GpuKv::with_buffers(&layout, |_, _| Ok::<(), GpuError>(()))?;
    // Decode, a prefill micro-batch, all logits of a batch, and a short odd one.
    for (n_tokens, n_outputs) in [(1, 1), (64, 1), (16, 16), (7, 1)] {
        let graph = model
            .graph(n_tokens, n_outputs, n_ctx)
            .map_err(|e| GpuError::Unsupported(e.to_string()))?;
        let plan = Plan::new(&graph);
        let slots = vec![(); plan.slot_len.len()];
        let act_len = activations_len(&graph);
        let buffers = GraphBuffers {
            plan: &plan,
            slots: &slots,
            step: &(),
            acts: &(),
            acts_uniform: uniform_activations(target, &graph, act_len),
        };
        let mut rec = Recorder::new(target);
        record_nodes(&mut rec, &graph, &buffers, &weights, &kv)?;
        let width = graph.node(graph.output).ne[0];
        sample::argmax(&mut rec, &(), &(), width, n_outputs)?;
        sample::sample_chain(&mut rec, &(), &(), &(), &(), width, 0)?;
    }
    let mut rec = Recorder::new(target);
    for layer in &kv.layers {
        let factors = layer.layout.rope.freq_factors.map(|_| ());
        shift_keys(&mut rec, &(), layer, 3, 0, 2.0, factors.as_ref())?;
    }
    Ok(())
}

/// Records `models` on every class; the canonical names requested.
fn check(models: &[(&str, std::sync::Arc<Model>)]) -> BTreeSet<String> {
    let mut missing = Vec::new();
    let mut requested = BTreeSet::new();
    for class in classes() {
        let target = LookUp {
            class,
            seen: Mutex::new(BTreeSet::new()),
        };
        for (name, model) in models {
            if let Err(e) = record_model(model, &target) {
                missing.push(format!("{name} on {class:?}: {e}"));
            }
        }
        requested.extend(target.seen.into_inner().unwrap());
    }
    assert!(missing.is_empty(), "{missing:#?}");
    // The stand-in saw GPU-class and CPU-class matmuls (it exercised both).
    assert!(requested.iter().any(|n| n.contains("ROW_PER_WORKGROUP")));
    assert!(requested
        .iter()
        .any(|n| n.starts_with("attention.wgsl:main F16")));
    requested
}

#[test]
fn the_test_models_request_only_prebuilt_kernels() {
    let requested = check(&[
        (
            "SmolLM2",
            tessera_testkit::load_model(tessera_testkit::SMOLLM2),
        ),
        (
            "Gemma 3",
            tessera_testkit::load_model(tessera_testkit::GEMMA3),
        ),
    ]);
    // Their quantized weights took the uniform decode input and the integer-dot kernel.
    assert!(requested.iter().any(|n| n.contains("X_UNIFORM")));
    assert!(requested.iter().any(|n| n.starts_with("mul_mat_q8.wgsl")));
}

#[test]
fn every_synthetic_architecture_requests_only_prebuilt_kernels() {
    let archs = [
        "llama",
        "llama3",
        "llama-yarn",
        "qwen2",
        "qwen3",
        "phi3",
        "phi3-longrope",
        "gemma2",
        "gemma3",
        "qwen3moe",
        "qwen3moe-fused",
        "dots1",
        "gpt-oss",
        "gpt-oss-fused",
        "gpt-oss-mxfp4",
    ];
    let models: Vec<_> = archs
        .iter()
        .map(|a| (*a, tessera_testkit::synth_cases(a).0))
        .collect();
    check(&models);
}

#[test]
fn a_variant_that_was_not_prebuilt_is_a_typed_error_naming_it() {
    let gpu = tessera_backend_vulkan::Gpu::new(None).expect("a Vulkan device (lavapipe in CI)");
    let key = PipelineKey {
        family: "mul_mat.wgsl",
        entry: "main",
        defines: vec![("W_Q4_0", 1), ("WG", 48), ("NR", 1)],
    };
    let Err(e) = Target::pipeline(&gpu, key) else {
        panic!("WG=48 is not a matmul variant")
    };
    assert!(matches!(&e, GpuError::NotPrebuilt(n) if n == "mul_mat.wgsl:main NR WG=48 W_Q4_0"));
    assert!(matches!(
        tessera_backend_vulkan::VulkanError::from_kernel(e),
        tessera_backend_vulkan::VulkanError::NotPrebuilt(_)
    ));
}
