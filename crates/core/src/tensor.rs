//! Tensor descriptors with ggml's conventions: up to 4 dimensions, `ne[0]` is the row length
//! (the fastest-moving index), `nb[i]` is the stride of dimension `i` in bytes.
//!
//! For block-quantized types a "row" is a whole number of blocks: `nb[0]` is the block size in
//! bytes and `nb[1]` the row size, exactly as `ggml_new_tensor` lays them out.

use tessera_gguf::GgmlType;

/// Element counts per dimension, ggml order.
pub type Ne = [usize; 4];

/// Shape, type and strides of a tensor (its bytes live elsewhere: a weight in the model file,
/// an activation in a backend buffer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorDesc {
    pub ty: GgmlType,
    pub ne: Ne,
    pub nb: [usize; 4],
}

impl TensorDesc {
    /// A contiguous tensor of type `ty`. `ne[0]` must be a multiple of the type's block size
    /// (checked by the callers that take shapes from files).
    pub fn contiguous(ty: GgmlType, ne: Ne) -> TensorDesc {
        let type_size = ty.type_size() as usize;
        let block = ty.block_size() as usize;
        let mut nb = [0usize; 4];
        nb[0] = type_size;
        nb[1] = type_size * (ne[0] / block.max(1));
        nb[2] = nb[1] * ne[1];
        nb[3] = nb[2] * ne[2];
        TensorDesc { ty, ne, nb }
    }

    /// An f32 activation of shape `ne`.
    pub fn f32(ne: Ne) -> TensorDesc {
        TensorDesc::contiguous(GgmlType::F32, ne)
    }

    pub fn n_elements(&self) -> usize {
        self.ne.iter().product()
    }

    /// Number of rows (all dimensions but the first).
    pub fn n_rows(&self) -> usize {
        self.ne[1] * self.ne[2] * self.ne[3]
    }

    /// Bytes of one row.
    pub fn row_bytes(&self) -> usize {
        self.nb[1]
    }

    /// Total bytes of a contiguous tensor.
    pub fn n_bytes(&self) -> usize {
        self.nb[3] * self.ne[3]
    }

    /// True when rows follow each other with no gaps.
    pub fn is_contiguous(&self) -> bool {
        *self == TensorDesc::contiguous(self.ty, self.ne)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_follow_ggml_for_float_and_block_types() {
        let f = TensorDesc::f32([64, 9, 5, 1]);
        assert_eq!(f.nb, [4, 256, 256 * 9, 256 * 9 * 5]);
        assert_eq!(f.n_elements(), 64 * 45);
        assert_eq!(f.n_bytes(), 64 * 45 * 4);
        let q = TensorDesc::contiguous(GgmlType::Q4_1, [576, 1536, 1, 1]);
        // 18 blocks of 20 bytes per row.
        assert_eq!(q.nb, [20, 360, 360 * 1536, 360 * 1536]);
        assert_eq!(q.n_rows(), 1536);
        assert!(q.is_contiguous());
        let k = TensorDesc::contiguous(GgmlType::Q4_K, [1024, 640, 1, 1]);
        assert_eq!(k.row_bytes(), 4 * 144);
    }
}
