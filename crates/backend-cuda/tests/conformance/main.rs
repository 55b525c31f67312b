//! The op conformance suite (`tessera-conformance`: every op against the CPU backend) on the
//! CUDA backend, and `host_kernels`: the CUDA headers' math compiled as host C++ (no GPU).
//!
//! Needs a CUDA device: without one every case is skipped with a message, except when
//! `TESSERA_REQUIRE_CUDA` is set (scripts/gpu-check.sh), where it fails.
//!
//! Limits are the cases' own, except prefill matmuls (more than `DECODE_COLS` columns, unless
//! `TESSERA_CUDA_PREFILL=int`), which run through cuBLAS on f16 activations instead of ggml's
//! quantized ones: the design's quantized-matmul limit (5e-4) applies to them.

mod host_kernels;

use std::sync::OnceLock;

use tessera_backend_cuda::ops::matmul::uses_gemm;
use tessera_backend_cuda::{libs, CudaBackend};
use tessera_conformance::{Case, UnderTest};

/// CUDA device 0; each case gets a backend of its own.
struct Cuda;

impl UnderTest for Cuda {
    type Backend = CudaBackend;

    /// The device, if a driver and a device answer (required when `TESSERA_REQUIRE_CUDA` is set).
    async fn open() -> Option<Cuda> {
        let present =
            libs::driver_present() && tessera_backend_cuda::devices().is_ok_and(|d| !d.is_empty());
        assert!(
            present || std::env::var_os("TESSERA_REQUIRE_CUDA").is_none(),
            "TESSERA_REQUIRE_CUDA is set but no CUDA device answers: {:?}",
            tessera_backend_cuda::devices()
        );
        if !present {
            eprintln!("skipped: no CUDA device (CUDA: no driver, or no devices)");
        }
        present.then_some(Cuda)
    }

    fn backend(&self) -> CudaBackend {
        static SHOWN: OnceLock<()> = OnceLock::new();
        let b = CudaBackend::new(0).expect("CUDA device 0");
        SHOWN.get_or_init(|| eprintln!("cuda: {}", b.describe()));
        b
    }

    /// Prefill matmuls (cuBLAS on f16 activations) get the design's 5e-4.
    fn limit(&self, case: &Case<'_>) -> f64 {
        let prefill = case.steps.iter().any(|s| uses_gemm(s.tokens.len()));
        if case.op() == "mul_mat" && prefill {
            case.limit.max(5e-4)
        } else {
            case.limit
        }
    }
}

tessera_conformance::op_conformance_tests!(Cuda);
