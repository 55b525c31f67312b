//! llama.cpp's own tokenizer tests: its test vocabularies (`models/ggml-vocab-*.gguf`, fetched
//! into `models/vocab/` by `scripts/fetch-models.sh vocab`) with their cases (`.inp`, separated
//! by `\n__ggml_vocab_test__\n`) and llama.cpp's ids for each (`.out`, one line per case),
//! encoded without special tokens and without parsing special-token text.

use std::path::PathBuf;

use tessera_gguf::GgufFile;
use tessera_tokenizer::Tokenizer;

const SEPARATOR: &str = "\n__ggml_vocab_test__\n";

fn vocab_dir() -> PathBuf {
    tessera_testkit::models_dir().join("vocab")
}

/// The cases of `name` that Tessera encodes differently from llama.cpp, or why it cannot load
/// the vocabulary.
fn mismatches(name: &str) -> Result<Vec<String>, String> {
    let path = vocab_dir().join(format!("ggml-vocab-{name}.gguf"));
    let read = |ext: &str| {
        std::fs::read_to_string(path.with_extension(format!("gguf.{ext}")))
            .unwrap_or_else(|e| panic!("{name}.{ext}: {e} (run scripts/fetch-models.sh vocab)"))
    };
    let (inp, out) = (read("inp"), read("out"));
    let cases: Vec<&str> = inp
        .strip_suffix(SEPARATOR)
        .unwrap_or(&inp)
        .split(SEPARATOR)
        .collect();
    let expected: Vec<Vec<u32>> = out
        .lines()
        .map(|l| l.split_whitespace().map(|t| t.parse().unwrap()).collect())
        .collect();
    assert!(
        expected.len() >= cases.len(),
        "{name}: fewer results than cases"
    );
    let file = GgufFile::open(&path).map_err(|e| e.to_string())?;
    let tok = Tokenizer::from_gguf(file.header()).map_err(|e| e.to_string())?;
    Ok(cases
        .iter()
        .zip(&expected)
        .filter_map(|(text, want)| {
            let got = tok.encode(text, false, false);
            (&got != want).then(|| format!("{text:?}: {got:?}, llama.cpp {want:?}"))
        })
        .collect())
}

/// Vocabularies whose tokenizer model or pre-tokenizer Tessera does not have yet: loading them
/// must fail with a clear error (never tokenize differently). None at present.
const NOT_YET: &[&str] = &[];

/// Every vocabulary with cases encodes every case as llama.cpp does, but those in [`NOT_YET`],
/// which are refused.
#[test]
fn every_test_vocabulary_encodes_as_llama_cpp() {
    let mut names: Vec<String> = std::fs::read_dir(vocab_dir())
        .expect("models/vocab (run scripts/fetch-models.sh vocab)")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let stem = name
                .strip_prefix("ggml-vocab-")?
                .strip_suffix(".gguf.inp")?;
            Some(stem.to_owned())
        })
        .collect();
    names.sort();
    assert!(names.len() >= 15, "only {names:?}");
    let mut failures = Vec::new();
    for name in &names {
        let refused = NOT_YET.contains(&name.as_str());
        match mismatches(name) {
            Ok(m) if m.is_empty() && !refused => {}
            Ok(m) if m.is_empty() => failures.push(format!("{name}: passes: leave NOT_YET")),
            Ok(m) => failures.push(format!("{name}: {} cases differ, first {}", m.len(), m[0])),
            Err(e) if refused && e.contains("unsupported") => {}
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// BERT's WordPiece: `[CLS]` ... `[SEP]` around the text with special tokens, and
/// detokenizing as llama.cpp does (ids and texts from llama.cpp's `llama_tokenize` and
/// `llama_detokenize`).
#[test]
fn bert_adds_cls_and_sep_and_decodes_like_llama_cpp() {
    let path = vocab_dir().join("ggml-vocab-bert-bge.gguf");
    let file = GgufFile::open(&path).expect("bert-bge (run scripts/fetch-models.sh vocab)");
    let tok = Tokenizer::from_gguf(file.header()).unwrap();
    assert_eq!(
        (tok.bos(), tok.sep(), tok.eos(), tok.unk()),
        (Some(101), Some(102), None, Some(100))
    );
    assert!(tok.add_bos() && tok.add_sep() && !tok.add_eos());
    let ids = tok.encode("Hello World, Café!", true, false);
    assert_eq!(ids, [101, 7592, 2088, 1010, 7668, 999, 102]);
    assert_eq!(tok.decode(&ids, false), " hello world, cafe!");
    assert_eq!(tok.decode(&ids, true), "[CLS] hello world, cafe![SEP]");
    let ids = tok.encode("[CLS] x [SEP]", true, true);
    assert_eq!(ids, [101, 101, 1060, 102, 102]);
    assert_eq!(tok.decode(&ids, true), "[CLS][CLS] x[SEP][SEP]");
    assert_eq!(
        tok.encode("[CLS] x [SEP]", false, false),
        [1031, 18856, 2015, 1033, 1060, 1031, 19802, 1033]
    );
}
