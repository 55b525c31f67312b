//! ggml block quantization formats: quantize, dequantize and vec-dot kernels.
//!
//! Block layouts are byte-for-byte ggml's (see [`blocks`]). Dequantization and the reference
//! quantizers reproduce ggml's scalar C code (`ggml-quants.c`, the `*_ref` functions) bit for
//! bit, so tensors written by llama.cpp's tools and activations quantized here agree exactly.
//!
//! Two levels of API:
//! - [`dequantize_row`] / [`quantize_row`]: byte slices (as found in GGUF files) and a
//!   [`GgmlType`], with typed errors for wrong lengths and unsupported types;
//! - typed per-format functions (`dequantize_row_q4_k`, `quantize_row_q8_0`, ...) over block
//!   slices, for hot loops: no `Result`, lengths only `debug_assert`ed.

pub mod blocks;
pub mod dequantize;
pub mod isa;
pub mod quantize;
pub mod repack;
pub mod vec_dot;

pub use blocks::*;
pub use dequantize::*;
pub use quantize::*;
pub use tessera_gguf::GgmlType;
pub use vec_dot::{vec_dot, vec_dot_type, vec_dot_x4};

/// What went wrong converting between f32 and a ggml type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantError {
    /// A type Tessera cannot (de)quantize (yet): the IQ family, integer types, F64, TQ.
    #[error("unsupported type {0}")]
    Unsupported(tessera_gguf::GgmlType),
    /// A buffer whose length does not match the element count.
    #[error("{ty}: {what} has length {got}, expected {expected}")]
    BadLength {
        ty: tessera_gguf::GgmlType,
        expected: usize,
        got: usize,
        what: &'static str,
    },
    /// An element count that is not a whole number of blocks.
    #[error("{ty}: {n} elements is not a whole number of {block_size}-element blocks")]
    PartialBlock {
        ty: tessera_gguf::GgmlType,
        n: usize,
        block_size: usize,
    },
}

/// Checks that `n` elements of `ty` fill whole blocks and returns the row's byte length.
pub fn row_bytes(ty: tessera_gguf::GgmlType, n: usize) -> Result<usize, QuantError> {
    let block_size = ty.block_size() as usize;
    if !n.is_multiple_of(block_size) {
        return Err(QuantError::PartialBlock { ty, n, block_size });
    }
    // Saturating: an impossible size then fails the caller's length comparison.
    Ok((n / block_size).saturating_mul(ty.type_size() as usize))
}

/// Checks that a buffer of `got` bytes (`what`, for the error) holds exactly `n_rows` rows of
/// `n` elements of `ty`; returns one row's byte length.
pub(crate) fn checked_row_bytes(
    ty: tessera_gguf::GgmlType,
    n: usize,
    n_rows: usize,
    got: usize,
    what: &'static str,
) -> Result<usize, QuantError> {
    let row_bytes = row_bytes(ty, n)?;
    let expected = row_bytes.saturating_mul(n_rows);
    if got != expected {
        return Err(QuantError::BadLength {
            ty,
            expected,
            got,
            what,
        });
    }
    Ok(row_bytes)
}
