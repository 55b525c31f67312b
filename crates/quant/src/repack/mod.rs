//! Repacked weights: rows interleaved in groups of 8 at load time, so one kernel pass turns a
//! block of activations into 8 outputs (llama.cpp's "8x8" CPU layouts; [`layout`]).
//!
//! The repacked kernels are a numerics family of their own, defined by [`reference::dot`]:
//! exact integer sums per block, one unfused float step per block. They are not ggml's
//! vec_dot bits (whose AVX2 kernels keep 8 float lanes per dot product); like llama.cpp's own
//! repacked kernels they round less. Every output element still depends only on its weight row
//! and activation row, so a token gets the same bits alone or in any batch, and every ISA
//! gives the same bits.
//!
//! Q4_1 is the exception ([`Kind::keeps_ggml_bits`]): llama.cpp has no repacked Q4_1, so its
//! kernels here ([`x86_q4_1`], x86 only) compute ggml's vec_dot bit for bit on the repacked
//! layout, and Q4_1 models keep llama.cpp's own bits.
//!
//! The kernels are written once ([`tiles`]) and built for x86-64 (AVX2, AVX-VNNI, AVX-512
//! VNNI; `x86`) and wasm32 SIMD128 (`simd128`). Where none runs, [`RepackedMatrix::new`]
//! returns `None` and callers keep ggml's layout and kernels.

pub mod layout;
pub mod reference;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd128;
mod tiles;
#[cfg(target_arch = "x86_64")]
mod x86;
#[cfg(target_arch = "x86_64")]
mod x86_q4_1;

use crate::blocks::*;
use crate::isa;
use crate::QuantError;
use layout::ROWS;
use std::ops::Range;
use tessera_gguf::GgmlType;

/// The weight types with a repacked layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum Kind {
    Q4_0,
    Q4_1,
    Q5_0,
    Q8_0,
    Q4_K,
    Q5_K,
    Q6_K,
}

impl Kind {
    pub fn of(ty: GgmlType) -> Option<Kind> {
        Some(match ty {
            GgmlType::Q4_0 => Kind::Q4_0,
            GgmlType::Q4_1 => Kind::Q4_1,
            GgmlType::Q5_0 => Kind::Q5_0,
            GgmlType::Q8_0 => Kind::Q8_0,
            GgmlType::Q4_K => Kind::Q4_K,
            GgmlType::Q5_K => Kind::Q5_K,
            GgmlType::Q6_K => Kind::Q6_K,
            _ => return None,
        })
    }

    /// Whether the kernels need each activation block's Σa (to take the weights' offset off).
    fn needs_act_sums(self) -> bool {
        matches!(self, Kind::Q4_0 | Kind::Q5_0)
    }

    /// Whether the kernels compute ggml's vec_dot bits (Q4_1) rather than the repacked
    /// family's ([`reference`] documents both).
    pub fn keeps_ggml_bits(self) -> bool {
        self == Kind::Q4_1
    }

    /// Whether build `isa` has kernels for this layout (Q4_1's are x86 only).
    pub fn has_kernels(self, isa: Isa) -> bool {
        self != Kind::Q4_1 || !matches!(isa, Isa::Simd128 | Isa::Simd128FusedDot)
    }

    /// Whether this CPU's build ([`isa`]) has kernels for this layout: where it has not,
    /// weights of this kind keep ggml's layout.
    pub fn has_kernels_here(self) -> bool {
        isa().is_some_and(|isa| self.has_kernels(isa))
    }
}

/// The kernel builds; every one gives the same bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    Avx2,
    AvxVnni,
    Avx512Vnni,
    Simd128,
    /// SIMD128 with relaxed SIMD, its decode tiles on the fused 4-byte dot product
    /// (`isa::CpuFeatures::fused_dot`).
    Simd128FusedDot,
}

impl Isa {
    pub const ALL: [Isa; 5] = [
        Isa::Avx2,
        Isa::AvxVnni,
        Isa::Avx512Vnni,
        Isa::Simd128,
        Isa::Simd128FusedDot,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Isa::Avx2 => "avx2",
            Isa::AvxVnni => "avx-vnni",
            Isa::Avx512Vnni => "avx512-vnni",
            Isa::Simd128 => "simd128",
            Isa::Simd128FusedDot => "simd128-fused-dot",
        }
    }

    /// Whether this CPU runs the build.
    pub fn runs_here(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            let f = isa::detected();
            f.level.has_avx2()
                && match self {
                    Isa::Avx2 => true,
                    Isa::AvxVnni => std::arch::is_x86_feature_detected!("avxvnni"),
                    Isa::Avx512Vnni => f.level == isa::Level::Avx512 && f.avx512_vnni,
                    Isa::Simd128 | Isa::Simd128FusedDot => false,
                }
        }
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        {
            self == Isa::Simd128
                || (self == Isa::Simd128FusedDot && cfg!(target_feature = "relaxed-simd"))
        }
        #[cfg(not(any(
            target_arch = "x86_64",
            all(target_arch = "wasm32", target_feature = "simd128")
        )))]
        {
            let _ = self;
            false
        }
    }
}

/// The build the dispatch level allows: the widest integer dot product at AVX-512, AVX-VNNI
/// or plain AVX2 at the AVX2 level, SIMD128 in wasm (on the fused dot product where the engine
/// has one), none at the scalar level (which keeps ggml's kernels).
pub fn isa() -> Option<Isa> {
    match isa::level() {
        isa::Level::Simd128 if isa::detected().fused_dot && Isa::Simd128FusedDot.runs_here() => {
            Some(Isa::Simd128FusedDot)
        }
        isa::Level::Simd128 if Isa::Simd128.runs_here() => Some(Isa::Simd128),
        isa::Level::Avx512 if Isa::Avx512Vnni.runs_here() => Some(Isa::Avx512Vnni),
        isa::Level::Avx512 | isa::Level::Avx2 if Isa::AvxVnni.runs_here() => Some(Isa::AvxVnni),
        isa::Level::Avx512 | isa::Level::Avx2 => Some(Isa::Avx2),
        _ => None,
    }
}

/// A thread pool's `run(n, task)`: calls `task(i)` for every `i < n`, possibly in parallel.
pub type Tasks<'a> = &'a dyn Fn(usize, &(dyn Fn(usize) + Sync));

/// A weight matrix in the repacked layout: `n_groups` groups of 8 rows (the last padded with
/// zero rows), each `nb` group blocks.
pub struct RepackedMatrix {
    kind: Kind,
    n: usize,
    n_rows: usize,
    nb: usize,
    group_block_bytes: usize,
    /// 8-byte words keep every block field aligned.
    words: Vec<u64>,
}

impl RepackedMatrix {
    /// Repacks `n_rows` ggml rows of `n` elements (`rows`: their bytes, contiguous). `None`
    /// when `ty` has no layout or this CPU no kernel for it.
    pub fn new(
        ty: GgmlType,
        n: usize,
        n_rows: usize,
        rows: &[u8],
    ) -> Result<Option<RepackedMatrix>, QuantError> {
        Self::new_parallel(ty, n, n_rows, rows, &|n_tasks, task| {
            (0..n_tasks).for_each(task)
        })
    }

    /// [`Self::new`] with the groups packed by `tasks` (a thread pool's `run`: every task
    /// index below the count it is given, in any order, possibly in parallel).
    pub fn new_parallel(
        ty: GgmlType,
        n: usize,
        n_rows: usize,
        rows: &[u8],
        tasks: Tasks,
    ) -> Result<Option<RepackedMatrix>, QuantError> {
        // Bad input is an error whether or not this build repacks the type.
        crate::checked_row_bytes(ty, n, n_rows, rows.len(), "weight rows")?;
        let Some(kind) = Kind::of(ty) else {
            return Ok(None);
        };
        if !kind.has_kernels_here() {
            return Ok(None);
        }
        Self::with_kind(kind, ty, n, n_rows, rows, tasks).map(Some)
    }

    fn with_kind(
        kind: Kind,
        ty: GgmlType,
        n: usize,
        n_rows: usize,
        rows: &[u8],
        tasks: Tasks,
    ) -> Result<RepackedMatrix, QuantError> {
        let row_bytes = crate::checked_row_bytes(ty, n, n_rows, rows.len(), "weight rows")?;
        let nb = n / ty.block_size() as usize;
        let group_block_bytes = group_block_bytes(kind);
        let n_groups = n_rows.div_ceil(ROWS);
        let total = n_groups * nb * group_block_bytes;
        let mut words = vec![0u64; total.div_ceil(8)];
        let out: &mut [u8] = &mut bytemuck::cast_slice_mut(&mut words)[..total];
        let zero_row = vec![0u8; row_bytes];
        let group_bytes = nb * group_block_bytes;
        // Each task packs one contiguous run of groups into its own chunk of the output (the
        // mutexes are never contended: task i only locks chunk i).
        let per_task = n_groups.div_ceil(64).max(1);
        let chunks: Vec<std::sync::Mutex<&mut [u8]>> = out
            .chunks_mut((per_task * group_bytes).max(1))
            .map(std::sync::Mutex::new)
            .collect();
        tasks(chunks.len(), &|i| {
            let mut chunk = chunks[i].lock().unwrap_or_else(|e| e.into_inner());
            for (j, dst) in chunk.chunks_exact_mut(group_bytes).enumerate() {
                let gi = i * per_task + j;
                let row = |k: usize| {
                    let r = gi * ROWS + k;
                    if r < n_rows {
                        &rows[r * row_bytes..(r + 1) * row_bytes]
                    } else {
                        &zero_row[..]
                    }
                };
                let group: [&[u8]; ROWS] = std::array::from_fn(row);
                for (b, dst) in dst.chunks_exact_mut(group_block_bytes).enumerate() {
                    pack_block(kind, group, b, dst);
                }
            }
        });
        drop(chunks);
        Ok(RepackedMatrix {
            kind,
            n,
            n_rows,
            nb,
            group_block_bytes,
            words,
        })
    }

    pub fn n_rows(&self) -> usize {
        self.n_rows
    }

    /// Elements per row.
    pub fn n(&self) -> usize {
        self.n
    }

    pub fn n_groups(&self) -> usize {
        self.n_rows.div_ceil(ROWS)
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// The rows of `groups` (8 per group, padding rows included) × `n_acts` activation rows
    /// of [`crate::vec_dot_type`] (`acts`: contiguous rows): `out[t * 8 * groups.len() + i]`.
    /// Every element has [`reference::dot`]'s bits.
    /// `sums`: [`act_block_sums`] of `acts` where [`Self::needs_act_sums`], else unused.
    pub fn gemm(
        &self,
        groups: Range<usize>,
        acts: &[u8],
        n_acts: usize,
        sums: &[i32],
        out: &mut [f32],
    ) {
        let isa = isa().expect("RepackedMatrix exists only where kernels run");
        self.gemm_with(isa, groups, acts, n_acts, sums, out)
    }

    /// [`Self::gemm`] with a given kernel build (tests and benches compare them).
    ///
    /// # Panics
    /// If this CPU cannot run `isa`, or on lengths that do not fit.
    pub fn gemm_with(
        &self,
        isa: Isa,
        groups: Range<usize>,
        acts: &[u8],
        n_acts: usize,
        sums: &[i32],
        out: &mut [f32],
    ) {
        assert!(isa.runs_here(), "this CPU cannot run {}", isa.name());
        assert!(groups.end <= self.n_groups());
        assert!(out.len() >= n_acts * ROWS * groups.len());
        let act_ty = crate::vec_dot_type(self.ty()).expect("repacked types have one");
        let act_row = crate::row_bytes(act_ty, self.n).expect("whole blocks");
        assert!(acts.len() >= act_row * n_acts);
        let gb = self.nb * self.group_block_bytes;
        let bytes: &[u8] = bytemuck::cast_slice(&self.words);
        let w = &bytes[groups.start * gb..groups.end * gb];
        let a = &acts[..act_row * n_acts];
        if self.needs_act_sums() {
            assert!(
                sums.len() >= n_acts * self.nb,
                "gemm: activation sums missing"
            );
        }
        let (kind, nb) = (self.kind, self.nb);
        assert!(
            kind.has_kernels(isa),
            "no {} kernels for {kind:?}",
            isa.name()
        );
        // SAFETY: `runs_here` checked the features; lengths asserted above.
        #[allow(unreachable_code, unused_variables)]
        unsafe {
            #[cfg(target_arch = "x86_64")]
            if kind == Kind::Q4_1 {
                return match isa {
                    Isa::Avx2 => x86::avx2::gemm_q4_1(nb, w, a, n_acts, out),
                    Isa::AvxVnni => x86::avx_vnni::gemm_q4_1(nb, w, a, n_acts, out),
                    Isa::Avx512Vnni => x86::avx512_vnni::gemm_q4_1(nb, w, a, n_acts, out),
                    Isa::Simd128 | Isa::Simd128FusedDot => unreachable!("refused by has_kernels"),
                };
            }
            match isa {
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2 => x86::avx2::gemm::<false>(kind, nb, w, a, n_acts, sums, out),
                #[cfg(target_arch = "x86_64")]
                Isa::AvxVnni => x86::avx_vnni::gemm::<false>(kind, nb, w, a, n_acts, sums, out),
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512Vnni => {
                    x86::avx512_vnni::gemm::<false>(kind, nb, w, a, n_acts, sums, out)
                }
                #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
                Isa::Simd128 => simd128::gemm::<false>(kind, nb, w, a, n_acts, sums, out),
                #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
                Isa::Simd128FusedDot => simd128::gemm::<true>(kind, nb, w, a, n_acts, sums, out),
                #[allow(unreachable_patterns)]
                _ => unreachable!("runs_here refuses {} on this target", isa.name()),
            }
        }
    }

    /// Whether [`Self::gemm`] needs the activation blocks' sums ([`act_block_sums`]).
    pub fn needs_act_sums(&self) -> bool {
        self.kind.needs_act_sums()
    }

    fn ty(&self) -> GgmlType {
        match self.kind {
            Kind::Q4_0 => GgmlType::Q4_0,
            Kind::Q4_1 => GgmlType::Q4_1,
            Kind::Q5_0 => GgmlType::Q5_0,
            Kind::Q8_0 => GgmlType::Q8_0,
            Kind::Q4_K => GgmlType::Q4_K,
            Kind::Q5_K => GgmlType::Q5_K,
            Kind::Q6_K => GgmlType::Q6_K,
        }
    }
}

/// Each Q8_0 activation block's Σq, in order: what [`RepackedMatrix::gemm`] takes for the
/// types whose weights carry an offset (computed once per activation matrix, not per call).
pub fn act_block_sums(acts: &[u8], out: &mut Vec<i32>) {
    let blocks: &[BlockQ8_0] = bytemuck::cast_slice(&acts[..acts.len() / 34 * 34]);
    out.clear();
    out.extend(
        blocks
            .iter()
            .map(|b| b.qs.iter().map(|&q| q as i32).sum::<i32>()),
    );
}

fn group_block_bytes(kind: Kind) -> usize {
    use layout::*;
    use std::mem::size_of;
    match kind {
        Kind::Q4_0 => size_of::<Q4_0x8>(),
        Kind::Q4_1 => size_of::<Q4_1x8>(),
        Kind::Q5_0 => size_of::<Q5_0x8>(),
        Kind::Q8_0 => size_of::<Q8_0x8>(),
        Kind::Q4_K => size_of::<Q4Kx8>(),
        Kind::Q5_K => size_of::<Q5Kx8>(),
        Kind::Q6_K => size_of::<Q6Kx8>(),
    }
}

/// Block `b` of 8 rows, repacked into `dst`.
fn pack_block(kind: Kind, rows: [&[u8]; ROWS], b: usize, dst: &mut [u8]) {
    use layout::*;
    fn nth<B: bytemuck::Pod>(rows: [&[u8]; ROWS], b: usize) -> [B; ROWS] {
        let size = std::mem::size_of::<B>();
        rows.map(|r| bytemuck::pod_read_unaligned(&r[b * size..(b + 1) * size]))
    }
    fn put<G: bytemuck::Pod>(g: G, dst: &mut [u8]) {
        dst.copy_from_slice(bytemuck::bytes_of(&g));
    }
    macro_rules! pack {
        ($B:ty, $f:ident) => {{
            let blocks = nth::<$B>(rows, b);
            put($f(std::array::from_fn(|r| &blocks[r])), dst)
        }};
    }
    match kind {
        Kind::Q4_0 => pack!(BlockQ4_0, pack_q4_0),
        Kind::Q4_1 => pack!(BlockQ4_1, pack_q4_1),
        Kind::Q5_0 => pack!(BlockQ5_0, pack_q5_0),
        Kind::Q8_0 => pack!(BlockQ8_0, pack_q8_0),
        Kind::Q4_K => pack!(BlockQ4K, pack_q4_k),
        Kind::Q5_K => pack!(BlockQ5K, pack_q5_k),
        Kind::Q6_K => pack!(BlockQ6K, pack_q6_k),
    }
}

#[cfg(test)]
mod tests;
