//! Helpers shared by the gguf integration tests: a small synthetic model, and a raw byte
//! builder for hand-made (hostile) headers.
#![allow(dead_code)]

use tessera_gguf::{GgmlType, GgufWriter, Value, ValueType};

/// Deterministic filler bytes (xorshift), so tensor contents differ between tensors.
pub fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A small model with every metadata value type (nested arrays too) and tensors of several
/// types, including a zero-sized one and one in a type the engine cannot compute with.
pub fn synthetic_writer() -> GgufWriter {
    let mut w = GgufWriter::new();
    w.add_str("general.architecture", "llama").unwrap();
    w.add_str("general.name", "tiny ünïcödé model").unwrap();
    w.add("t.u8", Value::U8(200)).unwrap();
    w.add("t.i8", Value::I8(-5)).unwrap();
    w.add("t.u16", Value::U16(65000)).unwrap();
    w.add("t.i16", Value::I16(-30000)).unwrap();
    w.add_u32("llama.block_count", 2).unwrap();
    w.add("t.i32", Value::I32(-2_000_000_000)).unwrap();
    w.add_f32("llama.rope.freq_base", 10000.5).unwrap();
    w.add_bool("t.bool", true).unwrap();
    w.add("t.u64", Value::U64(u64::MAX - 1)).unwrap();
    w.add("t.i64", Value::I64(i64::MIN)).unwrap();
    w.add("t.f64", Value::F64(-1.25e300)).unwrap();
    w.add_str_array("tokenizer.ggml.tokens", ["<s>", "</s>", "a", "", "ü"])
        .unwrap();
    w.add(
        "t.nested",
        Value::Array(
            ValueType::Array,
            vec![
                Value::Array(ValueType::I32, vec![Value::I32(1), Value::I32(-2)]),
                Value::Array(ValueType::String, vec![Value::String("x".into())]),
                Value::Array(ValueType::U8, vec![]),
            ],
        ),
    )
    .unwrap();
    w.add("t.empty", Value::Array(ValueType::F32, vec![]))
        .unwrap();
    w.add_tensor(
        "token_embd.weight",
        &[64, 5],
        GgmlType::Q8_0,
        bytes(1, 2 * 34 * 5),
    )
    .unwrap();
    w.add_tensor(
        "blk.0.attn_norm.weight",
        &[64],
        GgmlType::F32,
        bytes(2, 256),
    )
    .unwrap();
    w.add_tensor(
        "blk.0.ffn.weight",
        &[256, 3],
        GgmlType::Q4_K,
        bytes(3, 144 * 3),
    )
    .unwrap();
    w.add_tensor("blk.1.odd", &[3, 1, 1, 7], GgmlType::F16, bytes(4, 42))
        .unwrap();
    w.add_tensor("empty", &[0, 4], GgmlType::F32, vec![])
        .unwrap();
    w.add_tensor("iq", &[256], GgmlType::IQ2_XS, bytes(6, 74))
        .unwrap();
    w
}

/// Little-endian GGUF byte builder for headers the writer would refuse to produce.
#[derive(Default, Clone)]
pub struct Raw(pub Vec<u8>);

impl Raw {
    pub fn header(version: u32, tensors: u64, kvs: u64) -> Raw {
        Raw::default()
            .bytes(b"GGUF")
            .u32(version)
            .u64(tensors)
            .u64(kvs)
    }
    pub fn bytes(mut self, b: &[u8]) -> Raw {
        self.0.extend_from_slice(b);
        self
    }
    pub fn u8(self, v: u8) -> Raw {
        self.bytes(&[v])
    }
    pub fn u32(self, v: u32) -> Raw {
        self.bytes(&v.to_le_bytes())
    }
    pub fn u64(self, v: u64) -> Raw {
        self.bytes(&v.to_le_bytes())
    }
    pub fn str(self, s: &str) -> Raw {
        self.u64(s.len() as u64).bytes(s.as_bytes())
    }
    /// A key with a u32 value.
    pub fn kv_u32(self, key: &str, v: u32) -> Raw {
        self.str(key).u32(4).u32(v)
    }
    /// A tensor info.
    pub fn tensor(self, name: &str, dims: &[u64], ty: u32, offset: u64) -> Raw {
        let mut r = self.str(name).u32(dims.len() as u32);
        for &d in dims {
            r = r.u64(d);
        }
        r.u32(ty).u64(offset)
    }
    /// Zero padding up to a multiple of `align`, then `n` data bytes.
    pub fn data(mut self, align: usize, n: usize) -> Raw {
        let pad = self.0.len().div_ceil(align) * align;
        self.0.resize(pad + n, 0xAB);
        self
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
}
