//! `Op::Slice`: elements `offset .. offset + len` of every row (a fused projection's parts).

/// `out[r] = x[r][offset .. offset + out_row]` for rows of `width` elements in `x`.
pub fn slice(x: &[f32], width: usize, offset: usize, out: &mut [f32]) {
    let len = out.len() / (x.len() / width).max(1);
    for (xr, yr) in x.chunks_exact(width).zip(out.chunks_exact_mut(len)) {
        yr.copy_from_slice(&xr[offset..offset + len]);
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn takes_the_same_part_of_every_row() {
        let x: Vec<f32> = (0..10).map(|i| i as f32).collect();
        let mut o = [0.0f32; 4];
        super::slice(&x, 5, 1, &mut o);
        assert_eq!(o, [1.0, 2.0, 6.0, 7.0]);
    }
}
