//! GGUF v2/v3: reader (mmap, byte slice, incremental byte stream) and writer.
//!
//! - [`parse_header`] reads a header from a byte slice.
//! - [`GgufFile`] holds a whole model (mmap'd natively, or bytes in memory; split models as
//!   one) and hands out each tensor's bytes.
//! - [`StreamParser`] is fed chunks of a byte stream: it reports the header as soon as it is
//!   complete, then each tensor's bytes as they arrive, without holding the data section.
//! - [`GgufWriter`] writes files (and split shards).
//! - [`GgufError`] says what is wrong with a malformed file and where. Nothing here panics on
//!   bad input or allocates a size read from the file before checking it against the bytes
//!   that are really there.

mod cursor;
pub mod error;
pub mod file;
pub mod ggml_type;
pub mod header;
pub mod parse;
mod scan;
pub mod split;
pub mod stream;
pub mod value;
pub mod writer;

pub use error::GgufError;
pub use file::{GgufFile, TensorLocation};
pub use ggml_type::GgmlType;
pub use header::{Header, TensorInfo};
pub use parse::parse_header;
pub use stream::{StreamEvent, StreamParser};
pub use value::{Value, ValueType};
pub use writer::GgufWriter;
