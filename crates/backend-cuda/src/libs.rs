//! Finding CUDA's libraries at run time. cudarc dlopens them by name (`libcuda.so.1`,
//! `libnvrtc.so.12`, ...) on first use and panics when one is missing, so every entry point of
//! this crate asks these functions first and answers a typed error instead.
//!
//! NVRTC and cuBLAS often come from NVIDIA's Python wheels (`nvidia-cuda-nvrtc-cu12`,
//! `nvidia-cublas-cu12`) rather than a toolkit, in site-packages folders the dynamic loader does
//! not search. Loading such a file once by its full path makes later `dlopen("libnvrtc.so.12")`
//! calls (cudarc's) find the loaded library by its soname, so no `LD_LIBRARY_PATH` is needed.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::error::CudaError;

/// Names the NVRTC library's file (or its folder).
pub const NVRTC_ENV: &str = "TESSERA_NVRTC";
/// Names the cuBLAS library's file (or its folder).
pub const CUBLAS_ENV: &str = "TESSERA_CUBLAS";

/// A library cudarc loads by soname, and where its Python wheel puts it.
struct WheelLib {
    env: &'static str,
    file: &'static str,
    /// Below site-packages.
    wheel_dir: &'static str,
}

const NVRTC: WheelLib = WheelLib {
    env: NVRTC_ENV,
    file: "libnvrtc.so.12",
    wheel_dir: "nvidia/cuda_nvrtc/lib",
};
/// cuBLAS's own dependency, loaded first from the same folder.
const CUBLAS_LT: WheelLib = WheelLib {
    env: CUBLAS_ENV,
    file: "libcublasLt.so.12",
    wheel_dir: "nvidia/cublas/lib",
};
const CUBLAS: WheelLib = WheelLib {
    env: CUBLAS_ENV,
    file: "libcublas.so.12",
    wheel_dir: "nvidia/cublas/lib",
};

/// Whether the driver's library (libcuda) can be loaded.
pub fn driver_present() -> bool {
    // SAFETY: loads (and unloads) the library by name; no symbol is called.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

pub fn require_driver() -> Result<(), CudaError> {
    if driver_present() {
        Ok(())
    } else {
        Err(CudaError::NoDriver)
    }
}

/// Makes NVRTC loadable (see the module's note) and says whether it is.
pub fn nvrtc_present() -> bool {
    preload_nvrtc();
    // SAFETY: as in `driver_present`.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

pub fn require_nvrtc() -> Result<(), CudaError> {
    if nvrtc_present() {
        Ok(())
    } else {
        Err(CudaError::NoNvrtc)
    }
}

pub fn require_cublas() -> Result<(), CudaError> {
    static LOADED_LT: OnceLock<Option<PathBuf>> = OnceLock::new();
    static LOADED: OnceLock<Option<PathBuf>> = OnceLock::new();
    preload(&LOADED_LT, &CUBLAS_LT);
    preload(&LOADED, &CUBLAS);
    // SAFETY: as in `driver_present`.
    if unsafe { cudarc::cublas::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(CudaError::NoCublas)
    }
}

/// The NVRTC file this process loaded by path (None: none was found outside the loader's
/// search path, which may still hold one).
pub fn preload_nvrtc() -> Option<&'static Path> {
    static LOADED: OnceLock<Option<PathBuf>> = OnceLock::new();
    preload(&LOADED, &NVRTC)
}

fn preload<'a>(loaded: &'a OnceLock<Option<PathBuf>>, lib: &WheelLib) -> Option<&'a Path> {
    loaded
        .get_or_init(|| {
            let path = candidates(lib).into_iter().find(|p| p.is_file())?;
            // SAFETY: the CUDA libraries' initialisers only set up their own state. The
            // library stays loaded for the life of the process (forgotten, never unloaded).
            let handle = unsafe { libloading::Library::new(&path) }.ok()?;
            std::mem::forget(handle);
            Some(path)
        })
        .as_deref()
}

/// Where `lib` may be: `$<env>` (the file or its folder), then its wheel's folder under the
/// Python installations' site-packages folders, then the toolkit's usual folder.
fn candidates(lib: &WheelLib) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os(lib.env).map(PathBuf::from) {
        // A file names its folder too (cuBLAS's two libraries sit side by side).
        out.push(if p.is_dir() {
            p.join(lib.file)
        } else {
            p.with_file_name(lib.file)
        });
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut prefixes: Vec<PathBuf> = ["/usr/local/lib", "/usr/lib"].map(PathBuf::from).into();
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV") {
        prefixes.push(PathBuf::from(venv).join("lib"));
    }
    if let Some(home) = &home {
        prefixes.push(home.join(".local/lib"));
        // pyenv: every installed version's lib folder.
        for v in read_dir(&home.join(".pyenv/versions")) {
            prefixes.push(v.join("lib"));
        }
    }
    for prefix in prefixes {
        for py in read_dir(&prefix) {
            let is_python = py
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("python3"));
            if is_python {
                for site in ["site-packages", "dist-packages"] {
                    out.push(py.join(site).join(lib.wheel_dir).join(lib.file));
                }
            }
        }
    }
    out.push(PathBuf::from("/usr/local/cuda/lib64").join(lib.file));
    out
}

/// The entries of `dir`, sorted (none when it cannot be read).
fn read_dir(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.sort();
    v
}
