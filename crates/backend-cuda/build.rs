//! Embeds the CUDA C sources: every file under `shaders/cuda/` (`*.cu` kernels, `*.cuh`
//! includes) becomes an entry of the generated table `SOURCES`, so no hand-kept list can miss
//! one (the NVRTC check compiles every `.cu` found here).

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.join("../../shaders/cuda");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cu" || e == "cuh"))
        .collect();
    files.sort();
    let mut out = String::from("/// Every CUDA C file in `shaders/cuda/`, by file name.\n");
    out.push_str("pub const SOURCES: &[(&str, &str)] = &[\n");
    for path in files {
        let path = path.canonicalize().unwrap();
        let name = path.file_name().unwrap().to_str().unwrap();
        writeln!(out, "    ({name:?}, include_str!({:?})),", path.display()).unwrap();
    }
    out.push_str("];\n");
    let dst = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("cuda_sources.rs");
    std::fs::write(dst, out).unwrap();
}
