//! `tessera devices`: every device a `--backend` can run on, one section per backend (CPU,
//! wgpu adapters, Vulkan physical devices after the seed's de-duplication, CUDA devices). A
//! backend that cannot list its devices (no loader, no adapter, no driver) says why in its
//! section; the command still succeeds, since "what can I run on here" is what it is for.

mod cuda;
mod vulkan;

use clap::Args;

#[derive(Args, Debug)]
pub struct DevicesArgs {}

/// A backend's section: its name and the lines that list its devices.
type Section = (&'static str, fn() -> Vec<String>);

pub fn devices(_args: DevicesArgs) -> anyhow::Result<()> {
    let sections: [Section; 4] = [
        ("cpu", cpu_lines),
        ("wgpu", wgpu_lines),
        ("vulkan", vulkan::lines),
        ("cuda", cuda::lines),
    ];
    for (name, lines) in sections {
        println!("{name}:");
        for line in lines() {
            println!("  {line}");
        }
    }
    Ok(())
}

fn cpu_lines() -> Vec<String> {
    let threads = tessera_backend_cpu::available_threads();
    vec![format!(
        "0: CPU ({} kernels, {threads} threads)",
        tessera_quant::isa::level().name()
    )]
}

fn wgpu_lines() -> Vec<String> {
    let adapters = tessera_backend_wgpu::device::adapters();
    if adapters.is_empty() {
        return vec!["(no adapter)".into()];
    }
    adapters
        .iter()
        .enumerate()
        .map(|(i, a)| {
            format!(
                "{i}: {} ({}, {}; driver {}; shader-f16 {}, subgroups {}; bindings up to {} MiB)",
                a.name,
                a.backend,
                a.device_type,
                a.driver.trim(),
                yes_no(a.shader_f16),
                yes_no(a.subgroups),
                a.max_binding >> 20
            )
        })
        .collect()
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}
