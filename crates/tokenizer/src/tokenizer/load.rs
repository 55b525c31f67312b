//! Building a [`Tokenizer`] from GGUF metadata, with llama.cpp's defaults and fix-ups.

use super::bpe::BpeModel;
use super::pretokenize::{Class, Step};
use super::special::SpecialTokens;
use super::unicode::char_to_byte;
use super::vocab::{attr, Vocab};
use super::wpm::WpmModel;
use super::{Model, Tokenizer, TokenizerError};

const KEY_MODEL: &str = "tokenizer.ggml.model";
const KEY_PRE: &str = "tokenizer.ggml.pre";
const KEY_TOKENS: &str = "tokenizer.ggml.tokens";
const KEY_SCORES: &str = "tokenizer.ggml.scores";
const KEY_TYPES: &str = "tokenizer.ggml.token_type";
const KEY_MERGES: &str = "tokenizer.ggml.merges";

/// Texts llama.cpp treats as end-of-turn when no `eot_token_id` is given (first found wins).
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<end_of_utterance>",
];

/// Texts llama.cpp always treats as end-of-generation.
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
];

/// The BPE pre-tokenizer families: (names, steps, clean_spaces, ignore_merges_and_add_bos).
struct PreTokenizer {
    steps: Vec<Step>,
    clean_spaces: bool,
    /// Llama-3 style: whole-word tokens skip merging, and BOS is added by default.
    llama3_style: bool,
}

fn pre_tokenizer(name: &str) -> Result<PreTokenizer, TokenizerError> {
    let gpt2 = || vec![Step::Gpt2];
    let starcoder = || vec![Step::EachOf(Class::Number), Step::Gpt2];
    let (steps, clean_spaces, llama3_style) = match name {
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0"
        | "lfm2" => (vec![Step::Llama3], true, true),
        "dbrx" | "smaug-bpe" | "chatglm-bpe" | "glm4" => (vec![Step::Llama3], true, false),
        "qwen2" | "deepseek-r1-qwen" | "kormo" | "hunyuan" | "grok-2" => {
            (vec![Step::Qwen2], false, false)
        }
        "stablelm2" | "megrez" => (vec![Step::Qwen2], true, false),
        "qwen35" => (vec![Step::Qwen35], false, false),
        "gpt-4o" | "llama4" | "minimax-m2" => (vec![Step::Gpt4o], false, false),
        "smollm" | "command-r" => (starcoder(), false, false),
        "starcoder" | "refact" | "codeshell" | "exaone" | "minerva-7b" => {
            (starcoder(), true, false)
        }
        "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es" | "jina-v2-de"
        | "a.x-4.0" | "mellum" | "exaone4" | "mpt" | "olmo" | "jais" | "jina-v1-en"
        | "jina-v2-code" | "roberta-bpe" => (gpt2(), true, false),
        "trillion" | "granite-docling" => (gpt2(), false, false),
        "falcon" => (
            vec![
                Step::RunOf(Class::PunctOrMathAsciiBacktick),
                Step::Gpt2,
                Step::ThreeAsciiDigits,
            ],
            true,
            false,
        ),
        "deepseek-coder" => (
            vec![
                Step::EachOf(Class::LineBreak),
                Step::SpaceThenRunOf(Class::Letter),
                Step::SpaceThenRunOf(Class::Punctuation),
                Step::RunOf(Class::DeepseekCjk),
                Step::EachOf(Class::Number),
            ],
            false,
            false,
        ),
        "deepseek-llm" => (
            vec![
                Step::EachOf(Class::LineBreak),
                Step::AsciiSpaceThenRunOf(Class::DeepseekLetter),
                Step::AsciiSpaceThenRunOf(Class::DeepseekPunct),
                Step::TrailingAsciiSpace,
                Step::RunOf(Class::DeepseekCjk),
                Step::RunOf(Class::Number),
            ],
            false,
            false,
        ),
        // Pre-tokenizers llama.cpp knows whose patterns we have not implemented: refuse them
        // rather than tokenize differently.
        "deepseek-v3" | "poro-chat" | "viking" | "tekken" | "bloom" | "gpt3-finnish"
        | "chameleon" | "superbpe" | "bailingmoe" | "bailingmoe2" | "llada-moe" | "seed-coder"
        | "hunyuan-dense" | "kimi-k2" | "afmoe" => {
            return Err(TokenizerError::UnsupportedPreTokenizer(name.to_owned()))
        }
        // "default", a missing key and unknown names: llama.cpp's default pattern list.
        _ => (
            vec![
                Step::RunOf(Class::PunctOrMathAscii),
                Step::Gpt2,
                Step::RunOf(Class::Number),
                Step::ThreeAsciiDigits,
            ],
            true,
            false,
        ),
    };
    Ok(PreTokenizer {
        steps,
        clean_spaces,
        llama3_style,
    })
}

fn string_array<'h>(
    header: &'h tessera_gguf::Header,
    key: &'static str,
) -> Result<Option<Vec<&'h str>>, TokenizerError> {
    let Some(v) = header.get(key) else {
        return Ok(None);
    };
    let arr = v.as_array().ok_or(TokenizerError::WrongType {
        key,
        expected: "array of strings",
    })?;
    arr.iter()
        .map(|v| {
            v.as_str().ok_or(TokenizerError::WrongType {
                key,
                expected: "array of strings",
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn token_id(
    header: &tessera_gguf::Header,
    key: &'static str,
    n_vocab: usize,
    default: Option<u32>,
) -> Option<u32> {
    match header.get_u64(key) {
        // llama.cpp ignores (keeps the default for) an id outside the vocabulary.
        Some(id) if (id as usize) < n_vocab => Some(id as u32),
        _ => default,
    }
}

pub fn from_header(header: &tessera_gguf::Header) -> Result<Tokenizer, TokenizerError> {
    let model_name = header
        .get_str(KEY_MODEL)
        .ok_or(TokenizerError::MissingKey(KEY_MODEL))?;
    let texts = string_array(header, KEY_TOKENS)?.ok_or(TokenizerError::MissingKey(KEY_TOKENS))?;
    let scores = match header.get(KEY_SCORES) {
        None => None,
        Some(v) => {
            let arr = v.as_array().ok_or(TokenizerError::WrongType {
                key: KEY_SCORES,
                expected: "array of f32",
            })?;
            Some(
                arr.iter()
                    .map(|v| {
                        v.as_f32().ok_or(TokenizerError::WrongType {
                            key: KEY_SCORES,
                            expected: "array of f32",
                        })
                    })
                    .collect::<Result<Vec<f32>, _>>()?,
            )
        }
    };
    let types = match header.get(KEY_TYPES) {
        None => None,
        Some(v) => {
            let arr = v.as_array().ok_or(TokenizerError::WrongType {
                key: KEY_TYPES,
                expected: "array of i32",
            })?;
            Some(
                arr.iter()
                    .map(|v| {
                        v.as_i64().ok_or(TokenizerError::WrongType {
                            key: KEY_TYPES,
                            expected: "array of i32",
                        })
                    })
                    .collect::<Result<Vec<i64>, _>>()?,
            )
        }
    };
    let mut vocab = Vocab::new(texts.iter().map(|s| s.to_string()).collect(), scores, types)?;
    let n = vocab.len();

    // Defaults per model type, then the metadata's own settings (llama.cpp's order).
    let (
        model,
        mut bos,
        mut eos,
        mut unk,
        mut pad,
        mut add_bos,
        mut add_eos,
        mut add_space_prefix,
        clean_spaces,
    ) = match model_name {
        "gpt2" => {
            let merges =
                string_array(header, KEY_MERGES)?.ok_or(TokenizerError::MissingKey(KEY_MERGES))?;
            let pre = pre_tokenizer(header.get_str(KEY_PRE).unwrap_or("default"))?;
            let bpe = BpeModel::new(&vocab, &merges, pre.steps, pre.llama3_style, false);
            let no_bos = matches!(header.get_str(KEY_PRE), Some("chatglm-bpe" | "glm4"));
            let bos = if no_bos { None } else { Some(11) };
            (
                Model::Bpe(Box::new(bpe)),
                bos,
                Some(11),
                None,
                None,
                pre.llama3_style,
                false,
                false,
                pre.clean_spaces,
            )
        }
        // Gemma 4: BPE over UTF-8 characters with SentencePiece's `▁` spaces, split at
        // newlines only; BOS always added (as llama.cpp overrides it).
        "gemma4" => {
            let merges =
                string_array(header, KEY_MERGES)?.ok_or(TokenizerError::MissingKey(KEY_MERGES))?;
            let bpe = BpeModel::new(&vocab, &merges, vec![Step::NewlineRuns], false, true);
            (
                Model::Bpe(Box::new(bpe)),
                None,
                None,
                None,
                None,
                true,
                false,
                false,
                true,
            )
        }
        // BERT's WordPiece: [CLS] 101, [UNK] 100, [PAD] 0 by default; clean-up of spaces on
        // detokenize. Lowercasing and accent stripping are on unless the metadata says otherwise.
        "bert" => {
            let lowercase = header
                .get_bool("tokenizer.ggml.normalizer.lowercase")
                .unwrap_or(true);
            let strip_accents = header
                .get_bool("tokenizer.ggml.normalizer.strip_accents")
                .unwrap_or(lowercase);
            (
                Model::Wpm(WpmModel::new(&vocab, lowercase, strip_accents)),
                Some(101),
                None,
                Some(100),
                Some(0),
                true,
                false,
                false,
                true,
            )
        }
        "llama" => (
            Model::Spm,
            Some(1),
            Some(2),
            Some(0),
            None,
            true,
            false,
            true,
            false,
        ),
        other => return Err(TokenizerError::UnsupportedModel(other.to_owned())),
    };
    let in_range = |id: Option<u32>| id.filter(|&i| (i as usize) < n);
    if let Some(v) = header.get_bool("tokenizer.ggml.add_space_prefix") {
        add_space_prefix = v;
    }
    bos = token_id(header, "tokenizer.ggml.bos_token_id", n, in_range(bos));
    eos = token_id(header, "tokenizer.ggml.eos_token_id", n, in_range(eos));
    unk = token_id(header, "tokenizer.ggml.unknown_token_id", n, in_range(unk));
    pad = token_id(header, "tokenizer.ggml.padding_token_id", n, in_range(pad));
    let mut eot = token_id(header, "tokenizer.ggml.eot_token_id", n, None);
    let mut eom = token_id(header, "tokenizer.ggml.eom_token_id", n, None);
    if let Some(v) = header.get_bool("tokenizer.ggml.add_bos_token") {
        add_bos = v;
    }
    if let Some(v) = header.get_bool("tokenizer.ggml.add_eos_token") {
        add_eos = v;
    }
    // WordPiece: [SEP] 102 by default. llama.cpp's WordPiece encoding adds [CLS] (BOS) and
    // [SEP] with special tokens whatever the add_*_token flags say, and never EOS.
    let wpm = matches!(model, Model::Wpm(_));
    let sep = token_id(
        header,
        "tokenizer.ggml.seperator_token_id",
        n,
        in_range(wpm.then_some(102)),
    );
    let add_sep = wpm;
    if wpm {
        add_bos = true;
        add_eos = false;
    }

    // Find EOT/EOM by text when the metadata does not name them; such tokens become control
    // tokens if the file marked them otherwise.
    let mut found_by_text = Vec::new();
    if eot.is_none() {
        eot = vocab.ids_of_texts(EOT_TEXTS).first().copied();
        found_by_text.extend(eot);
    }
    if eom.is_none() {
        eom = vocab.id_of("<|eom_id|>");
        found_by_text.extend(eom);
    }
    for id in found_by_text {
        vocab.add_attr(id, attr::CONTROL);
    }
    // Control tokens named "unused..." are unused.
    for id in 0..n as u32 {
        if vocab.has_attr(id, attr::CONTROL) && vocab.text(id).is_some_and(|t| t.contains("unused"))
        {
            vocab.add_attr(id, attr::UNUSED);
        }
    }
    let mut eog = vocab.ids_of_texts(EOG_TEXTS);
    for &id in &eog {
        vocab.add_attr(id, attr::CONTROL);
    }
    for text in ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"] {
        if let Some(id) = vocab.id_of(text) {
            vocab.set_attr(id, attr::USER_DEFINED);
        }
    }
    eog.extend([eos, eot, eom].into_iter().flatten());
    eog.sort_unstable();
    eog.dedup();
    // gpt-oss / solar-open: "<|end|>" is not end-of-generation when "<|return|>"/"<|call|>" exist.
    let eog_has =
        |vocab: &Vocab, eog: &[u32], t: &str| vocab.id_of(t).is_some_and(|id| eog.contains(&id));
    if let Some(end) = vocab.id_of("<|end|>").filter(|id| eog.contains(id)) {
        let call = eog_has(&vocab, &eog, "<|call|>") || eog_has(&vocab, &eog, "<|calls|>");
        let harmony = eog_has(&vocab, &eog, "<|return|>") && call;
        let solar = call && eog_has(&vocab, &eog, "<|flush|>");
        if harmony || solar {
            eog.retain(|&x| x != end);
            vocab.set_attr(end, attr::USER_DEFINED);
        }
    }
    // Gemma 4: "</s>" is text, not end-of-generation, when "<|tool_response>" exists.
    if let Some(s) = vocab.id_of("</s>").filter(|id| eog.contains(id)) {
        if eog_has(&vocab, &eog, "<|tool_response>") {
            eog.retain(|&x| x != s);
            vocab.set_attr(s, attr::NORMAL);
        }
    }

    // Per-model attribute tweaks llama.cpp applies by name.
    let name = header
        .get_str("general.name")
        .unwrap_or("")
        .to_ascii_lowercase();
    let pre_name = header.get_str(KEY_PRE).unwrap_or("");
    let arch = header.architecture().unwrap_or("");
    let special_ids: Vec<u32> = (0..n as u32)
        .filter(|&id| vocab.has_attr(id, attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN))
        .collect();
    if ["jina-v2-de", "jina-v2-es", "jina-v2-code"]
        .iter()
        .any(|p| pre_name.contains(p))
        || ["nomic-bert-moe", "jina-bert-v3"]
            .iter()
            .any(|a| arch.contains(a))
    {
        if let Some(id) = vocab.id_of("<mask>") {
            vocab.add_attr(id, attr::LSTRIP);
        }
    } else if name.contains("phi-3") || name.contains("phi3") {
        for &id in &special_ids {
            vocab.add_attr(id, attr::RSTRIP);
        }
        if let Some(id) = vocab.id_of("</s>") {
            vocab.add_attr(id, attr::RSTRIP);
        }
        for t in ["<unk>", "<s>", "<|endoftext|>"] {
            if let Some(id) = vocab.id_of(t) {
                vocab.set_attr(id, vocab.attr(id) & !attr::RSTRIP);
            }
        }
    } else if name.contains("modern-bert") {
        if let Some(id) = vocab.id_of("[MASK]") {
            vocab.add_attr(id, attr::LSTRIP);
        }
    }

    if add_bos && bos.is_none() {
        add_bos = false;
    }
    if add_eos && eos.is_none() {
        add_eos = false;
    }
    let pieces = (0..n as u32)
        .map(|id| piece_of(&vocab, &model, id))
        .collect();
    let special = SpecialTokens::new(&vocab);
    Ok(Tokenizer {
        vocab,
        model,
        special,
        bos,
        eos,
        eot,
        eom,
        pad,
        unk,
        sep,
        eog,
        add_bos,
        add_eos,
        add_sep,
        add_space_prefix,
        clean_spaces,
        pieces,
    })
}

/// A token's bytes with special tokens rendered (llama.cpp's `token_to_piece(special=true)`).
fn piece_of(vocab: &Vocab, model: &Model, id: u32) -> Vec<u8> {
    let Some(text) = vocab.text(id) else {
        return Vec::new();
    };
    let a = vocab.attr(id);
    if a & (attr::CONTROL | attr::UNKNOWN | attr::USER_DEFINED) != 0 {
        return text.as_bytes().to_vec();
    }
    match model {
        Model::Spm | Model::Wpm(_) => {
            if a & attr::NORMAL != 0 {
                text.replace('\u{2581}', " ").into_bytes()
            } else if a & attr::BYTE != 0 {
                vocab.token_byte(id).map(|b| vec![b]).unwrap_or_default()
            } else {
                Vec::new()
            }
        }
        Model::Bpe(bpe) if bpe.raw => {
            if a & attr::NORMAL != 0 {
                text.replace('\u{2581}', " ").into_bytes()
            } else if a & attr::BYTE != 0 {
                vocab.token_byte(id).map(|b| vec![b]).unwrap_or_default()
            } else {
                Vec::new()
            }
        }
        Model::Bpe(_) => {
            if a & attr::NORMAL == 0 {
                return Vec::new();
            }
            let mut out = Vec::with_capacity(text.len());
            for c in text.chars() {
                match char_to_byte(c) {
                    Some(b) => out.push(b),
                    None => {
                        // llama.cpp's marker for a character outside GPT-2's byte map.
                        out.extend_from_slice(b"[UNK_BYTE_0x");
                        let mut buf = [0u8; 4];
                        for b in c.encode_utf8(&mut buf).bytes() {
                            out.extend_from_slice(format!("{b:02x}").as_bytes());
                        }
                        out.extend_from_slice(text.as_bytes());
                        out.push(b']');
                    }
                }
            }
            out
        }
    }
}
