//! Opening a GGUF file and loading a model with a progress bar on stderr.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressStyle};
use tessera_backend_cpu::CpuBackend;
use tessera_core::{Context, ContextParams, Model, ThreadPool};

use crate::args::{BackendArgs, ComputeArgs};

pub fn open_gguf(path: &Path) -> anyhow::Result<tessera_gguf::GgufFile> {
    tessera_gguf::GgufFile::open(path).map_err(|e| {
        let shown = path.display().to_string();
        // I/O errors already name the file.
        if e.to_string().starts_with(&shown) {
            anyhow::Error::new(e).context("cannot read model")
        } else {
            anyhow::Error::new(e).context(format!("cannot read model {shown}"))
        }
    })
}

pub fn load_model(path: &Path) -> anyhow::Result<Arc<Model>> {
    let file = Arc::new(open_gguf(path)?);
    let bar = ProgressBar::new(100).with_style(
        ProgressStyle::with_template("loading {msg} [{bar:30}] {percent:>3}%")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar.set_message(
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    );
    let model = Model::load(file, &mut |f| {
        bar.set_position((f.clamp(0.0, 1.0) * 100.0) as u64)
    })
    .with_context(|| format!("cannot load model {}", path.display()))?;
    bar.finish_and_clear();
    Ok(Arc::new(model))
}

pub fn thread_pool(threads: Option<usize>) -> anyhow::Result<Arc<tessera_backend_cpu::SpinPool>> {
    // llama.cpp's default: every core.
    let n = threads.unwrap_or_else(tessera_backend_cpu::available_threads);
    Ok(Arc::new(tessera_backend_cpu::SpinPool::on_std_threads(n)?))
}

pub fn new_context(model: &Arc<Model>, compute: &ComputeArgs) -> anyhow::Result<Context> {
    let params = ContextParams {
        n_ctx: compute.ctx_size,
        n_batch: compute.batch_size,
    };
    context_on(
        model,
        params,
        thread_pool(compute.threads)?,
        &compute.backend,
    )
}

/// A context on the chosen backend; `threads` run the CPU backend's kernels.
pub fn context_on(
    model: &Arc<Model>,
    params: ContextParams,
    threads: Arc<dyn ThreadPool>,
    backend: &BackendArgs,
) -> anyhow::Result<Context> {
    sequences_on(model, params, 1, threads, backend)
}

/// [`context_on`] for a context of `n_seq` sequences (`Context::with_sequences`), which the
/// CPU backend batches together; the GPU backends hold one sequence per context.
pub fn sequences_on(
    model: &Arc<Model>,
    params: ContextParams,
    n_seq: usize,
    threads: Arc<dyn ThreadPool>,
    backend: &BackendArgs,
) -> anyhow::Result<Context> {
    let cpu = |params, threads| {
        Ok(Context::with_sequences(
            model.clone(),
            params,
            n_seq,
            Box::new(CpuBackend::new(threads)),
        )?)
    };
    match backend.backend.as_str() {
        "cpu" => cpu(params, threads),
        "wgpu" if n_seq > 1 => {
            anyhow::bail!("the WebGPU backend holds one sequence per context")
        }
        "wgpu" => {
            let mut gpu =
                tessera_backend_wgpu::WgpuBackend::new().context("cannot open a WebGPU device")?;
            eprintln!("wgpu: {}", gpu.gpu().describe());
            gpu.upload_weights(model.weights())
                .context("cannot place the weights on the GPU")?;
            Ok(Context::new(model.clone(), params, Box::new(gpu))?)
        }
        "cuda" if n_seq > 1 => {
            anyhow::bail!("the CUDA backend holds one sequence per context")
        }
        "cuda" => {
            // Fails with "CUDA: no driver" (a typed error, no panic) on a machine without one.
            let mut gpu =
                tessera_backend_cuda::CudaBackend::new(0).context("cannot open a CUDA device")?;
            eprintln!("cuda: {}", gpu.describe());
            gpu.upload_weights(model.weights())
                .context("cannot place the weights on the GPU")?;
            Ok(Context::new(model.clone(), params, Box::new(gpu))?)
        }
        "vulkan" if n_seq > 1 => {
            anyhow::bail!("the Vulkan backend holds one sequence per context")
        }
        "auto" if n_seq > 1 => {
            eprintln!("backend auto: the CPU (the GPU backends hold one sequence per context)");
            cpu(params, threads)
        }
        "vulkan" => {
            let vk = crate::vulkan::backend(model, backend.device, false)?;
            Ok(Context::new(model.clone(), params, Box::new(vk))?)
        }
        "auto" => match crate::vulkan::backend(model, backend.device, true) {
            Ok(vk) => Ok(Context::new(model.clone(), params, Box::new(vk))?),
            Err(why) => {
                eprintln!("backend auto: the CPU ({why:#})");
                cpu(params, threads)
            }
        },
        other => anyhow::bail!("unknown backend '{other}' (cpu, wgpu, vulkan, cuda, auto)"),
    }
}
