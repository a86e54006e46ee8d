//! The GPU runtime and the device API every solver is written against.
//!
//! * [`Device`] — one API over a wgpu backend ([`GpuDevice`]: own headless device or a host's
//!   adopted `Device`/`Queue`) and a CPU backend ([`CpuDevice`]): typed buffers ([`Buf`]),
//!   `dispatch(kernel, buffers in binding order, params, n)`, reductions (sum, dot, max-abs) and
//!   recorded [`Plan`]s submitted at once.
//! * [`Kernel`] / [`kernel::KERNELS`] — the kernel table: shader, bindings, workgroup size and the
//!   CPU twin (in [`twins`]) taking the same resources in binding order.
//! * WGSL lives in `shaders/` (shared snippets in `shaders/shared/`); `build.rs` validates every
//!   kernel with naga and embeds it ([`shaders`]).
//! * [`ElasticEvaluator`] — energy, gradient and element Hessians of the incremental potential.
//!
//! Layouts ([`layout`]) are `#[repr(C)]` Pod with compile-time size checks. The **position
//! buffer** is `array<vec4<f32>>` (16-byte stride, xyz in metres relative to the rest centroid,
//! w unused) with usage `STORAGE | VERTEX | COPY_SRC | COPY_DST`; see
//! [`ElasticEvaluator::positions_buffer`].

mod adapter;
mod cpu_device;
mod csr;
mod device;
mod evaluator;
pub mod kernel;
pub mod layout;
pub mod shaders;
pub mod twins;
mod wgpu_device;

pub use adapter::{list_adapters, AdapterList, AdapterReport, Backend, DeviceInfo};
pub use cpu_device::CpuDevice;
pub use csr::VertexCsr;
pub use device::{Buf, BufferId, Device, Plan, ReduceOp};
pub use evaluator::{ElasticEvaluator, ElasticRest, EvalFlags, Evaluation};
pub use kernel::Kernel;
pub use layout::{ElemParams, GpuMat3, GpuTet, GpuVec4, Params};
pub use wgpu_device::{GpuDevice, DEFAULT_READBACK_TIMEOUT};

/// Material model ids understood by the `elastic` kernel (the `model` field of [`ElemParams`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum GpuModel {
    /// Smith et al. 2018 stable Neo-Hookean with the log(I_C+1) term.
    StableNeoHookean = 0,
    /// Stable Neo-Hookean without the log term: μ/2(I_C−3) + λ/2(J−α)², α = 1+μ/λ.
    StableNeoHookeanVbd = 1,
    /// Fixed corotated: μΣ(σ−1)² + λ/2(J−1)².
    FixedCorotated = 2,
    /// Neo-Hookean with log J (Ψ = +∞ for J ≤ 0).
    NeoHookean = 3,
    /// St. Venant–Kirchhoff.
    StVK = 4,
    /// As-rigid-as-possible: μΣ(σ−1)².
    Arap = 5,
    /// Linear elasticity: μ‖ε‖² + λ/2·tr(ε)², ε = sym(F) − I.
    Linear = 6,
}

impl GpuModel {
    /// All models.
    pub const ALL: [GpuModel; 7] = [
        GpuModel::StableNeoHookean,
        GpuModel::StableNeoHookeanVbd,
        GpuModel::FixedCorotated,
        GpuModel::NeoHookean,
        GpuModel::StVK,
        GpuModel::Arap,
        GpuModel::Linear,
    ];
    /// From the raw id.
    pub fn from_id(id: u32) -> Option<Self> {
        Self::ALL.get(id as usize).copied()
    }
    /// The kernel's id for a material model (same numbering as `MaterialModel::gpu_id`).
    pub fn from_material(m: crate::material::MaterialModel) -> Self {
        use crate::material::MaterialModel as M;
        match m {
            M::StableNeoHookean => GpuModel::StableNeoHookean,
            M::StableNeoHookeanVbd => GpuModel::StableNeoHookeanVbd,
            M::FixedCorotated => GpuModel::FixedCorotated,
            M::NeoHookean => GpuModel::NeoHookean,
            M::StVk => GpuModel::StVK,
            M::Arap => GpuModel::Arap,
            M::Linear => GpuModel::Linear,
        }
    }
}
