//! IPC contact of a step on a [`Device`]: the barrier κ·Σ m·b(d²) over a candidate pair list
//! (`ipc_pairs`) and the lagged friction Σ μλ·f₀(‖u‖) (`ipc_friction`), with their gradient
//! summed per model vertex (`ipc_gather`, one pass per term over host-built CSRs; the lists
//! and the kernels' recording are [`ContactTerms`], shared with the JGS2 / VBD device
//! iteration) at host positions — the contact
//! half of the multilevel solver's device gradient and line-search energies (issue 13; the
//! line search uses it through [`super::device_energy`]). [`DeviceContact`] is checked term by
//! term against the f64 [`StepProblem`] in `tests/gpu/gpu_multilevel.rs`.
//!
//! **Data.** Positions are the collision routines' array ([`StepProblem::contact_positions`]:
//! model vertices, then obstacle vertices where the step has them), as f32 relative to the
//! model's rest centroid so that differences keep their digits. Friction reads each collision
//! vertex's step displacement, formed in f64 before rounding: x − [`StepProblem::x_hat`] for
//! the model, [`FrictionSet::obstacle_motion`] for obstacles (`twins::friction` says why not a
//! difference of f32 positions).
//!
//! **Pairs.** The broad phase stays on the host: [`DeviceContact::new`] takes a candidate list
//! — [`IpcContact::active_pairs`] at one point, or [`IpcContact::swept_candidates`] along a
//! line-search direction, on which every trial of that search can be evaluated (the kernel
//! gives pairs at d² ≥ d̂² zero energy and gradient). The lagged friction pairs are read from
//! the problem when the evaluator is built; rebuild it after [`StepProblem::lag_friction`].
//!
//! **Sums.** Per-pair energies are read back (4 bytes per pair) and summed in f64 on the host;
//! a pair at d² ≤ 0 reports [`IPC_SENTINEL`] and makes the barrier +∞, as the f64 potential's.

use super::device_energy::ROUNDING_UNIT;
use crate::contact::{ContactPair, IpcContact};
use crate::error::{JelloError, Result};
use crate::gpu::abi::{dev_groups, FRICTION_GRADIENT, IPC_GRADIENT, IPC_SENTINEL};
use crate::gpu::model::relative_one;
use crate::gpu::{Buf, ContactTerms, Device, Gather, GpuVec4, Kernel, PairList, Params, Plan};
use crate::problem::StepProblem;
use std::sync::Arc;

/// The contact energies at one point (J) ([`DeviceContact::evaluate`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ContactEnergy {
    /// κ·Σ m·b(d²) over the candidate pairs (+∞ when a pair touches).
    pub barrier: f64,
    /// Σ μλ·f₀(‖u‖) over the lagged friction pairs.
    pub friction: f64,
    /// With [`DeviceContact::evaluate_bounded`]: the first-order effect on both of rounding
    /// their inputs to f32 (J): Σ_pairs Σ_corners Σ_k |f_k|·|p_k|·2⁻²⁴ over the pairs' corner
    /// forces f and the coordinates p they read (positions relative to the centroid for the
    /// barrier, step displacements for friction; `dev_rounding`). 0 otherwise.
    pub rounding: f64,
}

/// The barrier and lagged friction of one step on a device (module docs).
pub struct DeviceContact {
    /// The model's contact (pairs' ids, obstacle positions).
    ipc: Arc<IpcContact>,
    n_model: usize,
    n_coll: usize,
    origin: [f64; 3],
    /// The pair lists and term kernels (positions and displacements uploaded per point).
    terms: ContactTerms,
    /// x̂ (m, flat, model vertices) and each obstacle vertex's motion over the step (m).
    x_hat: Vec<f64>,
    motion: Vec<[f64; 3]>,
    /// `dev_rounding`'s per-group partials of the barrier and friction pairs.
    rounding: [Buf<f32>; 2],
    g: Buf<GpuVec4>,
    /// The obstacles' positions at the step's end ([`StepProblem::obstacles_end`]; `None`:
    /// where the collision mesh has them).
    obstacles_at_end: Option<Vec<[f64; 3]>>,
}

/// Records `dev_rounding` over `list`'s per-pair forces of the last gradient pass and the
/// coordinates `coords` the pairs read, into the per-group partials `rounding`.
fn record_rounding<T>(
    plan: &mut Plan,
    list: &PairList<T>,
    coords: &Buf<GpuVec4>,
    rounding: &Buf<f32>,
) {
    plan.dispatch(
        Kernel::DevRounding,
        &[
            list.grad.id(),
            coords.id(),
            list.stencils.id(),
            rounding.id(),
        ],
        Params::new(),
        list.n as u32,
    );
}

/// The sum of `n` pairs' `dev_rounding` partials (J, the 2⁻²⁴ applied).
fn read_rounding(dev: &mut Device, rounding: &Buf<f32>, n: usize) -> Result<f64> {
    let p = dev.read_range(rounding, 0..dev_groups(n))?;
    Ok(p.iter().map(|&v| v as f64).sum::<f64>() * ROUNDING_UNIT)
}

impl DeviceContact {
    /// Uploads `problem`'s contact for the candidate `pairs` (global collision ids) and the
    /// friction lagged at present ([`StepProblem::lagged_friction`]). Errors when the model
    /// has no IPC contact.
    pub fn new(dev: &mut Device, problem: &StepProblem, pairs: &[ContactPair]) -> Result<Self> {
        let ipc = problem.model.contact.clone().ok_or_else(|| {
            JelloError::Solver("device contact: the model has no IPC contact".into())
        })?;
        let model = problem.model;
        let n_model = model.num_vertices();
        let n_coll = ipc.mesh.num_vertices();
        let origin = crate::problem::centroid(&model.mesh.positions);
        let mut terms = ContactTerms::new(dev, n_coll, ipc.dhat_sq(), false)?;
        terms.kappa = problem.kappa() as f32;
        terms.set_barrier(dev, pairs, n_model, |_| true, false)?;
        let lagged = problem.lagged_friction();
        let set = lagged.as_ref().map(|f| &f.0);
        terms.set_friction(dev, set, n_model, |_| true, false)?;
        let motion = set.map_or_else(Vec::new, |f| f.obstacle_motion.clone());
        let rounding = [
            dev.alloc(
                "contact rounding partials",
                dev_groups(terms.barrier_len()).max(1),
            )?,
            dev.alloc(
                "friction rounding partials",
                dev_groups(terms.friction_len()).max(1),
            )?,
        ];
        Ok(DeviceContact {
            ipc,
            n_model,
            n_coll,
            origin,
            terms,
            x_hat: problem.x_hat.clone(),
            motion,
            rounding,
            g: dev.alloc("contact gradient", n_model.max(1))?,
            obstacles_at_end: problem.obstacles_end.clone(),
        })
    }

    /// Number of candidate pairs and of lagged friction pairs.
    pub fn counts(&self) -> (usize, usize) {
        (self.terms.barrier_len(), self.terms.friction_len())
    }

    /// The energies at the flat model positions `x` (m; obstacles where the step has them)
    /// and, when `gradient` is given (3 per model vertex), their gradient (N) added into it.
    pub fn evaluate(
        &mut self,
        dev: &mut Device,
        x: &[f64],
        gradient: Option<&mut [f64]>,
    ) -> Result<ContactEnergy> {
        self.run(dev, x, gradient, false)
    }

    /// The energies at `x` as [`Self::evaluate`] without the gradient, and their rounding
    /// bound ([`ContactEnergy::rounding`]; the per-pair forces are computed for it on the
    /// device, and only per-group partials come back).
    pub fn evaluate_bounded(&mut self, dev: &mut Device, x: &[f64]) -> Result<ContactEnergy> {
        self.run(dev, x, None, true)
    }

    fn run(
        &mut self,
        dev: &mut Device,
        x: &[f64],
        gradient: Option<&mut [f64]>,
        bounded: bool,
    ) -> Result<ContactEnergy> {
        if x.len() != 3 * self.n_model {
            return Err(JelloError::Solver(format!(
                "device contact: {} coordinates for {} vertices",
                x.len(),
                self.n_model
            )));
        }
        let xs = match &self.obstacles_at_end {
            Some(o) => self.ipc.positions_with(x, o),
            None => self.ipc.positions(x),
        };
        if xs.len() != self.n_coll {
            return Err(JelloError::Solver(format!(
                "device contact: {} collision positions, built for {}",
                xs.len(),
                self.n_coll
            )));
        }
        let t = &self.terms;
        let pos: Vec<GpuVec4> = xs.iter().map(|p| relative_one(*p, self.origin)).collect();
        dev.write(&t.xc, 0, &pos)?;
        if t.friction.is_some() {
            let dx: Vec<GpuVec4> = (0..self.n_coll)
                .map(|v| {
                    let d = if v < self.n_model {
                        std::array::from_fn(|k| x[3 * v + k] - self.x_hat[3 * v + k])
                    } else {
                        self.motion
                            .get(v - self.n_model)
                            .copied()
                            .unwrap_or([0.0; 3])
                    };
                    [d[0] as f32, d[1] as f32, d[2] as f32, 0.0]
                })
                .collect();
            dev.write(&t.dxc, 0, &dx)?;
        }
        let want_g = gradient.is_some() || bounded;
        let gather = gradient.is_some().then_some(Gather {
            g: &self.g,
            blocks: None,
            rows: self.n_model,
        });
        if gather.is_some() {
            dev.write(&self.g, 0, &vec![[0.0f32; 4]; self.n_model])?;
        }
        let mut plan = Plan::new();
        t.rec_barrier(&mut plan, if want_g { IPC_GRADIENT } else { 0 }, gather);
        t.rec_friction(
            &mut plan,
            if want_g { FRICTION_GRADIENT } else { 0 },
            gather,
        );
        if bounded {
            if let Some(b) = &t.barrier {
                record_rounding(&mut plan, b, &t.xc, &self.rounding[0]);
            }
            if let Some(f) = &t.friction {
                record_rounding(&mut plan, f, &t.dxc, &self.rounding[1]);
            }
        }
        dev.submit(&plan)?;
        let mut out = ContactEnergy::default();
        if let Some(b) = &t.barrier {
            let e = dev.read_range(&b.energy, 0..b.n)?;
            out.barrier = if e.iter().any(|&v| v.is_nan() || v >= 0.5 * IPC_SENTINEL) {
                f64::INFINITY
            } else {
                e.iter().map(|&v| v as f64).sum()
            };
            if bounded {
                out.rounding += read_rounding(dev, &self.rounding[0], b.n)?;
            }
        }
        if let Some(f) = &t.friction {
            let e = dev.read_range(&f.energy, 0..f.n)?;
            out.friction = e.iter().map(|&v| v as f64).sum();
            if bounded {
                out.rounding += read_rounding(dev, &self.rounding[1], f.n)?;
            }
        }
        if let Some(g) = gradient {
            let gv = dev.read_range(&self.g, 0..self.n_model)?;
            for (v, p) in gv.iter().enumerate() {
                for k in 0..3 {
                    g[3 * v + k] += p[k] as f64;
                }
            }
        }
        Ok(out)
    }

    /// Releases the buffers.
    pub fn free(self, dev: &mut Device) {
        self.terms.free(dev);
        let [a, b] = self.rounding;
        dev.free(a);
        dev.free(b);
        dev.free(self.g);
    }
}
