//! Q4_1 on its repacked layout ([`super::layout::Q4_1x8`]) with ggml's own arithmetic, bit for
//! bit: llama.cpp has no repacked Q4_1, so its Q4_1 models run ggml's x86 vec_dot, and these
//! kernels give that function's bits (`crate::vec_dot::ggml_order::vec_dot_q4_1_q8_1`, the
//! reference) to every row: SmolLM2's greedy fixtures stay exact.
//!
//! ggml keeps 8 float lanes per dot product: lane l sums, block by block with one fused
//! multiply-add, `d_w·d_a` times the exact integer sum of elements 4l..4l+4; the min terms go
//! to a scalar `summs` by fused multiply-adds; the result is `hsum_float_8(lanes) + summs`.
//! On the layout, one 32-byte load holds one 8-byte chunk of 4 rows: its low nibbles against 8
//! activation bytes repeated 4 times give two of ggml's lanes for each of the 4 rows (chunk c:
//! lanes 2c and 2c+1), its high nibbles two more (lanes 4+2c, 5+2c). So each of the 8 rows
//! keeps its 8 lanes in 4 registers, two lanes per row in each: a block of 8 rows costs 4
//! loads and 8 integer dot products, and one conversion of their 8 scales and 8 mins, where
//! the file layout unpacks and converts row by row. Each lane sees the same operations in the
//! same order as in ggml; only its place in the registers differs.
//!
//! x86 only (`super::x86` expands [`q4_1_kernels`] with each build's `dot`); elsewhere Q4_1
//! keeps its file layout and ggml's kernels. A SIMD128 build of the same kernel (2 rows per
//! vector, 16 accumulator vectors) ran slower than the file-layout kernel in the plain and the
//! relaxed build (`vec_dot_wasm_bench`, Node): wasm engines have 16 vector registers, and
//! ggml's fused steps need emulation without relaxed SIMD. Four rows at a time (8
//! accumulators) was still slower in Chromium's relaxed build: with 128-bit vectors it does no
//! fewer operations per row than the file-layout kernel.

macro_rules! q4_1_kernels {
    ($(#[$attr:meta])*) => {
        /// One activation row (`a`: `g.len()` blocks) against one group of 8 rows.
        #[inline]
        $(#[$attr])*
        unsafe fn q4_1_group(g: &[Q4_1x8], a: &[BlockQ8_1]) -> [f32; ROWS] {
            // acc[h][s], rows 4h..4h+4, two lanes per row: ggml's lanes 2s, 2s+1.
            let mut acc = [[_mm256_setzero_ps(); 4]; 2];
            // One lane per row.
            let mut summs = _mm256_setzero_ps();
            let pairs = [
                _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3),
                _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7),
            ];
            for (gb, act) in g.iter().zip(a) {
                prefetch_ahead(gb);
                // The activation's d and s, converted together (as ggml converts each).
                let ab = bytemuck::bytes_of(act);
                let ds = u32::from_le_bytes([ab[0], ab[1], ab[2], ab[3]]);
                let ds = _mm_cvtph_ps(_mm_cvtsi32_si128(ds as i32));
                let (d_a, s_a) = (_mm256_broadcastss_ps(ds), _mm256_broadcastss_ps(_mm_movehdup_ps(ds)));
                let dd = _mm256_mul_ps(f16x8::<1>(gb.d.as_ptr()), d_a);
                summs = _mm256_fmadd_ps(f16x8::<1>(gb.m.as_ptr()), s_a, summs);
                let qa = act.qs.as_ptr();
                let bytes = [bcast8(qa), bcast8(qa.add(8)), bcast8(qa.add(16)), bcast8(qa.add(24))];
                for h in 0..2 {
                    let dd = _mm256_permutevar8x32_ps(dd, pairs[h]);
                    for c in 0..2 {
                        let w = load(gb.qs.as_ptr().add(32 * (2 * c + h)));
                        let lo = dot(_mm256_setzero_si256(), nibbles(w, 0), bytes[c]);
                        let hi = dot(_mm256_setzero_si256(), nibbles(w, 1), bytes[2 + c]);
                        acc[h][c] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(lo), acc[h][c]);
                        acc[h][2 + c] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(hi), acc[h][2 + c]);
                    }
                }
            }
            let mut lanes = [[[0.0f32; 8]; 4]; 2];
            for h in 0..2 {
                for s in 0..4 {
                    _mm256_storeu_ps(lanes[h][s].as_mut_ptr(), acc[h][s]);
                }
            }
            let mut m = [0.0f32; ROWS];
            _mm256_storeu_ps(m.as_mut_ptr(), summs);
            core::array::from_fn(|r| {
                let (h, j) = (r / 4, 2 * (r % 4));
                let l = &lanes[h];
                // ggml's result: `hsum_float_8` of the row's lanes (in ggml's order), + summs.
                let row = [l[0][j], l[0][j + 1], l[1][j], l[1][j + 1], l[2][j], l[2][j + 1], l[3][j], l[3][j + 1]];
                crate::vec_dot::ggml_order::hsum_float_8(&row) + m[r]
            })
        }

        /// Q4_1 groups (`nb` group blocks each) × `n_acts` Q8_1 rows of `nb` blocks:
        /// `out[t * 8 * n_groups + 8 * group + r]`, each ggml's vec_dot of row and activation.
        ///
        /// # Safety
        /// The CPU must have this module's features; `out` must hold `n_acts * 8 * n_groups`
        /// floats and `acts` `n_acts * nb` blocks.
        $(#[$attr])*
        pub unsafe fn gemm_q4_1(nb: usize, groups: &[u8], acts: &[u8], n_acts: usize, out: &mut [f32]) {
            let g: &[Q4_1x8] = bytemuck::cast_slice(groups);
            let a: &[BlockQ8_1] = bytemuck::cast_slice(acts);
            let n_groups = g.len() / nb;
            let width = n_groups * ROWS;
            for gi in 0..n_groups {
                let group = &g[gi * nb..(gi + 1) * nb];
                // Activations one at a time: the group's bytes stay in L1 between them.
                for t in 0..n_acts {
                    let res = q4_1_group(group, &a[t * nb..(t + 1) * nb]);
                    out[t * width + gi * ROWS..][..ROWS].copy_from_slice(&res);
                }
            }
        }
    };
}

pub(crate) use q4_1_kernels;
