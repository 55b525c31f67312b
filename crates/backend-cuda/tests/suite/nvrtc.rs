//! Every kernel file of `shaders/cuda/` compiles with NVRTC to PTX for the architectures the
//! backend meets (Ampere, Ada, Hopper). NVRTC needs no driver, so this runs in CI, where
//! `scripts/setup.sh` installs the `nvidia-cuda-nvrtc-cu12` wheel, and CI=true or
//! TESSERA_REQUIRE_NVRTC (set by .ci/run) make a missing NVRTC a failure instead of a skip.

use tessera_backend_cuda::{kernels, libs};

const ARCHS: [&str; 3] = ["compute_80", "compute_89", "compute_90"];

/// Whether NVRTC is here; without it the test is skipped, except in CI.
fn nvrtc_or_skip() -> bool {
    if libs::nvrtc_present() {
        return true;
    }
    let required = std::env::var("CI").is_ok_and(|v| v == "true")
        || std::env::var_os("TESSERA_REQUIRE_NVRTC").is_some();
    assert!(
        !required,
        "the NVRTC check must run here (CI=true or TESSERA_REQUIRE_NVRTC) but NVRTC was not \
         found: scripts/setup.sh installs nvidia-cuda-nvrtc-cu12 (or set {})",
        libs::NVRTC_ENV
    );
    eprintln!(
        "skipped: NVRTC (libnvrtc.so.12) not found; set {}",
        libs::NVRTC_ENV
    );
    false
}

#[test]
fn every_kernel_file_compiles_to_ptx() {
    if !nvrtc_or_skip() {
        return;
    }
    let (major, minor) = kernels::nvrtc_version().unwrap();
    eprintln!("NVRTC {major}.{minor} from {:?}", libs::preload_nvrtc());
    let files: Vec<_> = kernels::kernel_files().collect();
    assert!(!files.is_empty(), "no .cu files embedded");
    let mut failures = Vec::new();
    for file in &files {
        let src = kernels::expand(file).unwrap();
        for arch in ARCHS {
            match kernels::compile_uncached(file, &src, arch) {
                Ok(ptx) => assert!(
                    ptx.contains(".entry"),
                    "{file} ({arch}): no kernel in the PTX"
                ),
                Err(e) => failures.push(e.to_string()),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // The dump for a report: which kernels each file defines.
    if std::env::var_os("TESSERA_CUDA_LIST").is_some() {
        for file in &files {
            let ptx =
                kernels::compile_uncached(file, &kernels::expand(file).unwrap(), ARCHS[2]).unwrap();
            let entries: Vec<_> = ptx
                .lines()
                .filter_map(|l| l.trim().strip_prefix(".visible .entry "))
                .map(|l| l.split('(').next().unwrap_or(l))
                .collect();
            eprintln!("{file}: {}", entries.join(" "));
        }
    }
}

#[test]
fn compile_caches_and_reports_errors() {
    if !nvrtc_or_skip() {
        return;
    }
    let file = kernels::kernel_files().next().unwrap();
    let a = kernels::compile(file, "compute_90").unwrap().to_src();
    let b = kernels::compile(file, "compute_90").unwrap().to_src();
    assert_eq!(a, b);
    let err = kernels::compile_uncached(
        "bad.cu",
        "extern \"C\" __global__ void k() { nope; }",
        "compute_90",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("bad.cu") && err.contains("nope"), "{err}");
}
