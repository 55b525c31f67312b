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

    /// MXFP4 rows (gpt-oss experts): 17-byte blocks, E8M0 scale byte then 16 nibble pairs.
    #[test]
    fn mxfp4_rows() {
        // Row 0: scale 2^(130-127) = 8, codes 0..16 in the low nibbles (elements 0..16) and
        // code 15 - j in the high nibbles; row 1: e = 0, the subnormal scale 2^-127.
        let mut table = vec![0u8; 2 * 17];
        table[0] = 130;
        for j in 0..16 {
            table[1 + j] = j as u8 | ((15 - j as u8) << 4);
        }
        table[17] = 0;
        table[18] = 0x07; // element 0: code 7 (6.0), element 16: code 0
        let fp4 = [
            0.0f32, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0,
            -6.0,
        ];
        let mut out = vec![f32::NAN; 64];
        get_rows(GgmlType::MXFP4, &table, 32, 2, &[0, 1], &mut out).unwrap();
        for j in 0..16 {
            assert_eq!(out[j], 8.0 * fp4[j], "element {j}");
            assert_eq!(out[16 + j], 8.0 * fp4[15 - j], "element {}", 16 + j);
        }
        assert_eq!(out[32], 6.0 * 2f32.powi(-127));
        assert!(out[33..].iter().all(|&v| v == 0.0));
    }
}
