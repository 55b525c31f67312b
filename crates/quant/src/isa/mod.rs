//! The instruction sets the CPU kernels may use: detected once, cached, read by every dispatch
//! site (the vec-dot kernel table, the activation quantizer, attention and the gated
//! activations in tessera-backend-cpu).
//!
//! x86-64 is detected at run time; wasm32 has no run-time detection, so SIMD128 (and relaxed
//! SIMD) are what the build enabled (`target_feature`). [`force_level`] lowers the level for the
//! whole process (tests and benches that want the scalar path); it can never raise it above what
//! the CPU runs, which is what keeps the `unsafe` in the SIMD kernels sound.
//!
//! [`simd`] holds the [`Simd`] trait: the float primitives (f32 lanes, f16 conversion and
//! rounding) that kernels written once are generic over, with one implementation per ISA.

pub mod simd;

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub use simd::Simd128;
#[cfg(target_arch = "x86_64")]
pub use simd::{Avx2, Avx512};
pub use simd::{Scalar, Simd};

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

/// How far ahead the weight-streaming kernels (decode's matrix-vector products) ask for bytes
/// with prefetch hints: far enough to hide memory latency, near enough to stay in L1/L2.
pub(crate) const PREFETCH_BYTES: usize = 4096;

/// The widest kernel family a CPU runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Level {
    /// Portable Rust only.
    Scalar = 0,
    /// x86-64 AVX2 with FMA and F16C.
    Avx2 = 1,
    /// x86-64 AVX-512 F, BW, DQ and VL, on top of everything [`Level::Avx2`] needs.
    Avx512 = 2,
    /// wasm32 SIMD128 (compiled in; relaxed SIMD is [`CpuFeatures::relaxed_simd`]).
    Simd128 = 3,
}

impl Level {
    /// Whether the AVX2 + FMA + F16C kernels may run (AVX-512 CPUs run them too).
    pub fn has_avx2(self) -> bool {
        matches!(self, Level::Avx2 | Level::Avx512)
    }

    /// The name logs and benches print.
    pub fn name(self) -> &'static str {
        match self {
            Level::Scalar => "scalar",
            Level::Avx2 => "avx2",
            Level::Avx512 => "avx512",
            Level::Simd128 => "simd128",
        }
    }

    fn from_u8(v: u8) -> Option<Level> {
        [Level::Scalar, Level::Avx2, Level::Avx512, Level::Simd128]
            .into_iter()
            .find(|l| *l as u8 == v)
    }
}

/// What this CPU (or this wasm build) supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CpuFeatures {
    /// The widest kernel family available.
    pub level: Level,
    /// AVX-512 VNNI (int8 dot-product instructions); only meaningful at [`Level::Avx512`].
    pub avx512_vnni: bool,
    /// wasm relaxed SIMD, enabled at compile time.
    pub relaxed_simd: bool,
    /// wasm relaxed SIMD whose engine runs `i32x4.relaxed_dot_i8x16_i7x16_add` as one
    /// instruction (x86 VNNI's `vpdpbusd`, Arm's `sdot`), so that kernels take it over the i16
    /// pair sums (`pmaddubsw`) that the engine otherwise builds it from
    /// ([`relaxed_dot_is_fused`]).
    pub fused_dot: bool,
}

impl CpuFeatures {
    /// Whether kernels of `level` run here: the scalar ones always, the others only on the
    /// matching ISA (AVX-512 CPUs also run the AVX2 kernels).
    pub fn supports(&self, level: Level) -> bool {
        match level {
            Level::Scalar => true,
            Level::Avx2 => self.level.has_avx2(),
            Level::Avx512 | Level::Simd128 => self.level == level,
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn detect() -> CpuFeatures {
    let avx2 = is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c");
    let avx512 = avx2
        && is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512dq")
        && is_x86_feature_detected!("avx512vl");
    let level = if avx512 {
        Level::Avx512
    } else if avx2 {
        Level::Avx2
    } else {
        Level::Scalar
    };
    CpuFeatures {
        level,
        avx512_vnni: avx512 && is_x86_feature_detected!("avx512vnni"),
        relaxed_simd: false,
        fused_dot: false,
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> CpuFeatures {
    let simd128 = cfg!(all(target_arch = "wasm32", target_feature = "simd128"));
    CpuFeatures {
        level: if simd128 {
            Level::Simd128
        } else {
            Level::Scalar
        },
        avx512_vnni: false,
        relaxed_simd: simd128 && cfg!(target_feature = "relaxed-simd"),
        fused_dot: relaxed_dot_is_fused(),
    }
}

/// Whether this wasm engine's `i32x4.relaxed_dot_i8x16_i7x16_add` is a fused 4-byte dot
/// product, told from its composed form by an operand outside the 7-bit range: a fused one
/// (x86 VNNI's `vpdpbusd`, which reads that operand unsigned, or a signed × signed one such as
/// Arm's `sdot` or `vpdpbssd`) sums the four products exactly (4 · 255 · 127, or 4 · -1 · 127);
/// `pmaddubsw` then `pmaddwd` saturates each pair at i16 (2 · 32767). Only the choice of
/// instructions rests on this: both forms are exact on 7-bit operands (checked at load by
/// `vec_dot::relaxed_simd_is_exact`). In Chromium on x86, the fused form makes the Q4_1 and
/// Q8_0 decode kernels faster with AVX-VNNI and slower without it (where V8 builds it from
/// `pmaddubsw`, `pmaddwd` and an add), hence the probe.
#[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
pub fn relaxed_dot_is_fused() -> bool {
    use core::arch::wasm32::*;
    let (a, b) = std::hint::black_box((i8x16_splat(127), u8x16_splat(255)));
    let sum = i32x4_extract_lane::<0>(i32x4_relaxed_dot_i8x16_i7x16_add(a, b, i32x4_splat(0)));
    sum == 4 * 255 * 127 || sum == -4 * 127
}

/// Without relaxed SIMD there is no relaxed dot product to choose a form of.
#[cfg(not(all(target_arch = "wasm32", target_feature = "relaxed-simd")))]
pub fn relaxed_dot_is_fused() -> bool {
    false
}

/// The features of this CPU, detected on first use.
pub fn detected() -> CpuFeatures {
    static FEATURES: OnceLock<CpuFeatures> = OnceLock::new();
    *FEATURES.get_or_init(detect)
}

/// No override: [`level`] is the detected one.
const NO_OVERRIDE: u8 = u8::MAX;
static OVERRIDE: AtomicU8 = AtomicU8::new(NO_OVERRIDE);

/// The level kernels dispatch on: [`force_level`]'s if set, else the detected one.
#[inline]
pub fn level() -> Level {
    Level::from_u8(OVERRIDE.load(Ordering::Relaxed)).unwrap_or_else(|| detected().level)
}

/// A level this CPU cannot run, refused by [`force_level`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("this CPU cannot run {0:?} kernels")]
pub struct Unsupported(pub Level);

/// Makes every dispatch site use `level` (`None`: the detected one again), process-wide, from
/// the next kernel call on. For tests and benches comparing paths; every level gives
/// bit-identical results, so concurrent callers only see a speed change.
pub fn force_level(level: Option<Level>) -> Result<(), Unsupported> {
    match level {
        Some(l) if !detected().supports(l) => Err(Unsupported(l)),
        Some(l) => {
            OVERRIDE.store(l as u8, Ordering::Relaxed);
            Ok(())
        }
        None => {
            OVERRIDE.store(NO_OVERRIDE, Ordering::Relaxed);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn forcing_scalar_reaches_dispatch_and_foreign_levels_are_refused() {
        force_level(Some(Level::Scalar)).unwrap();
        assert_eq!(level(), Level::Scalar);
        assert_eq!(crate::vec_dot::kernel_isa(), "scalar");
        force_level(None).unwrap();
        assert_eq!(level(), detected().level);
        let foreign = if cfg!(target_arch = "wasm32") {
            Level::Avx2
        } else {
            Level::Simd128
        };
        assert_eq!(force_level(Some(foreign)), Err(Unsupported(foreign)));
        assert_eq!(level(), detected().level);
    }
}
