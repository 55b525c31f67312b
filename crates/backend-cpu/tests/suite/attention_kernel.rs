//! Which attention kernel the CPU backend takes for a model.

use tessera_backend_cpu::ops::attention::AttentionKernel;
use tessera_backend_cpu::CpuBackend;
use tessera_testkit::{load_model, pool, GEMMA3, SMOLLM2};

#[test]
fn repacked_layers_take_the_f32_tiled_attention_and_file_layouts_ggml_s() {
    let (smollm2, gemma3) = (load_model(SMOLLM2), load_model(GEMMA3));
    let mut backend = CpuBackend::new(pool(1));
    backend.set_attention_kernel(None);
    // SmolLM2's layers are Q4_1, which keeps ggml's layout (only its Q8_0 table is repacked).
    assert_eq!(
        backend.attention_kernel(smollm2.weights()),
        AttentionKernel::Ggml
    );
    let gemma3_kernel = match tessera_quant::repack::isa() {
        Some(_) => AttentionKernel::F32Tiled,
        None => AttentionKernel::Ggml,
    };
    assert_eq!(backend.attention_kernel(gemma3.weights()), gemma3_kernel);
    backend.set_repack(false);
    assert_eq!(
        backend.attention_kernel(gemma3.weights()),
        AttentionKernel::Ggml
    );
    backend.set_attention_kernel(Some(AttentionKernel::F32Tiled));
    assert_eq!(
        backend.attention_kernel(smollm2.weights()),
        AttentionKernel::F32Tiled
    );
}
