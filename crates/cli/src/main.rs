//! `tessera`: run GGUF models from the terminal (llama.cpp-style flags).
//!
//! Generated text goes to stdout; logs, progress bars and statistics to stderr. Errors are one
//! line on stderr and a non-zero exit code.

mod args;
mod bench;
mod chat;
mod clock;
mod devices;
mod grammar_args;
mod inspect;
mod load;
mod load_test;
mod model_path;
mod perplexity;
mod roofline;
mod run;
mod serve;
mod spec_cmds;
mod speculative_args;
mod tokenize;
mod vulkan;

use clap::Parser;

use args::{Cli, Command};

fn main() {
    let cli = Cli::parse_from(speculative_args::expand_short_aliases(std::env::args_os()));
    let result = match cli.command {
        Command::Run(a) => run::run(a),
        Command::Chat(a) => chat::chat(a),
        Command::Tokenize(a) => tokenize::tokenize(a),
        Command::Inspect(a) => inspect::inspect(a),
        Command::Devices(a) => devices::devices(a),
        Command::Bench(a) => bench::bench(a),
        Command::Perplexity(a) => perplexity::perplexity(a),
        Command::LookupCreate(a) => spec_cmds::lookup_create(a),
        Command::BenchSpec(a) => spec_cmds::bench_spec(a),
        Command::Serve(a) => serve::serve(a),
        Command::LoadTest(a) => load_test::load_test(a),
    };
    if let Err(e) = result {
        eprintln!("error: {}", one_line(&e));
        std::process::exit(1);
    }
}

/// The error and its causes joined by ": " on one line, skipping a cause whose text the line
/// already holds (library errors often repeat their source's message).
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string().replace('\n', " ");
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}
