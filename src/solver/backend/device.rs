//! The f32 device backend: vectors are `vec4<f32>` buffers on a [`Device`] (a GPU, or the
//! kernels' CPU twins), operations are recorded into one [`Plan`] and submitted when the host
//! needs a value, and reduction results stay on the device in a scalar buffer.
//!
//! # Data on the device
//! Positions relative to the rest centroid ([`DeviceBackend::origin`]) as `vec4<f32>` (current
//! and trial), with per-vertex, per-obstacle contact records ([`GpuContact`]: half-spaces only,
//! see [`PotentialBackend::check`]) computed in f64 at the step's start and advanced with each
//! move, as the JGS2 device solver keeps them; the step's start and inertial target; per
//! element the energy of the `elastic` kernel and its value at the start (the reference of the
//! energy differences); per vertex the barrier at the start.
//!
//! # Scalars
//! `scal` holds up to [`MAX_SLOTS`] f32 scalars: dot products land there (a per-group partial
//! pass fused into the kernel that produced the vector, then `reduce_sum`), and later kernels
//! read their coefficients from it (`dev_combine`), so a chain of dependent reductions and
//! updates records without a read-back. What only the host needs — the energy change, the
//! residual, the largest move, the count of forbidden elements — is left as per-group partials
//! in the `readback` buffer and summed there in f64. [`Backend::read`] appends a copy of the
//! used slots to `readback`, submits the plan and reads `readback` once: one synchronisation.
//!
//! # Energy differences
//! A trial's E − E(x_start) is Σ_e (Ψ_e(x) − Ψ_e(x_start)) + Σ_v (inertia and barrier
//! differences), each term a difference of two f32 values of the same kernel, summed per group
//! in f32 and over groups in f64 on the host — as the f64 path sums per element — so the
//! inertia term's large constant never enters. Each Ψ_e still carries f32 round-off (~6e-8
//! relative), so a comparison allows [`DEVICE_ENERGY_SLACK`] of the summed magnitudes.
//!
//! # What crosses the bus
//! Per QN iteration: one read of the readback buffer (the used scalar slots, 4 bytes each, and
//! the per-group partials: ~4 bytes per 256 vertices or elements, a few hundred bytes), q read
//! and r written for the host solve (16·n bytes each), and with obstacles the contact records
//! for the contact correction (32·n bytes per obstacle). Measured on the 3,321-vertex Table I
//! bar (`benches/solvers.rs`): 104 KB per solve, the transfer and host solve 3–4% of a step on
//! lavapipe and the twins. DOT adds, once per step, the element Hessians at x_start read
//! back for the host's subdomain factors (576 bytes per element, from the `elastic` kernel)
//! and the per-vertex inertia and barrier blocks written for `dev_curvature` (48 bytes per
//! vertex); its quadratic start's dᵀHd then stays on the device. Per ADMM iteration (ADMM's
//! extension of this backend, `src/solver/admm/device.rs`): the right-hand side read and the
//! new positions written (16·n bytes each) and one read of the readback buffer; see
//! `src/solver/admm/mod.rs` for the figures.

use super::{Backend, Coef, Combine, Dots, GradientScalars, Point, PotentialBackend, TrialScalars};
use crate::clock::Instant;
use crate::error::{JelloError, Result};
use crate::gpu::abi::{
    dev_groups, COMBINE_DOT, COMBINE_SET, COMBINE_VEC4, ELASTIC_ABS, ELASTIC_GRADIENT,
    ELASTIC_HESSIAN, ELASTIC_PROJECT, ENERGY_REFERENCE, ENERGY_STRICT, INVERSION_STRICT, SLOT_NONE,
};
use crate::gpu::{Buf, Device, DeviceModel, GpuContact, GpuMat3, GpuVec4, Kernel, Params, Plan};
use crate::material::EigenFilter;
use crate::problem::{ElasticTerms, Model, Obstacle, StepProblem};

mod ext;

/// Scalar slots of the device scalar buffer.
pub const MAX_SLOTS: usize = 1000;

/// Relative round-off allowance of a device energy comparison: a trial is compared with the
/// current energy within `DEVICE_ENERGY_SLACK` × (|e| + Σ_e |Ψ_e(x_start)| + Σ_v |B_v(x_start)|).
/// Each f32 element energy carries ~6e-8 relative error, so the worst case of the summed
/// differences is ~6e-8 of the magnitudes; 1e-7 sits just above it. Measured on `drop.toml`
/// (twins): with 1e-6 (the JGS2 device solver's value) the slack let barrier increases of
/// ~1e-5 J through at impact, vertices were pressed to 1e-12 m of the ground and two steps ran
/// into the 1000-iteration cap; with 1e-7 all 80 steps converge and the trajectory stays within
/// 6e-5 of the diagonal of the f64 one, with the other bundled scenes' iteration counts unchanged.
pub const DEVICE_ENERGY_SLACK: f64 = 1e-7;

/// Handle to a [`DeviceBackend`] vector.
pub type DeviceVector = Buf<GpuVec4>;

/// Handle to a [`DeviceBackend`] scalar: a slot, or a value the host assembles from partials.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DeviceScalar {
    /// `scal[i]`.
    Slot(u32),
    /// 1 / max(1, `scal[i]`) (the step bound: its slot holds 1/α, which keeps a tiny α
    /// representable in f32 where 1 − α would round it to 0).
    Reciprocal(u32),
    /// `scale` / max(1, `scal[i]`) (a trial's α).
    Alpha {
        /// The bound's slot.
        slot: u32,
        /// The trial's scale.
        scale: f64,
    },
    /// The last trial's energy change (element + vertex partials).
    Energy,
    /// The last trial's forbidden-element count.
    Forbidden,
    /// The last trial's largest vertex move.
    MaxMove,
    /// The last gradient's characteristic-norm residual.
    Residual,
    /// ADMM's last primal residual ‖W(Dx − z)‖ (element partials).
    Primal,
    /// ADMM's last dual residual ‖DᵀW²(zⁿ⁺¹ − zⁿ)‖ over the free vertices (vertex partials).
    Dual,
}

/// Offsets of the readback buffer's partial regions.
#[derive(Clone, Copy, Debug)]
struct Regions {
    /// Element energy partials (ge), then forbidden counts (ge).
    elem: usize,
    ge: usize,
    /// Vertex energy partials (gv).
    vert: usize,
    gv: usize,
    /// Largest moves (gv).
    dx: usize,
    /// Residual square sums (gv).
    res: usize,
    /// ADMM's primal (ge) and dual (gv) square-sum partials.
    admm: usize,
    len: usize,
}

/// Bus traffic and host time of [`Backend::host_solve`] calls and ADMM x-steps (ADMM's
/// `admm_global`).
#[derive(Clone, Copy, Debug, Default)]
pub struct HostSolveStats {
    /// Calls.
    pub calls: usize,
    /// Bytes read from and written to the device.
    pub bytes: usize,
    /// Time waiting for the device and moving q and r, ms.
    pub transfer_ms: f64,
    /// Of `transfer_ms`, the wait for the work recorded before the call (ADMM's x-steps wait
    /// for it separately so that the transfers themselves can be told apart; QN's do not), ms.
    pub wait_ms: f64,
    /// Time in the host routine (the prefactored solve), ms.
    pub host_ms: f64,
}

/// See the module docs.
pub struct DeviceBackend {
    dev: Device,
    /// The body's mesh data and step start on `dev`.
    pub(crate) m: DeviceModel,
    hess: Buf<f32>,
    x: [Buf<GpuVec4>; 2],
    contacts: [Buf<GpuContact>; 2],
    cur: usize,
    energy: Buf<f32>,
    eref: Buf<f32>,
    egrad: Buf<GpuVec4>,
    vref: Buf<f32>,
    scal: Buf<f32>,
    used: u32,
    bound_slot: u32,
    part: [Buf<f32>; 3],
    /// Per element group the AND of the inversion filter's orientation masks
    /// (`dev_inversion_bound`).
    inv_part: Buf<u32>,
    /// The flat vectors ([`Backend::flat_vector`]): worked on all four lanes.
    flat: Vec<crate::gpu::BufferId>,
    readback: Buf<f32>,
    regions: Regions,
    plan: Plan,
    magnitude: f64,
    pending_magnitude: bool,
    solves: HostSolveStats,
    /// A solver's own state on this backend (module `ext`).
    ext: ext::Extension,
    /// The element Hessians at x_start and the per-vertex blocks, once asked for
    /// ([`PotentialBackend::start_element_hessians`]).
    start: Option<Box<StartHessian>>,
    /// Whether `start` holds this step's Hessians.
    start_valid: bool,
}

/// DOT's Hessian at the step's start on the device: element Hessians (f32, 144 per element, as
/// the `elastic` kernel writes them), the per-vertex 3×3 blocks of inertia and barrier
/// ([`StepProblem::vertex_block`], computed in f64 on the host and uploaded once per step), the
/// per-group partials of `dev_curvature`, and the host's f64 copy of the element Hessians.
struct StartHessian {
    hess: Buf<f32>,
    kv: Buf<GpuMat3>,
    part: Buf<f32>,
    host: Vec<[f64; 144]>,
}

impl DeviceBackend {
    /// Uploads `model`'s static data to `device`.
    pub fn new(device: Device, model: &Model) -> Result<Self> {
        let mut d = device;
        let m = DeviceModel::new(&mut d, model)?;
        let (nv, ne) = (m.nv, m.ne);
        let nc = m.contacts_per_vertex();
        let (ge, gv) = (dev_groups(ne), dev_groups(nv));
        let elem_off = MAX_SLOTS;
        let regions = Regions {
            elem: elem_off,
            ge,
            vert: elem_off + 2 * ge,
            gv,
            dx: elem_off + 2 * ge + gv,
            res: elem_off + 2 * ge + 2 * gv,
            admm: elem_off + 2 * ge + 3 * gv,
            len: elem_off + 3 * ge + 4 * gv,
        };
        let mut s = DeviceBackend {
            hess: d.alloc("unused Hessians", 1)?,
            x: [d.alloc("positions", nv)?, d.alloc("trial positions", nv)?],
            contacts: [
                d.alloc("contact records", nc * nv)?,
                d.alloc("trial contact records", nc * nv)?,
            ],
            cur: 0,
            energy: d.alloc("element energies", ne)?,
            eref: d.alloc("element energies at the start", ne)?,
            egrad: d.alloc("element gradients", 4 * ne)?,
            vref: d.alloc("vertex barrier at the start", nv)?,
            scal: d.alloc("scalars", MAX_SLOTS)?,
            used: 0,
            bound_slot: 0,
            part: [
                d.alloc("partials a·b", gv)?,
                d.alloc("partials a·a", gv)?,
                d.alloc("partials b·b", gv)?,
            ],
            inv_part: d.alloc("inversion filter masks", ge)?,
            flat: Vec::new(),
            readback: d.alloc("readback", regions.len)?,
            regions,
            plan: Plan::new(),
            magnitude: 0.0,
            pending_magnitude: false,
            solves: HostSolveStats::default(),
            ext: None,
            start: None,
            start_valid: false,
            m,
            dev: d,
        };
        s.bound_slot = s.alloc_slot()?;
        Ok(s)
    }

    /// The device (GPU or CPU twins).
    pub fn device(&self) -> &Device {
        &self.dev
    }

    /// The point positions on the device are relative to (the rest centroid), m.
    pub fn origin(&self) -> [f64; 3] {
        self.m.origin
    }

    /// The GPU buffer of the current positions (`None` on the CPU twins):
    /// `array<vec4<f32>>`, 16-byte stride, xyz = position − [`Self::origin`] in metres, w = 0.
    pub fn positions_buffer(&self) -> Option<&wgpu::Buffer> {
        self.dev.as_gpu()?.buffer(self.x[self.cur].id())
    }

    /// Bus traffic and host time of the host solves so far.
    pub fn host_solve_stats(&self) -> HostSolveStats {
        self.solves
    }

    fn alloc_slot(&mut self) -> Result<u32> {
        if self.used as usize >= MAX_SLOTS.min(SLOT_NONE as usize) {
            return Err(JelloError::Solver(format!(
                "device backend: more than {MAX_SLOTS} scalar slots"
            )));
        }
        self.used += 1;
        Ok(self.used - 1)
    }

    fn flush(&mut self) -> Result<()> {
        if !self.plan.is_empty() {
            let plan = std::mem::take(&mut self.plan);
            self.dev.submit(&plan)?;
        }
        Ok(())
    }

    /// Whether `v` is a flat vector (four lanes per vec4) rather than a per-vertex field.
    fn is_flat(&self, v: &DeviceVector) -> bool {
        self.flat.contains(&v.id())
    }

    /// The lanes `v`'s numbers occupy per vec4 (3 for a field, 4 for a flat vector) and the
    /// `dev_combine` flag that says so; errors unless every one of `others` is of `v`'s kind
    /// and length.
    fn kind(&self, v: &DeviceVector, others: &[&DeviceVector], what: &str) -> Result<(usize, u32)> {
        let flat = self.is_flat(v);
        for o in others {
            if o.len() != v.len() || self.is_flat(o) != flat {
                return Err(JelloError::Solver(format!(
                    "device backend: {what} of vectors of different kinds or lengths"
                )));
            }
        }
        Ok(if flat { (4, COMBINE_VEC4) } else { (3, 0) })
    }

    fn slot_of(s: Option<DeviceScalar>, what: &str) -> Result<u32> {
        match s {
            None => Ok(SLOT_NONE),
            Some(DeviceScalar::Slot(i)) => Ok(i),
            Some(other) => Err(JelloError::Solver(format!(
                "device backend: {what} must be a scalar slot, got {other:?}"
            ))),
        }
    }

    fn point(&self, at: Point) -> usize {
        match at {
            Point::Current => self.cur,
            Point::Trial => 1 - self.cur,
        }
    }

    /// Records the element energies at x[p] (gradients too with `gradient`).
    fn rec_elastic(&mut self, p: usize, gradient: bool) {
        self.plan.dispatch(
            Kernel::Elastic,
            &[
                self.x[p].id(),
                self.m.tets.id(),
                self.m.dm_inv.id(),
                self.m.elem.id(),
                self.energy.id(),
                self.egrad.id(),
                self.hess.id(),
            ],
            Params::new().u0(if gradient { ELASTIC_GRADIENT } else { 0 }),
            self.m.ne as u32,
        );
    }

    fn vertex_params(&self, u0: u32, u1: usize) -> Params {
        Params {
            u0,
            u1: u1 as u32,
            f0: self.m.step.inertia,
            f1: self.m.step.kappa,
            f2: self.m.step.dhat,
            f3: self.m.step.barrier_ih2,
            ..Params::default()
        }
    }

    /// Records the element and vertex energy passes at x[p] (`reference`: the start's
    /// references; else the differences from them, with the forbidden-element check from
    /// x[from]); with `gradient`, the element pass also writes the element gradients (for
    /// [`Self::rec_gradient_tail`]: one element pass serves both).
    fn rec_energies(&mut self, p: usize, from: usize, reference: bool, gradient: bool) {
        self.rec_elastic(p, gradient);
        let mode = if reference {
            ENERGY_REFERENCE
        } else if self.m.step.strict {
            ENERGY_STRICT
        } else {
            0
        };
        self.plan.dispatch(
            Kernel::DevElementEnergy,
            &[
                self.energy.id(),
                self.eref.id(),
                self.x[from].id(),
                self.x[p].id(),
                self.m.tets.id(),
                self.m.elem.id(),
                self.readback.id(),
            ],
            Params {
                u0: mode,
                u1: self.regions.elem as u32,
                ..Params::default()
            },
            self.m.ne as u32,
        );
        let params = self.vertex_params(
            if reference { ENERGY_REFERENCE } else { 0 },
            self.regions.vert,
        );
        self.plan.dispatch(
            Kernel::DevVertexEnergy,
            &[
                self.x[p].id(),
                self.m.x_start.id(),
                self.m.x_tilde.id(),
                self.m.vinfo.id(),
                self.contacts[p].id(),
                self.vref.id(),
                self.readback.id(),
            ],
            params,
            self.m.nv as u32,
        );
    }

    /// Records the gradient at x[p] from the element gradients of the last element pass there:
    /// the per-vertex gather, then inertia, barrier, pins and the residual's partials.
    fn rec_gradient_tail(&mut self, p: usize, g: DeviceVector) -> DeviceScalar {
        self.plan.dispatch(
            Kernel::GatherGradient,
            &[
                self.egrad.id(),
                self.m.offsets.id(),
                self.m.csr_tets.id(),
                self.m.csr_local.id(),
                g.id(),
            ],
            Params::new(),
            self.m.nv as u32,
        );
        let params = self.vertex_params(0, self.regions.res);
        self.plan.dispatch(
            Kernel::DevVertexGradient,
            &[
                self.x[p].id(),
                self.m.x_tilde.id(),
                self.m.vinfo.id(),
                self.contacts[p].id(),
                self.m.res_weight.id(),
                g.id(),
                self.readback.id(),
            ],
            params,
            self.m.nv as u32,
        );
        DeviceScalar::Residual
    }

    /// Near an obstacle the contact records hold the distance to f32 *relative* precision,
    /// the positions only to f32 precision of the coordinate (~3e-8 m at 0.3 m from the
    /// centroid): a vertex the records keep 1e-8 m above the ground can come back below it.
    /// Within d̂ of a half-space the returned f64 position is moved along the normal so its
    /// distance is the record's — a change of the order of the position's f32 rounding.
    fn reconcile_contacts(&mut self, problem: &StepProblem, x: &mut [f64]) -> Result<()> {
        if self.m.obstacles.is_empty() {
            return Ok(());
        }
        let cs = self.dev.read(&self.contacts[self.cur])?;
        let nc = self.m.obstacles.len();
        let dhat = problem.model.barrier.dhat;
        for v in 0..self.m.nv {
            for (o, ob) in self.m.obstacles.iter().enumerate() {
                let c = &cs[v * nc + o];
                let Obstacle::HalfSpace { normal, offset } = ob else {
                    continue;
                };
                let d_rec = c.a[3] as f64;
                let p = &mut x[3 * v..3 * v + 3];
                let d64 = normal[0] * p[0] + normal[1] * p[1] + normal[2] * p[2] - offset;
                if d_rec < dhat || d64 <= 0.0 {
                    for k in 0..3 {
                        p[k] += (d_rec - d64) * normal[k];
                    }
                }
            }
        }
        Ok(())
    }

    fn value(&self, rb: &[f32], s: DeviceScalar) -> f64 {
        let r = &self.regions;
        let sum = |a: usize, n: usize| rb[a..a + n].iter().map(|&v| v as f64).sum::<f64>();
        match s {
            DeviceScalar::Slot(i) => rb[i as usize] as f64,
            DeviceScalar::Reciprocal(i) => 1.0 / (rb[i as usize] as f64).max(1.0),
            DeviceScalar::Alpha { slot, scale } => scale / (rb[slot as usize] as f64).max(1.0),
            DeviceScalar::Energy => sum(r.elem, r.ge) + sum(r.vert, r.gv),
            DeviceScalar::Forbidden => sum(r.elem + r.ge, r.ge),
            DeviceScalar::MaxMove => rb[r.dx..r.dx + r.gv].iter().fold(0.0f64, |m, &v| {
                if v as f64 > m || v.is_nan() {
                    v as f64
                } else {
                    m
                }
            }),
            DeviceScalar::Primal => sum(r.admm, r.ge).max(0.0).sqrt(),
            DeviceScalar::Dual => sum(r.admm + r.ge, r.gv).max(0.0).sqrt(),
            DeviceScalar::Residual => {
                let norm = sum(r.res, r.gv).max(0.0).sqrt();
                if self.m.char_scale > 0.0 {
                    norm / self.m.char_scale
                } else {
                    norm
                }
            }
        }
    }
}

impl Backend for DeviceBackend {
    type Vector = DeviceVector;
    type Scalar = DeviceScalar;

    fn name(&self) -> String {
        self.dev.info().to_string()
    }

    fn is_f64(&self) -> bool {
        false
    }

    fn vector(&mut self, label: &str) -> Result<DeviceVector> {
        self.dev.alloc(label, self.m.nv)
    }

    fn flat_vector(&mut self, label: &str, len: usize) -> Result<DeviceVector> {
        if !len.is_multiple_of(4) {
            return Err(JelloError::Solver(format!(
                "device backend: a flat vector of {len} numbers (a multiple of 4 is needed)"
            )));
        }
        let n = (len / 4).max(1);
        let g = dev_groups(n);
        if g > self.part[0].len() {
            // The per-group partials of `combine` and `dots` must hold this vector's groups;
            // nothing recorded may name the old ones.
            self.flush()?;
            for k in 0..3 {
                let old = std::mem::replace(&mut self.part[k], self.dev.alloc("partials", g)?);
                self.dev.free(old);
            }
        }
        let v = self.dev.alloc(label, n)?;
        self.flat.push(v.id());
        Ok(v)
    }

    fn scalar(&mut self) -> Result<DeviceScalar> {
        Ok(DeviceScalar::Slot(self.alloc_slot()?))
    }

    fn write_vector(&mut self, v: DeviceVector, values: &[f64]) -> Result<()> {
        let (lanes, _) = self.kind(&v, &[], "write")?;
        if values.len() != lanes * v.len() {
            return Err(JelloError::Solver(format!(
                "device backend: {} values for a vector of {}",
                values.len(),
                lanes * v.len()
            )));
        }
        let packed: Vec<GpuVec4> = values
            .chunks_exact(lanes)
            .map(|c| {
                let mut p = [0.0f32; 4];
                for (o, &x) in p.iter_mut().zip(c) {
                    *o = x as f32;
                }
                p
            })
            .collect();
        // In order with the recorded work that reads or writes `v`.
        self.flush()?;
        self.dev.write(&v, 0, &packed)
    }

    fn read_vector(&mut self, v: DeviceVector) -> Result<Vec<f64>> {
        let (lanes, _) = self.kind(&v, &[], "read")?;
        self.flush()?;
        Ok(self
            .dev
            .read(&v)?
            .iter()
            .flat_map(|p| p[..lanes].iter().map(|&x| x as f64).collect::<Vec<_>>())
            .collect())
    }

    fn combine(
        &mut self,
        y: DeviceVector,
        coef: Coef<DeviceScalar>,
        x: DeviceVector,
        mode: Combine,
        dot: Option<(DeviceVector, DeviceScalar)>,
    ) -> Result<()> {
        let a = Self::slot_of(coef.a, "a coefficient")?;
        let num = Self::slot_of(coef.num, "a coefficient")?;
        let den = Self::slot_of(coef.den, "a coefficient")?;
        let store = Self::slot_of(coef.store, "a stored ratio")?;
        if store != SLOT_NONE && [a, num, den].contains(&store) {
            return Err(JelloError::Solver(
                "device backend: a stored ratio may not overwrite a slot it reads".into(),
            ));
        }
        let out = dot.map(|(z, s)| Self::slot_of(Some(s), "a dot product").map(|i| (z, i)));
        let out = out.transpose()?;
        let z = out.map_or(x, |(z, _)| z);
        let (_, lanes) = self.kind(&y, &[&x, &z], "combine")?;
        let n = y.len();
        let flags = if mode == Combine::Set { COMBINE_SET } else { 0 }
            | if out.is_some() { COMBINE_DOT } else { 0 }
            | lanes;
        self.plan.dispatch(
            Kernel::DevCombine,
            &[self.scal.id(), x.id(), z.id(), y.id(), self.part[0].id()],
            Params {
                u0: a | num << 10 | den << 20,
                u1: store | flags << 10,
                f0: coef.base as f32,
                f1: coef.ratio as f32,
                ..Params::default()
            },
            n as u32,
        );
        if let Some((_, slot)) = out {
            self.plan
                .sum(&self.part[0], dev_groups(n) as u32, &self.scal, slot);
        }
        Ok(())
    }

    fn dots(&mut self, a: DeviceVector, b: DeviceVector, out: Dots<DeviceScalar>) -> Result<()> {
        let slots = [
            out.ab
                .map(|s| Self::slot_of(Some(s), "a dot product"))
                .transpose()?,
            out.aa
                .map(|s| Self::slot_of(Some(s), "a dot product"))
                .transpose()?,
            out.bb
                .map(|s| Self::slot_of(Some(s), "a dot product"))
                .transpose()?,
        ];
        let (_, lanes) = self.kind(&a, &[&b], "dots")?;
        let n = a.len();
        self.plan.dispatch(
            Kernel::DevDots,
            &[
                a.id(),
                b.id(),
                self.part[0].id(),
                self.part[1].id(),
                self.part[2].id(),
            ],
            Params {
                u0: u32::from(lanes != 0),
                ..Params::new()
            },
            n as u32,
        );
        let g = dev_groups(n) as u32;
        for (k, s) in slots.iter().enumerate() {
            if let Some(i) = s {
                self.plan.sum(&self.part[k], g, &self.scal, *i);
            }
        }
        Ok(())
    }

    fn read(&mut self, scalars: &[DeviceScalar]) -> Result<Vec<f64>> {
        if self.used > 0 {
            self.plan
                .copy(&self.scal, 0, &self.readback, 0, self.used as usize);
        }
        self.flush()?;
        let rb = self.dev.read(&self.readback)?;
        if self.pending_magnitude {
            // The reference passes of `begin_step` left Σ|Ψ_e| and Σ|B_v| at the start in the
            // energy regions (no trial has run since).
            let r = &self.regions;
            self.magnitude = rb[r.elem..r.elem + r.ge]
                .iter()
                .chain(&rb[r.vert..r.vert + r.gv])
                .map(|&v| v as f64)
                .sum();
            self.pending_magnitude = false;
        }
        Ok(scalars.iter().map(|&s| self.value(&rb, s)).collect())
    }

    fn host_solve(
        &mut self,
        q: DeviceVector,
        r: DeviceVector,
        f: &mut dyn FnMut(&mut [f64]) -> Result<()>,
    ) -> Result<()> {
        let t0 = Instant::now();
        self.kind(&q, &[&r], "a host solve")?;
        let mut buf = self.read_vector(q)?;
        let t1 = Instant::now();
        f(&mut buf)?;
        let host = t1.elapsed().as_secs_f64() * 1e3;
        self.write_vector(r, &buf)?;
        self.solves.calls += 1;
        self.solves.bytes += 16 * (q.len() + r.len());
        self.solves.host_ms += host;
        self.solves.transfer_ms += t0.elapsed().as_secs_f64() * 1e3 - host;
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.flush()?;
        self.dev.wait_idle()
    }
}

impl PotentialBackend for DeviceBackend {
    fn check(&self, problem: &StepProblem) -> Result<()> {
        let model = problem.model;
        if model.num_vertices() != self.m.nv || model.mesh.num_tets() != self.m.ne {
            return Err(JelloError::Solver(
                "device backend: the problem's model is not the one it was built for".into(),
            ));
        }
        if problem.is_static() {
            return Err(JelloError::Invalid(
                "a static solve runs on the CPU backend (the device backend has no static \
                 load term)"
                    .into(),
            ));
        }
        if model.obstacles.iter().any(|o| o.is_bounded()) {
            return Err(JelloError::Invalid(
                "spheres and boxes act through surface primitive pairs, which the device \
                 backend does not have yet (half-spaces only)"
                    .into(),
            ));
        }
        if model.contact.is_some() {
            return Err(JelloError::Invalid(
                "IPC contact (contact.ipc) runs on the CPU backend: its surface pairs, CCD and \
                 κ updates are f64 host work"
                    .into(),
            ));
        }
        Ok(())
    }

    fn begin_step(&mut self, problem: &StepProblem, _elastic: &dyn ElasticTerms) -> Result<()> {
        self.check(problem)?;
        // Writes go to the queue: nothing recorded may still be waiting behind them.
        self.flush()?;
        self.cur = 0;
        let (x0, c0) = (self.x[0], self.contacts[0]);
        self.m
            .begin_step(&mut self.dev, problem, &x0, &c0, "device backend")?;
        self.rec_energies(0, 0, true, false);
        self.pending_magnitude = true;
        self.start_valid = false;
        Ok(())
    }

    fn gradient(
        &mut self,
        _problem: &StepProblem,
        _elastic: &dyn ElasticTerms,
        at: Point,
        g: DeviceVector,
    ) -> Result<GradientScalars<DeviceScalar>> {
        let p = self.point(at);
        self.rec_elastic(p, true);
        Ok(GradientScalars {
            residual: self.rec_gradient_tail(p, g),
        })
    }

    /// The obstacle bound (`dev_step_bound`), then the inversion filter at its halvings
    /// (`dev_inversion_bound`, `dev_inversion_finish`) as [`StepProblem::step_limit`] applies
    /// it: without it the line search found an element's inversion only by a trial's energy
    /// pass (6.9 trials per DOT iteration on armadillo_18k's kicked foot against the f64
    /// backend's 1.1, measured on lavapipe).
    fn step_bound(&mut self, _problem: &StepProblem, d: DeviceVector) -> Result<DeviceScalar> {
        self.plan.dispatch(
            Kernel::DevStepBound,
            &[d.id(), self.contacts[self.cur].id(), self.part[0].id()],
            Params::new(),
            self.m.nv as u32,
        );
        self.plan.max_abs(
            &self.part[0],
            dev_groups(self.m.nv) as u32,
            &self.scal,
            self.bound_slot,
        );
        let strict = if self.m.step.strict {
            INVERSION_STRICT
        } else {
            0
        };
        self.plan.dispatch(
            Kernel::DevInversionBound,
            &[
                self.m.tets.id(),
                self.m.elem.id(),
                self.x[self.cur].id(),
                d.id(),
                self.scal.id(),
                self.inv_part.id(),
            ],
            Params {
                u1: strict,
                ..Params::new().u0(self.bound_slot)
            },
            self.m.ne as u32,
        );
        self.plan.dispatch(
            Kernel::DevInversionFinish,
            &[self.inv_part.id(), self.scal.id()],
            Params {
                u1: dev_groups(self.m.ne) as u32,
                ..Params::new().u0(self.bound_slot | strict << 16)
            },
            1,
        );
        Ok(DeviceScalar::Reciprocal(self.bound_slot))
    }

    fn trial(
        &mut self,
        _problem: &StepProblem,
        _elastic: &dyn ElasticTerms,
        d: DeviceVector,
        scale: f64,
        bound: DeviceScalar,
        step: DeviceVector,
        gradient: Option<DeviceVector>,
    ) -> Result<TrialScalars<DeviceScalar>> {
        let DeviceScalar::Reciprocal(slot) = bound else {
            return Err(JelloError::Solver(format!(
                "device backend: a trial's bound must come from `step_bound`, got {bound:?}"
            )));
        };
        let (c, t) = (self.cur, 1 - self.cur);
        self.plan.dispatch(
            Kernel::DevTrial,
            &[
                self.x[c].id(),
                d.id(),
                self.contacts[c].id(),
                self.scal.id(),
                self.x[t].id(),
                self.contacts[t].id(),
                step.id(),
                self.readback.id(),
            ],
            Params {
                u0: slot,
                u1: self.regions.dx as u32,
                f0: scale as f32,
                ..Params::default()
            },
            self.m.nv as u32,
        );
        self.rec_energies(t, c, false, gradient.is_some());
        let residual = gradient.map(|g| self.rec_gradient_tail(t, g));
        Ok(TrialScalars {
            energy: DeviceScalar::Energy,
            inverted: DeviceScalar::Forbidden,
            max_move: DeviceScalar::MaxMove,
            alpha: DeviceScalar::Alpha { slot, scale },
            residual,
        })
    }

    fn accept(&mut self) {
        self.cur = 1 - self.cur;
    }

    /// The `elastic` kernel at x_start with the Hessian flags (clamp: `ELASTIC_PROJECT`, abs:
    /// `ELASTIC_ABS`), read back once; the per-vertex blocks uploaded for `dev_curvature`.
    fn start_element_hessians(
        &mut self,
        problem: &StepProblem,
        _elastic: &dyn ElasticTerms,
        filter: EigenFilter,
    ) -> Result<&[[f64; 144]]> {
        let mode = match filter {
            EigenFilter::Clamp => ELASTIC_PROJECT,
            EigenFilter::Abs => ELASTIC_ABS,
        };
        if self.start.is_none() {
            let groups = dev_groups(self.m.ne.max(self.m.nv));
            self.start = Some(Box::new(StartHessian {
                hess: self
                    .dev
                    .alloc("element Hessians at the start", 144 * self.m.ne)?,
                kv: self.dev.alloc("vertex blocks at the start", self.m.nv)?,
                part: self.dev.alloc("curvature partials", groups)?,
                host: Vec::new(),
            }));
        }
        let st = self.start.as_mut().expect("allocated above");
        self.plan.dispatch(
            Kernel::Elastic,
            &[
                self.m.x_start.id(),
                self.m.tets.id(),
                self.m.dm_inv.id(),
                self.m.elem.id(),
                self.energy.id(),
                self.egrad.id(),
                st.hess.id(),
            ],
            Params::new().u0(ELASTIC_HESSIAN | mode),
            self.m.ne as u32,
        );
        // The read below waits for the plan. The pass rewrites `energy` with the start's
        // element energies, the values the reference pass recorded before it already took.
        let plan = std::mem::take(&mut self.plan);
        self.dev.submit(&plan)?;
        let h32 = self.dev.read(&st.hess)?;
        st.host.clear();
        st.host.extend(h32.chunks_exact(144).map(|c| {
            let mut h = [0.0f64; 144];
            for (a, &b) in h.iter_mut().zip(c) {
                *a = b as f64;
            }
            h
        }));
        let kv: Vec<GpuMat3> = (0..self.m.nv)
            .map(|v| {
                let k = problem.vertex_block(&problem.x_start, v);
                GpuMat3::from_rows(std::array::from_fn(|r| {
                    std::array::from_fn(|c| k[(r, c)] as f32)
                }))
            })
            .collect();
        self.dev.write(&st.kv, 0, &kv)?;
        self.start_valid = true;
        Ok(&self.start.as_ref().expect("allocated above").host)
    }

    fn start_curvature(
        &mut self,
        _problem: &StepProblem,
        d: DeviceVector,
        out: DeviceScalar,
    ) -> Result<()> {
        let slot = Self::slot_of(Some(out), "the curvature")?;
        let st = match (&self.start, self.start_valid) {
            (Some(st), true) => st,
            _ => {
                return Err(JelloError::Solver(
                    "start_curvature before start_element_hessians in this step".into(),
                ))
            }
        };
        let n = self.m.ne.max(self.m.nv);
        self.plan.dispatch(
            Kernel::DevCurvature,
            &[
                st.hess.id(),
                self.m.tets.id(),
                d.id(),
                st.kv.id(),
                st.part.id(),
            ],
            Params {
                u0: self.m.ne as u32,
                u1: self.m.nv as u32,
                ..Params::default()
            },
            n as u32,
        );
        self.plan
            .sum(&st.part, dev_groups(n) as u32, &self.scal, slot);
        Ok(())
    }

    fn contact_terms(
        &mut self,
        problem: &StepProblem,
        out: &mut Vec<crate::solver::pd::ContactTerm>,
    ) -> Result<()> {
        // From the contact records (32·n bytes per obstacle read), which hold the distance to
        // f32 relative precision: the positions do not resolve the 1e-8 m gaps of a vertex
        // pressed against the ground, where the barrier's curvature is largest.
        out.clear();
        if self.m.obstacles.is_empty() {
            return Ok(());
        }
        self.flush()?;
        let cs = self.dev.read(&self.contacts[self.cur])?;
        let nc = self.m.obstacles.len();
        let model = problem.model;
        let dhat = model.barrier.dhat;
        let ih2 = problem.inv_h2();
        for v in 0..self.m.nv {
            if problem.fixed[3 * v] {
                continue;
            }
            for c in &cs[v * nc..(v + 1) * nc] {
                if c.kind() != GpuContact::HALF_SPACE {
                    continue;
                }
                let d = c.a[3] as f64;
                if d > 0.0 && d < dhat {
                    let (_, _, ddb) = crate::problem::barrier_derivatives(d, dhat);
                    let beta = model.barrier.kappa * model.mass[v] * ih2 * ddb;
                    if beta > 0.0 && beta.is_finite() {
                        out.push(crate::solver::pd::ContactTerm {
                            vertex: v as u32,
                            normal: [c.a[0] as f64, c.a[1] as f64, c.a[2] as f64],
                            beta,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    fn energy_slack(&self, _problem: &StepProblem, _elastic: &dyn ElasticTerms, e: f64) -> f64 {
        DEVICE_ENERGY_SLACK * (e.abs() + self.magnitude)
    }

    fn finish_step(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        _change: f64,
        x: &mut Vec<f64>,
    ) -> Result<(f64, f64)> {
        self.flush()?;
        let xv = self.dev.read(&self.x[self.cur])?;
        x.clear();
        x.extend(xv.iter().flat_map(|p| (0..3).map(move |k| p[k] as f64)));
        for (k, xi) in x.iter_mut().enumerate() {
            *xi += self.m.origin[k % 3];
        }
        self.reconcile_contacts(problem, x)?;
        // The report's energies in f64 from the returned positions (the device's own are f32).
        Ok((
            problem.energy(elastic, x),
            problem.energy_change(elastic, x),
        ))
    }
}
