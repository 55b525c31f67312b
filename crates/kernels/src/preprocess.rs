//! The tiny preprocessor that turns a kernel family (a file of `shaders/wgsl/`) plus defines
//! into one WGSL module: `#include "file"`, `#ifdef NAME`, `#ifndef NAME`, `#else`, `#endif`,
//! and one `const NAME: u32 = value;` per define. The sources come from a lookup so that the
//! WebGPU backend (sources embedded in the binary) and the Vulkan backend's build script
//! (sources read from disk) run the same code.

use std::collections::BTreeSet;

/// A define: a name and its value (a flag is a define with value 1).
pub type Define = (&'static str, u32);

/// A file that is missing or whose directives do not nest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreprocessError {
    pub file: String,
    pub message: String,
}

impl std::fmt::Display for PreprocessError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.file, self.message)
    }
}

impl std::error::Error for PreprocessError {}

fn bad(file: &str, message: String) -> PreprocessError {
    PreprocessError {
        file: file.to_string(),
        message,
    }
}

/// The preprocessed text of `family` (a file name such as `mul_mat.wgsl`) with `defines`.
/// The define `F16` also enables WGSL's `f16` type (the device must have `shader-f16`).
/// `SUBGROUPS` kernels use the subgroup built-ins, which naga 30 reads without an `enable`
/// directive (it refuses `enable subgroups;`): the device must have subgroup arithmetic.
pub fn preprocess<'s>(
    family: &str,
    defines: &[Define],
    source: &dyn Fn(&str) -> Option<&'s str>,
) -> Result<String, PreprocessError> {
    let mut out = String::new();
    if defines.iter().any(|(n, _)| *n == "F16") {
        out.push_str("enable f16;\n"); // directives come before any declaration
    }
    for (name, value) in defines {
        out.push_str(&format!("const {name}: u32 = {value}u;\n"));
    }
    let mut included = Vec::new();
    expand(family, defines, source, &mut out, &mut included)?;
    Ok(out)
}

fn expand<'s>(
    file: &str,
    defines: &[Define],
    source: &dyn Fn(&str) -> Option<&'s str>,
    out: &mut String,
    included: &mut Vec<String>,
) -> Result<(), PreprocessError> {
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
                expand(inc.trim_matches('"'), defines, source, out, included)?;
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

/// Every identifier-like word of `family` and of every file it may include (in any branch).
pub fn mentions<'s>(
    family: &str,
    source: &dyn Fn(&str) -> Option<&'s str>,
) -> Result<BTreeSet<&'s str>, PreprocessError> {
    let mut words = BTreeSet::new();
    let mut files = vec![family.to_string()];
    let mut seen = Vec::new();
    while let Some(file) = files.pop() {
        if seen.contains(&file) {
            continue;
        }
        let text = source(&file).ok_or_else(|| bad(&file, "no such WGSL file".into()))?;
        for line in text.lines() {
            if let Some(inc) = line.trim().strip_prefix("#include") {
                files.push(inc.trim().trim_matches('"').to_string());
            }
        }
        words.extend(
            text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| !w.is_empty()),
        );
        seen.push(file);
    }
    Ok(words)
}

/// The defines that make a difference to `family`, in one order: the ones its files name
/// (a define they never mention only adds an unused constant, e.g. `BUILTIN_MATH`, which the
/// backends pass to every kernel), sorted by name, each once. Two requests with the same
/// canonical defines compile to the same module.
pub fn canonical<'s>(
    family: &str,
    defines: &[Define],
    source: &dyn Fn(&str) -> Option<&'s str>,
) -> Result<Vec<Define>, PreprocessError> {
    Ok(canonical_among(&mentions(family, source)?, defines))
}

/// [`canonical`] given the family's [`mentions`] (for callers that keep them: scanning the
/// files is most of the work).
pub fn canonical_among(words: &BTreeSet<&str>, defines: &[Define]) -> Vec<Define> {
    let mut out: Vec<Define> = defines
        .iter()
        .copied()
        .filter(|(name, _)| words.contains(name))
        .collect();
    out.sort();
    out.dedup_by_key(|(name, _)| *name);
    out
}

/// `family:entry D1=v D2` — how a variant is named in errors and in the prebuilt table
/// (flags, i.e. value 1, without their value; the defines in canonical order).
pub fn variant_name(family: &str, entry: &str, defines: &[Define]) -> String {
    let mut s = format!("{family}:{entry}");
    for (name, value) in defines {
        match value {
            1 => s.push_str(&format!(" {name}")),
            v => s.push_str(&format!(" {name}={v}")),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(name: &str) -> Option<&'static str> {
        match name {
            "a.wgsl" => {
                Some("#include \"b.inc.wgsl\"\n#ifdef X\nlet x = 1;\n#else\nlet x = Y;\n#endif\n")
            }
            "b.inc.wgsl" => Some("#ifdef W_F16\nfn z() {}\n#endif\n"),
            "broken.wgsl" => Some("#ifdef X\n"),
            _ => None,
        }
    }

    #[test]
    fn branches_includes_and_constants() {
        let text = preprocess("a.wgsl", &[("X", 1), ("F16", 1)], &files).unwrap();
        assert!(text.starts_with("enable f16;\nconst X: u32 = 1u;\nconst F16: u32 = 1u;\n"));
        assert!(text.contains("let x = 1;"));
        assert!(!text.contains("let x = Y;"));
        assert!(!text.contains("fn z"));
        assert!(preprocess("broken.wgsl", &[], &files).is_err());
        assert!(preprocess("nope.wgsl", &[], &files).is_err());
    }

    #[test]
    fn canonical_keeps_mentioned_defines_sorted() {
        // F16 is not a word of these files (W_F16 is); BUILTIN_MATH is not either.
        let c = canonical(
            "a.wgsl",
            &[
                ("Y", 3),
                ("BUILTIN_MATH", 1),
                ("F16", 1),
                ("W_F16", 1),
                ("X", 1),
            ],
            &files,
        )
        .unwrap();
        assert_eq!(c, vec![("W_F16", 1), ("X", 1), ("Y", 3)]);
        assert_eq!(
            variant_name("a.wgsl", "main", &c),
            "a.wgsl:main W_F16 X Y=3"
        );
    }
}
