//! `tessera inspect`: a GGUF file's metadata and tensor table.

use std::fmt::Write as _;
use std::io::Write as _;

use tessera_gguf::Value;

use crate::args::InspectArgs;
use crate::load::open_gguf;
use crate::model_path;

pub fn inspect(args: InspectArgs) -> anyhow::Result<()> {
    let path = model_path::resolve(args.model.model.as_deref())?;
    let file = open_gguf(&path)?;
    let h = file.header();
    let mut out = String::new();
    let total_bytes: u64 = h.tensors.iter().map(|t| t.size).sum();
    let total_params: u64 = h.tensors.iter().map(|t| t.n_elements()).sum();
    writeln!(out, "file: {}", path.display())?;
    writeln!(
        out,
        "GGUF v{}, {} metadata keys, {} tensors, {} parameters, {} of tensor data, alignment {}, data at byte {}",
        h.version,
        h.metadata.len(),
        h.tensors.len(),
        total_params,
        human_bytes(total_bytes),
        h.alignment,
        h.data_offset
    )?;
    if file.shard_count() > 1 {
        writeln!(out, "split into {} shards", file.shard_count())?;
    }
    writeln!(out, "\nmetadata:")?;
    let key_width = h.metadata.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (key, value) in &h.metadata {
        writeln!(
            out,
            "  {key:<key_width$}  {:<10} {}",
            type_name(value),
            format_value(value, args.max_array, args.max_string)
        )?;
    }
    writeln!(out, "\ntensors:")?;
    let name_width = h
        .tensors
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    writeln!(
        out,
        "  {:>5}  {:<name_width$}  {:<6}  {:<22}  {:>12}",
        "#", "name", "type", "shape", "bytes"
    )?;
    for (i, t) in h.tensors.iter().enumerate() {
        let shape = format!(
            "[{}]",
            t.dims
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
        writeln!(
            out,
            "  {i:>5}  {:<name_width$}  {:<6}  {shape:<22}  {:>12}",
            t.name,
            t.ty.name(),
            t.size
        )?;
    }
    std::io::stdout().lock().write_all(out.as_bytes())?;
    Ok(())
}

fn human_bytes(n: u64) -> String {
    if n >= 1 << 30 {
        format!("{:.2} GiB", n as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.2} MiB", n as f64 / (1u64 << 20) as f64)
    }
}

fn type_name(v: &Value) -> String {
    match v {
        Value::Array(ty, items) => format!("{ty:?}[{}]", items.len()).to_lowercase(),
        other => format!("{:?}", other.value_type()).to_lowercase(),
    }
}

/// A value on one line: strings quoted and escaped, long strings and arrays abbreviated.
pub fn format_value(v: &Value, max_array: usize, max_string: usize) -> String {
    match v {
        Value::String(s) => {
            let n = s.chars().count();
            if n > max_string {
                let head: String = s.chars().take(max_string).collect();
                format!("{head:?}… ({n} chars)")
            } else {
                format!("{s:?}")
            }
        }
        Value::Array(_, items) => {
            let shown: Vec<String> = items
                .iter()
                .take(max_array)
                .map(|x| format_value(x, max_array, max_string))
                .collect();
            if items.len() > max_array {
                format!("[{}, … {} more]", shown.join(", "), items.len() - max_array)
            } else {
                format!("[{}]", shown.join(", "))
            }
        }
        Value::U8(x) => x.to_string(),
        Value::I8(x) => x.to_string(),
        Value::U16(x) => x.to_string(),
        Value::I16(x) => x.to_string(),
        Value::U32(x) => x.to_string(),
        Value::I32(x) => x.to_string(),
        Value::U64(x) => x.to_string(),
        Value::I64(x) => x.to_string(),
        Value::F32(x) => x.to_string(),
        Value::F64(x) => x.to_string(),
        Value::Bool(x) => x.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_gguf::ValueType;

    #[test]
    fn long_arrays_and_strings_are_abbreviated() {
        let arr = Value::Array(ValueType::U32, (0..20).map(Value::U32).collect());
        assert_eq!(format_value(&arr, 3, 100), "[0, 1, 2, … 17 more]");
        let short = Value::Array(ValueType::String, vec![Value::String("a\"b".into())]);
        assert_eq!(format_value(&short, 3, 100), r#"["a\"b"]"#);
        assert_eq!(
            format_value(&Value::String("abcdef".into()), 8, 3),
            "\"abc\"… (6 chars)"
        );
        assert_eq!(type_name(&arr), "u32[20]");
    }
}
