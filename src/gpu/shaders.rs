//! The embedded WGSL kernels and their interface as reflected by naga in `build.rs`.
//!
//! Every `shaders/*.wgsl` file is preprocessed (`#import name` inlines `shaders/shared/name.wgsl`),
//! parsed and validated at build time, so a broken shader fails `cargo build`.

/// How a kernel accesses one of its bindings (reflected from the WGSL address space).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindingKind {
    /// `var<uniform>`: the per-dispatch [`Params`](super::Params) block (group 1).
    Uniform,
    /// `var<storage, read>`.
    StorageRead,
    /// `var<storage, read_write>`.
    StorageReadWrite,
}

/// One resource binding of a shader.
#[derive(Clone, Copy, Debug)]
pub struct ShaderBinding {
    /// Bind group index: 0 = storage buffers in binding order, 1 = the params uniform.
    pub group: u32,
    /// Binding index within the group.
    pub binding: u32,
    /// Access mode.
    pub kind: BindingKind,
}

/// A preprocessed, validated kernel.
#[derive(Clone, Copy, Debug)]
pub struct ShaderInfo {
    /// File stem in `shaders/`.
    pub name: &'static str,
    /// Compute entry point.
    pub entry: &'static str,
    /// Preprocessed WGSL source.
    pub source: &'static str,
    /// `@workgroup_size`.
    pub workgroup_size: [u32; 3],
    /// Bindings sorted by (group, binding).
    pub bindings: &'static [ShaderBinding],
}

include!(concat!(env!("OUT_DIR"), "/shaders.rs"));

/// Looks an embedded shader up by file stem.
pub fn shader(name: &str) -> Option<&'static ShaderInfo> {
    SHADERS.iter().find(|s| s.name == name)
}
