//! A whole model in memory or mapped from disk: one file, or several split shards read as one.

use std::collections::HashMap;
use std::ops::Range;

use crate::split;
use crate::{parse_header, GgufError, Header};

/// The bytes of one shard.
enum Storage {
    Owned(Vec<u8>),
    #[cfg(not(target_arch = "wasm32"))]
    Mapped(memmap2::Mmap),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Owned(v) => v,
            #[cfg(not(target_arch = "wasm32"))]
            Storage::Mapped(m) => m,
        }
    }
}

/// Where one tensor's bytes are: which shard, and the absolute byte range inside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorLocation {
    pub shard: usize,
    pub range: Range<usize>,
}

/// A whole model: one file or several split shards read as one. The bytes are either mmap'd
/// (native only) or owned in memory, and every tensor's bytes were checked to lie inside its
/// shard; or, for a model whose tensor bytes went elsewhere as they streamed in (GPU buffers),
/// only the headers are held ([`GgufFile::from_headers`]).
pub struct GgufFile {
    header: Header,
    /// Empty for a header-only file.
    shards: Vec<Storage>,
    /// Indexed like `header.tensors`.
    locations: Vec<TensorLocation>,
    by_name: HashMap<String, usize>,
}

impl GgufFile {
    /// Maps the file at `path`. A name like `model-00001-of-00003.gguf` (any shard's name)
    /// opens every shard of the split model.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<GgufFile, GgufError> {
        let path = path.as_ref();
        let paths = match split::shard_paths(path) {
            Some(paths) => paths,
            None => vec![path.to_path_buf()],
        };
        let storages = paths
            .iter()
            .map(|p| map_file(p))
            .collect::<Result<Vec<_>, _>>()?;
        GgufFile::assemble(storages)
    }

    /// Reads a model held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<GgufFile, GgufError> {
        GgufFile::assemble(vec![Storage::Owned(bytes)])
    }

    /// Reads a split model from its shards' bytes, in shard order.
    pub fn from_shards(shards: Vec<Vec<u8>>) -> Result<GgufFile, GgufError> {
        GgufFile::assemble(shards.into_iter().map(Storage::Owned).collect())
    }

    /// A model without its tensor bytes: the parsed header of each shard, in shard order (a
    /// [`crate::StreamParser`]'s `HeaderComplete`s). Metadata and tensor descriptions are all
    /// there; [`GgufFile::tensor_data`] and [`GgufFile::tensor_location`] are `None` for every
    /// tensor. The stream that delivered the bytes checks that each tensor arrived whole.
    pub fn from_headers(headers: Vec<Header>) -> Result<GgufFile, GgufError> {
        GgufFile::from_parts(headers, Vec::new())
    }

    fn assemble(storages: Vec<Storage>) -> Result<GgufFile, GgufError> {
        let mut headers = Vec::with_capacity(storages.len());
        for (shard, storage) in storages.iter().enumerate() {
            let bytes = storage.bytes();
            let header =
                parse_header(bytes).map_err(|e| split::in_shard(e, shard, storages.len()))?;
            check_bounds(&header, bytes.len() as u64)
                .map_err(|e| split::in_shard(e, shard, storages.len()))?;
            headers.push(header);
        }
        GgufFile::from_parts(headers, storages)
    }

    /// `storages`: one per header, or none (header-only).
    fn from_parts(headers: Vec<Header>, storages: Vec<Storage>) -> Result<GgufFile, GgufError> {
        if headers.is_empty() {
            return Err(GgufError::Split {
                problem: "no shards were given".into(),
            });
        }
        let shard_of_tensor = split::check_shards(&headers)?;
        // Only a file that holds its bytes has locations: a header-only one (which may describe
        // more than a wasm32 usize can address, bound for a GPU) has nothing to locate.
        let locations = if storages.is_empty() {
            Vec::new()
        } else {
            let locations = headers
                .iter()
                .enumerate()
                .flat_map(|(shard, h)| {
                    h.tensors.iter().map(move |t| {
                        // In bounds of the shard (checked by `assemble`), so these fit in usize.
                        let start = (h.data_offset + t.offset) as usize;
                        TensorLocation {
                            shard,
                            range: start..start + t.size as usize,
                        }
                    })
                })
                .collect::<Vec<_>>();
            debug_assert_eq!(locations.len(), shard_of_tensor.len());
            locations
        };
        let header = split::merge(headers);
        let by_name = header
            .tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        Ok(GgufFile {
            header,
            shards: storages,
            locations,
            by_name,
        })
    }

    /// Merged header: the first shard's metadata and every shard's tensors, in shard order.
    /// For split models a tensor's `offset` is relative to its own shard's data section; use
    /// [`GgufFile::tensor_location`] or [`GgufFile::tensor_data`] to reach its bytes.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The bytes of the tensor named `name`; they start at a multiple of the file's alignment.
    pub fn tensor_data(&self, name: &str) -> Option<&[u8]> {
        self.tensor_data_at(*self.by_name.get(name)?)
    }

    /// The bytes of `header().tensors[index]` (`None` in a header-only file).
    pub fn tensor_data_at(&self, index: usize) -> Option<&[u8]> {
        let loc = self.locations.get(index)?;
        // A header-only file has no locations, so `loc.shard` is one of the shards read.
        Some(&self.shards[loc.shard].bytes()[loc.range.clone()])
    }

    /// Tells the OS this process no longer needs tensor `index`'s mapped pages (a backend
    /// that copied them into a layout of its own): they leave the resident set and are read
    /// again from the page cache or the file if touched later. Best effort: nothing happens
    /// for bytes held in memory or where the OS refuses.
    pub fn release_tensor_pages(&self, index: usize) {
        let Some(loc) = self.locations.get(index) else {
            return;
        };
        match &self.shards[loc.shard] {
            #[cfg(unix)]
            Storage::Mapped(map) => {
                // SAFETY: the map is a read-only mapping of a file nobody may modify while it is
                // mapped (the premise of mapping it at all); MADV_DONTNEED on it only drops page
                // table entries, so later reads fault the same bytes back in. The range lies
                // inside the shard (checked when the file was opened).
                let _ = unsafe {
                    map.unchecked_advise_range(
                        memmap2::UncheckedAdvice::DontNeed,
                        loc.range.start,
                        loc.range.len(),
                    )
                };
            }
            _ => {}
        }
    }

    /// Whether the tensors' bytes are here (false for [`GgufFile::from_headers`]).
    pub fn has_tensor_data(&self) -> bool {
        !self.shards.is_empty()
    }

    /// Index into `header().tensors` of the tensor named `name`.
    pub fn tensor_index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// Which shard holds `header().tensors[index]` and its absolute byte range there (`None`
    /// in a header-only file).
    pub fn tensor_location(&self, index: usize) -> Option<&TensorLocation> {
        self.locations.get(index)
    }

    /// Shards read (0 for a header-only file).
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// The whole bytes of one shard (header included).
    pub fn shard_bytes(&self, shard: usize) -> Option<&[u8]> {
        self.shards.get(shard).map(Storage::bytes)
    }
}

/// Every tensor's bytes must lie inside the file.
pub(crate) fn check_bounds(header: &Header, file_len: u64) -> Result<(), GgufError> {
    for t in &header.tensors {
        // parse_header checked that these sums do not overflow.
        let start = header.data_offset + t.offset;
        let end = start + t.size;
        if end > file_len {
            return Err(GgufError::TensorOutOfBounds {
                name: t.name.clone(),
                start,
                end,
                file_len,
            });
        }
    }
    Ok(())
}

#[cfg(not(target_arch = "wasm32"))]
fn map_file(path: &std::path::Path) -> Result<Storage, GgufError> {
    let io_err = |source| GgufError::Io {
        path: path.display().to_string(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io_err)?;
    // SAFETY: the map is read-only and lives as long as the GgufFile. Another process truncating
    // or rewriting the model file while it is mapped is outside what we can guard against (as
    // with every mmap-based loader); we never write through the map.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io_err)?;
    Ok(Storage::Mapped(map))
}
