//! A chat answer through the library API, streamed to stdout:
//! `cargo run --release -p tessera-runtime --example chat -- [MODEL.gguf] ["question"]`
use std::{io::Write as _, sync::Arc};
use tessera_backend_cpu::{available_threads, CpuBackend};
use tessera_core::{Context, ContextParams, Model};
use tessera_runtime::generate::{generate, tokenize_chat, GenerateParams, NoClock};
use tessera_tokenizer::ChatMessage;

const MODEL: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or(MODEL.into());
    let question = args.next().unwrap_or("Hello!".into());
    let chat = [ChatMessage::new("user", question)];
    let file = Arc::new(tessera_gguf::GgufFile::open(&path)?);
    let model = Arc::new(Model::load(file, &mut |_progress| {})?);
    let template = model.chat_template()?.ok_or("no chat template")?;
    let prompt = tokenize_chat(model.tokenizer(), &template, &chat)?;
    let backend = Box::new(CpuBackend::with_threads(available_threads())?);
    let mut ctx = Context::new(model, ContextParams::default(), backend)?;
    // Up to 128 tokens with llama.cpp's sampling defaults; `false` from the callback stops.
    let params = GenerateParams::default();
    let stats = generate(&mut ctx, &prompt, &params, &NoClock, &mut |text| {
        print!("{text}");
        std::io::stdout().flush().is_ok()
    })?;
    println!("\n[{} tokens, stop: {:?}]", stats.n_generated, stats.stop);
    Ok(())
}
