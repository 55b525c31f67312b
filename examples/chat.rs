//! A chat answer through the library API, streamed to stdout:
//! `cargo run --release -p tessera-runtime --example chat -- [MODEL.gguf] ["question"]`
use std::io::Write as _;
use std::sync::Arc;

use tessera_backend_cpu::{CpuBackend, SpinPool};
use tessera_core::{Context, ContextParams, Model};
use tessera_runtime::generate::{generate, tokenize_chat, GenerateParams, NoClock};
use tessera_tokenizer::{ChatMessage, ChatTemplate};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or("models/SmolLM2-135M-Instruct.Q4_1.gguf".into());
    let question = args.next().unwrap_or("What is the capital of France?".into());
    let model = Arc::new(Model::load(Arc::new(tessera_gguf::GgufFile::open(&path)?), &mut |_| {})?);
    let tokenizer = model.tokenizer();
    let template = ChatTemplate::from_gguf(model.weights().file().header(), tokenizer)?
        .ok_or("the model has no chat template")?;
    let prompt = tokenize_chat(tokenizer, &template, &[ChatMessage::new("user", question)])?;
    // The CPU backend's kernels run on a pool of worker threads (the caller is one of them).
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pool = SpinPool::new(threads, 1 << 16, |_, body| {
        let handle = std::thread::spawn(body);
        Ok(Some(Box::new(move || drop(handle.join()))))
    })?;
    let params = ContextParams { n_ctx: 2048, n_batch: 512 };
    let mut ctx = Context::new(model.clone(), params, Box::new(CpuBackend::new(Arc::new(pool))))?;
    let mut on_text = |text: &str| {
        print!("{text}");
        std::io::stdout().flush().is_ok()
    };
    let stats = generate(&mut ctx, &prompt, &GenerateParams::default(), &NoClock, &mut on_text)?;
    println!("\n[{} prompt tokens, {} generated, stop: {:?}]", stats.n_prompt, stats.n_generated, stats.stop);
    Ok(())
}
