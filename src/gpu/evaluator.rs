//! The incremental-potential evaluator the Newton-type solvers call:
//! `E(x) = Σ_e V_e·Ψ(F_e(x)) + Σ_v m_v/(2h²)·|x_v − x̃_v|²`, its gradient and the element Hessians.
//!
//! Precision: kernels are f32. Positions are uploaded **relative to the rest centroid** (so F
//! keeps f32 digits for meshes far from the origin) and the inertia term receives `x − x̃`
//! computed in f64 (so it keeps f32 *relative* precision even when x ≈ x̃). Element energies are
//! reduced on the device into per-1024-element partials, which are summed in f64 on the host.

use super::abi::{ELASTIC_ABS, ELASTIC_GRADIENT, ELASTIC_HESSIAN, ELASTIC_PROJECT, REDUCE_BLOCK};
use super::device::{Buf, Device, Plan};
use super::kernel::Kernel;
use super::layout::{ElemParams, GpuMat3, GpuVec4, Params};
use super::model::{relative_one, DeviceModel};
use super::{DeviceInfo, GpuModel};
use crate::material::{ElementRest, Material};
use crate::{JelloError, Result};

/// Rest-state data of the elastic body.
#[derive(Clone, Copy, Debug)]
pub struct ElasticRest<'a> {
    /// Number of vertices.
    pub num_vertices: usize,
    /// Tetrahedra (vertex indices, positively oriented).
    pub tets: &'a [[u32; 4]],
    /// Per element: Dm⁻¹ (1/m) and rest volume (m³).
    pub rest: &'a [ElementRest<f64>],
    /// Per element material (model-space μ, λ in Pa).
    pub materials: &'a [Material],
    /// Per-vertex lumped masses (kg).
    pub masses: &'a [f64],
    /// Reference point (m) positions are uploaded relative to; use the rest centroid.
    pub origin: [f64; 3],
}

impl<'a> ElasticRest<'a> {
    /// The elastic part of a [`Model`](crate::problem::Model): its tets, rest data, materials and
    /// lumped masses, with the rest centroid as origin.
    pub fn from_model(model: &'a crate::problem::Model) -> Self {
        ElasticRest {
            num_vertices: model.mesh.num_vertices(),
            tets: &model.mesh.tets,
            rest: &model.rest,
            materials: &model.materials,
            masses: &model.mass,
            origin: crate::problem::centroid(&model.mesh.positions),
        }
    }
}

/// What to compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvalFlags {
    /// Compute the gradient.
    pub gradient: bool,
    /// Compute the element Hessians.
    pub hessian: bool,
    /// Project each element Hessian to PSD.
    pub project: bool,
    /// With `project`: the absolute-value filter |λ| instead of the clamp max(λ, 0)
    /// ([`crate::material::EigenFilter::Abs`]).
    pub abs: bool,
    /// Also gather the per-vertex diagonal 3×3 blocks of the assembled elastic Hessian
    /// (requires `hessian`; for Jacobi/VBD-style preconditioners).
    pub hessian_diagonal: bool,
}

impl Default for EvalFlags {
    fn default() -> Self {
        EvalFlags {
            gradient: true,
            hessian: false,
            project: true,
            abs: false,
            hessian_diagonal: false,
        }
    }
}

impl EvalFlags {
    /// Energy only (line searches).
    pub fn energy_only() -> Self {
        EvalFlags {
            gradient: false,
            hessian: false,
            project: false,
            abs: false,
            hessian_diagonal: false,
        }
    }
    /// Energy, gradient and PSD-projected element Hessians (projected Newton).
    pub fn newton() -> Self {
        EvalFlags {
            gradient: true,
            hessian: true,
            project: true,
            abs: false,
            hessian_diagonal: false,
        }
    }
}

/// Result of one evaluation.
#[derive(Clone, Debug, Default)]
pub struct Evaluation {
    /// Total incremental potential (J) = elastic + inertia.
    pub energy: f64,
    /// Σ_e V_e Ψ_e (J).
    pub elastic_energy: f64,
    /// Σ_v m_v/(2h²)|x_v − x̃_v|² (J).
    pub inertia_energy: f64,
    /// ∂E/∂x, 3n, vertex-major (N); empty unless requested.
    pub gradient: Vec<f64>,
    /// Per element 12×12 Hessian of V·Ψ (N/m), row-major, dofs `[x0 y0 z0 x1 …]`; empty unless
    /// requested. The inertia Hessian m/h²·I is not included.
    pub element_hessians: Vec<[f32; 144]>,
    /// Per vertex, the diagonal 3×3 block of the assembled elastic Hessian (N/m), row-major;
    /// empty unless `hessian_diagonal` was requested. Inertia (m/h²·I) not included.
    pub vertex_hessian_diagonal: Vec<[f64; 9]>,
}

/// Evaluates the incremental potential on a [`Device`] (GPU or CPU twins).
pub struct ElasticEvaluator {
    device: Device,
    /// The body's mesh data on `device`.
    model: DeviceModel,
    x: Buf<GpuVec4>,
    dx: Buf<GpuVec4>,
    zeros: Buf<GpuVec4>,
    /// Lumped masses as the `inertia` kernel takes them (kg).
    mass: Buf<f32>,
    energy: Buf<f32>,
    elem_grad: Buf<GpuVec4>,
    vgrad: Buf<GpuVec4>,
    venergy: Buf<f32>,
    partials: Buf<f32>,
    hess: Option<Buf<f32>>,
    hdiag: Option<Buf<GpuMat3>>,
    dummy: Buf<f32>,
}

impl ElasticEvaluator {
    /// Uploads the rest data. Errors on inconsistent lengths, bad indices or non-finite data.
    pub fn new(mut device: Device, rest: &ElasticRest<'_>) -> Result<Self> {
        let d = &mut device;
        let model = DeviceModel::from_rest(d, rest)?;
        let (ne, nv) = (model.ne, model.nv);
        let masses: Vec<f32> = rest.masses.iter().map(|&m| m as f32).collect();
        let x = d.alloc::<GpuVec4>("positions", nv)?;
        let dx = d.alloc::<GpuVec4>("x - x_tilde", nv)?;
        let zeros = d.alloc::<GpuVec4>("zeros", nv)?;
        let mass = d.upload("masses", &masses)?;
        let energy = d.alloc::<f32>("element energy", ne)?;
        let elem_grad = d.alloc::<GpuVec4>("element gradients", 4 * ne)?;
        let vgrad = d.alloc::<GpuVec4>("vertex gradient", nv)?;
        let venergy = d.alloc::<f32>("vertex energy", nv)?;
        let np = ne.div_ceil(REDUCE_BLOCK).max(1) + nv.div_ceil(REDUCE_BLOCK).max(1);
        let partials = d.alloc::<f32>("energy partials", np)?;
        let dummy = d.alloc::<f32>("unused binding", 4)?;
        Ok(ElasticEvaluator {
            device,
            model,
            x,
            dx,
            zeros,
            mass,
            energy,
            elem_grad,
            vgrad,
            venergy,
            partials,
            hess: None,
            hdiag: None,
            dummy,
        })
    }

    /// The device (GPU or CPU) this evaluator runs on.
    pub fn device(&self) -> &Device {
        &self.device
    }
    /// Which adapter ran the evaluations.
    pub fn info(&self) -> &DeviceInfo {
        self.device.info()
    }
    /// The reference point positions are stored relative to (m).
    pub fn origin(&self) -> [f64; 3] {
        self.model.origin
    }
    /// The GPU position buffer (None on the CPU backend): `array<vec4<f32>>`, 16-byte stride,
    /// xyz = position − [`origin`](Self::origin) in metres as of the last `evaluate`/`upload`,
    /// w = 0; usage STORAGE | VERTEX | COPY_SRC | COPY_DST, so a host can bind it as a vertex
    /// buffer (`Float32x4`, or `Float32x3` with stride 16) and add the origin in its transform.
    pub fn positions_buffer(&self) -> Option<&wgpu::Buffer> {
        self.device.as_gpu()?.buffer(self.x.id())
    }

    /// Uploads positions `x` (3n, m) relative to the origin.
    pub fn upload_positions(&mut self, x: &[f64]) -> Result<()> {
        check_flat(x, self.model.nv, "x")?;
        let v = self.model.relative(x);
        self.device.write(&self.x, 0, &v)
    }

    /// Evaluates the incremental potential at `x` (3n, m) for predicted positions `x_tilde`
    /// (3n, m) and time step `h` (s).
    pub fn evaluate(
        &mut self,
        x: &[f64],
        x_tilde: &[f64],
        h: f64,
        flags: EvalFlags,
    ) -> Result<Evaluation> {
        if !(h.is_finite() && h > 0.0) {
            return Err(JelloError::Invalid(format!(
                "evaluate: time step h = {h} must be > 0"
            )));
        }
        if flags.hessian_diagonal && !flags.hessian {
            return Err(JelloError::Invalid(
                "evaluate: hessian_diagonal needs hessian".into(),
            ));
        }
        self.upload_positions(x)?;
        check_flat(x_tilde, self.model.nv, "x_tilde")?;
        // x − x̃ in f64, then rounded: the inertia term keeps f32 relative precision near x̃.
        let dxv: Vec<GpuVec4> = x
            .chunks_exact(3)
            .zip(x_tilde.chunks_exact(3))
            .map(|(p, q)| relative_one([p[0], p[1], p[2]], [q[0], q[1], q[2]]))
            .collect();
        self.device.write(&self.dx, 0, &dxv)?;
        let m = &self.model;
        let (ne, nv) = (m.ne as u32, m.nv as u32);
        // Energy-only evaluations (line searches) skip the element gradients and their gather;
        // the inertia kernel then adds into a gradient buffer nobody reads.
        let want_grad = flags.gradient || flags.hessian;
        let mut kflags = if want_grad { ELASTIC_GRADIENT } else { 0 };
        if flags.hessian {
            kflags |= ELASTIC_HESSIAN;
            if flags.project {
                kflags |= if flags.abs {
                    ELASTIC_ABS
                } else {
                    ELASTIC_PROJECT
                };
            }
            if self.hess.is_none() {
                self.hess = Some(
                    self.device
                        .alloc::<f32>("element hessians", 144 * self.model.ne)?,
                );
            }
        }
        let hess_id = match (&self.hess, flags.hessian) {
            (Some(h), true) => h.id(),
            _ => self.dummy.id(),
        };
        let mut plan = Plan::new();
        plan.dispatch(
            Kernel::Elastic,
            &[
                self.x.id(),
                m.tets.id(),
                m.dm_inv.id(),
                m.elem.id(),
                self.energy.id(),
                self.elem_grad.id(),
                hess_id,
            ],
            Params::new().u0(kflags),
            ne,
        );
        if want_grad {
            plan.dispatch(
                Kernel::GatherGradient,
                &[
                    self.elem_grad.id(),
                    m.offsets.id(),
                    m.csr_tets.id(),
                    m.csr_local.id(),
                    self.vgrad.id(),
                ],
                Params::new(),
                nv,
            );
        }
        plan.dispatch(
            Kernel::Inertia,
            &[
                self.dx.id(),
                self.zeros.id(),
                self.mass.id(),
                self.vgrad.id(),
                self.venergy.id(),
            ],
            Params::new().f0((1.0 / (h * h)) as f32),
            nv,
        );
        if flags.hessian_diagonal {
            if self.hdiag.is_none() {
                self.hdiag = Some(
                    self.device
                        .alloc::<GpuMat3>("vertex hessian diagonal", self.model.nv)?,
                );
            }
            let (hb, db) = (
                self.hess.expect("allocated above"),
                self.hdiag.expect("allocated above"),
            );
            plan.dispatch(
                Kernel::GatherHessianDiag,
                &[
                    hb.id(),
                    m.offsets.id(),
                    m.csr_tets.id(),
                    m.csr_local.id(),
                    db.id(),
                ],
                Params::new(),
                nv,
            );
        }
        // First reduction pass only: partials are summed in f64 on the host.
        let pe = self.model.ne.div_ceil(REDUCE_BLOCK).max(1);
        plan.dispatch(
            Kernel::ReduceSum,
            &[self.energy.id(), self.partials.id()],
            Params::new(),
            ne,
        );
        plan.dispatch(
            Kernel::ReduceSum,
            &[self.venergy.id(), self.partials.id()],
            Params::new().u0(pe as u32),
            nv,
        );
        self.device.submit(&plan)?;
        let partials = self.device.read(&self.partials)?;
        let elastic_energy: f64 = partials[..pe].iter().map(|&v| v as f64).sum();
        let inertia_energy: f64 = partials[pe..].iter().map(|&v| v as f64).sum();
        let mut out = Evaluation {
            energy: elastic_energy + inertia_energy,
            elastic_energy,
            inertia_energy,
            ..Default::default()
        };
        if flags.gradient {
            let g = self.device.read(&self.vgrad)?;
            out.gradient = g
                .iter()
                .flat_map(|v| [v[0] as f64, v[1] as f64, v[2] as f64])
                .collect();
        }
        if flags.hessian {
            if let Some(hb) = &self.hess {
                let hv = self.device.read(hb)?;
                out.element_hessians = bytemuck::pod_collect_to_vec(&hv);
            }
        }
        if flags.hessian_diagonal {
            if let Some(db) = &self.hdiag {
                out.vertex_hessian_diagonal = self
                    .device
                    .read(db)?
                    .iter()
                    .map(|m| {
                        let mut r = [0.0; 9];
                        for (i, v) in r.iter_mut().enumerate() {
                            *v = m.get(i / 3, i % 3) as f64;
                        }
                        r
                    })
                    .collect();
            }
        }
        Ok(out)
    }
}

/// Per-element GPU rest records: Dm⁻¹ (1/m) as [`GpuMat3`] and material + rest volume as
/// [`ElemParams`], in f32. Errors on a non-finite Dm⁻¹ or a non-positive rest volume, naming the
/// element.
pub fn element_records(
    rest: &[ElementRest<f64>],
    materials: &[Material],
) -> Result<(Vec<GpuMat3>, Vec<ElemParams>)> {
    let mut dm = Vec::with_capacity(rest.len());
    let mut ep = Vec::with_capacity(rest.len());
    for (e, (r, m)) in rest.iter().zip(materials).enumerate() {
        let d = r.dm_inv;
        if !(d.iter().all(|v| v.is_finite()) && r.volume.is_finite() && r.volume > 0.0) {
            return Err(JelloError::Invalid(format!(
                "element {e} has a degenerate rest shape"
            )));
        }
        dm.push(GpuMat3::from_rows([0, 1, 2].map(|i| {
            [d[(i, 0)] as f32, d[(i, 1)] as f32, d[(i, 2)] as f32]
        })));
        ep.push(ElemParams {
            mu: m.mu as f32,
            lambda: m.lambda as f32,
            volume: r.volume as f32,
            model: GpuModel::from_material(m.model) as u32,
        });
    }
    Ok((dm, ep))
}

/// Checks that `a` holds 3 × `nv` finite values, naming it `what` otherwise.
fn check_flat(a: &[f64], nv: usize, what: &str) -> Result<()> {
    if a.len() != 3 * nv {
        return Err(JelloError::Invalid(format!(
            "{what} has {} values, expected 3 × {nv}",
            a.len()
        )));
    }
    if let Some(i) = a.iter().position(|v| !v.is_finite()) {
        return Err(JelloError::Invalid(format!("{what}[{i}] is not finite")));
    }
    Ok(())
}
