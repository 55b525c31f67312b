//! The WGSL sources (from `shaders/wgsl/`, embedded at build time) and the tiny preprocessor
//! that turns a family plus defines into one module: `#include "file"`, `#ifdef NAME`,
//! `#ifndef NAME`, `#else`, `#endif`, and one `const NAME: u32 = value;` per define.

use crate::error::WgpuError;

macro_rules! wgsl {
    ($($name:literal),* $(,)?) => {
        &[$(($name, include_str!(concat!("../../../shaders/wgsl/", $name)))),*]
    };
}

/// Every kernel file and include, by file name.
const SOURCES: &[(&str, &str)] = wgsl!(
    "bytes.inc.wgsl",
    "dequant.inc.wgsl",
    "grid.inc.wgsl",
    "f16_round.inc.wgsl",
    "rope_rotate.inc.wgsl",
    "mul_mat.wgsl",
    "rows.wgsl",
    "elementwise.wgsl",
    "norm.wgsl",
    "rope.wgsl",
    "kv.wgsl",
    "attention.wgsl",
    "sample.wgsl",
    "sample_chain.wgsl",
    "quantize.wgsl",
);

fn source(name: &str) -> Option<&'static str> {
    SOURCES.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
}

/// A define: a name and its value (a flag is a define with value 1).
pub type Define = (&'static str, u32);

/// The preprocessed text of `family` (a file name such as `mul_mat.wgsl`) with `defines`.
/// The define `F16` also enables WGSL's `f16` type (the device must have `shader-f16`).
pub fn preprocess(family: &str, defines: &[Define]) -> Result<String, WgpuError> {
    let mut out = String::new();
    if defines.iter().any(|(n, _)| *n == "F16") {
        out.push_str("enable f16;\n"); // directives come before any declaration
    }
    for (name, value) in defines {
        out.push_str(&format!("const {name}: u32 = {value}u;\n"));
    }
    let mut included = Vec::new();
    expand(family, defines, &mut out, &mut included)?;
    Ok(out)
}

fn bad(family: &str, message: String) -> WgpuError {
    WgpuError::Shader {
        family: family.to_string(),
        message,
    }
}

fn expand(
    file: &str,
    defines: &[Define],
    out: &mut String,
    included: &mut Vec<String>,
) -> Result<(), WgpuError> {
    if included.iter().any(|f| f == file) {
        return Ok(()); // each include once
    }
    included.push(file.to_string());
    let text = source(file).ok_or_else(|| bad(file, "no such WGSL file".into()))?;
    // Stack of (this branch active, parent active).
    let mut stack: Vec<(bool, bool)> = Vec::new();
    let active = |stack: &[(bool, bool)]| stack.last().is_none_or(|&(on, parent)| on && parent);
    let defined = |name: &str| defines.iter().any(|(n, _)| *n == name);
    for (no, line) in text.lines().enumerate() {
        let t = line.trim();
        let directive = |d: &str| t.strip_prefix(d).map(str::trim);
        if let Some(name) = directive("#ifdef") {
            let parent = active(&stack);
            stack.push((defined(name), parent));
        } else if let Some(name) = directive("#ifndef") {
            let parent = active(&stack);
            stack.push((!defined(name), parent));
        } else if t == "#else" {
            let top = stack
                .last_mut()
                .ok_or_else(|| bad(file, format!("line {}: #else without #if", no + 1)))?;
            top.0 = !top.0;
        } else if t == "#endif" {
            stack
                .pop()
                .ok_or_else(|| bad(file, format!("line {}: #endif without #if", no + 1)))?;
        } else if let Some(inc) = directive("#include") {
            if active(&stack) {
                expand(inc.trim_matches('"'), defines, out, included)?;
            }
        } else if active(&stack) {
            out.push_str(line);
            out.push('\n');
        }
    }
    if !stack.is_empty() {
        return Err(bad(file, "unterminated #ifdef".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defines_select_branches_and_become_constants() {
        let text = preprocess("elementwise.wgsl", &[("OP_SCALE", 1), ("UNARY", 1)]).unwrap();
        assert!(text.starts_with("const OP_SCALE: u32 = 1u;\nconst UNARY: u32 = 1u;\n"));
        assert!(text.contains("a[i] * P.s"));
        assert!(!text.contains("a[i] + b[i]"));
        assert!(!text.contains("var<storage, read> b"));
        assert!(text.contains("fn linear_group")); // the include
    }

    #[test]
    fn nested_branches_and_missing_files_are_handled() {
        let text = preprocess("mul_mat.wgsl", &[("W_Q4_K", 1), ("WG", 32), ("NC", 1)]).unwrap();
        assert!(text.contains("(c / 8u) * 144u"));
        assert!(!text.contains("* 210u"));
        assert!(text.contains("fn scale_min_k4"));
        assert!(matches!(
            preprocess("nope.wgsl", &[]),
            Err(WgpuError::Shader { .. })
        ));
    }
}
