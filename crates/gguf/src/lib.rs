//! GGUF v2/v3: reader (mmap, byte slice, incremental byte stream) and writer.

pub mod ggml_type;
pub mod value;

pub use ggml_type::GgmlType;
pub use value::{Value, ValueType};
