//! The one error type of the crate. Every variant says what is wrong and where: a byte offset
//! into the file (or stream), a metadata key, or a tensor name.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum GgufError {
    #[error("not a GGUF file: magic bytes {found:02x?} at offset 0 (expected \"GGUF\")")]
    BadMagic { found: [u8; 4] },

    #[error("unsupported GGUF version {version} (supported: 2 and 3)")]
    UnsupportedVersion { version: u32 },

    #[error(
        "truncated: {what} at byte offset {offset} needs {needed} bytes, only {available} remain"
    )]
    Truncated {
        what: String,
        offset: u64,
        needed: u64,
        available: u64,
    },

    /// A count or length read from the file that cannot possibly fit in the bytes that remain.
    #[error("{what} at byte offset {offset} claims {count} items of at least {min_item_bytes} bytes each, but only {available} bytes remain")]
    CountTooLarge {
        what: String,
        offset: u64,
        count: u64,
        min_item_bytes: u64,
        available: u64,
    },

    #[error("unknown metadata value type id {id} for key `{key}` at byte offset {offset}")]
    UnknownValueType { key: String, id: u32, offset: u64 },

    #[error("invalid UTF-8 in {what} at byte offset {offset}")]
    InvalidUtf8 { what: String, offset: u64 },

    #[error("duplicate metadata key `{key}` at byte offset {offset}")]
    DuplicateKey { key: String, offset: u64 },

    #[error("arrays nested deeper than {max} levels in key `{key}` at byte offset {offset}")]
    NestingTooDeep { key: String, max: u32, offset: u64 },

    #[error("metadata key `{key}`: {problem}")]
    BadMetadata { key: String, problem: String },

    #[error("duplicate tensor name `{name}` at byte offset {offset}")]
    DuplicateTensor { name: String, offset: u64 },

    #[error("tensor `{name}` at byte offset {offset}: unknown ggml type id {id}")]
    UnknownTensorType { name: String, id: u32, offset: u64 },

    #[error("tensor `{name}` at byte offset {offset}: {n_dims} dimensions, at most {max} allowed")]
    TooManyDims {
        name: String,
        n_dims: u32,
        max: u32,
        offset: u64,
    },

    #[error(
        "tensor `{name}`: dimensions {dims:?} of type {ty} overflow 64 bits (elements or bytes)"
    )]
    DimsOverflow {
        name: String,
        dims: Vec<u64>,
        ty: crate::GgmlType,
    },

    #[error("tensor `{name}`: row length {row_len} is not a multiple of the {ty} block size {block_size}")]
    RowNotBlockMultiple {
        name: String,
        row_len: u64,
        ty: crate::GgmlType,
        block_size: u64,
    },

    #[error(
        "tensor `{name}`: data offset {offset} is not a multiple of the alignment {alignment}"
    )]
    MisalignedTensor {
        name: String,
        offset: u64,
        alignment: u64,
    },

    #[error("tensors `{first}` (bytes {first_start}..{first_end} of the data section) and `{second}` (from byte {second_start}) overlap")]
    OverlappingTensors {
        first: String,
        first_start: u64,
        first_end: u64,
        second: String,
        second_start: u64,
    },

    #[error("tensor `{name}`: data offset {offset} + size {size} overflows a 64-bit file offset")]
    OffsetOverflow {
        name: String,
        offset: u64,
        size: u64,
    },

    #[error(
        "tensor `{name}`: bytes {start}..{end} of the file lie past its end ({file_len} bytes)"
    )]
    TensorOutOfBounds {
        name: String,
        start: u64,
        end: u64,
        file_len: u64,
    },

    #[error("header is larger than the limit of {limit} bytes (byte offset {offset} reached)")]
    HeaderTooLarge { limit: u64, offset: u64 },

    #[error("the stream parser failed earlier; start a new one")]
    StreamFailed,

    #[error("split model: {problem}")]
    Split { problem: String },

    #[error("the writer was given {problem}")]
    InvalidWrite { problem: String },

    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl GgufError {
    /// Prefixes the "what" of location-carrying errors with the enclosing item, so an error
    /// deep inside a value says which key (or tensor) it belongs to.
    pub(crate) fn in_context(self, context: &dyn Fn() -> String) -> GgufError {
        match self {
            GgufError::Truncated {
                what,
                offset,
                needed,
                available,
            } => GgufError::Truncated {
                what: format!("{what} of {}", context()),
                offset,
                needed,
                available,
            },
            GgufError::CountTooLarge {
                what,
                offset,
                count,
                min_item_bytes,
                available,
            } => GgufError::CountTooLarge {
                what: format!("{what} of {}", context()),
                offset,
                count,
                min_item_bytes,
                available,
            },
            GgufError::InvalidUtf8 { what, offset } => GgufError::InvalidUtf8 {
                what: format!("{what} of {}", context()),
                offset,
            },
            other => other,
        }
    }
}
