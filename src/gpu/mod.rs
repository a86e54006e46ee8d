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
//! Layouts ([`layout`]) are `#[repr(C)]` Pod with compile-time size checks.
//!
//! # Choosing the device
//! [`Device::new`] with [`Backend::Auto`] takes a hardware GPU adapter when one exists, else the
//! CPU twins; software adapters (Mesa lavapipe/llvmpipe, SwiftShader, WARP) only with
//! [`Backend::Gpu`] ([`Backend::resolve`] says which and why). Env `WGPU_BACKEND`
//! (`vulkan`, `gl`, `metal`, `dx12`) restricts the APIs, `WGPU_ADAPTER_NAME` (case-insensitive
//! substring) picks an adapter. [`Device::info`] reports what runs (name, API, device type) for
//! stats.json and logs; [`list_adapters`] lists every adapter with its limits and features.
//!
//! # Embedding in a host application
//! [`Device::from_wgpu`] adopts the host's `wgpu::Device` and `wgpu::Queue` (clones of the
//! handles; the engine never destroys the device and installs no error or device-lost
//! callbacks on it). Needed: no optional features; within `Limits::default()`: 8 storage
//! buffers per compute stage, 256 invocations per workgroup, 2 bind groups, 1 dynamic uniform
//! buffer; bindings up to `max_storage_buffer_binding_size` (Hessians take 576 B per element).
//!
//! The **position buffer** ([`ElasticEvaluator::positions_buffer`]) is `array<vec4<f32>>`,
//! 16-byte stride, xyz in metres relative to [`ElasticEvaluator::origin`] (the rest centroid),
//! w = 0, usage `STORAGE | VERTEX | COPY_SRC | COPY_DST` — bind it as a vertex buffer with
//! `VertexFormat::Float32x4` (or `Float32x3`, stride 16) and add the origin in the model
//! transform. This layout is stable. Every engine buffer has the same usages
//! ([`GpuDevice::buffer`]).
//!
//! # Precision
//! Kernels are f32. Energies are evaluated in e = σ − 1 without first-order cancellation, so
//! energy differences near rest keep f32 relative precision; the evaluator sums per-block energy
//! partials in f64. GPU results match the f32 twins to ~1e-6 relative (see tests/gpu_kernels.rs)
//! and the f64 reference (`crate::material`) to ~1e-6 on well-conditioned elements. The IPC
//! contact-pair kernels (`ipc_pairs`, `ipc_gather`; [`twins::ipc`]) resolve a pair's squared
//! distance to ~ε·L/d relative (L the pair's size): f32 is accurate for pairs well above
//! ε·L and the f64 path (`crate::contact`) is the reference below; their candidates come from the
//! CPU broad phase (`crate::contact::broad`), which stays on the CPU.

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

pub use adapter::{
    is_software, list_adapters, AdapterList, AdapterReport, Backend, BackendChoice, DeviceInfo,
};
pub use cpu_device::CpuDevice;
pub use csr::{SurfaceCsr, VertexCsr};
pub use device::{
    Buf, BufferId, CounterHandle, Device, DeviceCounters, KernelCount, Plan, ReduceOp,
};
pub use evaluator::{element_records, ElasticEvaluator, ElasticRest, EvalFlags, Evaluation};
pub use kernel::Kernel;
pub use layout::{
    ElemParams, GpuContact, GpuFrictionPair, GpuLocalSystem, GpuMat3, GpuPair, GpuTet, GpuTreeNode,
    GpuVec4, GpuVertexInfo, Params,
};
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
