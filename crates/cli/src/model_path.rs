//! Which model file to use: `-m`, or the default model (SmolLM2-135M-Instruct Q4_1), fetched
//! with the project's `scripts/fetch-models.sh` the first time it is needed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context as _};

pub const DEFAULT_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
const FETCH_SCRIPT: &str = "scripts/fetch-models.sh";

/// The repository this binary was built from (the workspace root, two levels above crates/cli).
fn build_repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `$TESSERA_MODELS`, else `<repo>/models`.
pub fn models_dir() -> PathBuf {
    match std::env::var_os("TESSERA_MODELS") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => build_repo_root().join("models"),
    }
}

/// The fetch script: next to the executable's repository (`target/<profile>/tessera` lives two
/// levels below it), else in the repository the binary was built from.
fn find_fetch_script() -> Option<PathBuf> {
    let from_exe = std::env::current_exe().ok().into_iter().flat_map(|exe| {
        exe.ancestors()
            .skip(1)
            .map(Path::to_path_buf)
            .collect::<Vec<_>>()
    });
    from_exe
        .chain(std::iter::once(build_repo_root()))
        .map(|dir| dir.join(FETCH_SCRIPT))
        .find(|p| p.is_file())
        .map(|p| p.canonicalize().unwrap_or(p))
}

/// The model to load: `explicit` when given, else the default model (fetching it if missing).
pub fn resolve(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    let dir = models_dir();
    let path = dir.join(DEFAULT_MODEL_FILE);
    if path.is_file() {
        return Ok(path);
    }
    let Some(script) = find_fetch_script() else {
        bail!(
            "no -m given and the default model {} is missing, and {FETCH_SCRIPT} cannot be found \
             to fetch it: pass -m MODEL.gguf",
            path.display()
        );
    };
    eprintln!(
        "tessera: no -m given; fetching the default model SmolLM2-135M-Instruct Q4_1 (~98 MB, \
         first use only) into {} with {}",
        dir.display(),
        script.display()
    );
    let status = Command::new(&script)
        .arg("smollm2")
        .env("TESSERA_MODELS", &dir)
        .stdin(Stdio::null())
        // The script prints the destination on stdout; stdout is for generated text.
        .stdout(Stdio::null())
        .status()
        .with_context(|| format!("cannot run {}", script.display()))?;
    if !status.success() || !path.is_file() {
        bail!(
            "fetching the default model with {} failed ({status})",
            script.display()
        );
    }
    Ok(path)
}
