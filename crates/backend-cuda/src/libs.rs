//! Finding CUDA's libraries at run time. cudarc dlopens them by name (`libcuda.so.1`,
//! `libnvrtc.so.12`, ...) on first use and panics when one is missing, so every entry point of
//! this crate asks these functions first and answers a typed error instead.
//!
//! NVRTC often comes from the `nvidia-cuda-nvrtc-cu12` Python wheel rather than a toolkit, in
//! a site-packages folder the dynamic loader does not search. Loading that file once by its
//! full path makes later `dlopen("libnvrtc.so.12")` calls (cudarc's) find the loaded library
//! by its soname, so no `LD_LIBRARY_PATH` is needed.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::error::CudaError;

/// Names the NVRTC library's file.
pub const NVRTC_ENV: &str = "TESSERA_NVRTC";
const NVRTC_FILE: &str = "libnvrtc.so.12";

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
    LOADED
        .get_or_init(|| {
            let path = nvrtc_candidates().into_iter().find(|p| p.is_file())?;
            // SAFETY: NVRTC's initialisers only set up its own state. The library stays
            // loaded for the life of the process (forgotten, never unloaded).
            let lib = unsafe { libloading::Library::new(&path) }.ok()?;
            std::mem::forget(lib);
            Some(path)
        })
        .as_deref()
}

/// Where NVRTC may be: `$TESSERA_NVRTC` (the file or its folder), then the wheel's folder
/// (`nvidia/cuda_nvrtc/lib`) under the Python installations' site-packages folders.
fn nvrtc_candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os(NVRTC_ENV).map(PathBuf::from) {
        out.push(if p.is_dir() { p.join(NVRTC_FILE) } else { p });
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
                    out.push(py.join(site).join("nvidia/cuda_nvrtc/lib").join(NVRTC_FILE));
                }
            }
        }
    }
    out.push(PathBuf::from("/usr/local/cuda/lib64").join(NVRTC_FILE));
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
