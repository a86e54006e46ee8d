//! gpu
pub mod shaders;
