//! `tessera tokenize`: token ids of a text, like llama-tokenize.

use std::io::Write as _;

use anyhow::{bail, Context as _};
use tessera_tokenizer::Tokenizer;

use crate::args::TokenizeArgs;
use crate::load::open_gguf;
use crate::model_path;

pub fn tokenize(args: TokenizeArgs) -> anyhow::Result<()> {
    let text = match (&args.prompt, &args.file) {
        (Some(p), _) => p.clone(),
        (None, Some(f)) => {
            std::fs::read_to_string(f).with_context(|| format!("cannot read {}", f.display()))?
        }
        (None, None) => bail!("no text: give -p TEXT or -f FILE"),
    };
    let path = model_path::resolve(args.model.model.as_deref())?;
    let file = open_gguf(&path)?;
    let tokenizer = Tokenizer::from_gguf(file.header())
        .with_context(|| format!("cannot build the tokenizer of {}", path.display()))?;
    let ids = tokenizer.encode(&text, !args.no_bos, !args.no_parse_special);
    let mut out = String::new();
    if args.ids {
        out.push_str(&format_ids(&ids));
        out.push('\n');
    } else {
        for &id in &ids {
            let piece = String::from_utf8_lossy(&tokenizer.token_to_piece(id, true)).into_owned();
            out.push_str(&format!("{id:>6} -> {piece:?}\n"));
        }
    }
    std::io::stdout().lock().write_all(out.as_bytes())?;
    Ok(())
}

/// `[1, 2, 3]`: a JSON array, spaced like llama-tokenize --ids.
pub fn format_ids(ids: &[u32]) -> String {
    let parts: Vec<String> = ids.iter().map(u32::to_string).collect();
    format!("[{}]", parts.join(", "))
}
