//! The WGSL kernels' variants, shared by the WebGPU backend (which compiles the preprocessed
//! text at run time through wgpu) and the Vulkan backend's build script (which compiles every
//! variant to SPIR-V ahead of time with naga): the preprocessor ([`preprocess`]), the closed
//! list of variants the op builders can ask for ([`variants`]) and the shader folder's files
//! for both build scripts ([`files`]).

pub mod files;
pub mod preprocess;
pub mod variants;

pub use preprocess::{canonical, canonical_among, mentions, preprocess, Define, PreprocessError};
pub use variants::Variant;
