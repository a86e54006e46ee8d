//! Ψ evaluated through the device API: the bridge that lets the f64 solvers run their element
//! work on the GPU (f32 WGSL kernels) — or on the kernels' CPU twins — while factorisations and
//! line searches stay on the CPU in f64.

use super::{ElasticReference, ElasticTerms, Model};
use crate::error::Result;
use crate::gpu::{Backend, Device, ElasticEvaluator, ElasticRest, EvalFlags};
use crate::material::EigenFilter;
use std::sync::Mutex;

/// [`ElasticTerms`] backed by an [`ElasticEvaluator`] on a [`Device`].
///
/// Gradient and element Hessians come from the device (f32). The energy used by line searches
/// is the model's f64 sum: f32 element energies carry ~1e-7 relative error, far above the
/// decrease a converging line search must resolve.
pub struct DeviceElastic {
    /// A copy of the model: the f64 energy for line searches is evaluated on it.
    model: Model,
    eval: Mutex<ElasticEvaluator>,
    name: String,
}

impl DeviceElastic {
    /// Uploads `model`'s rest data to a device of the given backend.
    pub fn new(model: &Model, backend: Backend) -> Result<Self> {
        Self::on_device(model, Device::new(backend)?)
    }

    /// Uploads `model`'s rest data to an existing device (e.g. one adopted from a host).
    pub fn on_device(model: &Model, device: Device) -> Result<Self> {
        let eval = ElasticEvaluator::new(device, &ElasticRest::from_model(model))?;
        let name = eval.info().to_string();
        Ok(DeviceElastic {
            model: model.clone(),
            eval: Mutex::new(eval),
            name,
        })
    }

    /// The device's position buffer (`array<vec4<f32>>`, xyz in metres relative to
    /// [`DeviceElastic::origin`], 16-byte stride, usage STORAGE | VERTEX | COPY_SRC | COPY_DST):
    /// a host binds it as a vertex buffer to draw without a CPU copy. `None` on the CPU twins.
    /// Call [`DeviceElastic::sync_positions`] after a step so it holds the step's result.
    pub fn positions_buffer(&self) -> Option<wgpu::Buffer> {
        let e = self.eval.lock().unwrap_or_else(|p| p.into_inner());
        e.positions_buffer().cloned()
    }

    /// Uploads positions `x` (flattened, m) into the position buffer.
    pub fn sync_positions(&self, x: &[f64]) -> Result<()> {
        let mut e = self.eval.lock().unwrap_or_else(|p| p.into_inner());
        e.upload_positions(x)
    }

    /// The point positions on the device are relative to (the rest centroid), m.
    pub fn origin(&self) -> [f64; 3] {
        let e = self.eval.lock().unwrap_or_else(|p| p.into_inner());
        e.origin()
    }

    /// Whether the evaluator runs on a GPU adapter (false: CPU twins).
    pub fn is_gpu(&self) -> bool {
        self.eval
            .lock()
            .map(|e| e.device().is_gpu())
            .unwrap_or(false)
    }

    fn run(&self, x: &[f64], flags: EvalFlags) -> crate::gpu::Evaluation {
        let mut e = self.eval.lock().unwrap_or_else(|p| p.into_inner());
        // x̃ = x and h = 1 switch the inertia term off: only Ψ's terms are wanted here.
        match e.evaluate(x, x, 1.0, flags) {
            Ok(v) => v,
            Err(err) => {
                // The trait has no error channel; NaN makes the solver report a failed step.
                log::error!("device evaluation failed: {err}");
                crate::gpu::Evaluation {
                    elastic_energy: f64::NAN,
                    gradient: vec![f64::NAN; x.len()],
                    element_hessians: vec![[f32::NAN; 144]; self.model.mesh.num_tets()],
                    ..Default::default()
                }
            }
        }
    }
}

impl ElasticTerms for DeviceElastic {
    fn elastic_energy(&self, x: &[f64]) -> f64 {
        self.model.elastic_energy(x)
    }

    fn elastic_gradient(&self, x: &[f64], g: &mut [f64]) -> f64 {
        let ev = self.run(x, EvalFlags::default());
        for (gi, v) in g.iter_mut().zip(&ev.gradient) {
            *gi += v;
        }
        self.model.elastic_energy(x)
    }

    /// Both filters run on the device (the `elastic` kernel's `ELASTIC_PROJECT` and
    /// `ELASTIC_ABS` flags).
    fn elastic_element_hessians_filtered(
        &self,
        x: &[f64],
        filter: EigenFilter,
        out: &mut Vec<[f64; 144]>,
    ) {
        let flags = EvalFlags {
            abs: filter == EigenFilter::Abs,
            ..EvalFlags::newton()
        };
        let ev = self.run(x, flags);
        out.clear();
        out.extend(ev.element_hessians.iter().map(|h| h.map(|v| v as f64)));
    }

    fn backend_name(&self) -> String {
        self.name.clone()
    }

    fn elastic_reference(&self, x: &[f64]) -> ElasticReference {
        self.model.elastic_reference(x)
    }

    fn elastic_energy_change(&self, x: &[f64], reference: &ElasticReference) -> f64 {
        self.model.elastic_energy_change(x, reference)
    }
}

/// The mean of the points `p` (m): the origin the device paths keep f32 positions relative to.
pub(crate) fn centroid(p: &[[f64; 3]]) -> [f64; 3] {
    let mut c = [0.0; 3];
    for q in p {
        for k in 0..3 {
            c[k] += q[k];
        }
    }
    c.map(|v| v / p.len().max(1) as f64)
}

/// Shared ownership lets a host keep a handle (for the position buffer) while the simulation
/// uses the evaluator.
impl ElasticTerms for std::sync::Arc<DeviceElastic> {
    fn elastic_energy(&self, x: &[f64]) -> f64 {
        self.as_ref().elastic_energy(x)
    }
    fn elastic_gradient(&self, x: &[f64], g: &mut [f64]) -> f64 {
        self.as_ref().elastic_gradient(x, g)
    }
    fn elastic_element_hessians_filtered(
        &self,
        x: &[f64],
        filter: EigenFilter,
        out: &mut Vec<[f64; 144]>,
    ) {
        self.as_ref()
            .elastic_element_hessians_filtered(x, filter, out)
    }
    fn backend_name(&self) -> String {
        self.as_ref().backend_name()
    }
    fn elastic_reference(&self, x: &[f64]) -> ElasticReference {
        self.as_ref().elastic_reference(x)
    }
    fn elastic_energy_change(&self, x: &[f64], reference: &ElasticReference) -> f64 {
        self.as_ref().elastic_energy_change(x, reference)
    }
}
