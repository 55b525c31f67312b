//! A loaded model: the GGUF file (weights stay in it, never copied), the architecture with its
//! checked weights, and the tokenizer.

use std::sync::Arc;

use tessera_gguf::{GgufFile, Header};

use crate::error::EngineError;
use crate::models::{self, Architecture, HParams};
use crate::weights::WeightStore;
use tessera_tokenizer::chat_template::{ChatTemplate, ChatTemplateError};
use tessera_tokenizer::Tokenizer;

pub struct Model {
    weights: WeightStore,
    arch: Box<dyn Architecture>,
    tokenizer: Tokenizer,
}

impl Model {
    /// What one file's header tells before its tensor data arrives (a download can stop
    /// there): the architecture is one Tessera runs and, for an unsplit file, every tensor it
    /// uses is present with its shape and a type the engine computes with, and the tokenizer
    /// loads. A shard of a split model is checked for its architecture only (the first) and
    /// fully when all have arrived ([`Model::load`]).
    pub fn check_header(header: &Header) -> Result<(), EngineError> {
        let count = |key: &str| header.get(key).and_then(|v| v.as_u64());
        if count(tessera_gguf::split::SPLIT_NO_KEY).unwrap_or(0) == 0 {
            let arch = header.architecture().ok_or(EngineError::NoArchitecture)?;
            if !models::is_supported(arch) {
                return Err(EngineError::UnknownArchitecture(arch.to_string()));
            }
        }
        if count(tessera_gguf::split::SPLIT_COUNT_KEY).unwrap_or(1) > 1 {
            return Ok(());
        }
        let file = GgufFile::from_headers(vec![header.clone()])
            .map_err(|e| EngineError::InvalidArgument(format!("GGUF header: {e}")))?;
        Model::load(Arc::new(file), &mut |_| {}).map(|_| ())
    }

    /// Reads the hyper-parameters and tokenizer and checks every tensor the architecture uses
    /// (present, right shape, a type the engine computes with). `progress` gets 0.0 ..= 1.0.
    pub fn load(file: Arc<GgufFile>, progress: &mut dyn FnMut(f32)) -> Result<Model, EngineError> {
        progress(0.0);
        let header = file.header();
        // Architecture first: "unknown architecture" says more than a tokenizer complaint.
        let arch_name = header
            .architecture()
            .ok_or(EngineError::NoArchitecture)?
            .to_string();
        if !models::is_supported(&arch_name) {
            return Err(EngineError::UnknownArchitecture(arch_name));
        }
        let mut weights = WeightStore::new(file.clone());
        let arch = models::load(file.header(), &mut weights)?;
        progress(0.5);
        let tokenizer = Tokenizer::from_gguf(file.header())
            .map_err(|e| EngineError::Tokenizer(e.to_string()))?;
        if tokenizer_vocab_mismatch(&tokenizer, arch.hparams()) {
            return Err(EngineError::Tokenizer(format!(
                "the tokenizer has more tokens than the embedding's {} rows",
                arch.hparams().n_vocab
            )));
        }
        progress(1.0);
        Ok(Model {
            weights,
            arch,
            tokenizer,
        })
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    pub fn arch(&self) -> &str {
        self.arch.name()
    }

    pub fn hparams(&self) -> &HParams {
        self.arch.hparams()
    }

    pub fn n_vocab(&self) -> usize {
        self.arch.hparams().n_vocab
    }

    pub fn n_ctx_train(&self) -> usize {
        self.arch.hparams().n_ctx_train
    }

    pub fn weights(&self) -> &WeightStore {
        &self.weights
    }

    /// The model's chat template: the GGUF's own, or the built-in one its architecture implies;
    /// `None` when it has neither. Built on each call (hosts keep the one they use).
    pub fn chat_template(&self) -> Result<Option<ChatTemplate>, ChatTemplateError> {
        ChatTemplate::from_gguf(self.weights.file().header(), &self.tokenizer)
    }

    pub(crate) fn architecture(&self) -> &dyn Architecture {
        &*self.arch
    }

    /// The graph of a micro-batch of `n_tokens` tokens with `n_outputs` outputs in a context
    /// of `n_ctx`, as a [`crate::Context`] builds it (for backends' tests that record graphs
    /// without running them).
    pub fn graph(
        &self,
        n_tokens: usize,
        n_outputs: usize,
        n_ctx: usize,
    ) -> Result<crate::graph::Graph, EngineError> {
        let mut b = crate::graph::GraphBuilder::new(&self.weights, n_tokens, n_outputs);
        b.n_ctx = n_ctx;
        let out = self.arch.build(&mut b)?;
        Ok(b.finish(out))
    }

    /// The KV cache layout of one sequence of `n_ctx` positions, as a context asks for it.
    pub fn kv_layout(&self, n_ctx: usize) -> crate::backend::KvLayout {
        self.arch.kv_layout(n_ctx)
    }

    /// One line: architecture, size and shape.
    pub fn describe(&self) -> String {
        let hp = self.hparams();
        let name = self
            .weights
            .file()
            .header()
            .get_str("general.name")
            .unwrap_or("unnamed");
        format!(
            "{name} ({}): {} layers, n_embd {}, {} heads ({} KV, dim {}), n_ff {}, vocab {}, \
             context {}, weights {:.1} MiB",
            hp.arch,
            hp.n_layer,
            hp.n_embd,
            hp.n_head,
            hp.n_head_kv,
            hp.head_dim_k,
            hp.n_ff,
            hp.n_vocab,
            hp.n_ctx_train,
            self.weights.total_bytes() as f64 / (1024.0 * 1024.0)
        )
    }
}

fn tokenizer_vocab_mismatch(t: &Tokenizer, hp: &HParams) -> bool {
    t.vocab_size() > hp.n_vocab
}
