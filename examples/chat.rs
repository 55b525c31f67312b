//! A chat answer through the library API, streamed to stdout:
//! `cargo run --release -p tessera-runtime --example chat -- [MODEL.gguf] ["question"]`
use std::{io::Write as _, sync::Arc};
use tessera_backend_cpu::{CpuBackend, SpinPool};
use tessera_core::{Context, ContextParams, Model};
use tessera_runtime::generate::{generate, tokenize_chat, GenerateParams, NoClock};
use tessera_tokenizer::ChatMessage;

const MODEL: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or(MODEL.into());
    let question = args.next().unwrap_or("Hello!".into());
    let file = Arc::new(tessera_gguf::GgufFile::open(&path)?);
    let model = Arc::new(Model::load(file, &mut |_progress| {})?);
    let tokenizer = model.tokenizer();
    let template = model.chat_template()?.ok_or("no chat template")?;
    let prompt = tokenize_chat(tokenizer, &template, &[ChatMessage::new("user", question)])?;
    // The CPU backend's kernels run on a pool of threads (the caller is one of them).
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pool = SpinPool::new(threads, 1 << 16, |_, body| {
        let handle = std::thread::spawn(body);
        Ok(Some(Box::new(move || drop(handle.join()))))
    })?;
    let backend = Box::new(CpuBackend::new(Arc::new(pool)));
    let mut ctx = Context::new(model.clone(), ContextParams::default(), backend)?;
    let mut on_text = |text: &str| {
        print!("{text}");
        std::io::stdout().flush().is_ok() // false stops the generation
    };
    let params = GenerateParams::default(); // up to 128 tokens, llama.cpp's sampling defaults
    let stats = generate(&mut ctx, &prompt, &params, &NoClock, &mut on_text)?;
    println!("\n[{} tokens, stop: {:?}]", stats.n_generated, stats.stop);
    Ok(())
}
