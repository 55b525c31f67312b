//! Element-wise ops (`elementwise.wgsl`).

use crate::error::WgpuError;
use crate::pipelines::PipelineKey;
use crate::recorder::Recorder;
use crate::shaders::wgsl_params;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Elementwise {
    Add,
    Scale(f32),
    /// Times a row vector (`b` holds `width` floats).
    MulRow {
        width: usize,
    },
    Swiglu,
    Geglu,
    Softcap(f32),
}

/// `elementwise.wgsl`'s parameters.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ElementwiseParams {
    pub n: u32,
    /// Row width of `b` (`OP_MUL_ROW`).
    pub width: u32,
    /// The scale or the cap.
    pub s: f32,
}
const _: () = assert!(size_of::<ElementwiseParams>() == wgsl_params::ELEMENTWISE);

/// `y = op(a, b)` over `n` floats.
pub fn record(
    rec: &mut Recorder,
    op: Elementwise,
    a: &wgpu::Buffer,
    b: Option<&wgpu::Buffer>,
    y: &wgpu::Buffer,
    n: usize,
) -> Result<(), WgpuError> {
    let (define, s, width) = match op {
        Elementwise::Add => ("OP_ADD", 0.0, 1),
        Elementwise::Scale(s) => ("OP_SCALE", s, 1),
        Elementwise::MulRow { width } => ("OP_MUL_ROW", 0.0, width.max(1)),
        Elementwise::Swiglu => ("OP_SWIGLU", 0.0, 1),
        Elementwise::Geglu => ("OP_GEGLU", 0.0, 1),
        Elementwise::Softcap(cap) => ("OP_SOFTCAP", cap, 1),
    };
    let unary = matches!(op, Elementwise::Scale(_) | Elementwise::Softcap(_));
    let mut defines = vec![(define, 1)];
    let mut buffers = vec![(1, a.clone()), (3, y.clone())];
    if unary {
        defines.push(("UNARY", 1));
    } else {
        let b = b.ok_or_else(|| WgpuError::Unsupported(format!("{op:?} needs two inputs")))?;
        buffers.push((2, b.clone()));
    }
    let key = PipelineKey {
        family: "elementwise.wgsl",
        entry: "main",
        defines,
    };
    let groups = rec.grid(n.div_ceil(256), 1)?;
    let params = ElementwiseParams {
        n: n as u32,
        width: width as u32,
        s,
    };
    rec.dispatch(key, params, buffers, groups)
}
