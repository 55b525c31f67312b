//! naga's SPIR-V options for a kernel variant on a device profile (build.rs only: the crate
//! itself has no naga). What changes a module besides its defines is the `Profile`: whether
//! the device bounds-checks buffers itself (robustBufferAccess2), zeroes workgroup memory
//! itself, and has `shaderInt8`. The capabilities of the defines `F16`, `SUBGROUPS` and
//! `EXACT_FMA` (f64), and of packed integer dot products (`mul_mat_q8.wgsl`), are granted to
//! the kernels that use them: the backend only requests those variants where the device has
//! the feature.

use naga::back::spv;

/// Bindings per kernel (the WGSL kernels use at most 8 of group 0).
pub const MAX_BINDINGS: usize = 12;

/// Device properties that change SPIR-V, as bits (the generated table repeats them for the
/// runtime, `src/kernels.rs`).
#[derive(Clone, Copy, Debug)]
pub struct Profile {
    pub bits: u8,
}

impl Profile {
    /// robustBufferAccess2: buffer accesses are the driver's to clamp (as wgpu relies on).
    pub const ROBUST2: u8 = 1;
    /// shaderZeroInitializeWorkgroupMemory: the driver zeroes workgroup memory.
    pub const ZERO_INIT: u8 = 2;
    /// shaderInt8: naga's 8-bit packing built-ins run natively (else its polyfills).
    pub const INT8: u8 = 4;
    pub const ALL: u8 = 7;

    /// The bits that can change a module with this text: buffer bounds always; zeroing only
    /// with workgroup memory; Int8 only with the 4x8 packing built-ins.
    pub fn relevant_bits(text: &str) -> u8 {
        let mut bits = Profile::ROBUST2;
        if text.contains("var<workgroup>") {
            bits |= Profile::ZERO_INIT;
        }
        if text.contains("4xI8") || text.contains("4xU8") {
            bits |= Profile::INT8;
        }
        bits
    }

    fn has(self, bit: u8) -> bool {
        self.bits & bit != 0
    }

    /// naga's options: out-of-range indices clamped as WebGPU requires, exactly as wgpu does
    /// (buffer accesses by the driver where it has robustBufferAccess2, else by naga's
    /// clamps), so a kernel behaves the same on both backends; capabilities limited to what
    /// the device was created with, which the validation layer checks.
    pub fn options(self, defines: &[(&str, u32)], text: &str) -> spv::Options<'static> {
        use spv::Capability as C;
        let defined = |name: &str| defines.iter().any(|(n, _)| *n == name);
        let mut caps: naga::FastHashSet<C> = [C::Shader].into_iter().collect();
        if defined("F16") {
            caps.extend([C::Float16, C::StorageBuffer16BitAccess]);
        }
        if self.has(Profile::INT8) {
            caps.insert(C::Int8);
        }
        if defined("SUBGROUPS") {
            caps.extend([C::GroupNonUniform, C::GroupNonUniformArithmetic]);
        }
        if defined("EXACT_FMA") {
            caps.insert(C::Float64);
        }
        // Else naga would polyfill dot4I8Packed with bit-field extracts.
        if text.contains("dot4I8Packed") || text.contains("dot4U8Packed") {
            caps.extend([C::DotProduct, C::DotProductInput4x8BitPacked]);
        }
        let restrict = naga::proc::BoundsCheckPolicy::Restrict;
        let buffer = match self.has(Profile::ROBUST2) {
            true => naga::proc::BoundsCheckPolicy::Unchecked,
            false => restrict,
        };
        spv::Options {
            lang_version: (1, 3),
            zero_initialize_workgroup_memory: match self.has(Profile::ZERO_INIT) {
                true => spv::ZeroInitializeWorkgroupMemoryMode::Native,
                false => spv::ZeroInitializeWorkgroupMemoryMode::Polyfill,
            },
            flags: spv::WriterFlags::empty(),
            capabilities: Some(caps),
            // Compute shaders have no f16 inputs or outputs; naga would declare it regardless.
            use_storage_input_output_16: false,
            bounds_check_policies: naga::proc::BoundsCheckPolicies {
                index: restrict,
                buffer,
                image_load: restrict,
                binding_array: naga::proc::BoundsCheckPolicy::Unchecked,
            },
            ..spv::Options::default()
        }
    }
}

/// Each group-0 binding `entry` uses: 0 none, 1 uniform buffer, 2 storage buffer. The layout
/// holds what this entry point uses (as wgpu's automatic layouts do), which is what the
/// dispatch builders bind.
pub fn binding_kinds(
    module: &naga::Module,
    info: &naga::valid::ModuleInfo,
    entry: &str,
) -> Result<[u8; MAX_BINDINGS], String> {
    let ep = module
        .entry_points
        .iter()
        .position(|e| e.name == entry)
        .ok_or_else(|| format!("no entry point `{entry}`"))?;
    let uses = info.get_entry_point(ep);
    let mut kinds = [0u8; MAX_BINDINGS];
    for (handle, var) in module.global_variables.iter() {
        let Some(binding) = &var.binding else {
            continue;
        };
        if uses[handle].is_empty() {
            continue;
        }
        let kind = match var.space {
            naga::AddressSpace::Uniform => 1,
            naga::AddressSpace::Storage { .. } => 2,
            other => return Err(format!("binding {} in {other:?}", binding.binding)),
        };
        let slot = kinds
            .get_mut(binding.binding as usize)
            .filter(|_| binding.group == 0)
            .ok_or_else(|| format!("binding {}:{}", binding.group, binding.binding))?;
        *slot = kind;
    }
    Ok(kinds)
}
