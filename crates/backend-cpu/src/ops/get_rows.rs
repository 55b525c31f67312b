//! Row lookup (embeddings): dequantizes the selected rows of a weight matrix to f32.

use tessera_gguf::GgmlType;

use tessera_core::error::EngineError;

/// `out[i] = dequantize(table row ids[i])`; rows of `k` elements; `n_rows` rows in `table`.
pub fn get_rows(
    ty: GgmlType,
    table: &[u8],
    k: usize,
    n_rows: usize,
    ids: &[u32],
    out: &mut [f32],
) -> Result<(), EngineError> {
    let row_bytes = table.len() / n_rows.max(1);
    for (&id, dst) in ids.iter().zip(out.chunks_exact_mut(k)) {
        let id = id as usize;
        if id >= n_rows {
            return Err(EngineError::BadToken {
                id: id as u32,
                n_vocab: n_rows,
            });
        }
        tessera_quant::dequantize_row(ty, &table[id * row_bytes..(id + 1) * row_bytes], dst)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_and_dequantizes_rows_and_rejects_bad_ids() {
        let k = 32;
        let rows: Vec<f32> = (0..3 * k).map(|i| i as f32 * 0.5).collect();
        let table: Vec<u8> = bytemuck::cast_slice(&rows).to_vec();
        let mut out = vec![0.0; 2 * k];
        get_rows(GgmlType::F32, &table, k, 3, &[2, 0], &mut out).unwrap();
        assert_eq!(&out[..k], &rows[2 * k..]);
        assert_eq!(&out[k..], &rows[..k]);
        assert!(get_rows(GgmlType::F32, &table, k, 3, &[3], &mut out[..k]).is_err());
    }
}
