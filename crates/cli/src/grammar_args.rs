//! Structured output on the command line, with llama.cpp's flags: `--grammar`, `--grammar-file`,
//! `-j/--json-schema`, `--json-schema-file`. They become the request model's [`Grammar`], so the
//! CLI accepts and refuses what the server and the browser do.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use tessera_runtime::constraint::Grammar;
use tessera_runtime::request::structured::{self, Schema};

#[derive(Args, Debug, Default)]
pub struct GrammarArgs {
    /// The answer follows this grammar (Lark, or llama.cpp's GBNF).
    #[arg(long = "grammar", conflicts_with_all = ["grammar_file", "json_schema", "json_schema_file"])]
    pub grammar: Option<String>,
    /// The answer follows the grammar in this file (Lark, or llama.cpp's GBNF).
    #[arg(long = "grammar-file", conflicts_with_all = ["json_schema", "json_schema_file"])]
    pub grammar_file: Option<PathBuf>,
    /// The answer is JSON following this JSON schema (`{}`: any JSON object).
    #[arg(short = 'j', long = "json-schema", conflicts_with = "json_schema_file")]
    pub json_schema: Option<String>,
    /// The answer is JSON following the JSON schema in this file.
    #[arg(long = "json-schema-file", alias = "jf")]
    pub json_schema_file: Option<PathBuf>,
}

impl GrammarArgs {
    /// The grammar asked for, checked as a request's (`grammar` / `json_schema`) is.
    pub fn grammar(&self) -> anyhow::Result<Option<Grammar>> {
        let read = |path: &PathBuf| {
            std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
        };
        let grammar = match (&self.grammar, &self.grammar_file) {
            (Some(text), _) => Some(text.clone()),
            (None, Some(path)) => Some(read(path)?),
            (None, None) => None,
        };
        let schema_text = match (&self.json_schema, &self.json_schema_file) {
            (Some(text), _) => Some(text.clone()),
            (None, Some(path)) => Some(read(path)?),
            (None, None) => None,
        };
        let schema = match schema_text {
            Some(text) => Some(
                serde_json::from_str::<Schema>(&text).context("--json-schema is not valid JSON")?,
            ),
            None => None,
        };
        Ok(structured::grammar(
            None,
            schema.as_ref(),
            grammar.as_deref(),
        )?)
    }
}
