//! Constrained decoding: the answer follows a JSON schema, a regular expression or a Lark
//! grammar, through llguidance (the grammar engine llama.cpp also uses).
//!
//! Per model, a [`GrammarEnv`] holds the vocabulary as the grammar engine sees it (each token's
//! bytes, control tokens marked) and its parser factory, whose precomputed slices of the
//! vocabulary make masks cheap: building it costs a fraction of a second (a second for Gemma
//! 3's 262,144 tokens), so [`GrammarEnv::for_model`] builds it once per model. Per generation,
//! a [`Constraint`] compiles the grammar (about a millisecond for a typical schema), gives the
//! tokens allowed next as a bit mask for [`Sampler::sample_allowed`](tessera_core::sampling::
//! Sampler::sample_allowed) and takes each token chosen.
//!
//! An end-of-generation token is allowed exactly where the grammar may end; once nothing may
//! follow, the generation ends without asking the model for another token.

mod gbnf;
mod guide;

use std::sync::{Arc, Mutex, OnceLock, Weak};

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie};
use llguidance::{Matcher, ParserFactory};
use tessera_core::Model;
use tessera_tokenizer::Tokenizer;

pub use gbnf::{gbnf_to_lark, looks_like_gbnf, GbnfError};
pub use guide::Guide;

/// What the answer must follow.
#[derive(Clone, Debug, PartialEq)]
pub enum Grammar {
    /// A JSON schema (the draft 2020-12 subset llguidance implements; other keywords are
    /// refused by name). `{}` is any JSON value.
    JsonSchema(serde_json::Value),
    /// A regular expression the whole answer matches.
    Regex(String),
    /// A Lark grammar (llguidance's dialect: `start: ...`, `%json {...}` for an embedded schema).
    Lark(String),
    /// Free text until the answer writes `trigger`, then `then` for what follows it.
    Lazy { trigger: String, then: Box<Grammar> },
}

impl Grammar {
    fn top_level(&self) -> TopLevelGrammar {
        match self {
            Grammar::JsonSchema(schema) => TopLevelGrammar::from_json_schema(compact(schema)),
            Grammar::Regex(rx) => TopLevelGrammar::from_regex(rx),
            Grammar::Lark(lark) => TopLevelGrammar::from_lark(lark.clone()),
            Grammar::Lazy { then, .. } => then.top_level(),
        }
    }
}

/// `schema` with compact JSON asked for unless it says otherwise (its `x-guidance` options):
/// the grammar engine's default allows any whitespace between tokens, and small models then
/// loop on newlines where nothing bounds them.
pub fn compact(schema: &serde_json::Value) -> serde_json::Value {
    let mut schema = schema.clone();
    if let Some(map) = schema.as_object_mut() {
        map.entry("x-guidance")
            .or_insert_with(|| serde_json::json!({"whitespace_flexible": false}));
    }
    schema
}

/// A grammar that cannot be compiled or followed; the message says why (for a schema, the
/// keywords that are not supported).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ConstraintError(pub String);

impl ConstraintError {
    fn from_engine(e: impl std::fmt::Display) -> ConstraintError {
        ConstraintError(e.to_string())
    }
}

/// A model's vocabulary as the grammar engine sees it, and the parser factory over it.
pub struct GrammarEnv {
    factory: ParserFactory,
}

impl GrammarEnv {
    /// The environment of `tokenizer`'s vocabulary for a model with `n_vocab` logits (rows past
    /// the tokenizer's vocabulary are never allowed).
    pub fn new(tokenizer: &Tokenizer, n_vocab: usize) -> Result<GrammarEnv, ConstraintError> {
        let n = n_vocab.max(tokenizer.vocab_size());
        let words: Vec<Vec<u8>> = (0..n as u32).map(|id| token_bytes(tokenizer, id)).collect();
        let eog = tokenizer.eog_ids();
        let eos = tokenizer.eos().or(eog.first().copied()).unwrap_or(0);
        let mut trie = TokTrie::from(&TokRxInfo::new(n as u32, eos), &words);
        if !eog.is_empty() {
            trie = trie.with_eos_tokens(eog);
        }
        let env: TokEnv = Arc::new(ApproximateTokEnv::new(trie));
        let mut factory = ParserFactory::new_simple(&env).map_err(ConstraintError::from_engine)?;
        // Warnings go to the caller as errors, never to the host's stderr (the browser's).
        factory.quiet().set_stderr_log_level(0);
        // Client-facing errors: the reason, not the parser's state and the whole grammar.
        factory.limits_mut().verbose_errors = false;
        Ok(GrammarEnv { factory })
    }

    /// `model`'s environment, built on first use and kept while the model lives.
    pub fn for_model(model: &Arc<Model>) -> Result<Arc<GrammarEnv>, ConstraintError> {
        // Keyed by the model (a weak reference: the cache never keeps a model alive); the
        // environment depends on nothing else. Models are few, so a list does.
        static CACHE: OnceLock<Mutex<Vec<(Weak<Model>, Arc<GrammarEnv>)>>> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        let find = |entries: &mut Vec<(Weak<Model>, Arc<GrammarEnv>)>| {
            entries.retain(|(m, _)| m.strong_count() > 0);
            entries
                .iter()
                .find(|(m, _)| std::ptr::eq(m.as_ptr(), Arc::as_ptr(model)))
                .map(|(_, env)| env.clone())
        };
        if let Some(env) = find(&mut cache.lock().unwrap_or_else(|e| e.into_inner())) {
            return Ok(env);
        }
        // Built outside the lock (it takes a while); two first requests may both build it.
        let env = Arc::new(GrammarEnv::new(model.tokenizer(), model.n_vocab())?);
        let mut entries = cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(env) = find(&mut entries) {
            return Ok(env);
        }
        entries.push((Arc::downgrade(model), env.clone()));
        Ok(env)
    }
}

/// The bytes token `id` stands for, as the grammar engine takes them: a control or unknown
/// token is 0xFF and its text (never produced by text, only by grammars naming it); an id
/// outside the vocabulary is empty (never allowed).
fn token_bytes(tokenizer: &Tokenizer, id: u32) -> Vec<u8> {
    if id as usize >= tokenizer.vocab_size() {
        return Vec::new();
    }
    let piece = tokenizer.token_to_piece(id, false);
    if !piece.is_empty() {
        return piece;
    }
    let mut marked = vec![TokTrie::SPECIAL_TOKEN_MARKER];
    marked.extend(tokenizer.token_to_piece(id, true));
    marked
}

/// Whether `grammar` compiles over `model`'s vocabulary (what a host checks before it queues a
/// request, so that a bad grammar is the client's error, not a failed generation).
pub fn check(model: &Arc<Model>, grammar: &Grammar) -> Result<(), ConstraintError> {
    Constraint::new(&*GrammarEnv::for_model(model)?, grammar).map(drop)
}

/// One generation's grammar state.
pub struct Constraint {
    matcher: Matcher,
}

impl Constraint {
    /// Compiles `grammar` over `env`'s vocabulary.
    pub fn new(env: &GrammarEnv, grammar: &Grammar) -> Result<Constraint, ConstraintError> {
        let matcher = Matcher::new(env.factory.create_parser(grammar.top_level()));
        match matcher.get_error() {
            Some(e) => Err(ConstraintError(e)),
            None => Ok(Constraint { matcher }),
        }
    }

    /// The tokens allowed next: a bit per token id, least significant first (the mask
    /// [`Sampler::sample_allowed`](tessera_core::sampling::Sampler::sample_allowed) takes).
    pub fn allowed(&mut self) -> Result<Vec<u32>, ConstraintError> {
        let mask = self
            .matcher
            .compute_mask()
            .map_err(ConstraintError::from_engine)?;
        Ok(mask.as_slice().to_vec())
    }

    /// Takes the token chosen (one [`Constraint::allowed`] allowed).
    pub fn commit(&mut self, token: u32) -> Result<(), ConstraintError> {
        self.matcher
            .consume_token(token)
            .map_err(ConstraintError::from_engine)
    }

    /// Whether the grammar is complete and nothing may follow (the generation ends here).
    pub fn is_done(&self) -> bool {
        self.matcher.is_stopped()
    }
}
