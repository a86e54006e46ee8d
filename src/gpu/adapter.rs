//! Backend choice, adapter selection and adapter reports.

use crate::{JelloError, Result};
use std::fmt;
use std::str::FromStr;

/// Which device the engine runs on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Backend {
    /// A hardware GPU adapter when one exists, else the CPU. Software adapters (Mesa
    /// lavapipe/llvmpipe, SwiftShader, WARP: see [`DeviceInfo::is_software`]) are never chosen
    /// here: they run the f32 kernels several times slower than the f64 CPU path. See
    /// [`Backend::resolve`].
    #[default]
    Auto,
    /// A GPU adapter (software adapters included), or an error.
    Gpu,
    /// The CPU twins (rayon).
    Cpu,
}

impl FromStr for Backend {
    type Err = JelloError;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Backend::Auto),
            "gpu" => Ok(Backend::Gpu),
            "cpu" => Ok(Backend::Cpu),
            other => Err(JelloError::Invalid(format!(
                "backend `{other}`: expected auto, gpu or cpu"
            ))),
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Auto => "auto",
            Backend::Gpu => "gpu",
            Backend::Cpu => "cpu",
        })
    }
}

/// What ran a computation, for stats.json and logs.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DeviceInfo {
    /// Adapter name ("cpu" for the CPU backend).
    pub name: String,
    /// Graphics API ("vulkan", "gl", "metal", "dx12", or "cpu").
    pub backend: String,
    /// "discrete", "integrated", "virtual", "software" (an adapter wgpu reports as a CPU, or
    /// one named like a known software rasteriser), "other", or "cpu".
    pub device_type: String,
    /// Driver and driver info, when known.
    pub driver: String,
}

impl DeviceInfo {
    /// The CPU backend.
    pub fn cpu() -> Self {
        DeviceInfo {
            name: "cpu".into(),
            backend: "cpu".into(),
            device_type: "cpu".into(),
            driver: format!("rayon, {} threads", rayon::current_num_threads()),
        }
    }
    /// From a wgpu adapter's info.
    pub fn from_adapter(info: &wgpu::AdapterInfo) -> Self {
        let device_type = if is_software(info) {
            "software"
        } else {
            device_type_name(info.device_type)
        };
        DeviceInfo {
            name: info.name.clone(),
            backend: backend_name(info.backend).into(),
            device_type: device_type.into(),
            driver: format!("{} {}", info.driver, info.driver_info)
                .trim()
                .to_string(),
        }
    }
    /// True for the CPU backend.
    pub fn is_cpu(&self) -> bool {
        self.backend == "cpu"
    }
    /// True for a software adapter (a rasteriser running on the CPU behind a GPU API).
    pub fn is_software(&self) -> bool {
        self.device_type == "software"
    }
}

/// Name fragments of software rasterisers that present themselves as GPU adapters (lower case).
/// Matched as well as wgpu's `DeviceType::Cpu`, since some drivers report them as "other".
const SOFTWARE_NAMES: [&str; 6] = [
    "llvmpipe",
    "lavapipe",
    "softpipe",
    "swiftshader",
    "warp",
    "basic render driver",
];

/// True when `info` describes a software adapter: wgpu's `DeviceType::Cpu`, or a name containing
/// one of `SOFTWARE_NAMES` (Mesa llvmpipe/lavapipe/softpipe, SwiftShader, Microsoft WARP /
/// Basic Render Driver).
pub fn is_software(info: &wgpu::AdapterInfo) -> bool {
    let name = info.name.to_lowercase();
    info.device_type == wgpu::DeviceType::Cpu || SOFTWARE_NAMES.iter().any(|s| name.contains(s))
}

impl fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}, {})", self.name, self.backend, self.device_type)
    }
}

fn backend_name(b: wgpu::Backend) -> &'static str {
    match b {
        wgpu::Backend::Vulkan => "vulkan",
        wgpu::Backend::Metal => "metal",
        wgpu::Backend::Dx12 => "dx12",
        wgpu::Backend::Gl => "gl",
        wgpu::Backend::BrowserWebGpu => "webgpu",
        _ => "other",
    }
}

fn device_type_name(t: wgpu::DeviceType) -> &'static str {
    match t {
        wgpu::DeviceType::DiscreteGpu => "discrete",
        wgpu::DeviceType::IntegratedGpu => "integrated",
        wgpu::DeviceType::VirtualGpu => "virtual",
        wgpu::DeviceType::Cpu => "software",
        wgpu::DeviceType::Other => "other",
    }
}

/// The wgpu instance for headless compute; backends from env `WGPU_BACKEND` (e.g. `vulkan`,
/// `gl`), default all native backends.
pub(crate) fn instance() -> wgpu::Instance {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    if let Some(b) = wgpu::Backends::from_env() {
        desc.backends = b;
    }
    wgpu::Instance::new(desc)
}

/// Waits on the calling thread for a wgpu future (adapters, devices, error scopes).
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn block_on<F: std::future::Future>(_what: &str, f: F) -> Result<F::Output> {
    Ok(pollster::block_on(f))
}

/// On wasm32 a blocking wait is an error: a browser settles WebGPU's promises only once control
/// returns to its event loop, so waiting on the calling thread would never end. The async entry
/// points ([`super::GpuDevice::new_headless_async`]) await instead.
#[cfg(target_arch = "wasm32")]
pub(crate) fn block_on<F: std::future::Future>(what: &str, _f: F) -> Result<F::Output> {
    Err(JelloError::Gpu(format!(
        "{what}: a wasm build cannot block on the GPU (use the async API)"
    )))
}

/// [`pick_adapter_async`], waited for on the calling thread (an error on wasm32).
pub(crate) fn pick_adapter(instance: &wgpu::Instance) -> Result<Option<wgpu::Adapter>> {
    block_on("enumerating GPU adapters", pick_adapter_async(instance))?
}

/// Picks an adapter: env `WGPU_ADAPTER_NAME` (case-insensitive substring) when set, else the
/// best by type (discrete > integrated > virtual > other > software, where software is
/// [`is_software`]). `None` when none exists.
pub(crate) async fn pick_adapter_async(instance: &wgpu::Instance) -> Result<Option<wgpu::Adapter>> {
    let adapters = instance.enumerate_adapters(wgpu::Backends::all()).await;
    let wanted = std::env::var("WGPU_ADAPTER_NAME")
        .ok()
        .map(|s| s.to_lowercase());
    if let Some(w) = &wanted {
        let found = adapters
            .into_iter()
            .find(|a| a.get_info().name.to_lowercase().contains(w.as_str()));
        return match found {
            Some(a) => Ok(Some(a)),
            None => Err(JelloError::Gpu(format!(
                "no adapter matches WGPU_ADAPTER_NAME=`{w}` (see `jello info`)"
            ))),
        };
    }
    let rank = |a: &wgpu::Adapter| match a.get_info().device_type {
        _ if is_software(&a.get_info()) => 4,
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    };
    Ok(adapters.into_iter().min_by_key(rank))
}

/// How a requested [`Backend`] was resolved, and why: for the run banner, `jello info`,
/// stats.json and the run manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendChoice {
    /// What was asked for.
    pub requested: Backend,
    /// What runs: [`Backend::Cpu`] (the f64 path) or [`Backend::Gpu`] (f32 kernels).
    pub backend: Backend,
    /// The adapter the GPU backend uses (`None` on the CPU).
    pub adapter: Option<DeviceInfo>,
    /// Why, in words (e.g. "only a software adapter (llvmpipe) was found; use --backend gpu to
    /// run on it").
    pub reason: String,
}

impl BackendChoice {
    /// The CPU, for `reason`.
    pub fn cpu(requested: Backend, reason: impl Into<String>) -> Self {
        BackendChoice {
            requested,
            backend: Backend::Cpu,
            adapter: None,
            reason: reason.into(),
        }
    }
    /// `cpu` or `gpu`, as in stats.json.
    pub fn kind(&self) -> &'static str {
        match self.backend {
            Backend::Gpu => "gpu",
            _ => "cpu",
        }
    }
}

impl fmt::Display for BackendChoice {
    /// `backend cpu (f64): REASON` or `backend gpu (f32, ADAPTER): REASON`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.adapter {
            Some(a) if self.backend == Backend::Gpu => {
                write!(f, "backend gpu (f32, {a}): {}", self.reason)
            }
            _ => write!(f, "backend cpu (f64): {}", self.reason),
        }
    }
}

impl Backend {
    /// Decides where work runs, without creating a device (adapters are enumerated, honouring
    /// `WGPU_BACKEND` and `WGPU_ADAPTER_NAME`):
    /// - `Cpu`: the f64 CPU path.
    /// - `Gpu`: the adapter `pick_adapter` picks, software adapters included; an error when
    ///   there is none.
    /// - `Auto`: that adapter when it is hardware, else the CPU, with the reason (no adapter,
    ///   only a software one, or no match for `WGPU_ADAPTER_NAME`).
    pub fn resolve(self) -> Result<BackendChoice> {
        if self == Backend::Cpu {
            return Ok(BackendChoice::cpu(self, "requested"));
        }
        let picked = pick_adapter(&instance());
        let info = match (self, picked) {
            (_, Ok(Some(a))) => DeviceInfo::from_adapter(&a.get_info()),
            (Backend::Gpu, Ok(None)) => {
                return Err(JelloError::Gpu("no GPU adapter found".into()));
            }
            (Backend::Gpu, Err(e)) => return Err(e),
            (_, Ok(None)) => return Ok(BackendChoice::cpu(self, "no GPU adapter was found")),
            (_, Err(e)) => return Ok(BackendChoice::cpu(self, e.to_string())),
        };
        let reason = match (self, info.is_software()) {
            (Backend::Gpu, false) => "requested".to_string(),
            (Backend::Gpu, true) => format!(
                "requested; {} is a software adapter (f32 on the CPU, usually slower than \
                 --backend cpu)",
                info.name
            ),
            (_, false) => "hardware adapter found".to_string(),
            (_, true) => {
                return Ok(BackendChoice::cpu(
                    self,
                    format!(
                        "only a software adapter ({}) was found; use --backend gpu to run on it",
                        info.name
                    ),
                ))
            }
        };
        Ok(BackendChoice {
            requested: self,
            backend: Backend::Gpu,
            adapter: Some(info),
            reason,
        })
    }
}

/// One adapter with the limits and features that matter to jello.
#[derive(Clone, Debug)]
pub struct AdapterReport {
    /// Name, API, type, driver.
    pub info: DeviceInfo,
    /// Adapter limits.
    pub limits: wgpu::Limits,
    /// Adapter features.
    pub features: wgpu::Features,
}

/// All adapters the instance sees (honouring `WGPU_BACKEND`), for `jello info`.
#[derive(Clone, Debug, Default)]
pub struct AdapterList(pub Vec<AdapterReport>);

/// Lists every adapter with its limits and features (native only: it blocks).
#[cfg(not(target_arch = "wasm32"))]
pub fn list_adapters() -> AdapterList {
    let instance = instance();
    let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
    AdapterList(
        adapters
            .iter()
            .map(|a| AdapterReport {
                info: DeviceInfo::from_adapter(&a.get_info()),
                limits: a.limits(),
                features: a.features(),
            })
            .collect(),
    )
}

impl fmt::Display for AdapterReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = &self.limits;
        writeln!(f, "{}", self.info)?;
        writeln!(f, "  driver: {}", self.info.driver)?;
        writeln!(
            f,
            "  limits: storage buffers/stage {}, storage binding {} MiB, buffer {} MiB, invocations/workgroup {}, workgroups/dim {}",
            l.max_storage_buffers_per_shader_stage,
            l.max_storage_buffer_binding_size / (1 << 20),
            l.max_buffer_size / (1 << 20),
            l.max_compute_invocations_per_workgroup,
            l.max_compute_workgroups_per_dimension
        )?;
        write!(f, "  features: {:?}", self.features)
    }
}

impl fmt::Display for AdapterList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return write!(f, "no GPU adapter found (the CPU backend is available)");
        }
        for (i, a) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "[{i}] {a}")?;
        }
        Ok(())
    }
}
