//! CPU kernels, one op family per file, each with its scalar reference and tests.

pub mod attention;
pub mod binary;
pub mod get_rows;
pub mod glu;
pub mod mul_mat;
pub mod norm;
pub mod rope;
