//! IPC contact terms of the JGS2 / VBD device iteration: at every evaluated point the barrier
//! κ·Σ m·b(d²) over a candidate pair list (`ipc_pairs`, gradient and PSD-projected Hessian)
//! and the lagged friction Σ μλ·f₀(‖u‖) (`ipc_friction`, gradient), summed per model vertex
//! into the assembled gradient g and — the diagonal 3×3 blocks of the barrier's PSD-projected
//! and friction's (PSD) pair Hessians — into the per-vertex barrier Hessians every local
//! system adds (`ipc_gather` over host-built CSRs, no atomics).
//! Their per-pair energies are reduced into the iteration's readback, so an evaluation still
//! returns only scalars. This is the device half of what `contact.rs` does in f64.
//!
//! # Data
//! The collision positions are the model's vertices (copied from the iterate by the plan) then
//! the obstacle vertices at the step's end (written once per step), relative to the model's
//! origin as every device position is. Friction reads each collision vertex's step
//! displacement x − x̂: for model vertices formed on the device from the iterate and x̂ (both
//! f32 relative to the origin, so the difference carries the positions' absolute rounding,
//! ~6e-8 of the body's distance from its centroid), for obstacle vertices their motion over
//! the step, formed in f64.
//!
//! # Pairs
//! The candidate list comes from the host's broad phase ([`crate::contact::IpcContact`]) at
//! the step's start; the kernels give pairs at d² ≥ d̂² zero energy and gradient, so any
//! superset of the pairs within d̂ at an evaluated point evaluates that point exactly. Rows of
//! pinned vertices and of obstacle vertices are left out of the CSRs, so g stays zero on
//! pinned vertices, as the f64 gradient.

use crate::contact::{ContactPair, IpcContact};
use crate::error::{JelloError, Result};
use crate::gpu::abi::{
    dev_groups, FRICTION_GRADIENT, FRICTION_HESSIAN, IPC_GRADIENT, IPC_HESSIAN, IPC_PROJECT,
    IPC_SENTINEL, REDUCE_BLOCK,
};
use crate::gpu::model::{relative, relative_one};
use crate::gpu::{
    Buf, BufferId, Device, GpuFrictionPair, GpuMat3, GpuPair, GpuVec4, Kernel, PairList, Params,
    Plan,
};
use crate::problem::StepProblem;
use std::sync::Arc;

/// `dev_combine`'s "no scalar slot".
const NO_SLOT: u32 = 1023;

/// The IPC barrier and lagged friction of a JGS2 / VBD device step (module docs).
pub(super) struct DeviceIpc {
    ipc: Arc<IpcContact>,
    nv: usize,
    n_coll: usize,
    origin: [f64; 3],
    pinned: Vec<bool>,
    /// κ of the step (J/m⁴), d̂² (m²), friction's ε_v·h (m).
    kappa: f32,
    dhat_sq: f32,
    eps: f32,
    /// Collision positions (model vertices, then obstacle vertices at the step's end).
    xc: Buf<GpuVec4>,
    /// Step displacement per collision vertex (friction).
    dxc: Buf<GpuVec4>,
    /// x̂ of the model's vertices, relative to the origin.
    x_hat: Buf<GpuVec4>,
    barrier: Option<PairList<GpuPair>>,
    hess: Buf<f32>,
    dist: Buf<f32>,
    ptype: Buf<u32>,
    friction: Option<PairList<GpuFrictionPair>>,
    /// `dev_combine`'s per-group dot partials (unused).
    combine_part: Buf<f32>,
    /// Unread bindings of `ipc_gather` without the Hessian.
    scratch: (Buf<f32>, Buf<GpuMat3>),
}

impl DeviceIpc {
    /// The buffers that do not depend on the step (`ipc`: the model's contact).
    pub(super) fn new(
        dev: &mut Device,
        ipc: Arc<IpcContact>,
        origin: [f64; 3],
        pinned: &[bool],
    ) -> Result<Self> {
        let nv = pinned.len();
        let n_coll = ipc.mesh.num_vertices();
        if n_coll < nv {
            return Err(JelloError::Solver(format!(
                "device contact: {n_coll} collision vertices for a model of {nv}"
            )));
        }
        Ok(DeviceIpc {
            dhat_sq: ipc.dhat_sq() as f32,
            ipc,
            nv,
            n_coll,
            origin,
            pinned: pinned.to_vec(),
            kappa: 0.0,
            eps: 1.0,
            xc: dev.alloc("contact positions", n_coll.max(1))?,
            dxc: dev.alloc("contact step displacements", n_coll.max(1))?,
            x_hat: dev.alloc("contact x-hat", nv.max(1))?,
            barrier: None,
            hess: dev.alloc("contact pair Hessians", 144)?,
            dist: dev.alloc("contact pair distances", 1)?,
            ptype: dev.alloc("contact pair types", 1)?,
            friction: None,
            combine_part: dev.alloc("contact combine partials", dev_groups(nv).max(1))?,
            scratch: (
                dev.alloc("contact no Hessian", 1)?,
                dev.alloc("contact no Hessian diagonal", 1)?,
            ),
        })
    }

    /// Starts `problem`'s step: the obstacle vertices at the step's end and their motion, x̂,
    /// κ, the candidate pairs (within d̂ + `margin` of each other at x_start, m) and the
    /// lagged friction pairs.
    pub(super) fn begin_step(
        &mut self,
        dev: &mut Device,
        problem: &StepProblem,
        margin: f64,
    ) -> Result<()> {
        let xs = problem.contact_positions(&self.ipc, &problem.x_start);
        if xs.len() != self.n_coll {
            return Err(JelloError::Solver(format!(
                "device contact: {} collision positions, built for {}",
                xs.len(),
                self.n_coll
            )));
        }
        if self.n_coll > self.nv {
            let obs: Vec<GpuVec4> = xs[self.nv..]
                .iter()
                .map(|p| relative_one(*p, self.origin))
                .collect();
            dev.write(&self.xc, self.nv, &obs)?;
        }
        dev.write(&self.x_hat, 0, &relative(&problem.x_hat, self.origin))?;
        self.kappa = problem.kappa() as f32;
        let pairs = self.ipc.candidates_within(&xs, margin)?;
        self.set_pairs(dev, &pairs)?;
        self.lag_friction(dev, problem)
    }

    /// Replaces the candidate list (collision ids).
    fn set_pairs(&mut self, dev: &mut Device, pairs: &[ContactPair]) -> Result<()> {
        let list: Vec<GpuPair> = pairs.iter().map(GpuPair::of).collect();
        let stencils: Vec<[u32; 4]> = pairs.iter().map(|p| p.ids).collect();
        if let Some(old) = self.barrier.take() {
            old.free(dev);
        }
        let n = pairs.len().max(1);
        self.ensure_hess(dev, n)?;
        if self.dist.len() < n {
            let old = std::mem::replace(&mut self.dist, dev.alloc("contact pair distances", n)?);
            dev.free(old);
            let old = std::mem::replace(&mut self.ptype, dev.alloc("contact pair types", n)?);
            dev.free(old);
        }
        if !pairs.is_empty() {
            self.barrier = Some(PairList::new(
                dev,
                "contact pairs",
                &list,
                &stencils,
                self.nv,
                |v| !self.pinned[v as usize],
            )?);
        }
        Ok(())
    }

    /// Grows the pair Hessian buffer, which the barrier and the friction pass write and gather
    /// in turn, to hold `n` pairs.
    fn ensure_hess(&mut self, dev: &mut Device, n: usize) -> Result<()> {
        if self.hess.len() < 144 * n {
            let new = dev.alloc("contact pair Hessians", 144 * n)?;
            dev.free(std::mem::replace(&mut self.hess, new));
        }
        Ok(())
    }

    /// Re-reads the lagged friction pairs and ε_v·h from `problem` (after
    /// [`StepProblem::lag_friction`]) and the obstacle vertices' motion over the step.
    pub(super) fn lag_friction(&mut self, dev: &mut Device, problem: &StepProblem) -> Result<()> {
        if let Some(old) = self.friction.take() {
            old.free(dev);
        }
        let Some(f) = problem.lagged_friction() else {
            return Ok(());
        };
        let set = &f.0;
        if set.pairs.is_empty() {
            return Ok(());
        }
        let list: Vec<GpuFrictionPair> = set
            .pairs
            .iter()
            .map(|p| GpuFrictionPair::new(p.ids, p))
            .collect();
        let stencils: Vec<[u32; 4]> = set.pairs.iter().map(|p| p.ids).collect();
        self.ensure_hess(dev, list.len())?;
        self.friction = Some(PairList::new(
            dev,
            "friction pairs",
            &list,
            &stencils,
            self.nv,
            |v| !self.pinned[v as usize],
        )?);
        self.eps = set.eps as f32;
        if self.n_coll > self.nv {
            let motion: Vec<GpuVec4> = (self.nv..self.n_coll)
                .map(|v| {
                    let d = set
                        .obstacle_motion
                        .get(v - self.nv)
                        .copied()
                        .unwrap_or([0.0; 3]);
                    [d[0] as f32, d[1] as f32, d[2] as f32, 0.0]
                })
                .collect();
            dev.write(&self.dxc, self.nv, &motion)?;
        }
        Ok(())
    }

    /// Partial sums the energies take in the readback ([`Self::rec_energy_partials`]).
    pub(super) fn partials(&self) -> usize {
        let n = |t: Option<usize>| t.map_or(0, |n| n.div_ceil(REDUCE_BLOCK));
        n(self.barrier.as_ref().map(|t| t.n)) + n(self.friction.as_ref().map(|t| t.n))
    }

    /// Records the terms at the iterate `x` (the model's positions): the pair energies, and
    /// their gradients added into `g` and the diagonal blocks of the barrier's and friction's
    /// pair Hessians into `hbar`.
    pub(super) fn rec_terms(
        &self,
        p: &mut Plan,
        x: &Buf<GpuVec4>,
        g: &Buf<GpuVec4>,
        hbar: &Buf<GpuMat3>,
    ) {
        let scratch = (&self.scratch.0, &self.scratch.1);
        if let Some(b) = &self.barrier {
            p.copy(x, 0, &self.xc, 0, self.nv);
            p.dispatch(
                Kernel::IpcPairs,
                &[
                    self.xc.id(),
                    b.list.id(),
                    b.energy.id(),
                    self.dist.id(),
                    self.ptype.id(),
                    b.grad.id(),
                    self.hess.id(),
                ],
                Params {
                    f1: self.kappa,
                    ..Params::new()
                        .u0(IPC_GRADIENT | IPC_HESSIAN | IPC_PROJECT)
                        .f0(self.dhat_sq)
                },
                b.n as u32,
            );
            b.record_gather(p, Some((&self.hess, hbar)), scratch, g, self.nv);
        }
        if let Some(f) = &self.friction {
            // x − x̂ of the model's vertices; the obstacles' motion was written at the lag.
            p.copy(x, 0, &self.dxc, 0, self.nv);
            // dev_combine with no scalar slots: y += f0·x over xyz.
            p.dispatch(
                Kernel::DevCombine,
                &[
                    self.scratch.0.id(),
                    self.x_hat.id(),
                    self.x_hat.id(),
                    self.dxc.id(),
                    self.combine_part.id(),
                ],
                Params {
                    u1: NO_SLOT,
                    ..Params::new()
                        .u0(NO_SLOT | NO_SLOT << 10 | NO_SLOT << 20)
                        .f0(-1.0)
                },
                self.nv as u32,
            );
            p.dispatch(
                Kernel::IpcFriction,
                &[
                    self.dxc.id(),
                    f.list.id(),
                    f.energy.id(),
                    f.grad.id(),
                    self.hess.id(),
                ],
                Params::new()
                    .u0(FRICTION_GRADIENT | FRICTION_HESSIAN)
                    .f0(self.eps),
                f.n as u32,
            );
            f.record_gather(p, Some((&self.hess, hbar)), scratch, g, self.nv);
        }
    }

    /// Records the first pass of the energies' sums into `readback[at..at + partials()]`.
    pub(super) fn rec_energy_partials(&self, p: &mut Plan, readback: BufferId, at: usize) {
        let mut at = at;
        for (e, n) in [
            self.barrier.as_ref().map(|t| (t.energy.id(), t.n)),
            self.friction.as_ref().map(|t| (t.energy.id(), t.n)),
        ]
        .into_iter()
        .flatten()
        {
            p.dispatch(
                Kernel::ReduceSum,
                &[e, readback],
                Params::new().u0(at as u32),
                n as u32,
            );
            at += n.div_ceil(REDUCE_BLOCK);
        }
    }

    /// Whether a barrier partial carries the touching pair's sentinel (+∞ energy).
    pub(super) fn touching(&self, partials: &[f32]) -> bool {
        let n = self
            .barrier
            .as_ref()
            .map_or(0, |t| t.n.div_ceil(REDUCE_BLOCK));
        partials[..n]
            .iter()
            .any(|&v| v.is_nan() || v >= 0.5 * IPC_SENTINEL)
    }
}
