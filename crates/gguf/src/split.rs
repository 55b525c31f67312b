//! Split models (`name-00001-of-00003.gguf`, as llama.cpp's gguf-split writes them): every
//! shard is a full GGUF file; the first holds the model's metadata, and all hold
//! `split.no` (0-based), `split.count` and (at least the first) `split.tensors.count`.

use std::collections::HashSet;

use crate::{GgufError, Header};

pub const SPLIT_NO_KEY: &str = "split.no";
pub const SPLIT_COUNT_KEY: &str = "split.count";
pub const SPLIT_TENSORS_COUNT_KEY: &str = "split.tensors.count";

/// The file name of shard `no` (0-based) of `count`, llama.cpp style.
pub fn shard_file_name(prefix: &str, no: usize, count: usize) -> String {
    format!("{prefix}-{:05}-of-{count:05}.gguf", no + 1)
}

/// For a name like `prefix-00002-of-00003.gguf`, the paths of all its shards in order.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn shard_paths(path: &std::path::Path) -> Option<Vec<std::path::PathBuf>> {
    let name = path.file_name()?.to_str()?;
    let (prefix, _no, count, width) = parse_shard_name(name)?;
    let dir = path.parent().unwrap_or(std::path::Path::new(""));
    Some(
        (1..=count)
            .map(|no| dir.join(format!("{prefix}-{no:0width$}-of-{count:0width$}.gguf")))
            .collect(),
    )
}

/// `prefix-NNNNN-of-MMMMM.gguf` → (prefix, NNNNN (1-based), MMMMM, digit width), or `None` for
/// a name that is not a shard name.
pub fn parse_shard_name(name: &str) -> Option<(&str, usize, usize, usize)> {
    let stem = name.strip_suffix(".gguf")?;
    let (rest, count) = stem.rsplit_once("-of-")?;
    let (prefix, no) = rest.rsplit_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.len() <= 9 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(no) || !digits(count) || prefix.is_empty() {
        return None;
    }
    let (no_n, count_n) = (no.parse().ok()?, count.parse().ok()?);
    if no_n == 0 || no_n > count_n {
        return None;
    }
    Some((prefix, no_n, count_n, no.len()))
}

/// Names the shard in an error, when there is more than one.
pub(crate) fn in_shard(e: GgufError, shard: usize, count: usize) -> GgufError {
    if count <= 1 {
        return e;
    }
    GgufError::Split {
        problem: format!("shard {} of {count}: {e}", shard + 1),
    }
}

fn split_error(problem: String) -> GgufError {
    GgufError::Split { problem }
}

/// Checks the shards belong together, in order, with unique tensor names. Returns, for each
/// tensor of the merged model, the shard holding it.
pub(crate) fn check_shards(headers: &[Header]) -> Result<Vec<usize>, GgufError> {
    let n = headers.len();
    let first = &headers[0];
    let declared = first.get(SPLIT_COUNT_KEY);
    if n == 1 {
        if let Some(v) = declared {
            match v.as_u64() {
                Some(0 | 1) => {}
                Some(c) => {
                    return Err(split_error(format!(
                        "this file is one shard of {c} (`{SPLIT_COUNT_KEY}`); open it by its \
                         `-0000N-of-{c:05}.gguf` name or pass every shard"
                    )))
                }
                None => {
                    return Err(GgufError::BadMetadata {
                        key: SPLIT_COUNT_KEY.into(),
                        problem: format!("{v:?} is not a count"),
                    })
                }
            }
        }
    } else {
        for (i, h) in headers.iter().enumerate() {
            let count = h.get_u64(SPLIT_COUNT_KEY);
            if count != Some(n as u64) {
                return Err(split_error(format!(
                    "shard {} of {n} says `{SPLIT_COUNT_KEY}` = {count:?}",
                    i + 1
                )));
            }
            let no = h.get_u64(SPLIT_NO_KEY);
            if no != Some(i as u64) {
                return Err(split_error(format!(
                    "shard {} of {n} says `{SPLIT_NO_KEY}` = {no:?} (expected {i}, 0-based)",
                    i + 1
                )));
            }
        }
    }
    let total: usize = headers.iter().map(|h| h.tensors.len()).sum();
    if let Some(v) = first.get(SPLIT_TENSORS_COUNT_KEY) {
        if v.as_u64() != Some(total as u64) {
            return Err(split_error(format!(
                "`{SPLIT_TENSORS_COUNT_KEY}` is {v:?} but the shards hold {total} tensors"
            )));
        }
    }
    let mut seen = HashSet::with_capacity(total);
    let mut shard_of = Vec::with_capacity(total);
    for (i, h) in headers.iter().enumerate() {
        for t in &h.tensors {
            if !seen.insert(t.name.as_str()) {
                return Err(split_error(format!(
                    "tensor `{}` appears twice (again in shard {} of {n})",
                    t.name,
                    i + 1
                )));
            }
            shard_of.push(i);
        }
    }
    Ok(shard_of)
}

/// The first header with every shard's tensors appended.
pub(crate) fn merge(mut headers: Vec<Header>) -> Header {
    let rest: Vec<Header> = headers.drain(1..).collect();
    let mut merged = headers.pop().expect("at least one shard");
    for h in rest {
        merged.tensors.extend(h.tensors);
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_names_parse() {
        assert_eq!(
            parse_shard_name("m-00002-of-00003.gguf"),
            Some(("m", 2, 3, 5))
        );
        assert_eq!(
            parse_shard_name("a-b-00001-of-00001.gguf"),
            Some(("a-b", 1, 1, 5))
        );
        assert_eq!(parse_shard_name("m-00004-of-00003.gguf"), None);
        assert_eq!(parse_shard_name("m-00000-of-00003.gguf"), None);
        assert_eq!(parse_shard_name("model.gguf"), None);
        assert_eq!(parse_shard_name("-00001-of-00002.gguf"), None);
        assert_eq!(shard_file_name("m", 0, 3), "m-00001-of-00003.gguf");
    }
}
