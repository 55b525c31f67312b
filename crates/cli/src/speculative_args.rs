//! Speculative-decoding flags (llama.cpp's names) and what they build: the speculator chain,
//! the lookup-cache files, the statistics printed at the end.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;
use tessera_backend_cpu::CpuBackend;
use tessera_core::{Context, ContextParams, Model};
use tessera_runtime::speculative::{
    draft_model_speculator, NgramCache, SpecParams, SpecType, Speculator, SpeculatorChain,
};

use crate::args::ComputeArgs;
use crate::load::{load_model, thread_pool};

#[derive(Args, Debug, Clone)]
pub struct SpeculativeArgs {
    /// Draftless speculative decoding: none, ngram-cache, ngram-simple, ngram-map-k,
    /// ngram-map-k4v (with -md a draft model is used too, after the draftless type).
    #[arg(long = "spec-type", default_value = "none", value_name = "TYPE")]
    pub spec_type: String,
    /// N-gram size n (the key, the sampled token included) for the ngram-* types.
    #[arg(long = "spec-ngram-size-n", default_value_t = 12, value_name = "N")]
    pub ngram_size_n: usize,
    /// M-gram size m (tokens proposed) for the ngram-* types.
    #[arg(long = "spec-ngram-size-m", default_value_t = 48, value_name = "M")]
    pub ngram_size_m: usize,
    /// Look up n-grams only every R tokens.
    #[arg(long = "spec-ngram-check-rate", default_value_t = 1, value_name = "R")]
    pub ngram_check_rate: usize,
    /// Hits a key needs before it drafts (ngram-map-*).
    #[arg(long = "spec-ngram-min-hits", default_value_t = 1, value_name = "H")]
    pub ngram_min_hits: usize,
    /// Most draft tokens verified per step.
    #[arg(
        long = "draft-max",
        alias = "draft",
        alias = "draft-n",
        default_value_t = 16
    )]
    pub draft_max: usize,
    /// Drafts shorter than this are not verified.
    #[arg(long = "draft-min", alias = "draft-n-min", default_value_t = 0)]
    pub draft_min: usize,
    /// The draft model stops after a token it gives less than this probability.
    #[arg(long = "draft-p-min", default_value_t = 0.75)]
    pub draft_p_min: f32,
    /// Draft model (GGUF) for speculative decoding (also -md).
    #[arg(long = "model-draft", value_name = "FILE")]
    pub model_draft: Option<PathBuf>,
    /// Static lookup cache for ngram-cache, made by `tessera lookup-create` (also -lcs).
    #[arg(long = "lookup-cache-static", value_name = "FILE")]
    pub lookup_cache_static: Option<PathBuf>,
    /// Dynamic lookup cache for ngram-cache: loaded if present, updated and saved at the end
    /// (also -lcd).
    #[arg(long = "lookup-cache-dynamic", value_name = "FILE")]
    pub lookup_cache_dynamic: Option<PathBuf>,
    /// Translate between target and draft vocabularies: replace TARGET by DRAFT (repeatable).
    #[arg(long = "spec-replace", num_args = 2, value_names = ["TARGET", "DRAFT"])]
    pub spec_replace: Vec<String>,
}

/// llama.cpp's multi-letter short flags, which clap cannot declare, spelled out.
const SHORT_ALIASES: [(&str, &str); 4] = [
    ("-md", "--model-draft"),
    ("-lcs", "--lookup-cache-static"),
    ("-lcd", "--lookup-cache-dynamic"),
    ("-np", "--parallel"),
];

/// Rewrites `-md`, `-lcs`, `-lcd`, `-np` (alone or as `-md=FILE`) to their long forms; everything
/// else passes through unchanged.
pub fn expand_short_aliases(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    args.into_iter()
        .map(|a| {
            let Some(s) = a.to_str() else { return a };
            for (short, long) in SHORT_ALIASES {
                if s == short {
                    return OsString::from(long);
                }
                if let Some(value) = s.strip_prefix(short).and_then(|r| r.strip_prefix('=')) {
                    return OsString::from(format!("{long}={value}"));
                }
            }
            a
        })
        .collect()
}

/// A built chain plus where its dynamic cache goes.
pub struct Speculation {
    pub chain: SpeculatorChain,
    dynamic_path: Option<PathBuf>,
}

impl SpeculativeArgs {
    /// The validated options.
    pub fn params(&self) -> anyhow::Result<SpecParams> {
        let spec_type: SpecType = self.spec_type.parse()?;
        let replacements = self
            .spec_replace
            .chunks(2)
            .map(|p| (p[0].clone(), p[1].clone()))
            .collect();
        let params = SpecParams {
            spec_type,
            n_max: self.draft_max,
            n_min: self.draft_min,
            p_min: self.draft_p_min,
            ngram_size_n: self.ngram_size_n,
            ngram_size_m: self.ngram_size_m,
            ngram_check_rate: self.ngram_check_rate,
            ngram_min_hits: self.ngram_min_hits,
            replacements,
        };
        params.validate()?;
        Ok(params)
    }

    /// True when speculative decoding was asked for.
    pub fn enabled(&self) -> anyhow::Result<bool> {
        Ok(self.params()?.spec_type != SpecType::None || self.model_draft.is_some())
    }

    /// The chain for `target`, or `None` without speculative options. The draft model gets a
    /// context like the target's (`compute`).
    pub fn build(
        &self,
        target: &Arc<Model>,
        compute: &ComputeArgs,
    ) -> anyhow::Result<Option<Speculation>> {
        let params = self.params()?;
        if !self.enabled()? {
            return Ok(None);
        }
        let uses_cache = params.spec_type == SpecType::NgramCache;
        let static_cache = match (&self.lookup_cache_static, uses_cache) {
            (Some(path), true) => Some(load_cache(path)?),
            _ => None,
        };
        let dynamic_cache = match (&self.lookup_cache_dynamic, uses_cache) {
            // A missing dynamic cache starts empty and is created at the end.
            (Some(path), true) if path.exists() => Some(load_cache(path)?),
            _ => None,
        };
        let draft: Option<Box<dyn Speculator>> = match &self.model_draft {
            None => None,
            Some(path) => {
                let model = load_model(path)?;
                let ctx = Context::new(
                    model,
                    ContextParams {
                        n_ctx: compute.ctx_size,
                        n_batch: compute.batch_size,
                    },
                    Box::new(CpuBackend::new(thread_pool(compute.threads)?)),
                )?;
                Some(Box::new(draft_model_speculator(target, ctx, &params)?))
            }
        };
        let chain = SpeculatorChain::from_params(&params, static_cache, dynamic_cache, draft)?;
        Ok(Some(Speculation {
            chain,
            dynamic_path: self.lookup_cache_dynamic.clone().filter(|_| uses_cache),
        }))
    }
}

impl Speculation {
    /// Prints the statistics on stderr and saves the dynamic cache (creating the file).
    pub fn finish(&self) -> anyhow::Result<()> {
        for line in self.chain.stats_lines() {
            eprintln!("{line}");
        }
        if let (Some(path), Some(cache)) = (&self.dynamic_path, self.chain.dynamic_cache()) {
            std::fs::write(path, cache.to_bytes())
                .with_context(|| format!("cannot write lookup cache {}", path.display()))?;
        }
        Ok(())
    }
}

pub fn load_cache(path: &Path) -> anyhow::Result<NgramCache> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("cannot read lookup cache {}", path.display()))?;
    NgramCache::from_bytes(&bytes).with_context(|| format!("lookup cache {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        spec: SpeculativeArgs,
    }

    fn parse(args: &[&str]) -> Result<T, clap::Error> {
        let argv = std::iter::once("t")
            .chain(args.iter().copied())
            .map(OsString::from);
        T::try_parse_from(expand_short_aliases(argv))
    }

    #[test]
    fn llama_cpp_flags_parse() {
        let t = parse(&[
            "--spec-type",
            "ngram-map-k",
            "--spec-ngram-size-n",
            "8",
            "--spec-ngram-size-m",
            "24",
            "--spec-ngram-check-rate",
            "2",
            "--spec-ngram-min-hits",
            "3",
            "--draft-max",
            "8",
            "--draft-min",
            "2",
            "--draft-p-min",
            "0.5",
            "-md",
            "d.gguf",
            "-lcs",
            "s.bin",
            "-lcd=dyn.bin",
            "--spec-replace",
            "<a>",
            "<b>",
            "--spec-replace",
            "x",
            "y",
        ])
        .unwrap();
        let p = t.spec.params().unwrap();
        assert_eq!(p.spec_type, SpecType::NgramMapK);
        assert_eq!((p.ngram_size_n, p.ngram_size_m), (8, 24));
        assert_eq!((p.ngram_check_rate, p.ngram_min_hits), (2, 3));
        assert_eq!((p.n_max, p.n_min, p.p_min), (8, 2, 0.5));
        assert_eq!(t.spec.model_draft.as_deref(), Some(Path::new("d.gguf")));
        assert_eq!(
            t.spec.lookup_cache_static.as_deref(),
            Some(Path::new("s.bin"))
        );
        assert_eq!(
            t.spec.lookup_cache_dynamic.as_deref(),
            Some(Path::new("dyn.bin"))
        );
        assert_eq!(
            p.replacements,
            vec![
                ("<a>".to_string(), "<b>".to_string()),
                ("x".into(), "y".into())
            ]
        );
    }

    #[test]
    fn defaults_and_errors() {
        let p = parse(&[]).unwrap().spec.params().unwrap();
        assert_eq!(p, SpecParams::default());
        for bad in [
            &["--spec-type", "ngram"][..],
            &["--spec-ngram-size-n", "0"],
            &["--spec-ngram-size-m", "2000"],
            &["--spec-ngram-check-rate", "0"],
            &["--spec-ngram-min-hits", "0"],
        ] {
            let err = parse(bad).unwrap().spec.params().unwrap_err().to_string();
            assert!(err.contains("invalid argument"), "{bad:?}: {err}");
        }
    }
}
