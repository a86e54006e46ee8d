//! The kernel table: for every kernel its shader, bindings (name, access, element size, length
//! rule), items per workgroup and CPU twin. Binding order is the shader's `@binding` order and
//! the twin's argument order; a test checks the table against naga's reflection of the shader.

use super::layout::{ElemParams, GpuMat3, GpuTet, GpuVec4, Params};
use super::shaders;
use super::twins;
use crate::{JelloError, Result};
use bytemuck::Pod;
use std::mem::size_of;

/// Every kernel of the runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// `y = f0·x + y` (f32, n floats).
    Axpy,
    /// `x = f0·x` (f32, n floats).
    Scale,
    /// Block partial sums (1024 items per partial) into `out[u0..]`.
    ReduceSum,
    /// Block partial dot products into `out[u0..]`.
    ReduceDot,
    /// Block partial max-abs into `out[u0..]`.
    ReduceMaxAbs,
    /// Per-element deformation gradient.
    DeformationGradient,
    /// Per-matrix signed SVD.
    Svd3,
    /// Per-element energy, gradient, 12×12 Hessian (flags in u0).
    Elastic,
    /// Per-vertex gather of element gradients over the vertex→element CSR.
    GatherGradient,
    /// Per-vertex gather of the element Hessians' diagonal 3×3 blocks.
    GatherHessianDiag,
    /// Per-vertex inertia gradient (added) and energy (f0 = 1/h²).
    Inertia,
}

impl Kernel {
    /// All kernels, in table order.
    pub const ALL: [Kernel; 11] = [
        Kernel::Axpy,
        Kernel::Scale,
        Kernel::ReduceSum,
        Kernel::ReduceDot,
        Kernel::ReduceMaxAbs,
        Kernel::DeformationGradient,
        Kernel::Svd3,
        Kernel::Elastic,
        Kernel::GatherGradient,
        Kernel::GatherHessianDiag,
        Kernel::Inertia,
    ];
    /// Index into [`Kernel::ALL`] / [`KERNELS`].
    pub fn index(self) -> usize {
        self as usize
    }
    /// This kernel's table entry.
    pub fn desc(self) -> &'static KernelDesc {
        &KERNELS[self.index()]
    }
}

/// Read-only or read-write storage binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// `var<storage, read>`.
    Read,
    /// `var<storage, read_write>`.
    ReadWrite,
}

/// Minimum length (in elements) a binding must have for a dispatch over `n` items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Len {
    /// Checked by the twin only (data-dependent, e.g. CSR arrays or gathered-from arrays).
    Any,
    /// `k·n`.
    PerItem(u32),
    /// `k·n + 1` (CSR offsets).
    PerItemPlusOne(u32),
    /// `k·n` when `Params::u0 & flag != 0`, else at least 1.
    PerItemIf(u32, u32),
    /// Reduction output: `u0 + ceil(n / 1024)`.
    Partials,
}

/// One storage binding of a kernel.
#[derive(Clone, Copy, Debug)]
pub struct BindingDesc {
    /// Name (as in the shader).
    pub name: &'static str,
    /// Access mode.
    pub access: Access,
    /// Size of one element in bytes (the buffer's `T` must have this size).
    pub elem_bytes: u32,
    /// Length rule.
    pub len: Len,
}

/// The CPU twin adapter: runs the kernel's twin on the bound CPU buffers.
pub type CpuTwin = fn(&Params, &mut Bindings<'_>) -> Result<()>;

/// A kernel table entry.
pub struct KernelDesc {
    /// Which kernel.
    pub kernel: Kernel,
    /// Shader file stem in `shaders/`.
    pub name: &'static str,
    /// Storage bindings in binding order (group 0); the params uniform is group 1, binding 0.
    pub bindings: &'static [BindingDesc],
    /// Items one workgroup covers (workgroup size, or 1024 for the block reductions).
    pub items_per_group: u32,
    /// The CPU twin.
    pub cpu: CpuTwin,
}

impl KernelDesc {
    /// The preprocessed WGSL source (entry point `main`).
    pub fn source(&self) -> &'static str {
        shaders::source(self.name)
            .expect("kernel table names an embedded shader (checked by tests)")
    }
    /// Workgroups needed for `n` items (at least 1).
    pub fn groups(&self, n: u32) -> u32 {
        n.div_ceil(self.items_per_group).max(1)
    }
}

const fn b(name: &'static str, access: Access, elem_bytes: usize, len: Len) -> BindingDesc {
    BindingDesc {
        name,
        access,
        elem_bytes: elem_bytes as u32,
        len,
    }
}

use Access::{Read as R, ReadWrite as W};
const F: usize = size_of::<f32>();
const U: usize = size_of::<u32>();
const V4: usize = size_of::<GpuVec4>();
const M3: usize = size_of::<GpuMat3>();
const T4: usize = size_of::<GpuTet>();
const EP: usize = size_of::<ElemParams>();

/// The kernel table, indexed by [`Kernel::index`].
pub static KERNELS: [KernelDesc; 11] = [
    KernelDesc {
        kernel: Kernel::Axpy,
        name: "axpy",
        bindings: &[b("x", R, F, Len::PerItem(1)), b("y", W, F, Len::PerItem(1))],
        items_per_group: 256,
        cpu: |p, b| twins::axpy(p, b.ro(0), b.rw(1)),
    },
    KernelDesc {
        kernel: Kernel::Scale,
        name: "scale",
        bindings: &[b("x", W, F, Len::PerItem(1))],
        items_per_group: 256,
        cpu: |p, b| twins::scale(p, b.rw(0)),
    },
    KernelDesc {
        kernel: Kernel::ReduceSum,
        name: "reduce_sum",
        bindings: &[b("a", R, F, Len::PerItem(1)), b("out", W, F, Len::Partials)],
        items_per_group: twins::REDUCE_BLOCK as u32,
        cpu: |p, b| twins::reduce_sum(p, b.ro(0), b.rw(1)),
    },
    KernelDesc {
        kernel: Kernel::ReduceDot,
        name: "reduce_dot",
        bindings: &[
            b("a", R, F, Len::PerItem(1)),
            b("b", R, F, Len::PerItem(1)),
            b("out", W, F, Len::Partials),
        ],
        items_per_group: twins::REDUCE_BLOCK as u32,
        cpu: |p, b| twins::reduce_dot(p, b.ro(0), b.ro(1), b.rw(2)),
    },
    KernelDesc {
        kernel: Kernel::ReduceMaxAbs,
        name: "reduce_max_abs",
        bindings: &[b("a", R, F, Len::PerItem(1)), b("out", W, F, Len::Partials)],
        items_per_group: twins::REDUCE_BLOCK as u32,
        cpu: |p, b| twins::reduce_max_abs(p, b.ro(0), b.rw(1)),
    },
    KernelDesc {
        kernel: Kernel::DeformationGradient,
        name: "deformation_gradient",
        bindings: &[
            b("x", R, V4, Len::Any),
            b("tets", R, T4, Len::PerItem(1)),
            b("dm_inv", R, M3, Len::PerItem(1)),
            b("f_out", W, M3, Len::PerItem(1)),
        ],
        items_per_group: 64,
        cpu: |p, b| twins::deformation_gradient(p, b.ro(0), b.ro(1), b.ro(2), b.rw(3)),
    },
    KernelDesc {
        kernel: Kernel::Svd3,
        name: "svd3",
        bindings: &[
            b("f_in", R, M3, Len::PerItem(1)),
            b("u_out", W, M3, Len::PerItem(1)),
            b("s_out", W, V4, Len::PerItem(1)),
            b("v_out", W, M3, Len::PerItem(1)),
        ],
        items_per_group: 64,
        cpu: |p, b| twins::svd3(p, b.ro(0), b.rw(1), b.rw(2), b.rw(3)),
    },
    KernelDesc {
        kernel: Kernel::Elastic,
        name: "elastic",
        bindings: &[
            b("x", R, V4, Len::Any),
            b("tets", R, T4, Len::PerItem(1)),
            b("dm_inv", R, M3, Len::PerItem(1)),
            b("elem", R, EP, Len::PerItem(1)),
            b("energy", W, F, Len::PerItem(1)),
            b("grad", W, V4, Len::PerItemIf(4, twins::ELASTIC_GRADIENT)),
            b("hess", W, F, Len::PerItemIf(144, twins::ELASTIC_HESSIAN)),
        ],
        items_per_group: 64,
        cpu: |p, b| {
            twins::elastic(
                p,
                b.ro(0),
                b.ro(1),
                b.ro(2),
                b.ro(3),
                b.rw(4),
                b.rw(5),
                b.rw(6),
            )
        },
    },
    KernelDesc {
        kernel: Kernel::GatherGradient,
        name: "gather_gradient",
        bindings: &[
            b("elem_grad", R, V4, Len::Any),
            b("offsets", R, U, Len::PerItemPlusOne(1)),
            b("csr_tets", R, U, Len::Any),
            b("csr_local", R, U, Len::Any),
            b("out", W, V4, Len::PerItem(1)),
        ],
        items_per_group: 64,
        cpu: |p, b| twins::gather_gradient(p, b.ro(0), b.ro(1), b.ro(2), b.ro(3), b.rw(4)),
    },
    KernelDesc {
        kernel: Kernel::GatherHessianDiag,
        name: "gather_hessian_diag",
        bindings: &[
            b("elem_hess", R, F, Len::Any),
            b("offsets", R, U, Len::PerItemPlusOne(1)),
            b("csr_tets", R, U, Len::Any),
            b("csr_local", R, U, Len::Any),
            b("out", W, M3, Len::PerItem(1)),
        ],
        items_per_group: 64,
        cpu: |p, b| twins::gather_hessian_diag(p, b.ro(0), b.ro(1), b.ro(2), b.ro(3), b.rw(4)),
    },
    KernelDesc {
        kernel: Kernel::Inertia,
        name: "inertia",
        bindings: &[
            b("x", R, V4, Len::PerItem(1)),
            b("x_tilde", R, V4, Len::PerItem(1)),
            b("mass", R, F, Len::PerItem(1)),
            b("grad", W, V4, Len::PerItem(1)),
            b("energy", W, F, Len::PerItem(1)),
        ],
        items_per_group: 64,
        cpu: |p, b| twins::inertia(p, b.ro(0), b.ro(1), b.ro(2), b.rw(3), b.rw(4)),
    },
];

/// Checks a dispatch's buffers against the table: count, element sizes, lengths (in elements).
pub(crate) fn validate(
    desc: &KernelDesc,
    params: &Params,
    bufs: &[(u32, usize)], // (elem_bytes, len) per binding
) -> Result<()> {
    if bufs.len() != desc.bindings.len() {
        return Err(JelloError::Invalid(format!(
            "kernel `{}` takes {} buffers, got {}",
            desc.name,
            desc.bindings.len(),
            bufs.len()
        )));
    }
    let n = params.n as usize;
    for (bd, &(eb, len)) in desc.bindings.iter().zip(bufs) {
        if eb != bd.elem_bytes {
            return Err(JelloError::Invalid(format!(
                "kernel `{}` binding `{}`: element size {eb} B, expected {} B",
                desc.name, bd.name, bd.elem_bytes
            )));
        }
        let required = match bd.len {
            Len::Any => 1,
            Len::PerItem(k) => k as usize * n,
            Len::PerItemPlusOne(k) => k as usize * n + 1,
            Len::PerItemIf(k, flag) => {
                if params.u0 & flag != 0 {
                    k as usize * n
                } else {
                    1
                }
            }
            Len::Partials => params.u0 as usize + n.div_ceil(twins::REDUCE_BLOCK).max(1),
        };
        if len < required.max(1) {
            return Err(JelloError::Invalid(format!(
                "kernel `{}` binding `{}`: buffer holds {len} elements, needs {required} for n = {n}",
                desc.name, bd.name
            )));
        }
    }
    Ok(())
}

/// The CPU buffers bound to one twin call, in binding order.
pub struct Bindings<'a> {
    slots: Vec<Slot<'a>>,
}

enum Slot<'a> {
    Ro(&'a [u32]),
    Rw(Option<&'a mut [u32]>),
}

impl<'a> Bindings<'a> {
    pub(crate) fn new() -> Self {
        Bindings { slots: Vec::new() }
    }
    pub(crate) fn push_ro(&mut self, words: &'a [u32]) {
        self.slots.push(Slot::Ro(words));
    }
    pub(crate) fn push_rw(&mut self, words: &'a mut [u32]) {
        self.slots.push(Slot::Rw(Some(words)));
    }
    /// Read-only view of binding `i` as `[T]`.
    ///
    /// # Panics
    /// When the table's access or element size disagrees with the twin (a programming error in
    /// the table, caught by the kernel-table tests).
    pub fn ro<T: Pod>(&self, i: usize) -> &'a [T] {
        match &self.slots[i] {
            Slot::Ro(w) => bytemuck::cast_slice(w),
            Slot::Rw(_) => panic!("binding {i} is read-write in the kernel table"),
        }
    }
    /// Read-write view of binding `i` as `[T]` (each may be taken once).
    ///
    /// # Panics
    /// As [`Bindings::ro`].
    pub fn rw<T: Pod>(&mut self, i: usize) -> &'a mut [T] {
        match &mut self.slots[i] {
            Slot::Rw(w) => {
                bytemuck::cast_slice_mut(w.take().expect("read-write binding taken twice"))
            }
            Slot::Ro(_) => panic!("binding {i} is read-only in the kernel table"),
        }
    }
}
