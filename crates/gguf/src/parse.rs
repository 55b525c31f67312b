//! Parsing a complete GGUF header from a byte slice, with every check a hostile file needs.

use std::collections::HashSet;

use crate::cursor::Cursor;
use crate::{GgmlType, GgufError, Header, TensorInfo, Value, ValueType};

pub const MAGIC: [u8; 4] = *b"GGUF";
pub const DEFAULT_ALIGNMENT: u64 = 32;
pub const ALIGNMENT_KEY: &str = "general.alignment";
/// ggml's GGML_MAX_DIMS.
pub const MAX_DIMS: u32 = 4;
/// Nested arrays beyond this depth are refused (recursion is bounded, the stack is safe).
pub const MAX_ARRAY_DEPTH: u32 = 16;

/// Smallest encoding of one metadata key/value pair: empty key (8), type (4), 1-byte value.
const MIN_KV_BYTES: u64 = 8 + 4 + 1;
/// Smallest encoding of one tensor info: empty name (8), n_dims (4), type (4), offset (8).
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 4 + 8;

/// Bytes the smallest value of this type occupies in a file (strings and arrays: empty ones).
pub(crate) fn min_encoded_size(ty: ValueType) -> u64 {
    use ValueType::*;
    match ty {
        U8 | I8 | Bool => 1,
        U16 | I16 => 2,
        U32 | I32 | F32 => 4,
        U64 | I64 | F64 => 8,
        String => 8,
        Array => 4 + 8,
    }
}

/// Parses the header at the start of `bytes`. `bytes` may end right after the header: tensor
/// data is not looked at, so tensor bounds against the file length are checked by the callers
/// that have the whole file (`GgufFile`).
pub fn parse_header(bytes: &[u8]) -> Result<Header, GgufError> {
    let mut c = Cursor::new(bytes);
    let magic: [u8; 4] = {
        let b = c.take(4, "magic")?;
        [b[0], b[1], b[2], b[3]]
    };
    if magic != MAGIC {
        return Err(GgufError::BadMagic { found: magic });
    }
    let version = c.u32("version")?;
    if version != 2 && version != 3 {
        return Err(GgufError::UnsupportedVersion { version });
    }
    let tensor_count_at = c.pos();
    let tensor_count = c.u64("tensor count")?;
    let kv_count_at = c.pos();
    let kv_count = c.u64("metadata count")?;
    c.check_count(kv_count, MIN_KV_BYTES, "metadata count", kv_count_at)?;
    c.check_count(
        tensor_count,
        MIN_TENSOR_INFO_BYTES,
        "tensor count",
        tensor_count_at,
    )?;

    let metadata = read_metadata(&mut c, kv_count)?;
    let alignment = alignment_of(&metadata)?;

    // Re-checked now that the metadata is consumed: the tensor infos must fit in what is left.
    c.check_count(
        tensor_count,
        MIN_TENSOR_INFO_BYTES,
        "tensor count",
        tensor_count_at,
    )?;
    let tensors = read_tensor_infos(&mut c, tensor_count, alignment)?;

    let header_end = c.pos();
    let data_offset = align_up(header_end, alignment).ok_or_else(|| GgufError::BadMetadata {
        key: ALIGNMENT_KEY.into(),
        problem: format!("alignment {alignment} overflows the data offset"),
    })?;
    check_layout(&tensors, data_offset)?;

    Ok(Header {
        version,
        metadata,
        tensors,
        alignment,
        data_offset,
    })
}

fn read_metadata(c: &mut Cursor, kv_count: u64) -> Result<Vec<(String, Value)>, GgufError> {
    // `kv_count` was checked against the remaining bytes, so this capacity is bounded by them.
    let mut metadata = Vec::with_capacity(kv_count as usize);
    let mut seen = HashSet::new();
    for i in 0..kv_count {
        let key_at = c.pos();
        let key = c
            .string("key")
            .map_err(|e| e.in_context(&|| format!("metadata entry #{i}")))?;
        if !seen.insert(key.clone()) {
            return Err(GgufError::DuplicateKey {
                key,
                offset: key_at,
            });
        }
        let type_at = c.pos();
        let ctx = || format!("key `{key}`");
        let type_id = c.u32("value type").map_err(|e| e.in_context(&ctx))?;
        let ty = ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
            key: key.clone(),
            id: type_id,
            offset: type_at,
        })?;
        let value = read_value(c, ty, 0, &key).map_err(|e| e.in_context(&ctx))?;
        metadata.push((key, value));
    }
    Ok(metadata)
}

pub(crate) fn read_value(
    c: &mut Cursor,
    ty: ValueType,
    depth: u32,
    key: &str,
) -> Result<Value, GgufError> {
    let at = c.pos();
    Ok(match ty {
        ValueType::U8 => Value::U8(c.u8("u8 value")?),
        ValueType::I8 => Value::I8(c.u8("i8 value")? as i8),
        ValueType::U16 => Value::U16(c.u16("u16 value")?),
        ValueType::I16 => Value::I16(c.u16("i16 value")? as i16),
        ValueType::U32 => Value::U32(c.u32("u32 value")?),
        ValueType::I32 => Value::I32(c.u32("i32 value")? as i32),
        ValueType::F32 => Value::F32(f32::from_bits(c.u32("f32 value")?)),
        ValueType::U64 => Value::U64(c.u64("u64 value")?),
        ValueType::I64 => Value::I64(c.u64("i64 value")? as i64),
        ValueType::F64 => Value::F64(f64::from_bits(c.u64("f64 value")?)),
        ValueType::Bool => match c.u8("bool value")? {
            0 => Value::Bool(false),
            1 => Value::Bool(true),
            b => {
                return Err(GgufError::BadMetadata {
                    key: key.into(),
                    problem: format!("bool byte {b} at byte offset {at} (must be 0 or 1)"),
                })
            }
        },
        ValueType::String => Value::String(c.string("string value")?),
        ValueType::Array => {
            if depth >= MAX_ARRAY_DEPTH {
                return Err(GgufError::NestingTooDeep {
                    key: key.into(),
                    max: MAX_ARRAY_DEPTH,
                    offset: at,
                });
            }
            let elem_id = c.u32("array element type")?;
            let elem_ty = ValueType::from_id(elem_id).ok_or(GgufError::UnknownValueType {
                key: key.into(),
                id: elem_id,
                offset: at,
            })?;
            let count_at = c.pos();
            let count = c.u64("array length")?;
            c.check_count(count, min_encoded_size(elem_ty), "array length", count_at)?;
            // Checked just above: `count` elements fit in the remaining bytes.
            let mut items = Vec::with_capacity(count as usize);
            for _ in 0..count {
                items.push(read_value(c, elem_ty, depth + 1, key)?);
            }
            Value::Array(elem_ty, items)
        }
    })
}

fn alignment_of(metadata: &[(String, Value)]) -> Result<u64, GgufError> {
    let Some((_, value)) = metadata.iter().find(|(k, _)| k == ALIGNMENT_KEY) else {
        return Ok(DEFAULT_ALIGNMENT);
    };
    match value.as_u64() {
        Some(a) if a.is_power_of_two() => Ok(a),
        _ => Err(GgufError::BadMetadata {
            key: ALIGNMENT_KEY.into(),
            problem: format!("{value:?} is not a non-zero power of two"),
        }),
    }
}

fn read_tensor_infos(
    c: &mut Cursor,
    tensor_count: u64,
    alignment: u64,
) -> Result<Vec<TensorInfo>, GgufError> {
    // `tensor_count` was checked against the remaining bytes by the caller.
    let mut tensors = Vec::with_capacity(tensor_count as usize);
    let mut seen = HashSet::new();
    for i in 0..tensor_count {
        let info_at = c.pos();
        let name = c
            .string("name")
            .map_err(|e| e.in_context(&|| format!("tensor info #{i}")))?;
        if !seen.insert(name.clone()) {
            return Err(GgufError::DuplicateTensor {
                name,
                offset: info_at,
            });
        }
        let ctx = || format!("tensor `{name}`");
        let dims_at = c.pos();
        let n_dims = c.u32("dimension count").map_err(|e| e.in_context(&ctx))?;
        if n_dims > MAX_DIMS {
            return Err(GgufError::TooManyDims {
                name,
                n_dims,
                max: MAX_DIMS,
                offset: dims_at,
            });
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            dims.push(c.u64("dimension").map_err(|e| e.in_context(&ctx))?);
        }
        let type_at = c.pos();
        let type_id = c.u32("tensor type").map_err(|e| e.in_context(&ctx))?;
        let ty = GgmlType::from_id(type_id).ok_or_else(|| GgufError::UnknownTensorType {
            name: name.clone(),
            id: type_id,
            offset: type_at,
        })?;
        let offset = c.u64("data offset").map_err(|e| e.in_context(&ctx))?;
        let size = tensor_size(&name, &dims, ty)?;
        if offset % alignment != 0 {
            return Err(GgufError::MisalignedTensor {
                name,
                offset,
                alignment,
            });
        }
        tensors.push(TensorInfo {
            name,
            dims,
            ty,
            offset,
            size,
        });
    }
    Ok(tensors)
}

/// Bytes of a tensor of `ty` with these dims, refusing overflow and partial blocks.
pub(crate) fn tensor_size(name: &str, dims: &[u64], ty: GgmlType) -> Result<u64, GgufError> {
    let overflow = || GgufError::DimsOverflow {
        name: name.into(),
        dims: dims.to_vec(),
        ty,
    };
    // The element count must fit too (llama.cpp holds it in an i64).
    let n_elements = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= i64::MAX as u64)
        .ok_or_else(overflow)?;
    let row_len = dims.first().copied().unwrap_or(1);
    if row_len % ty.block_size() != 0 {
        return Err(GgufError::RowNotBlockMultiple {
            name: name.into(),
            row_len,
            ty,
            block_size: ty.block_size(),
        });
    }
    let row_bytes = ty.row_bytes(row_len).ok_or_else(overflow)?;
    if n_elements == 0 {
        return Ok(0);
    }
    let rows = n_elements / row_len;
    rows.checked_mul(row_bytes).ok_or_else(overflow)
}

pub(crate) fn align_up(x: u64, alignment: u64) -> Option<u64> {
    Some(x.checked_add(alignment - 1)? & !(alignment - 1))
}

/// Tensors must not overlap and must end within a 64-bit file offset.
fn check_layout(tensors: &[TensorInfo], data_offset: u64) -> Result<(), GgufError> {
    for t in tensors {
        let fits = data_offset
            .checked_add(t.offset)
            .and_then(|s| s.checked_add(t.size));
        if fits.is_none() {
            return Err(GgufError::OffsetOverflow {
                name: t.name.clone(),
                offset: t.offset,
                size: t.size,
            });
        }
    }
    let order = data_order(tensors);
    for pair in order.windows(2) {
        let (a, b) = (&tensors[pair[0]], &tensors[pair[1]]);
        if a.offset + a.size > b.offset {
            return Err(GgufError::OverlappingTensors {
                first: a.name.clone(),
                first_start: a.offset,
                first_end: a.offset + a.size,
                second: b.name.clone(),
                second_start: b.offset,
            });
        }
    }
    Ok(())
}

/// Tensor indices in the order their bytes appear in the data section (empty tensors first at
/// a shared offset, so they never count as overlapping).
pub(crate) fn data_order(tensors: &[TensorInfo]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_by_key(|&i| (tensors[i].offset, tensors[i].size, i));
    order
}
