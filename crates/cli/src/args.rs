//! Command-line arguments, with llama.cpp's flag names where it has one.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use tessera_core::sampling::SamplingParams;

#[derive(Parser, Debug)]
#[command(
    name = "tessera",
    version,
    about = "Run GGUF language models (llama.cpp's format)"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Generate text after a prompt (streamed to stdout; statistics to stderr).
    Run(RunArgs),
    /// Interactive chat on stdin with the model's chat template and the conversation's history.
    Chat(ChatArgs),
    /// Print the token ids of a text.
    Tokenize(TokenizeArgs),
    /// Print a GGUF file's metadata and tensor table.
    Inspect(InspectArgs),
    /// List the devices each backend can run on (CPU, wgpu adapters, Vulkan and CUDA devices).
    Devices(crate::devices::DevicesArgs),
    /// Measure prompt processing and generation speed (like llama-bench).
    Bench(BenchArgs),
    /// Perplexity of a text file (llama-perplexity's method).
    Perplexity(PerplexityArgs),
    /// Build a static n-gram cache for --spec-type ngram-cache from a corpus.
    LookupCreate(crate::spec_cmds::LookupCreateArgs),
    /// Speculative decoding on one prompt: tokens/s and acceptance of each type vs none.
    BenchSpec(crate::spec_cmds::BenchSpecArgs),
    /// OpenAI-compatible HTTP server (the companion host for web pages on this machine).
    Serve(crate::serve::ServeArgs),
    /// Concurrent streaming clients against an OpenAI-compatible server: throughput, latency.
    LoadTest(crate::load_test::LoadTestArgs),
}

#[derive(Args, Debug, Clone)]
pub struct ModelArg {
    /// GGUF model file (default: SmolLM2-135M-Instruct Q4_1, fetched on first use).
    #[arg(short = 'm', long = "model")]
    pub model: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct ComputeArgs {
    /// Threads (default: every core).
    #[arg(short = 't', long = "threads")]
    pub threads: Option<usize>,
    /// Context size in tokens (0 = the model's training context).
    #[arg(short = 'c', long = "ctx-size", default_value_t = 4096)]
    pub ctx_size: usize,
    /// Micro-batch size for prompt processing.
    #[arg(short = 'b', long = "batch-size", default_value_t = 512)]
    pub batch_size: usize,
    #[command(flatten)]
    pub backend: BackendArgs,
}

/// The compute backend and device (`tessera devices` lists them).
#[derive(Args, Debug, Clone)]
pub struct BackendArgs {
    /// Compute backend: cpu; wgpu (WebGPU natively, e.g. lavapipe or a real GPU); vulkan (ash);
    /// cuda (NVIDIA GPUs; needs the driver and NVRTC); auto (Vulkan on a hardware GPU, else the
    /// CPU, saying why).
    #[arg(long = "backend", default_value = "cpu", value_parser = ["cpu", "wgpu", "vulkan", "cuda", "auto"])]
    pub backend: String,
    /// Vulkan device: its number in `tessera devices` (default: the first GPU, else the first
    /// device).
    #[arg(long = "device")]
    pub device: Option<usize>,
}

#[derive(Args, Debug, Clone)]
pub struct SamplingArgs {
    /// Temperature (≤ 0: greedy).
    #[arg(long = "temp", default_value_t = 0.8, allow_negative_numbers = true)]
    pub temp: f32,
    /// Top-k (0: off).
    #[arg(long = "top-k", default_value_t = 40, allow_negative_numbers = true)]
    pub top_k: i32,
    /// Top-p (1: off).
    #[arg(long = "top-p", default_value_t = 0.95, allow_negative_numbers = true)]
    pub top_p: f32,
    /// Min-p (0: off).
    #[arg(long = "min-p", default_value_t = 0.05, allow_negative_numbers = true)]
    pub min_p: f32,
    /// Repetition penalty (1: off).
    #[arg(
        long = "repeat-penalty",
        default_value_t = 1.0,
        allow_negative_numbers = true
    )]
    pub repeat_penalty: f32,
    /// Tokens the penalties look back over (0: off, -1: the whole context).
    #[arg(
        long = "repeat-last-n",
        default_value_t = 64,
        allow_negative_numbers = true
    )]
    pub repeat_last_n: i32,
    #[arg(
        long = "presence-penalty",
        default_value_t = 0.0,
        allow_negative_numbers = true
    )]
    pub presence_penalty: f32,
    #[arg(
        long = "frequency-penalty",
        default_value_t = 0.0,
        allow_negative_numbers = true
    )]
    pub frequency_penalty: f32,
    /// RNG seed (-1: random; the seed used is printed on stderr).
    #[arg(short = 's', long = "seed", default_value_t = -1, allow_negative_numbers = true)]
    pub seed: i64,
}

impl SamplingArgs {
    /// The sampler options and the seed actually used.
    pub fn params(&self) -> SamplingParams {
        let seed = if self.seed < 0 {
            random_seed()
        } else {
            self.seed as u64
        };
        SamplingParams {
            temperature: self.temp,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            penalty_last_n: self.repeat_last_n,
            seed,
            logit_bias: Vec::new(),
        }
    }
}

fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded from the OS; mix in the time for good measure.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    if let Ok(d) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(d.as_nanos());
    }
    h.finish() & 0xFFFF_FFFF
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub model: ModelArg,
    /// The prompt.
    #[arg(short = 'p', long = "prompt", conflicts_with_all = ["file", "prompt_pos"])]
    pub prompt: Option<String>,
    /// Read the prompt from a file.
    #[arg(short = 'f', long = "file", conflicts_with = "prompt_pos")]
    pub file: Option<PathBuf>,
    /// The prompt (instead of -p).
    #[arg(value_name = "PROMPT")]
    pub prompt_pos: Option<String>,
    /// Tokens to generate (-1: until end of generation or a full context).
    #[arg(short = 'n', long = "n-predict", default_value_t = -1, allow_negative_numbers = true)]
    pub n_predict: i64,
    /// Apply the model's chat template (the prompt becomes the user's message).
    #[arg(long = "chat")]
    pub chat: bool,
    /// System prompt (with --chat).
    #[arg(long = "system-prompt", requires = "chat")]
    pub system_prompt: Option<String>,
    /// Keep generating past end-of-generation tokens (they are never sampled).
    #[arg(long = "ignore-eos")]
    pub ignore_eos: bool,
    /// Stop before this string (repeatable).
    #[arg(long = "stop", short = 'r', alias = "reverse-prompt")]
    pub stop: Vec<String>,
    #[command(flatten)]
    pub grammar: crate::grammar_args::GrammarArgs,
    #[command(flatten)]
    pub compute: ComputeArgs,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    #[command(flatten)]
    pub spec: crate::speculative_args::SpeculativeArgs,
}

#[derive(Args, Debug)]
pub struct ChatArgs {
    #[command(flatten)]
    pub model: ModelArg,
    /// System prompt.
    #[arg(long = "system-prompt")]
    pub system_prompt: Option<String>,
    /// Most tokens per answer (-1: until end of turn or a full context).
    #[arg(short = 'n', long = "n-predict", default_value_t = -1, allow_negative_numbers = true)]
    pub n_predict: i64,
    #[command(flatten)]
    pub grammar: crate::grammar_args::GrammarArgs,
    #[command(flatten)]
    pub compute: ComputeArgs,
    #[command(flatten)]
    pub sampling: SamplingArgs,
}

#[derive(Args, Debug)]
pub struct TokenizeArgs {
    #[command(flatten)]
    pub model: ModelArg,
    /// The text.
    #[arg(short = 'p', long = "prompt", conflicts_with = "file")]
    pub prompt: Option<String>,
    /// Read the text from a file.
    #[arg(short = 'f', long = "file")]
    pub file: Option<PathBuf>,
    /// Print only the ids, as a JSON array.
    #[arg(long = "ids")]
    pub ids: bool,
    /// Treat special-token text (e.g. <|im_start|>) as plain text.
    #[arg(long = "no-parse-special")]
    pub no_parse_special: bool,
    /// Do not add BOS/EOS even when the model asks for them.
    #[arg(long = "no-bos")]
    pub no_bos: bool,
}

#[derive(Args, Debug)]
pub struct InspectArgs {
    #[command(flatten)]
    pub model: ModelArg,
    /// Array values longer than this are abbreviated.
    #[arg(long = "max-array", default_value_t = 8)]
    pub max_array: usize,
    /// String values longer than this many characters are abbreviated.
    #[arg(long = "max-string", default_value_t = 160)]
    pub max_string: usize,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Model files (repeatable or comma-separated; default: SmolLM2-135M-Instruct Q4_1).
    #[arg(short = 'm', long = "model", value_delimiter = ',')]
    pub models: Vec<PathBuf>,
    /// Prompt lengths to process (comma list; 0 skips the test).
    #[arg(
        short = 'p',
        long = "n-prompt",
        value_delimiter = ',',
        default_value = "512"
    )]
    pub n_prompt: Vec<usize>,
    /// Token counts to generate (comma list; 0 skips the test).
    #[arg(
        short = 'n',
        long = "n-gen",
        value_delimiter = ',',
        default_value = "128"
    )]
    pub n_gen: Vec<usize>,
    /// Tokens already in the KV cache before each test (comma list).
    #[arg(
        short = 'd',
        long = "n-depth",
        value_delimiter = ',',
        default_value = "0"
    )]
    pub n_depth: Vec<usize>,
    /// Thread counts (comma list; default: every core).
    #[arg(short = 't', long = "threads", value_delimiter = ',')]
    pub threads: Vec<usize>,
    /// Micro-batch size.
    #[arg(short = 'b', long = "batch-size", default_value_t = 512)]
    pub batch_size: usize,
    #[command(flatten)]
    pub backend: BackendArgs,
    /// CPU kernel family (scalar, avx2, avx512, simd128; default: the widest this CPU runs).
    /// For comparing kernels: avx2 and avx512 give the same bits; scalar also keeps weights in
    /// their file layout (no repacking).
    #[arg(long = "cpu-isa", value_parser = ["scalar", "avx2", "avx512", "simd128"])]
    pub cpu_isa: Option<String>,
    /// Repetitions of each test.
    #[arg(short = 'r', long = "repetitions", default_value_t = 5)]
    pub repetitions: usize,
    /// Also measure the memory read bandwidth before each decode repetition and show every
    /// decode test against it (bytes per token × t/s; the decode roofline), on stderr.
    #[arg(long = "roofline")]
    pub roofline: bool,
    /// Output format: md or json.
    #[arg(short = 'o', long = "output", default_value = "md", value_parser = ["md", "json"])]
    pub output: String,
    /// Same as `-o json`.
    #[arg(long = "json")]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct PerplexityArgs {
    #[command(flatten)]
    pub model: ModelArg,
    /// The text file.
    #[arg(short = 'f', long = "file")]
    pub file: PathBuf,
    /// Chunk (context) size in tokens.
    #[arg(short = 'c', long = "ctx-size", default_value_t = 512)]
    pub ctx_size: usize,
    /// Micro-batch size (at most the chunk size).
    #[arg(short = 'b', long = "batch-size", default_value_t = 512)]
    pub batch_size: usize,
    /// Threads (default: every core).
    #[arg(short = 't', long = "threads")]
    pub threads: Option<usize>,
    /// Score at most this many chunks (-1: all).
    #[arg(long = "chunks", default_value_t = -1, allow_negative_numbers = true)]
    pub chunks: i64,
    #[command(flatten)]
    pub backend: BackendArgs,
}
