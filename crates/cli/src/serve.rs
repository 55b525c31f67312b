//! `tessera serve`: the companion host (`tessera-serve`) with this binary's model loading and
//! backends. Flags follow llama-server's names.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::Args;
use tessera_core::{Context, ContextParams, Model, ThreadPool};
use tessera_serve::models::{ModelLimits, DEFAULT_MODELS_MAX};
use tessera_serve::preset::{self, Defaults};
use tessera_serve::{Access, Limits, ModelHost, ModelSpec, Registry, Settings};

use crate::load::{load_model, sequences_on, thread_pool};
use crate::model_path;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// GGUF model file (default: SmolLM2-135M-Instruct Q4_1, fetched on first use); ignored
    /// with --models-preset.
    #[arg(short = 'm', long = "model")]
    pub model: Option<PathBuf>,
    /// Models to offer, as llama-server's preset INI file (a section per model).
    #[arg(long = "models-preset")]
    pub models_preset: Option<PathBuf>,
    /// Models loaded at once (0: no cap). Loading one more unloads the least recently used
    /// model that serves no request; when all are busy the request gets 503.
    #[arg(long = "models-max", default_value_t = DEFAULT_MODELS_MAX)]
    pub models_max: usize,
    /// Address to listen on. Anything but loopback exposes the server to the network.
    #[arg(long = "host", default_value = "127.0.0.1")]
    pub host: String,
    #[arg(long = "port", default_value_t = 8080)]
    pub port: u16,
    /// Require `Authorization: Bearer KEY` on every endpoint but /health.
    #[arg(long = "api-key", conflicts_with = "api_key_file")]
    pub api_key: Option<String>,
    /// Read the API key from the first line of this file.
    #[arg(long = "api-key-file")]
    pub api_key_file: Option<PathBuf>,
    /// An origin (`http://localhost:5173`) whose pages may call the server; repeatable. Other
    /// pages get 403.
    #[arg(long = "allowed-origin")]
    pub allowed_origins: Vec<String>,
    /// A host name requests may address (the `Host` header) besides IP addresses and
    /// `localhost`; repeatable. Other names get 403 (DNS rebinding).
    #[arg(long = "allowed-host")]
    pub allowed_hosts: Vec<String>,
    /// Most tokens one answer generates, whatever it asks (default: one slot's context).
    #[arg(short = 'n', long = "n-predict")]
    pub n_predict: Option<usize>,
    /// Seconds a request's head (or a keep-alive connection's next request) may take.
    #[arg(long = "header-timeout", default_value_t = 10)]
    pub header_timeout: u64,
    /// Seconds a body may take, plus its length at --body-min-rate.
    #[arg(long = "body-timeout", default_value_t = 10)]
    pub body_timeout: u64,
    /// Bytes per second a body must at least arrive at.
    #[arg(long = "body-min-rate", default_value_t = 1 << 20)]
    pub body_min_rate: u64,
    /// Seconds a streaming client may read nothing before its request is dropped.
    #[arg(long = "write-timeout", default_value_t = 30)]
    pub write_timeout: u64,
    /// Open connections at most (idle ones are closed to make room).
    #[arg(long = "max-connections", default_value_t = 256)]
    pub max_connections: usize,
    /// Reuse a slot's cached prompt across callers (origins). Faster for one user's pages;
    /// off by default because a page could then time another's prompt.
    #[arg(long = "share-prefix-cache")]
    pub share_prefix_cache: bool,
    /// Requests served at once (slots; also `-np`); the context is split between them.
    #[arg(long = "parallel")]
    pub parallel: Option<usize>,
    /// Context size of all slots together (default 4096; 0: the model's training context).
    #[arg(short = 'c', long = "ctx-size")]
    pub ctx_size: Option<usize>,
    /// Micro-batch size for prompt processing.
    #[arg(short = 'b', long = "batch-size", default_value_t = 512)]
    pub batch_size: usize,
    /// Threads (default: every core).
    #[arg(short = 't', long = "threads")]
    pub threads: Option<usize>,
    /// When a slot's context fills during an answer, drop half of it (keeping the BOS) and go
    /// on, instead of ending the answer.
    #[arg(long = "context-shift")]
    pub context_shift: bool,
    #[command(flatten)]
    pub backend: crate::args::BackendArgs,
}

/// Loads models with this binary's loader and gives each slot a context on the chosen backend.
struct Host {
    backend: crate::args::BackendArgs,
    batch_size: usize,
    pool: Arc<dyn ThreadPool>,
}

impl ModelHost for Host {
    fn load(&self, spec: &ModelSpec) -> Result<Arc<Model>, String> {
        load_model(&spec.path).map_err(|e| format!("{e:#}"))
    }

    fn context(
        &self,
        _: &ModelSpec,
        model: &Arc<Model>,
        n_ctx: usize,
        n_seq: usize,
    ) -> Result<Context, String> {
        let params = ContextParams {
            n_ctx,
            n_batch: self.batch_size,
        };
        sequences_on(model, params, n_seq, self.pool.clone(), &self.backend)
            .map_err(|e| format!("{e:#}"))
    }
}

pub fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let access = Access {
        api_key: match (&args.api_key, &args.api_key_file) {
            (Some(k), _) => Some(k.clone()),
            (None, Some(f)) => Some(read_key(f)?),
            (None, None) => None,
        },
        allowed_origins: args.allowed_origins.clone(),
        allowed_hosts: args.allowed_hosts.clone(),
    };
    if access.api_key.as_ref().is_some_and(|k| k.is_empty()) {
        bail!("the API key is empty");
    }
    let defaults = Defaults {
        context_shift: args.context_shift,
        n_ctx: args.ctx_size.unwrap_or(4096),
        n_ctx_explicit: args.ctx_size.is_some(),
        parallel: args.parallel.unwrap_or(1),
        parallel_explicit: args.parallel.is_some(),
    };
    if defaults.parallel == 0 || defaults.parallel > 64 {
        bail!("--parallel must be between 1 and 64");
    }
    let mut specs = match &args.models_preset {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let (specs, warnings) = preset::parse(path, &text, &defaults)?;
            for w in warnings {
                eprintln!("warning: {w}");
            }
            specs
        }
        None => {
            let path = model_path::resolve(args.model.as_deref())?;
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "model".into());
            vec![ModelSpec {
                name,
                path,
                n_ctx: defaults.n_ctx,
                parallel: defaults.parallel,
                load_on_startup: true,
                context_shift: defaults.context_shift,
            }]
        }
    };
    for spec in &mut specs {
        if spec.n_ctx == 0 {
            spec.n_ctx = n_ctx_train(&spec.path)?;
        }
    }
    let addr: SocketAddr = format!("{}:{}", args.host, args.port)
        .parse()
        .with_context(|| format!("bad --host/--port {}:{}", args.host, args.port))?;
    if !addr.ip().is_loopback() {
        eprintln!("warning: listening on {addr}: other machines can reach this server");
    }
    let host = Host {
        backend: args.backend.clone(),
        batch_size: args.batch_size,
        pool: thread_pool(args.threads)?,
    };
    let model_limits = ModelLimits {
        models_max: args.models_max,
        ..ModelLimits::new(64)
    };
    model_limits
        .check_startup(&specs)
        .map_err(anyhow::Error::msg)?;
    let registry = Registry::with_limits(specs, Arc::new(host), model_limits);
    registry.load_startup_models();
    let limits = Limits {
        header_timeout: Duration::from_secs(args.header_timeout.max(1)),
        body_timeout: Duration::from_secs(args.body_timeout.max(1)),
        body_min_rate: args.body_min_rate.max(1),
        write_timeout: Duration::from_secs(args.write_timeout.max(1)),
        max_connections: args.max_connections.max(1),
    };
    let settings = Settings {
        limits,
        max_generated: args.n_predict,
        share_prefix_cache: args.share_prefix_cache,
        ..Settings::new(access)
    };
    let app = tessera_serve::router(registry, settings);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        eprintln!("listening on http://{}", listener.local_addr()?);
        tessera_serve::serve(listener, app, limits, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
        Ok(())
    })
}

fn read_key(path: &std::path::Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the API key file {}", path.display()))?;
    Ok(text.lines().next().unwrap_or("").trim().to_string())
}

/// The training context of a model file (for `-c 0`), read from its header only.
fn n_ctx_train(path: &std::path::Path) -> anyhow::Result<usize> {
    let file = crate::load::open_gguf(path)?;
    let header = file.header();
    let arch = header.architecture().context("no general.architecture")?;
    header
        .get(&format!("{arch}.context_length"))
        .and_then(|v| v.as_u64())
        .map(|n| n as usize)
        .context("the model has no context_length")
}
