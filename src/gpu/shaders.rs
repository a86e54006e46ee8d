//! Embedded kernels.
include!(concat!(env!("OUT_DIR"), "/shaders.rs"));
pub struct ShaderInfo { pub name: &'static str, pub entry: &'static str, pub source: &'static str, pub workgroup_size: [u32;3], pub bindings: &'static [ShaderBinding] }
pub struct ShaderBinding { pub group: u32, pub binding: u32, pub kind: BindingKind }
pub enum BindingKind { Uniform, StorageRead, StorageReadWrite }
