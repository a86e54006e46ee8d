//! The kernel table: for every kernel its shader, bindings (name, access, element size, length
//! rule), items per workgroup and CPU twin. Binding order is the shader's `@binding` order and
//! the twin's argument order; a test checks the table against naga's reflection of the shader.

use super::layout::{
    ElemParams, GpuContact, GpuFrictionPair, GpuLocalSystem, GpuMat3, GpuPair, GpuTet, GpuTreeNode,
    GpuVec4, GpuVertexInfo, Params,
};
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
    /// `elastic` on listed elements (u0 flags, u1 list offset).
    ElasticList,
    /// JGS2/VBD per-vertex terms: inertia + half-space barrier gradient, vertex energy (inertia
    /// relative to the step's start), barrier Hessian.
    Jgs2VertexTerms,
    /// JGS2/VBD surface barrier against spheres and boxes, gathered per vertex over its surface
    /// triangles and added to the vertex terms.
    Jgs2FaceTerms,
    /// JGS2 per-vertex rotations and rest-frame gradients.
    Jgs2Rotation,
    /// JGS2 cluster-tree node sums of the rest-frame gradients (one level per dispatch).
    Jgs2TreeSum,
    /// H-matrix far field: forward transform `w_c = Q_cᵀ x_c`, one thread per basis column.
    Jgs2HmForward,
    /// H-matrix far field: couplings `v_c = Σ S_IJ w_J` (transposed where c is the column
    /// cluster), gathered per basis column over the node's block list.
    Jgs2HmCoupling,
    /// H-matrix far field: per tree position its near rows and `Σ_c Q_c v_c` up the tree, then
    /// the vertex's far sum `S_i y_i − ĝ_i`.
    Jgs2HmBackward,
    /// JGS2 per-vertex local system and its VBD fallback.
    Jgs2System,
    /// VBD per-vertex local system.
    VbdSystem,
    /// Per-vertex 3×3 Cholesky solve with fallback and obstacle filter.
    VertexSolve,
    /// Hessian-vector products (up to 3 vectors) gathered per vertex.
    HessVec,
    /// Block partial dot products of the safeguarded JGS2 iteration and the weighted ‖g‖².
    Jgs2Dots,
    /// Safeguarded step from the directions and per-vertex obstacle bounds.
    Jgs2Combine,
    /// Surface triangles' times of impact against spheres and boxes folded into the per-vertex
    /// step bounds.
    Jgs2FaceBound,
    /// Line-search trial positions, previous step and per-vertex moves.
    Jgs2Trial,
    /// Applies a scaled step to listed vertices.
    Jgs2Apply,
    // ---- device backend of the generic solver loops (`crate::solver::backend`) ----
    /// Fused vector update y (+)= c·x with c from scalar slots, and a per-group dot z·y.
    DevCombine,
    /// Per-group partial dot products a·b, a·a, b·b.
    DevDots,
    /// Per-group max of 1 − the obstacle step bound along a direction.
    DevStepBound,
    /// Line-search trial positions, contact records, step and per-group max move.
    DevTrial,
    /// Per-group element energy change (or reference) and forbidden-element counts.
    DevElementEnergy,
    /// Per-group vertex energy change (inertia + barrier) or the barrier reference.
    DevVertexEnergy,
    /// Vertex terms of the gradient (inertia, barrier, pins) and the residual's square sums.
    DevVertexGradient,
    /// Per-group partials of dᵀH d over stored element Hessians and per-vertex 3×3 blocks.
    DevCurvature,
    /// Per-group first-order effect of rounding the coordinates terms read: Σ |f|·|p|.
    DevRounding,
    // ---- ADMM-PD (`crate::solver::backend::AdmmBackend`) ----
    /// ADMM local step per element: F from x, z-step (PD or hyperelastic prox), dual update,
    /// and the corner forces of Σ w²Dᵀ(z − ū) and DᵀW²(zⁿ⁺¹ − zⁿ) (or the step's reset).
    AdmmLocal,
    /// ADMM per-vertex gather of the corner forces over the vertex→element CSR, and the dual
    /// residual's per-group partials.
    AdmmGather,
    /// ADMM primal residual's per-group partials Σ w²‖F(x) − z‖².
    AdmmPrimal,
    // ---- IPC contact pairs (`twins::ipc`; the broad phase stays on the CPU) ----
    /// Per candidate pair: closest-feature type, squared distance, κ·m·b(d²) with its gradient
    /// and (PSD-projected) 12×12 Hessian (flags in u0, d̂² in f0, κ in f1).
    IpcPairs,
    /// Per-vertex gather of the pair gradients (added to `g`) and, with flag 1, of the pair
    /// Hessians' diagonal blocks (added to `hdiag`) over the vertex→(pair, slot) CSR.
    IpcGather,
    /// Per lagged friction pair: μλ·f₀(‖u‖) and (flag 1) its per-pair gradient in
    /// [`Kernel::IpcPairs`]' layout, for [`Kernel::IpcGather`] (ε_v·h in f0).
    IpcFriction,
    // ---- multilevel solver (`twins::multilevel`; issue 13) ----
    /// Lift `u = P U q` of a subspace vector, gathered per vertex over its (handle, weighted
    /// frame) CSR; zero on pinned vertices.
    MlLift,
    /// Restriction `q = Uᵀ P y`, one 64-invocation workgroup per handle gathering over the
    /// handle's (vertex, weighted frame) CSR (no atomics); pinned vertices skipped.
    MlRestrict,
    /// Block-Jacobi application `z_h = B_h r_h` with the inverted 12×12 blocks, one invocation
    /// per row vec4 of a subspace vector.
    MlBlockApply,
    /// Cubature element terms of H·x into per-corner outputs (`scale·K_e x̄_e`, zero at pinned
    /// corners), summed per vertex by [`Kernel::GatherGradient`] over the terms' CSR.
    MlElementHv,
    /// Block-sparse (3×3 BSR, both triangles per row) product `y = B x (+ add)` per vertex: the
    /// base term of H·x (inertia, barrier, pins, the lagged elastic Hessian), adding the
    /// gathered element/contact terms; with the inverse diagonal, the Jacobi preconditioner.
    MlBsrHv,
}

impl Kernel {
    /// All kernels, in table order.
    pub const ALL: [Kernel; 48] = [
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
        Kernel::ElasticList,
        Kernel::Jgs2VertexTerms,
        Kernel::Jgs2FaceTerms,
        Kernel::Jgs2Rotation,
        Kernel::Jgs2TreeSum,
        Kernel::Jgs2HmForward,
        Kernel::Jgs2HmCoupling,
        Kernel::Jgs2HmBackward,
        Kernel::Jgs2System,
        Kernel::VbdSystem,
        Kernel::VertexSolve,
        Kernel::HessVec,
        Kernel::Jgs2Dots,
        Kernel::Jgs2Combine,
        Kernel::Jgs2FaceBound,
        Kernel::Jgs2Trial,
        Kernel::Jgs2Apply,
        // ---- device backend ----
        Kernel::DevCombine,
        Kernel::DevDots,
        Kernel::DevStepBound,
        Kernel::DevTrial,
        Kernel::DevElementEnergy,
        Kernel::DevVertexEnergy,
        Kernel::DevVertexGradient,
        Kernel::DevCurvature,
        Kernel::DevRounding,
        // ---- ADMM-PD ----
        Kernel::AdmmLocal,
        Kernel::AdmmGather,
        Kernel::AdmmPrimal,
        // ---- IPC contact pairs ----
        Kernel::IpcPairs,
        Kernel::IpcGather,
        Kernel::IpcFriction,
        // ---- multilevel solver ----
        Kernel::MlLift,
        Kernel::MlRestrict,
        Kernel::MlBlockApply,
        Kernel::MlElementHv,
        Kernel::MlBsrHv,
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
const CT: usize = size_of::<GpuContact>();
const VI: usize = size_of::<GpuVertexInfo>();
const LS: usize = size_of::<GpuLocalSystem>();
const TN: usize = size_of::<GpuTreeNode>();
const PR: usize = size_of::<GpuPair>();
const FP: usize = size_of::<GpuFrictionPair>();

/// The kernel table, indexed by [`Kernel::index`].
pub static KERNELS: [KernelDesc; 48] = [
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
    KernelDesc {
        kernel: Kernel::ElasticList,
        name: "elastic_list",
        bindings: &[
            b("x", R, V4, Len::Any),
            b("tets", R, T4, Len::Any),
            b("dm_inv", R, M3, Len::Any),
            b("elem", R, EP, Len::Any),
            b("lists", R, U, Len::Any),
            b("energy", W, F, Len::Any),
            b("grad", W, V4, Len::Any),
            b("hess", W, F, Len::Any),
        ],
        items_per_group: 64,
        cpu: |p, b| {
            twins::elastic_list(
                p,
                b.ro(0),
                b.ro(1),
                b.ro(2),
                b.ro(3),
                b.ro(4),
                b.rw(5),
                b.rw(6),
                b.rw(7),
            )
        },
    },
    KernelDesc {
        kernel: Kernel::Jgs2VertexTerms,
        name: "jgs2_vertex_terms",
        bindings: &[
            b("x", R, V4, Len::PerItem(1)),
            b("x_tilde", R, V4, Len::PerItem(1)),
            b("x_start", R, V4, Len::PerItem(1)),
            b("vinfo", R, VI, Len::PerItem(1)),
            b("contacts", R, CT, Len::PerItem(1)),
            b("g", W, V4, Len::PerItem(1)),
            b("venergy", W, F, Len::PerItem(1)),
            b("hbar", W, M3, Len::PerItem(1)),
        ],
        items_per_group: 64,
        cpu: |p, b| {
            twins::jgs2_vertex_terms(
                p,
                b.ro(0),
                b.ro(1),
                b.ro(2),
                b.ro(3),
                b.ro(4),
                b.rw(5),
                b.rw(6),
                b.rw(7),
            )
        },
    },
    KernelDesc {
        kernel: Kernel::Jgs2FaceTerms,
        name: "jgs2_face_terms",
        bindings: &[
            b("contacts", R, CT, Len::PerItem(1)),
            b("vfaces", R, U, Len::PerItemPlusOne(1)),
            b("tris", R, T4, Len::Any),
            b("vinfo", R, VI, Len::PerItem(1)),
            b("g", W, V4, Len::PerItem(1)),
            b("venergy", W, F, Len::PerItem(1)),
            b("hbar", W, M3, Len::PerItem(1)),
        ],
        items_per_group: 64,
        cpu: |p, b| {
            twins::jgs2_face_terms(
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
        kernel: Kernel::Jgs2Rotation,
        name: "jgs2_rotation",
        bindings: &[
            b("f", R, M3, Len::Any),
            b("elem", R, EP, Len::Any),
            b("offsets", R, U, Len::PerItemPlusOne(1)),
            b("csr_tets", R, U, Len::Any),
            b("g", R, V4, Len::PerItem(1)),
            b("rot", W, M3, Len::PerItem(1)),
            b("frame", W, V4, Len::PerItem(1)),
        ],
        items_per_group: 64,
        cpu: |p, b| {
            twins::jgs2_rotation(
                p,
                b.ro(0),
                b.ro(1),
                b.ro(2),
                b.ro(3),
                b.ro(4),
                b.rw(5),
                b.rw(6),
            )
        },
    },
    KernelDesc {
        kernel: Kernel::Jgs2TreeSum,
        name: "jgs2_tree_sum",
        bindings: &[
            b("lists", R, U, Len::Any),
            b("nodes", R, TN, Len::Any),
            b("perm", R, U, Len::Any),
            b("rest", R, V4, Len::Any),
            b("frame", W, V4, Len::Any),
        ],
        items_per_group: 64,
        cpu: |p, b| twins::jgs2_tree_sum(p, b.ro(0), b.ro(1), b.ro(2), b.ro(3), b.rw(4)),
    },
    KernelDesc {
        kernel: Kernel::Jgs2HmForward,
        name: "jgs2_hm_forward",
        bindings: &[
            b("hm", R, U, Len::Any),
            b("perm", R, U, Len::Any),
            b("frame", R, V4, Len::Any),
            b("hw", W, F, Len::Any),
        ],
        items_per_group: 64,
        cpu: |p, b| twins::jgs2_hm_forward(p, b.ro(0), b.ro(1), b.ro(2), b.rw(3)),
    },
    KernelDesc {
        kernel: Kernel::Jgs2HmCoupling,
        name: "jgs2_hm_coupling",
        bindings: &[b("hm", R, U, Len::Any), b("hw", W, F, Len::Any)],
        items_per_group: 64,
        cpu: |p, b| twins::jgs2_hm_coupling(p, b.ro(0), b.rw(1)),
    },
    KernelDesc {
        kernel: Kernel::Jgs2HmBackward,
        name: "jgs2_hm_backward",
        bindings: &[
            b("hm", R, U, Len::Any),
            b("perm", R, U, Len::Any),
            b("hw", R, F, Len::Any),
            b("frame", W, V4, Len::Any),
        ],
        items_per_group: 64,
        cpu: |p, b| twins::jgs2_hm_backward(p, b.ro(0), b.ro(1), b.ro(2), b.rw(3)),
    },
    KernelDesc {
        kernel: Kernel::Jgs2System,
        name: "jgs2_system",
        bindings: &[
            b("lists", R, U, Len::Any),
            b("blob", R, U, Len::Any),
            b("g", R, V4, Len::Any),
            b("rot", R, M3, Len::Any),
            b("frame", R, V4, Len::Any),
            b("hess", R, F, Len::Any),
            b("sys", W, LS, Len::Any),
        ],
        items_per_group: 64,
        cpu: |p, b| {
            twins::jgs2_system(
                p,
                b.ro(0),
                b.ro(1),
                b.ro(2),
                b.ro(3),
                b.ro(4),
                b.ro(5),
                b.rw(6),
            )
        },
    },
    KernelDesc {
        kernel: Kernel::VbdSystem,
        name: "vbd_system",
        bindings: &[
            b("lists", R, U, Len::Any),
            b("vinfo", R, VI, Len::Any),
            b("g", R, V4, Len::Any),
            b("hess", R, F, Len::Any),
            b("offsets", R, U, Len::Any),
            b("packed", R, U, Len::Any),
            b("sys", W, LS, Len::Any),
        ],
        items_per_group: 64,
        cpu: |p, b| {
            twins::vbd_system(
                p,
                b.ro(0),
                b.ro(1),
                b.ro(2),
                b.ro(3),
                b.ro(4),
                b.ro(5),
                b.rw(6),
            )
        },
    },
    KernelDesc {
        kernel: Kernel::VertexSolve,
        name: "vertex_solve",
        bindings: &[
            b("lists", R, U, Len::Any),
            b("sys", R, LS, Len::Any),
            b("hbar", R, M3, Len::Any),
            b("contacts", R, CT, Len::Any),
            b("vfaces", R, U, Len::Any),
            b("tris", R, T4, Len::Any),
            b("dirs", W, V4, Len::Any),
        ],
        items_per_group: 64,
        cpu: |p, b| {
            twins::vertex_solve(
                p,
                b.ro(0),
                b.ro(1),
                b.ro(2),
                b.ro(3),
                b.ro(4),
                b.ro(5),
                b.rw(6),
            )
        },
    },
    KernelDesc {
        kernel: Kernel::HessVec,
        name: "hess_vec",
        bindings: &[
            b("hess", R, F, Len::Any),
            b("tets", R, T4, Len::Any),
            b("offsets", R, U, Len::PerItemPlusOne(1)),
            b("packed", R, U, Len::Any),
            b("vinfo", R, VI, Len::PerItem(1)),
            b("hbar", R, M3, Len::PerItem(1)),
            b("dirs", R, V4, Len::Any),
            b("out", W, V4, Len::Any),
        ],
        items_per_group: 64,
        cpu: |p, b| {
            twins::hess_vec(
                p,
                b.ro(0),
                b.ro(1),
                b.ro(2),
                b.ro(3),
                b.ro(4),
                b.ro(5),
                b.ro(6),
                b.rw(7),
            )
        },
    },
    KernelDesc {
        kernel: Kernel::Jgs2Dots,
        name: "jgs2_dots",
        bindings: &[
            b("g", R, V4, Len::PerItem(1)),
            b("dirs", R, V4, Len::Any),
            b("hd", R, V4, Len::Any),
            b("weight", R, F, Len::PerItem(1)),
            b("out", W, F, Len::Any),
        ],
        items_per_group: twins::REDUCE_BLOCK as u32,
        cpu: |p, b| twins::jgs2_dots(p, b.ro(0), b.ro(1), b.ro(2), b.ro(3), b.rw(4)),
    },
    KernelDesc {
        kernel: Kernel::Jgs2Combine,
        name: "jgs2_combine",
        bindings: &[
            b("dirs", R, V4, Len::PerItem(3)),
            b("contacts", R, CT, Len::PerItem(1)),
            b("step", W, V4, Len::PerItem(1)),
            b("bound", W, F, Len::PerItem(1)),
        ],
        items_per_group: 64,
        cpu: |p, b| twins::jgs2_combine(p, b.ro(0), b.ro(1), b.rw(2), b.rw(3)),
    },
    KernelDesc {
        kernel: Kernel::Jgs2FaceBound,
        name: "jgs2_face_bound",
        bindings: &[
            b("step", R, V4, Len::PerItem(1)),
            b("contacts", R, CT, Len::PerItem(1)),
            b("vfaces", R, U, Len::PerItemPlusOne(1)),
            b("tris", R, T4, Len::Any),
            b("bound", W, F, Len::PerItem(1)),
        ],
        items_per_group: 64,
        cpu: |p, b| twins::jgs2_face_bound(p, b.ro(0), b.ro(1), b.ro(2), b.ro(3), b.rw(4)),
    },
    KernelDesc {
        kernel: Kernel::Jgs2Trial,
        name: "jgs2_trial",
        bindings: &[
            b("x", R, V4, Len::PerItem(1)),
            b("step", R, V4, Len::PerItem(1)),
            b("scal", R, F, Len::Any),
            b("contacts", R, CT, Len::PerItem(1)),
            b("x_new", W, V4, Len::PerItem(1)),
            b("contacts_new", W, CT, Len::PerItem(1)),
            b("dirs", W, V4, Len::PerItem(3)),
            b("dxn", W, F, Len::PerItem(1)),
        ],
        items_per_group: 64,
        cpu: |p, b| {
            twins::jgs2_trial(
                p,
                b.ro(0),
                b.ro(1),
                b.ro(2),
                b.ro(3),
                b.rw(4),
                b.rw(5),
                b.rw(6),
                b.rw(7),
            )
        },
    },
    KernelDesc {
        kernel: Kernel::Jgs2Apply,
        name: "jgs2_apply",
        bindings: &[
            b("lists", R, U, Len::Any),
            b("dirs", R, V4, Len::Any),
            b("x", W, V4, Len::Any),
            b("contacts", W, CT, Len::Any),
            b("dxn", W, F, Len::Any),
        ],
        items_per_group: 64,
        cpu: |p, b| twins::jgs2_apply(p, b.ro(0), b.ro(1), b.rw(2), b.rw(3), b.rw(4)),
    },
    // ---- device backend of the generic solver loops (`crate::solver::backend`) ----
    KernelDesc {
        kernel: Kernel::DevCombine,
        name: "dev_combine",
        bindings: &[
            b("scal", W, F, Len::Any),
            b("x", R, V4, Len::PerItem(1)),
            b("z", R, V4, Len::PerItem(1)),
            b("y", W, V4, Len::PerItem(1)),
            b("part", W, F, Len::Any),
        ],
        items_per_group: twins::backend::DEV_GROUP as u32,
        cpu: |p, b| twins::backend::dev_combine(p, b.rw(0), b.ro(1), b.ro(2), b.rw(3), b.rw(4)),
    },
    KernelDesc {
        kernel: Kernel::DevDots,
        name: "dev_dots",
        bindings: &[
            b("a", R, V4, Len::PerItem(1)),
            b("b", R, V4, Len::PerItem(1)),
            b("p_ab", W, F, Len::Any),
            b("p_aa", W, F, Len::Any),
            b("p_bb", W, F, Len::Any),
        ],
        items_per_group: twins::backend::DEV_GROUP as u32,
        cpu: |p, b| twins::backend::dev_dots(p, b.ro(0), b.ro(1), b.rw(2), b.rw(3), b.rw(4)),
    },
    KernelDesc {
        kernel: Kernel::DevStepBound,
        name: "dev_step_bound",
        bindings: &[
            b("d", R, V4, Len::PerItem(1)),
            b("contacts", R, CT, Len::PerItem(1)),
            b("part", W, F, Len::Any),
        ],
        items_per_group: twins::backend::DEV_GROUP as u32,
        cpu: |p, b| twins::backend::dev_step_bound(p, b.ro(0), b.ro(1), b.rw(2)),
    },
    KernelDesc {
        kernel: Kernel::DevTrial,
        name: "dev_trial",
        bindings: &[
            b("x", R, V4, Len::PerItem(1)),
            b("d", R, V4, Len::PerItem(1)),
            b("contacts", R, CT, Len::PerItem(1)),
            b("scal", R, F, Len::Any),
            b("x_new", W, V4, Len::PerItem(1)),
            b("contacts_new", W, CT, Len::PerItem(1)),
            b("step", W, V4, Len::PerItem(1)),
            b("out", W, F, Len::Any),
        ],
        items_per_group: twins::backend::DEV_GROUP as u32,
        cpu: |p, b| {
            twins::backend::dev_trial(
                p,
                b.ro(0),
                b.ro(1),
                b.ro(2),
                b.ro(3),
                b.rw(4),
                b.rw(5),
                b.rw(6),
                b.rw(7),
            )
        },
    },
    KernelDesc {
        kernel: Kernel::DevElementEnergy,
        name: "dev_element_energy",
        bindings: &[
            b("energy", R, F, Len::PerItem(1)),
            b("eref", W, F, Len::PerItem(1)),
            b("x", R, V4, Len::Any),
            b("x_new", R, V4, Len::Any),
            b("tets", R, T4, Len::PerItem(1)),
            b("elem", R, EP, Len::PerItem(1)),
            b("out", W, F, Len::Any),
        ],
        items_per_group: twins::backend::DEV_GROUP as u32,
        cpu: |p, b| {
            twins::backend::dev_element_energy(
                p,
                b.ro(0),
                b.rw(1),
                b.ro(2),
                b.ro(3),
                b.ro(4),
                b.ro(5),
                b.rw(6),
            )
        },
    },
    KernelDesc {
        kernel: Kernel::DevVertexEnergy,
        name: "dev_vertex_energy",
        bindings: &[
            b("x", R, V4, Len::PerItem(1)),
            b("x_start", R, V4, Len::PerItem(1)),
            b("x_tilde", R, V4, Len::PerItem(1)),
            b("vinfo", R, VI, Len::PerItem(1)),
            b("contacts", R, CT, Len::PerItem(1)),
            b("vref", W, F, Len::PerItem(1)),
            b("out", W, F, Len::Any),
        ],
        items_per_group: twins::backend::DEV_GROUP as u32,
        cpu: |p, b| {
            twins::backend::dev_vertex_energy(
                p,
                b.ro(0),
                b.ro(1),
                b.ro(2),
                b.ro(3),
                b.ro(4),
                b.rw(5),
                b.rw(6),
            )
        },
    },
    KernelDesc {
        kernel: Kernel::DevVertexGradient,
        name: "dev_vertex_gradient",
        bindings: &[
            b("x", R, V4, Len::PerItem(1)),
            b("x_tilde", R, V4, Len::PerItem(1)),
            b("vinfo", R, VI, Len::PerItem(1)),
            b("contacts", R, CT, Len::PerItem(1)),
            b("inv_c", R, F, Len::PerItem(1)),
            b("g", W, V4, Len::PerItem(1)),
            b("out", W, F, Len::Any),
        ],
        items_per_group: twins::backend::DEV_GROUP as u32,
        cpu: |p, b| {
            twins::backend::dev_vertex_gradient(
                p,
                b.ro(0),
                b.ro(1),
                b.ro(2),
                b.ro(3),
                b.ro(4),
                b.rw(5),
                b.rw(6),
            )
        },
    },
    // ---- ADMM-PD ----
    KernelDesc {
        kernel: Kernel::DevCurvature,
        name: "dev_curvature",
        bindings: &[
            b("hess", R, F, Len::Any),
            b("tets", R, T4, Len::Any),
            b("d", R, V4, Len::Any),
            b("kv", R, M3, Len::Any),
            b("part", W, F, Len::Any),
        ],
        items_per_group: twins::backend::DEV_GROUP as u32,
        cpu: |p, b| twins::backend::dev_curvature(p, b.ro(0), b.ro(1), b.ro(2), b.ro(3), b.rw(4)),
    },
    KernelDesc {
        kernel: Kernel::DevRounding,
        name: "dev_rounding",
        bindings: &[
            b("forces", R, V4, Len::PerItem(4)),
            b("coords", R, V4, Len::Any),
            b("stencils", R, T4, Len::PerItem(1)),
            b("out", W, F, Len::Any),
        ],
        items_per_group: twins::backend::DEV_GROUP as u32,
        cpu: |p, b| twins::backend::dev_rounding(p, b.ro(0), b.ro(1), b.ro(2), b.rw(3)),
    },
    KernelDesc {
        kernel: Kernel::AdmmLocal,
        name: "admm_local",
        bindings: &[
            b("x", R, V4, Len::Any),
            b("tets", R, T4, Len::PerItem(1)),
            b("dm_inv", R, M3, Len::PerItem(1)),
            b("elem", R, EP, Len::PerItem(1)),
            b("w2", R, F, Len::PerItem(1)),
            b("z", W, M3, Len::PerItem(1)),
            b("u", W, M3, Len::PerItem(1)),
            b("corner", W, V4, Len::PerItem(8)),
        ],
        items_per_group: twins::admm::ADMM_LOCAL_GROUP as u32,
        cpu: |p, b| {
            twins::admm::admm_local(
                p,
                b.ro(0),
                b.ro(1),
                b.ro(2),
                b.ro(3),
                b.ro(4),
                b.rw(5),
                b.rw(6),
                b.rw(7),
            )
        },
    },
    KernelDesc {
        kernel: Kernel::AdmmGather,
        name: "admm_gather",
        bindings: &[
            b("corner", R, V4, Len::Any),
            b("offsets", R, U, Len::PerItemPlusOne(1)),
            b("csr_tets", R, U, Len::Any),
            b("csr_local", R, U, Len::Any),
            b("vinfo", R, VI, Len::PerItem(1)),
            b("rhs", W, V4, Len::PerItem(1)),
            b("out", W, F, Len::Any),
        ],
        items_per_group: twins::admm::ADMM_GROUP as u32,
        cpu: |p, b| {
            twins::admm::admm_gather(
                p,
                b.ro(0),
                b.ro(1),
                b.ro(2),
                b.ro(3),
                b.ro(4),
                b.rw(5),
                b.rw(6),
            )
        },
    },
    KernelDesc {
        kernel: Kernel::AdmmPrimal,
        name: "admm_primal",
        bindings: &[
            b("x", R, V4, Len::Any),
            b("tets", R, T4, Len::PerItem(1)),
            b("dm_inv", R, M3, Len::PerItem(1)),
            b("w2", R, F, Len::PerItem(1)),
            b("z", R, M3, Len::PerItem(1)),
            b("out", W, F, Len::Any),
        ],
        items_per_group: twins::admm::ADMM_GROUP as u32,
        cpu: |p, b| {
            twins::admm::admm_primal(p, b.ro(0), b.ro(1), b.ro(2), b.ro(3), b.ro(4), b.rw(5))
        },
    },
    // ---- IPC contact pairs ----
    KernelDesc {
        kernel: Kernel::IpcPairs,
        name: "ipc_pairs",
        bindings: &[
            b("x", R, V4, Len::Any),
            b("pairs", R, PR, Len::PerItem(1)),
            b("energy", W, F, Len::PerItem(1)),
            b("dist", W, F, Len::PerItem(1)),
            b("ptype", W, U, Len::PerItem(1)),
            b("grad", W, V4, Len::PerItemIf(4, twins::ipc::IPC_GRADIENT)),
            b("hess", W, F, Len::PerItemIf(144, twins::ipc::IPC_HESSIAN)),
        ],
        items_per_group: 64,
        cpu: |p, b| {
            twins::ipc::ipc_pairs(
                p,
                b.ro(0),
                b.ro(1),
                b.rw(2),
                b.rw(3),
                b.rw(4),
                b.rw(5),
                b.rw(6),
            )
        },
    },
    KernelDesc {
        kernel: Kernel::IpcGather,
        name: "ipc_gather",
        bindings: &[
            b("pair_grad", R, V4, Len::Any),
            b("pair_hess", R, F, Len::Any),
            b("offsets", R, U, Len::PerItemPlusOne(1)),
            b("csr_pairs", R, U, Len::Any),
            b("csr_slot", R, U, Len::Any),
            b("g", W, V4, Len::PerItem(1)),
            b(
                "hdiag",
                W,
                M3,
                Len::PerItemIf(1, twins::ipc::IPC_GATHER_HESSIAN),
            ),
        ],
        items_per_group: 64,
        cpu: |p, b| {
            twins::ipc::ipc_gather(
                p,
                b.ro(0),
                b.ro(1),
                b.ro(2),
                b.ro(3),
                b.ro(4),
                b.rw(5),
                b.rw(6),
            )
        },
    },
    KernelDesc {
        kernel: Kernel::IpcFriction,
        name: "ipc_friction",
        bindings: &[
            b("dx", R, V4, Len::Any),
            b("pairs", R, FP, Len::PerItem(1)),
            b("energy", W, F, Len::PerItem(1)),
            b(
                "grad",
                W,
                V4,
                Len::PerItemIf(4, twins::friction::FRICTION_GRADIENT),
            ),
        ],
        items_per_group: 64,
        cpu: |p, b| twins::friction::ipc_friction(p, b.ro(0), b.ro(1), b.rw(2), b.rw(3)),
    },
    // ---- multilevel solver ----
    KernelDesc {
        kernel: Kernel::MlLift,
        name: "ml_lift",
        bindings: &[
            b("q", R, V4, Len::Any),
            b("vptr", R, U, Len::PerItemPlusOne(1)),
            b("vhandle", R, U, Len::Any),
            b("vframe", R, V4, Len::Any),
            b("vinfo", R, VI, Len::PerItem(1)),
            b("u", W, V4, Len::PerItem(1)),
        ],
        items_per_group: 64,
        cpu: |p, b| {
            twins::multilevel::ml_lift(p, b.ro(0), b.ro(1), b.ro(2), b.ro(3), b.ro(4), b.rw(5))
        },
    },
    KernelDesc {
        kernel: Kernel::MlRestrict,
        name: "ml_restrict",
        bindings: &[
            b("y", R, V4, Len::Any),
            b("hptr", R, U, Len::PerItemPlusOne(1)),
            b("hvertex", R, U, Len::Any),
            b("hframe", R, V4, Len::Any),
            b("vinfo", R, VI, Len::Any),
            b("q", W, V4, Len::PerItem(3)),
        ],
        // One workgroup (64 invocations) per handle.
        items_per_group: 1,
        cpu: |p, b| {
            twins::multilevel::ml_restrict(p, b.ro(0), b.ro(1), b.ro(2), b.ro(3), b.ro(4), b.rw(5))
        },
    },
    KernelDesc {
        kernel: Kernel::MlBlockApply,
        name: "ml_block_apply",
        bindings: &[
            b("blocks", R, V4, Len::PerItem(12)),
            b("rv", R, V4, Len::PerItem(1)),
            b("z", W, V4, Len::PerItem(1)),
        ],
        items_per_group: 64,
        cpu: |p, b| twins::multilevel::ml_block_apply(p, b.ro(0), b.ro(1), b.rw(2)),
    },
    KernelDesc {
        kernel: Kernel::MlElementHv,
        name: "ml_element_hv",
        bindings: &[
            b("x", R, V4, Len::Any),
            b("tets", R, T4, Len::PerItem(1)),
            b("hess", R, F, Len::PerItem(144)),
            b("scale", R, F, Len::PerItem(1)),
            b("vinfo", R, VI, Len::Any),
            b("out", W, V4, Len::PerItem(4)),
        ],
        items_per_group: 64,
        cpu: |p, b| {
            twins::multilevel::ml_element_hv(
                p,
                b.ro(0),
                b.ro(1),
                b.ro(2),
                b.ro(3),
                b.ro(4),
                b.rw(5),
            )
        },
    },
    KernelDesc {
        kernel: Kernel::MlBsrHv,
        name: "ml_bsr_hv",
        bindings: &[
            b("rowptr", R, U, Len::PerItemPlusOne(1)),
            b("cols", R, U, Len::Any),
            b("blocks", R, M3, Len::Any),
            b("x", R, V4, Len::Any),
            b("add", R, V4, Len::Any),
            b("y", W, V4, Len::PerItem(1)),
        ],
        items_per_group: 64,
        cpu: |p, b| {
            twins::multilevel::ml_bsr_hv(p, b.ro(0), b.ro(1), b.ro(2), b.ro(3), b.ro(4), b.rw(5))
        },
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
