//! llama-server's `--models-preset` INI file: a section per model (its name) with options named
//! like the command-line flags (`model`/`m`, `ctx-size`/`c`, `parallel`/`np`) and the
//! preset-only `load-on-startup`; a `[*]` section gives every model's defaults. Options the
//! command line sets explicitly win over the file's. Other llama-server options are ignored with
//! a warning (a preset written for llama-server still loads); so are the server's own options
//! such as `models-max`, which llama-server also takes from its command line only.

use std::path::{Path, PathBuf};

use crate::models::ModelSpec;

/// The command line's values: defaults, and which were given explicitly (those override).
#[derive(Clone, Debug)]
pub struct Defaults {
    /// `--context-shift` on the command line (a preset's `context-shift = true` also turns it on).
    pub context_shift: bool,
    pub n_ctx: usize,
    pub n_ctx_explicit: bool,
    pub parallel: usize,
    pub parallel_explicit: bool,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PresetError {
    #[error("{path}:{line}: {why}")]
    Syntax {
        path: String,
        line: usize,
        why: String,
    },
    #[error("{path}: section [{section}] has no model path (model = FILE)")]
    NoModel { path: String, section: String },
    #[error("{path}: no model sections")]
    Empty { path: String },
}

/// One `key = value` line: its number, key and value.
type Setting = (usize, String, String);

/// The models of preset file `path` (`text` its contents), and warnings about ignored keys.
/// Relative model paths are relative to the current directory, as in llama-server.
pub fn parse(
    path: &Path,
    text: &str,
    d: &Defaults,
) -> Result<(Vec<ModelSpec>, Vec<String>), PresetError> {
    let shown = path.display().to_string();
    let syntax = |line: usize, why: String| PresetError::Syntax {
        path: shown.clone(),
        line,
        why,
    };
    let mut global: Vec<Setting> = Vec::new();
    let mut sections: Vec<(String, Vec<Setting>)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let name = rest
                .strip_suffix(']')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .ok_or_else(|| syntax(i + 1, format!("bad section header {line:?}")))?;
            if name != "*" {
                if sections.iter().any(|(n, _)| n == name) {
                    return Err(syntax(i + 1, format!("section [{name}] appears twice")));
                }
                sections.push((name.to_string(), Vec::new()));
            } else if !sections.is_empty() {
                return Err(syntax(
                    i + 1,
                    "[*] must come before the model sections".into(),
                ));
            }
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .ok_or_else(|| syntax(i + 1, format!("expected key = value, got {line:?}")))?;
        let entry = (i + 1, key.trim().to_string(), value.trim().to_string());
        match sections.last_mut() {
            Some((_, keys)) => keys.push(entry),
            // Before any section: the file's own keys (`version`) and [*]'s.
            None => global.push(entry),
        }
    }
    if sections.is_empty() {
        return Err(PresetError::Empty { path: shown });
    }
    let mut warnings = Vec::new();
    let mut specs = Vec::new();
    for (name, keys) in sections {
        let mut spec = ModelSpec {
            name: name.clone(),
            path: PathBuf::new(),
            n_ctx: d.n_ctx,
            parallel: d.parallel,
            load_on_startup: false,
            context_shift: d.context_shift,
        };
        for (line, key, value) in global.iter().chain(&keys) {
            let number = || {
                value
                    .parse::<usize>()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| {
                        syntax(
                            *line,
                            format!("{key}: expected a positive integer, got {value:?}"),
                        )
                    })
            };
            let flag = || match value.to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" | "on" => Ok(true),
                "false" | "0" | "no" | "off" => Ok(false),
                _ => Err(syntax(
                    *line,
                    format!("{key}: expected true or false, got {value:?}"),
                )),
            };
            match key.as_str() {
                "version" => {}
                "model" | "m" => spec.path = PathBuf::from(value),
                "ctx-size" | "c" if !d.n_ctx_explicit => spec.n_ctx = number()?,
                "parallel" | "np" if !d.parallel_explicit => spec.parallel = number()?,
                "ctx-size" | "c" | "parallel" | "np" => {}
                "load-on-startup" => spec.load_on_startup = flag()?,
                "context-shift" => spec.context_shift |= flag()?,
                "models-max" => warnings.push(format!(
                    "{shown}:{line}: models-max is a server option, not a model's: use --models-max"
                )),
                other => warnings.push(format!(
                    "{shown}:{line}: option {other:?} is not used by tessera serve"
                )),
            }
        }
        if spec.path.as_os_str().is_empty() {
            return Err(PresetError::NoModel {
                path: shown,
                section: name,
            });
        }
        specs.push(spec);
    }
    Ok((specs, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> Defaults {
        Defaults {
            context_shift: false,
            n_ctx: 4096,
            n_ctx_explicit: false,
            parallel: 1,
            parallel_explicit: false,
        }
    }

    #[test]
    fn sections_global_defaults_and_startup_flags() {
        let text = "version = 1\n; comment\n[*]\nc = 2048\nn-gpu-layers = 99\n\n[small]\nmodel = /m/a.gguf\nload-on-startup = true\n[big]\nm = b.gguf\nctx-size = 8192\nnp = 2\n";
        let (specs, warnings) = parse(Path::new("p.ini"), text, &defaults()).unwrap();
        assert_eq!(specs.len(), 2);
        assert_eq!(
            (
                specs[0].name.as_str(),
                specs[0].n_ctx,
                specs[0].load_on_startup
            ),
            ("small", 2048, true)
        );
        assert_eq!(specs[0].path, PathBuf::from("/m/a.gguf"));
        assert_eq!(
            (specs[1].n_ctx, specs[1].parallel, specs[1].load_on_startup),
            (8192, 2, false)
        );
        // The ignored llama-server option is reported once per model.
        assert_eq!(warnings.len(), 2);
        assert!(warnings[0].contains("n-gpu-layers"));
    }

    #[test]
    fn the_command_line_wins() {
        let d = Defaults {
            n_ctx: 1024,
            n_ctx_explicit: true,
            ..defaults()
        };
        let (specs, _) = parse(Path::new("p.ini"), "[a]\nmodel = a.gguf\nc = 8192\n", &d).unwrap();
        assert_eq!(specs[0].n_ctx, 1024);
    }

    #[test]
    fn server_options_are_not_a_models() {
        let text = "[*]\nmodels-max = 1\n[a]\nmodel = a.gguf\n";
        let (specs, warnings) = parse(Path::new("p.ini"), text, &defaults()).unwrap();
        assert_eq!(specs.len(), 1);
        assert_eq!(
            warnings,
            ["p.ini:2: models-max is a server option, not a model's: use --models-max"]
        );
    }

    #[test]
    fn errors_name_the_line() {
        for (text, want) in [
            ("[a]\nmodel = x\nc = lots\n", "p.ini:3"),
            ("[a]\njust words\n", "p.ini:2"),
            ("[a\n", "p.ini:1"),
            ("[a]\nmodel = x\nload-on-startup = maybe\n", "p.ini:3"),
            ("[a]\nc = 5\n", "no model path"),
            ("c = 5\n", "no model sections"),
            ("[a]\nmodel = x\n[a]\nmodel = y\n", "twice"),
        ] {
            let e = parse(Path::new("p.ini"), text, &defaults()).unwrap_err();
            assert!(e.to_string().contains(want), "{text:?}: {e}");
        }
    }
}
