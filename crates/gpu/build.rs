//! Finds the WGSL sources at build time: every file under `shaders/wgsl/` (folders included)
//! is embedded by `include_str!` in the generated table `SOURCES`, by its path there, so no
//! hand-kept list can miss one. For every kernel file (not `*.inc.wgsl`) it also measures
//! `struct Params`: the bytes of its fields before the `_p` padding become the constant
//! `wgsl_params::<FILE>` that each op's `#[repr(C)]` parameter struct is asserted against,
//! and the whole struct must be the recorder's 64-byte block.

use std::fmt::Write as _;
use std::path::PathBuf;

/// Bytes of one dispatch's parameter block (`recorder::PARAMS_BYTES`).
const PARAMS_BYTES: usize = 64;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.join("../../shaders/wgsl");
    println!("cargo:rerun-if-changed={}", root.display());
    let files = tessera_kernels::files::wgsl_files(&root).unwrap();
    let mut sources =
        String::from("/// Every WGSL file under `shaders/wgsl/`, by its path there.\n");
    sources.push_str("pub const SOURCES: &[(&str, &str)] = &[\n");
    let mut params = String::from(
        "/// Bytes of the fields of each kernel file's `struct Params` before its padding.\n\
         pub mod wgsl_params {\n",
    );
    for (name, path) in &files {
        let path = path.canonicalize().unwrap();
        writeln!(
            sources,
            "    ({name:?}, include_str!({:?})),",
            path.display()
        )
        .unwrap();
        if name.ends_with(".inc.wgsl") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let leading = params_fields_bytes(name, &text);
        let constant: String = name
            .trim_end_matches(".wgsl")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect();
        writeln!(params, "    pub const {constant}: usize = {leading};").unwrap();
    }
    sources.push_str("];\n");
    params.push_str("}\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("wgsl_sources.rs");
    std::fs::write(out, sources + &params).unwrap();
}

/// Bytes of `struct Params`'s fields before the first `_p` padding field; panics (failing the
/// build) when the struct is missing, uses a type other than u32, i32, f32 or a 4-vector of
/// them, or is not [`PARAMS_BYTES`] in all.
fn params_fields_bytes(file: &str, text: &str) -> usize {
    let start = text
        .find("struct Params {")
        .unwrap_or_else(|| panic!("{file}: no `struct Params {{`"));
    let body = &text[start + "struct Params {".len()..];
    let body = &body[..body
        .find('}')
        .unwrap_or_else(|| panic!("{file}: unterminated Params"))];
    let (mut offset, mut leading) = (0, None);
    for line in body.lines() {
        let line = line.split("//").next().unwrap().trim();
        assert!(
            !line.starts_with('#'),
            "{file}: a define inside struct Params"
        );
        for field in line.split(',').map(str::trim).filter(|f| !f.is_empty()) {
            let (name, ty) = field
                .split_once(':')
                .unwrap_or_else(|| panic!("{file}: bad Params field `{field}`"));
            let (size, align) = match ty.trim() {
                "u32" | "i32" | "f32" => (4, 4),
                "vec4<u32>" | "vec4<i32>" | "vec4<f32>" => (16, 16),
                other => panic!("{file}: Params field type `{other}`"),
            };
            offset = usize::next_multiple_of(offset, align);
            if name.trim().starts_with("_p") {
                leading.get_or_insert(offset);
            } else {
                assert!(
                    leading.is_none(),
                    "{file}: Params field `{name}` after the padding"
                );
                assert_eq!(
                    size, 4,
                    "{file}: Params field `{name}` before the padding is not a scalar"
                );
            }
            offset += size;
        }
    }
    let total = offset.next_multiple_of(16);
    assert_eq!(
        total, PARAMS_BYTES,
        "{file}: struct Params is {total} bytes"
    );
    leading.unwrap_or(total)
}
