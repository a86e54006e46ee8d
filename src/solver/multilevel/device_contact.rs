//! IPC contact of a step on a [`Device`]: the barrier κ·Σ m·b(d²) over a candidate pair list
//! (`ipc_pairs`) and the lagged friction Σ μλ·f₀(‖u‖) (`ipc_friction`), with their gradient
//! summed per model vertex (`ipc_gather`, one pass per term over host-built CSRs) — the contact
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

use super::device::upload_nonempty;
use super::device_energy::ROUNDING_UNIT;
use crate::contact::friction::FrictionSet;
use crate::contact::{ContactPair, IpcContact};
use crate::error::{JelloError, Result};
use crate::gpu::abi::{dev_groups, FRICTION_GRADIENT, IPC_GRADIENT, IPC_SENTINEL};
use crate::gpu::model::relative_one;
use crate::gpu::{
    Buf, Device, GpuFrictionPair, GpuMat3, GpuPair, GpuTet, GpuVec4, Kernel, PairList, Params, Plan,
};
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

/// One term's pairs on the device ([`PairList`], its CSR over the collision positions) and
/// what `dev_rounding` needs.
struct PairTerm<T> {
    pairs: PairList<T>,
    /// Each pair's collision vertices (for `dev_rounding`).
    stencils: Buf<GpuTet>,
    /// `dev_rounding`'s per-group partials.
    rounding: Buf<f32>,
}

impl<T> std::ops::Deref for PairTerm<T> {
    type Target = PairList<T>;
    fn deref(&self) -> &PairList<T> {
        &self.pairs
    }
}

impl<T: bytemuck::Pod + Default> PairTerm<T> {
    fn new(
        dev: &mut Device,
        label: &str,
        list: &[T],
        stencils: &[[u32; 4]],
        nx: usize,
    ) -> Result<Self> {
        Ok(PairTerm {
            pairs: PairList::new(dev, label, list, stencils, nx, |_| true)?,
            stencils: upload_nonempty(dev, "contact stencils", stencils)?,
            rounding: dev.alloc("contact rounding partials", dev_groups(list.len()).max(1))?,
        })
    }

    fn free(self, dev: &mut Device) {
        dev.free(self.stencils);
        dev.free(self.rounding);
        self.pairs.free(dev);
    }

    /// Records `dev_rounding` over the per-pair forces of the last gradient pass and the
    /// coordinates `coords` the pairs read.
    fn record_rounding(&self, plan: &mut Plan, coords: &Buf<GpuVec4>) {
        plan.dispatch(
            Kernel::DevRounding,
            &[
                self.grad.id(),
                coords.id(),
                self.stencils.id(),
                self.rounding.id(),
            ],
            Params::new(),
            self.n as u32,
        );
    }

    /// The sum of the `dev_rounding` partials (J, the 2⁻²⁴ applied).
    fn read_rounding(&self, dev: &mut Device) -> Result<f64> {
        let p = dev.read_range(&self.rounding, 0..dev_groups(self.n))?;
        Ok(p.iter().map(|&v| v as f64).sum::<f64>() * ROUNDING_UNIT)
    }
}

/// The barrier and lagged friction of one step on a device (module docs).
pub struct DeviceContact {
    /// The model's contact (pairs' ids, obstacle positions).
    ipc: Arc<IpcContact>,
    n_model: usize,
    n_coll: usize,
    origin: [f64; 3],
    kappa: f32,
    dhat_sq: f32,
    /// ε_v·h of the lagged friction (m).
    eps: f32,
    x: Buf<GpuVec4>,
    /// Step displacement per collision vertex (m).
    dx: Buf<GpuVec4>,
    /// x̂ (m, flat, model vertices) and each obstacle vertex's motion over the step (m).
    x_hat: Vec<f64>,
    motion: Vec<[f64; 3]>,
    barrier: PairTerm<GpuPair>,
    dist: Buf<f32>,
    ptype: Buf<u32>,
    friction: PairTerm<GpuFrictionPair>,
    dummy_hess: Buf<f32>,
    dummy_hdiag: Buf<GpuMat3>,
    g: Buf<GpuVec4>,
    /// The obstacles' positions at the step's end ([`StepProblem::obstacles_end`]; `None`:
    /// where the collision mesh has them).
    obstacles_at_end: Option<Vec<[f64; 3]>>,
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
        let gpairs: Vec<GpuPair> = pairs.iter().map(GpuPair::of).collect();
        let stencils: Vec<[u32; 4]> = pairs.iter().map(|p| p.ids).collect();
        let barrier = PairTerm::new(dev, "contact pairs", &gpairs, &stencils, n_coll)?;
        let lagged: Option<Arc<(FrictionSet, f64)>> = problem.lagged_friction();
        let (fpairs, eps, motion) = match &lagged {
            Some(f) => (
                f.0.pairs
                    .iter()
                    .map(|p| GpuFrictionPair::new(p.ids, p))
                    .collect::<Vec<_>>(),
                f.0.eps,
                f.0.obstacle_motion.clone(),
            ),
            None => (Vec::new(), 1.0, Vec::new()),
        };
        let fstencils: Vec<[u32; 4]> = fpairs.iter().map(|p| p.v).collect();
        let friction = PairTerm::new(dev, "friction pairs", &fpairs, &fstencils, n_coll)?;
        let n = pairs.len().max(1);
        Ok(DeviceContact {
            dhat_sq: ipc.dhat_sq() as f32,
            ipc,
            n_model,
            n_coll,
            origin,
            kappa: problem.kappa() as f32,
            eps: eps as f32,
            x: dev.alloc("contact positions", n_coll.max(1))?,
            dx: dev.alloc("contact step displacements", n_coll.max(1))?,
            x_hat: problem.x_hat.clone(),
            motion,
            barrier,
            dist: dev.alloc("contact pair distance", n)?,
            ptype: dev.alloc("contact pair type", n)?,
            friction,
            dummy_hess: dev.alloc("contact no hessian", 1)?,
            dummy_hdiag: dev.alloc("contact no hessian diagonal", 1)?,
            g: dev.alloc("contact gradient", n_model.max(1))?,
            obstacles_at_end: problem.obstacles_end.clone(),
        })
    }

    /// Number of candidate pairs and of lagged friction pairs.
    pub fn counts(&self) -> (usize, usize) {
        (self.barrier.n, self.friction.n)
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
        let pos: Vec<GpuVec4> = xs.iter().map(|p| relative_one(*p, self.origin)).collect();
        dev.write(&self.x, 0, &pos)?;
        if self.friction.n > 0 {
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
            dev.write(&self.dx, 0, &dx)?;
        }
        let gather = gradient.is_some();
        let want_g = gather || bounded;
        let mut plan = Plan::new();
        if gather {
            dev.write(&self.g, 0, &vec![[0.0f32; 4]; self.n_model])?;
        }
        if self.barrier.n > 0 {
            plan.dispatch(
                Kernel::IpcPairs,
                &[
                    self.x.id(),
                    self.barrier.list.id(),
                    self.barrier.energy.id(),
                    self.dist.id(),
                    self.ptype.id(),
                    self.barrier.grad.id(),
                    self.dummy_hess.id(),
                ],
                Params {
                    f1: self.kappa,
                    ..Params::new()
                        .u0(if want_g { IPC_GRADIENT } else { 0 })
                        .f0(self.dhat_sq)
                },
                self.barrier.n as u32,
            );
            if bounded {
                self.barrier.record_rounding(&mut plan, &self.x);
            }
            if gather {
                self.barrier.record_gather(
                    &mut plan,
                    None,
                    (&self.dummy_hess, &self.dummy_hdiag),
                    &self.g,
                    self.n_model,
                );
            }
        }
        if self.friction.n > 0 {
            plan.dispatch(
                Kernel::IpcFriction,
                &[
                    self.dx.id(),
                    self.friction.list.id(),
                    self.friction.energy.id(),
                    self.friction.grad.id(),
                    self.dummy_hess.id(),
                ],
                Params::new()
                    .u0(if want_g { FRICTION_GRADIENT } else { 0 })
                    .f0(self.eps),
                self.friction.n as u32,
            );
            if bounded {
                self.friction.record_rounding(&mut plan, &self.dx);
            }
            if gather {
                self.friction.record_gather(
                    &mut plan,
                    None,
                    (&self.dummy_hess, &self.dummy_hdiag),
                    &self.g,
                    self.n_model,
                );
            }
        }
        dev.submit(&plan)?;
        let mut out = ContactEnergy::default();
        if self.barrier.n > 0 {
            let e = dev.read_range(&self.barrier.energy, 0..self.barrier.n)?;
            out.barrier = if e.iter().any(|&v| v.is_nan() || v >= 0.5 * IPC_SENTINEL) {
                f64::INFINITY
            } else {
                e.iter().map(|&v| v as f64).sum()
            };
        }
        if self.friction.n > 0 {
            let e = dev.read_range(&self.friction.energy, 0..self.friction.n)?;
            out.friction = e.iter().map(|&v| v as f64).sum();
        }
        if bounded {
            if self.barrier.n > 0 {
                out.rounding += self.barrier.read_rounding(dev)?;
            }
            if self.friction.n > 0 {
                out.rounding += self.friction.read_rounding(dev)?;
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
        self.barrier.free(dev);
        self.friction.free(dev);
        dev.free(self.x);
        dev.free(self.dx);
        dev.free(self.dist);
        dev.free(self.ptype);
        dev.free(self.dummy_hess);
        dev.free(self.dummy_hdiag);
        dev.free(self.g);
    }
}
