//! One CUDA device: its context and stream, device buffers, kernels (compiled by NVRTC for the
//! device's architecture on first use, see [`crate::kernels`]) and launches.
//!
//! Buffers are addressed by raw device pointers: the backend runs everything on one stream,
//! in order, so cudarc's per-buffer event tracking is turned off and a kernel's arguments are
//! plain words ([`Arg`]).

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Arc;

use cudarc::cublas::{result as blas, sys as blas_sys, CudaBlas};
use cudarc::driver::{
    result, CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr,
};

use crate::error::CudaError;
use crate::kernels;
use crate::libs;
use crate::probe::{self, DeviceInfo};

/// Threads of the element-wise kernels' blocks (`global_index` in common.cuh).
pub const BLOCK: u32 = 256;

pub struct Gpu {
    pub info: DeviceInfo,
    ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub blas: CudaBlas,
    arch: String,
    modules: HashMap<&'static str, Arc<CudaModule>>,
    functions: HashMap<String, CudaFunction>,
}

/// A device allocation of `bytes` bytes.
pub struct DevBuf {
    _slice: Option<CudaSlice<u8>>,
    pub ptr: u64,
    pub bytes: usize,
}

impl DevBuf {
    /// An address with no memory behind it, for a [`Queue`] that only records launches
    /// (tests of the launches' arguments without a GPU).
    pub fn unbacked(ptr: u64, bytes: usize) -> DevBuf {
        DevBuf {
            _slice: None,
            ptr,
            bytes,
        }
    }
}

/// What the ops and a [`crate::step::StepGraph`] queue their work on: the device's stream
/// ([`Gpu`]), or a recorder (tests of the launches without a GPU).
pub trait Queue {
    fn alloc(&self, bytes: usize) -> Result<DevBuf, CudaError>;

    /// Queues `name` of `file` on `grid` blocks of `block` threads.
    fn launch(
        &mut self,
        file: &'static str,
        name: &str,
        grid: (u32, u32, u32),
        block: u32,
        args: &[Arg],
    ) -> Result<(), CudaError>;

    /// Copies `bytes` bytes between device addresses.
    fn copy(&self, dst: u64, src: u64, bytes: usize) -> Result<(), CudaError>;

    /// `c (m × n, f32) = aᵀ · b` for `a` k × m and `b` k × n (f16, column-major), cuBLAS's.
    fn gemm_f16(
        &mut self,
        m: usize,
        n: usize,
        k: usize,
        a: u64,
        b: u64,
        c: u64,
    ) -> Result<(), CudaError>;

    /// A 1-D launch of `n` threads in blocks of [`BLOCK`], over a 2-D grid past 65535 blocks.
    fn launch_1d(
        &mut self,
        file: &'static str,
        name: &str,
        n: usize,
        args: &[Arg],
    ) -> Result<(), CudaError> {
        let grid = grid_2d(n.div_ceil(BLOCK as usize));
        self.launch(file, name, (grid.0, grid.1, 1), BLOCK, args)
    }
}

/// One kernel argument: a 32-bit word, a device pointer (0 for a kernel's optional null), or
/// a `#[repr(C)]` struct's bytes (the kernels' `RopeArgs`, `AttnArgs`, `RouteArgs`).
pub enum Arg {
    U32(u32),
    F32(f32),
    Ptr(u64),
    Struct(Vec<u8>),
}

impl Gpu {
    /// Opens device `ordinal`: the typed errors of [`probe::device`] (no driver, no such
    /// device), then [`CudaError::NoNvrtc`] / [`CudaError::NoCublas`].
    pub fn new(ordinal: usize) -> Result<Gpu, CudaError> {
        let info = probe::device(ordinal)?;
        libs::require_nvrtc()?;
        libs::require_cublas()?;
        let ctx = CudaContext::new(ordinal)?;
        // SAFETY: every buffer is used on `stream` only, in order (see the module's note).
        unsafe { ctx.disable_event_tracking() };
        // Not the legacy default stream: CUDA graphs capture only other streams.
        let stream = ctx.new_stream()?;
        let blas = CudaBlas::new(stream.clone())
            .map_err(|e| CudaError::Driver(format!("cuBLAS: {e:?}")))?;
        Ok(Gpu {
            arch: info.arch(),
            info,
            ctx,
            stream,
            blas,
            modules: HashMap::new(),
            functions: HashMap::new(),
        })
    }

    /// Kernel `name` of file `file` (`mul_mat.cu`), its module compiled and loaded on first use.
    pub fn function(&mut self, file: &'static str, name: &str) -> Result<CudaFunction, CudaError> {
        if let Some(f) = self.functions.get(name) {
            return Ok(f.clone());
        }
        if !self.modules.contains_key(file) {
            let ptx = kernels::compile(file, &self.arch)?;
            self.modules.insert(file, self.ctx.load_module(ptx)?);
        }
        let f = self.modules[file].load_function(name)?;
        self.functions.insert(name.to_string(), f.clone());
        Ok(f)
    }

    /// A buffer holding `data`.
    pub fn upload<T: Copy>(&self, data: &[T]) -> Result<DevBuf, CudaError> {
        let buf = self.alloc(std::mem::size_of_val(data))?;
        self.write(&buf, 0, data)?;
        Ok(buf)
    }

    /// Copies `data` to `buf` at byte `offset` (ordered on the stream).
    pub fn write<T: Copy>(&self, buf: &DevBuf, offset: usize, data: &[T]) -> Result<(), CudaError> {
        let bytes = std::mem::size_of_val(data);
        if offset + bytes > buf.bytes {
            return Err(CudaError::Unsupported(format!(
                "write of {bytes} bytes at {offset} into {}",
                buf.bytes
            )));
        }
        // SAFETY: the destination range lies within `buf` (checked); the stream is synchronised
        // before returning, so `data` outlives the copy.
        unsafe {
            result::memcpy_htod_async(buf.ptr + offset as u64, data, self.stream.cu_stream())?;
        }
        self.sync()
    }

    /// Reads `out.len()` values from `buf` at byte `offset`, after the work queued before.
    pub fn read<T: Copy>(
        &self,
        buf: &DevBuf,
        offset: usize,
        out: &mut [T],
    ) -> Result<(), CudaError> {
        let bytes = std::mem::size_of_val(out);
        if offset + bytes > buf.bytes {
            return Err(CudaError::Unsupported(format!(
                "read of {bytes} bytes at {offset} from {}",
                buf.bytes
            )));
        }
        self.read_at(buf.ptr + offset as u64, out)
    }

    /// Reads `out.len()` values at device address `src` (within a live buffer: the caller
    /// checks the length), after the work queued before.
    pub fn read_at<T: Copy>(&self, src: u64, out: &mut [T]) -> Result<(), CudaError> {
        // SAFETY: `src .. src + size_of_val(out)` lies in a live buffer (the callers' check);
        // the stream is synchronised before `out` is used or dropped.
        unsafe {
            result::memcpy_dtoh_async(out, src, self.stream.cu_stream())?;
        }
        self.sync()
    }

    /// Makes the device's context current on this thread (the backend may move between
    /// threads; the raw launches and copies below need it current).
    pub fn bind(&self) -> Result<(), CudaError> {
        Ok(self.ctx.bind_to_thread()?)
    }

    pub fn sync(&self) -> Result<(), CudaError> {
        Ok(self.stream.synchronize()?)
    }
}

impl Queue for Gpu {
    fn alloc(&self, bytes: usize) -> Result<DevBuf, CudaError> {
        // At least one byte: a zero-length allocation has no address to pass.
        let slice = self.stream.alloc_zeros::<u8>(bytes.max(1))?;
        let ptr = slice.device_ptr(&self.stream).0;
        Ok(DevBuf {
            _slice: Some(slice),
            ptr,
            bytes,
        })
    }

    /// Queues `name` of `file` on `grid` blocks of `block` threads.
    fn launch(
        &mut self,
        file: &'static str,
        name: &str,
        grid: (u32, u32, u32),
        block: u32,
        args: &[Arg],
    ) -> Result<(), CudaError> {
        let f = self.function(file, name)?;
        let mut params: Vec<*mut c_void> = args
            .iter()
            .map(|a| match a {
                Arg::U32(v) => v as *const u32 as *mut c_void,
                Arg::F32(v) => v as *const f32 as *mut c_void,
                Arg::Ptr(v) => v as *const u64 as *mut c_void,
                Arg::Struct(b) => b.as_ptr() as *mut c_void,
            })
            .collect();
        // SAFETY: `params` points into `args`, alive until the launch has copied them (the
        // driver copies kernel parameters at launch). Each kernel's signature is matched by
        // its caller in `ops`; device pointers are of live buffers.
        unsafe {
            result::launch_kernel(
                f.cu_function(),
                grid,
                (block, 1, 1),
                0,
                self.stream.cu_stream(),
                &mut params,
            )
        }?;
        Ok(())
    }

    /// Copies `bytes` bytes between device addresses (ordered on the stream).
    fn copy(&self, dst: u64, src: u64, bytes: usize) -> Result<(), CudaError> {
        // SAFETY: callers pass ranges within live buffers of this device.
        unsafe { result::memcpy_dtod_async(dst, src, bytes, self.stream.cu_stream()) }?;
        Ok(())
    }

    /// `c (m × n, f32) = aᵀ · b` for `a` k × m and `b` k × n (f16, column-major).
    fn gemm_f16(
        &mut self,
        m: usize,
        n: usize,
        k: usize,
        a: u64,
        b: u64,
        c: u64,
    ) -> Result<(), CudaError> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: the handle is bound to the device's stream; the callers pass device buffers
        // of k·m and k·n halves and m·n floats.
        unsafe {
            blas::gemm_ex(
                *self.blas.handle(),
                blas_sys::cublasOperation_t::CUBLAS_OP_T,
                blas_sys::cublasOperation_t::CUBLAS_OP_N,
                m as i32,
                n as i32,
                k as i32,
                &alpha as *const f32 as *const c_void,
                a as *const c_void,
                blas_sys::cudaDataType::CUDA_R_16F,
                k as i32,
                b as *const c_void,
                blas_sys::cudaDataType::CUDA_R_16F,
                k as i32,
                &beta as *const f32 as *const c_void,
                c as *mut c_void,
                blas_sys::cudaDataType::CUDA_R_32F,
                m as i32,
                blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
            )
        }
        .map_err(|e| CudaError::Driver(format!("cuBLAS GEMM {m}×{n}×{k}: {e:?}")))
    }
}

/// `blocks` blocks as (x, y) with x ≤ 65535 (`blockIdx.y * gridDim.x + blockIdx.x` in kernels;
/// the excess of the last row is bounds-checked there).
pub fn grid_2d(blocks: usize) -> (u32, u32) {
    let blocks = blocks.max(1);
    let x = blocks.min(65535);
    (x as u32, blocks.div_ceil(x) as u32)
}

/// A `#[repr(C)]` value's bytes as a kernel argument.
pub fn struct_arg<T: Copy>(v: &T) -> Arg {
    // SAFETY: `T` is a plain `Copy` struct of u32/f32 fields (the kernels' argument structs);
    // its bytes are read, never written.
    let bytes = unsafe { std::slice::from_raw_parts(v as *const T as *const u8, size_of::<T>()) };
    Arg::Struct(bytes.to_vec())
}
