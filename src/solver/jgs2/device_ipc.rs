//! IPC contact terms of the JGS2 / VBD device iteration: at every evaluated point the barrier
//! κ·Σ m·b(d²) over a candidate pair list (`ipc_pairs`, gradient and PSD-projected Hessian)
//! and the lagged friction Σ μλ·f₀(‖u‖) (`ipc_friction`, gradient), summed per model vertex
//! into the assembled gradient g and — the diagonal 3×3 blocks of the barrier's PSD-projected
//! and friction's (PSD) pair Hessians — into the per-vertex barrier Hessians every local
//! system adds (`ipc_gather` over host-built CSRs, no atomics).
//! Their per-pair energies are reduced into the iteration's readback, so an evaluation still
//! returns only scalars. This is the device half of what `contact.rs` does in f64. The lists
//! and the two term kernels' recording are [`ContactTerms`] (shared with the multilevel
//! solver's line search); this file adds what an iteration needs around them: positions from
//! the iterate, the step filter, κ's device reduction and the pairs' coupling.
//!
//! # Data
//! The collision positions are the model's vertices then the obstacle vertices at the step's
//! end, relative to the model's origin as every device position is, each in two parts
//! (`ContactTerms::fine_at`): a coarse f32 part written once per step — the model's step start,
//! the device model's own x_start, and the obstacles' end positions — and a fine f32 part —
//! the obstacles' low parts (what their f32 coarse part dropped) and, copied from the iterate
//! by the plan, the model vertices' fine parts, which the iteration keeps beside its f32
//! positions (`jgs2_apply`, `jgs2_trial_fine`): the step start's low part plus the move since.
//! The pair kernels take each pair relative to its first vertex from the two parts
//! (`twins::ipc::pair_relative`), so a pair's coordinates round with its size and the step's
//! displacement, not with its distance from the origin: f32 positions 0.22 m out resolve only
//! ~3e-8 m, and the CCD's position term on them (4ε·‖x‖ = 1.07e-7 m) certified no motion of
//! a pair closer than that (below, "κ and friction"). The f64 point read back is the coarse
//! start plus the fine parts. Friction reads each collision vertex's step
//! displacement x − x̂: for model vertices formed on the device as (coarse start − x̂) + fine
//! part, the first formed in f64 once per step, so it rounds with the step's motion (the f32
//! iterate less an f32 x̂ carried the positions' absolute rounding, ~6e-8 of the body's
//! distance from its centroid); for obstacle vertices their motion over the step, in f64.
//!
//! # Pairs
//! The candidate list comes from the device broad phase ([`DeviceBroadPhase`], a hashed grid
//! over the swept boxes, `twins::broad`): a superset of the host's
//! [`IpcContact::candidates_around`] on the same positions (its f32 boxes are rounded outward,
//! so it adds only pairs within that rounding of overlapping); the kernels give pairs at d² ≥
//! d̂² zero energy and gradient, so any superset of the pairs within d̂ at an evaluated point
//! evaluates that point exactly. The list is read back, put in a fixed order (the device emits
//! it in a scheduling-dependent one, and the energies' sums and the gathers follow the list)
//! and uploaded with its gather CSRs, built on the host: a query costs the count's readback and
//! the list's, at a step's start and at each rebuild, never within an iteration. Rows of pinned
//! vertices and of obstacle vertices are left out of the CSRs, so g stays zero on pinned
//! vertices, as the f64 gradient.
//!
//! # Step filter
//! The f64 backend runs a swept broad phase on every move. The device instead keeps one list
//! per step, valid inside a **trust box** per model vertex, and never lets a move leave it:
//! - At the step's start the boxes are swept along the inertial prediction x̃ − x_start and
//!   grown by half a margin of [`MARGIN_DHAT`]·d̂ + [`MARGIN_PREDICTED`] × the prediction's largest
//!   coordinate; the list holds every pair whose swept boxes grown by (d̂ + margin)/2 overlap,
//!   so while each vertex stays in its box no pair outside the list comes within d̂ (the
//!   argument is in [`IpcContact::candidates_around`]). Interior vertices, in no pair, get
//!   unbounded boxes.
//! - The safeguarded step's bound (the combined step of every iteration, and the cut
//!   safeguard's plain trial) takes, besides the obstacles' bounds: per vertex the box's bound
//!   (`ipc_trust`), and over the pairs additive CCD of the joint straight move (`ipc_ccd`,
//!   conservative in f32; ξ = 0, η and the reference's ACCD, an iteration cap of [`CCD_CAP`]),
//!   reduced per vertex (`ipc_vertex_toi`) — all folded into the one maximum whose reciprocal
//!   the trial reads on the device. Every accepted iterate is therefore intersection-free, as
//!   a move along one straight path limited by CCD over a superset of the pairs it can meet.
//!   The f32 CCD cannot certify a pair closer than ~20ε of its size apart, nor much motion of
//!   one just above that: the pairs holding a combined step nearly still (α < 1e-3) are decided
//!   again on the host in f64 ([`DeviceIpc::certify_on_host`]; "κ and friction").
//! - When a box (not a time of impact) limited an accepted step, the host reads the positions
//!   and the step (two readbacks), rebuilds the list swept along the rest of the step with the
//!   margin doubled, and uploads it: rare where the prediction holds (free flight, resting
//!   contact), a few times in a step that departs from it (an impact).
//! - Plain iterations (VBD's Gauss–Seidel sweeps, plain Jacobi) would need a CCD pass and a
//!   joint recheck per colour; the loop instead keeps the safeguard on under IPC on this
//!   backend (`jgs2_plain_moves_filtered`), so a sweep's displacement is one direction of the
//!   filtered combined step.
//!
//! # κ and friction
//! As Newton-IPC, with IPC's own raise gap ([`crate::contact::barrier::KAPPA_RAISE_GAP`], 1e-9
//! of the bounding-box diagonal): κ is raised from the smallest pair distance at each accepted
//! point, reduced on the device (the per-vertex minimum of the pairs' d², `ipc_vertex_toi` over
//! the barrier CSR, and its maximum reciprocal; pairs of pinned and obstacle vertices only,
//! which cannot move within the step, are not seen) and read back with the point's other
//! scalars. So the device solves the problem the f64 solvers solve, and `jello compare` can
//! hold it to their answers.
//!
//! IPC calibrates κ for gaps near 1e-8 of the diagonal, where f64 positions keep ~8 digits.
//! Positions relative to the model's origin in f32 do not: 0.22 m out they resolve ~3e-8 m, and
//! the CCD's position term on them (4ε·‖x‖ ≈ 1e-7 m) certified no motion of a pair closer than
//! that, so a pair that came that close capped every later combined step at a sliver of its
//! length (measured: the bundled balls' steps 7–8, an edge–edge pair at 8.1e-8 m holding α at
//! ~4e-6, the 1,000-iteration cap; the hoop's and cup's ball–obstacle edge pairs frozen at
//! 1.4–1.6e-7 m with κ at κ_max). Two things remove that, and with them the need to keep pairs
//! away from f32's reach:
//! - the two-part positions ("Data"): a pair rounds with its size and the step's displacement
//!   (a few 1e-9 m), not with its distance from the origin;
//! - the host's f64 decision of the pairs that hold a step: a pair still closer than ~20ε of
//!   its size can be neither resolved nor certified by the f32 CCD (its bound of the pair's
//!   distance loses ~2ε of the size, its position term 6ε), and each accepted combined step
//!   may close a pair to (1 − η) = 0.1 of its gap. Such a pair is flagged by the CCD
//!   (`twins::ccd::UNCERTIFIED`, time 0); whenever pairs hold a combined step nearly still
//!   (α < 1e-3), the pairs with times below 1e-3 are decided again on the host in f64
//!   ([`DeviceIpc::certify_on_host`]: the reference's ACCD of the pair's joint straight move
//!   from the two-part positions; a readback of the pairs' times, then of the positions and the
//!   step where a pair holds it, then the bound and the trial again where a time grew).
//!   Triggering on uncertified pairs alone (time 0) was not enough: the hoop's pair settled just
//!   above the f32 limit, its time tiny but not 0, and the step ran to the cap with none decided.
//!   The bundled cup reaches it as its ball bounces: from Newton-IPC's state after 12 steps,
//!   step 13 has 5 pairs' times grown on the host (CPU twins; 23 on lavapipe) and converges in
//!   89 iterations; with the decision left out it ran to the 300-iteration cap at CN 5.6e-2.
//!
//! Before those two, the device raised κ below a gap of the f32 CCD's relative rounding bound
//! (`twins::ccd::ROUND`, 1.9e-6 of the diagonal) to keep pairs out of that band. With them it
//! only made the device solve a stiffer problem than the f64 solvers: the bundled cup's impact
//! (step 12 from Newton-IPC's state) raised κ 16× where Newton keeps it, the answer lay 6.0e-4 m
//! from Newton-IPC's (f64 CN 6.4e-4 for Newton's problem), and the trajectories parted until
//! `jello compare` measured 1.07e-1 of the diagonal after 16 steps; with IPC's gap the same step
//! takes 178 iterations (the f64 JGS2: 154) and lands 6.1e-7 m from Newton-IPC's answer (f64 CN
//! 2.1e-7). Calibrating κ_min itself higher, or raising at the first shrinking distance below
//! the gap, moved the contact out to gaps of the order of d̂ (0.4–2.4 mm from Newton-IPC's on
//! the balls) and was not taken either.
//! Friction is lagged again at converged points from positions read back once per pass (the f64
//! [`StepProblem::lag_friction`] then builds the pairs). Energies stay relative to the step
//! start's at the start's κ and friction: a change shifts the reference of every later value
//! alike, so the line search's comparisons hold.

use crate::contact::ccd::{additive_ccd, AccdParams};
use crate::contact::{ContactPair, IpcContact};
use crate::error::{JelloError, Result};
use crate::gpu::abi::{
    dev_groups, FRICTION_GRADIENT, FRICTION_HESSIAN, IPC_GRADIENT, IPC_HESSIAN, IPC_PROJECT,
    IPC_SENTINEL, REDUCE_BLOCK,
};
use crate::gpu::model::{relative_low_one, relative_one};
use crate::gpu::twins::trust::TRUST_GROUP;
use crate::gpu::{
    Buf, BufferId, ContactTerms, Device, DeviceBroadPhase, Gather, GpuMat3, GpuPair, GpuVec4,
    Kernel, PairList, Params, Plan,
};
use crate::problem::StepProblem;
use nalgebra::Vector3;
use std::sync::Arc;

/// `dev_combine`'s "no scalar slot".
const NO_SLOT: u32 = 1023;

/// The candidate list's margin at a step's start: this many d̂ …
const MARGIN_DHAT: f64 = 2.0;
/// … plus this fraction of the largest coordinate of the inertial prediction x̃ − x_start (the
/// boxes are swept along the prediction itself; the margin covers the iteration's departure
/// from it, e.g. a bounce).
const MARGIN_PREDICTED: f64 = 0.25;
/// How far the trust boxes are rounded inward, relative to their coordinates' magnitude: 64
/// ε_f32, far above the few ε of f32 rounding they must absorb and far below a margin of d̂.
const BOX_INSET: f64 = 64.0 * f32::EPSILON as f64;
/// The device ACCD's iteration cap: a capped pair returns the time certified so far
/// (conservative); the f64 reference allows 10⁶, too many for one GPU invocation.
const CCD_CAP: u32 = 10_000;

/// The IPC barrier and lagged friction of a JGS2 / VBD device step (module docs).
pub(super) struct DeviceIpc {
    ipc: Arc<IpcContact>,
    nv: usize,
    n_coll: usize,
    origin: [f64; 3],
    pinned: Vec<bool>,
    /// The pair lists and term kernels; their positions are the model vertices (the step
    /// start's coarse parts and the iterate's fine parts, "Data") then the obstacle vertices at
    /// the step's end, their displacements x − x̂ formed by the plan and the obstacles' motion.
    /// The pair Hessians are kept: the Hessian-vector products read both after the gathers.
    terms: ContactTerms,
    /// Per model vertex its step start's coarse part (f32) less x̂ (m), formed in f64: friction's
    /// x − x̂ is this plus the vertex's fine part.
    start_less_hat: Buf<GpuVec4>,
    /// Scratch for one direction's H·d while the pairs' coupling is gathered into it.
    hd_tmp: Buf<GpuVec4>,
    /// `dev_combine`'s per-group dot partials (unused).
    combine_part: Buf<f32>,
    /// The step filter (module docs, "Step filter"): per model vertex its trust box (lo, hi;
    /// relative to the origin, rounded inward) and whether it is a collision-surface vertex.
    boxes: Buf<GpuVec4>,
    on_surface: Vec<bool>,
    /// The list's margin (m): the step's base margin, doubled at every rebuild within a step.
    margin: f64,
    /// List rebuilds this step (each one a position readback).
    rebuilds: usize,
    /// Pairs decided on the host this step ([`Self::certify_on_host`]).
    host_decided: usize,
    /// `ipc_trust`'s per-group partials.
    trust_part: Buf<f32>,
    /// CCD's step per collision vertex (model rows copied from the step; obstacles still).
    ccd_dx: Buf<GpuVec4>,
    /// Per pair its time of impact and ACCD iterations; per vertex the minimum over its pairs
    /// (`ipc_vertex_toi`) and per 256 vertices the maximum reciprocal.
    pair_toi: Buf<f32>,
    pair_iters: Buf<u32>,
    vertex_min: Buf<f32>,
    vertex_part: Buf<f32>,
    /// 1.0 per 256-vertex group: the neutral partials when there is no pair.
    ones: Buf<f32>,
    /// `dev_combine`'s scalar slots, none of which the displacement pass reads.
    no_scalars: Buf<f32>,
    /// The candidate pairs on the host (collision ids), for the pairs decided in f64
    /// ([`Self::certify_on_host`]).
    pairs: Vec<ContactPair>,
    /// The broad phase that finds them (module docs, "Pairs") and its query's collision
    /// positions (f32 relative to the origin) and swept displacements (m).
    broad: DeviceBroadPhase,
    broad_x: Buf<GpuVec4>,
    broad_dx: Buf<GpuVec4>,
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
        let groups = nv.div_ceil(TRUST_GROUP).max(1);
        let mut on_surface = vec![false; nv];
        for &v in ipc.mesh.vertices.iter().filter(|&&v| (v as usize) < nv) {
            on_surface[v as usize] = true;
        }
        Ok(DeviceIpc {
            terms: ContactTerms::new(dev, n_coll, ipc.dhat_sq(), true)?,
            broad: DeviceBroadPhase::new(dev, &ipc.mesh)?,
            broad_x: dev.alloc("contact broad-phase positions", n_coll.max(1))?,
            broad_dx: dev.alloc("contact broad-phase displacements", n_coll.max(1))?,
            ipc,
            nv,
            n_coll,
            origin,
            pinned: pinned.to_vec(),
            start_less_hat: dev.alloc("contact start less x-hat", nv.max(1))?,
            hd_tmp: dev.alloc("contact Hessian-direction scratch", nv.max(1))?,
            combine_part: dev.alloc("contact combine partials", dev_groups(nv).max(1))?,
            boxes: dev.alloc("contact trust boxes", 2 * nv.max(1))?,
            on_surface,
            margin: 0.0,
            rebuilds: 0,
            host_decided: 0,
            trust_part: dev.alloc("contact trust partials", groups)?,
            ccd_dx: dev.upload("contact CCD steps", &vec![[0.0f32; 4]; n_coll.max(1)])?,
            pair_toi: dev.alloc("contact pair times of impact", 1)?,
            pair_iters: dev.alloc("contact pair CCD iterations", 1)?,
            vertex_min: dev.alloc("contact vertex minima", nv.max(1))?,
            vertex_part: dev.alloc("contact vertex partials", groups)?,
            ones: dev.upload("contact neutral partials", &vec![1.0f32; groups])?,
            no_scalars: dev.alloc("contact no scalars", 1)?,
            pairs: Vec::new(),
        })
    }

    /// Starts `problem`'s step: the obstacle vertices at the step's end and their motion, x̂,
    /// κ, the candidate pairs and trust boxes around the inertial prediction (module docs) and
    /// the lagged friction pairs.
    pub(super) fn begin_step(&mut self, dev: &mut Device, problem: &StepProblem) -> Result<()> {
        let xs = problem.contact_positions(&self.ipc, &problem.x_start);
        if xs.len() != self.n_coll {
            return Err(JelloError::Solver(format!(
                "device contact: {} collision positions, built for {}",
                xs.len(),
                self.n_coll
            )));
        }
        // Coarse and fine parts (module docs, "Data"): the model's coarse parts are the step
        // start's f32 positions, the device model's own x_start; the obstacles' are their
        // positions at the step's end, fine parts their low parts.
        let (coarse, fine): (Vec<GpuVec4>, Vec<GpuVec4>) = xs
            .iter()
            .enumerate()
            .map(|(v, &p)| {
                let low = if v < self.nv {
                    [0.0; 4]
                } else {
                    relative_low_one(p, self.origin)
                };
                (relative_one(p, self.origin), low)
            })
            .unzip();
        dev.write(&self.terms.xc, 0, &coarse)?;
        dev.write(
            &self.terms.xc,
            self.terms.fine_at as usize + self.nv,
            &fine[self.nv..],
        )?;
        let start_less_hat: Vec<GpuVec4> = coarse[..self.nv]
            .iter()
            .zip(problem.x_hat.chunks_exact(3))
            .map(|(c, h)| {
                let d = [0, 1, 2].map(|k| c[k] as f64 - (h[k] - self.origin[k]));
                [d[0] as f32, d[1] as f32, d[2] as f32, 0.0]
            })
            .collect();
        dev.write(&self.start_less_hat, 0, &start_less_hat)?;
        self.terms.kappa = problem.kappa() as f32;
        let predicted: Vec<f64> = problem
            .x_tilde
            .iter()
            .zip(&problem.x_start)
            .map(|(a, b)| a - b)
            .collect();
        let reach = predicted.iter().fold(0.0f64, |m, d| m.max(d.abs()));
        self.margin = MARGIN_DHAT * self.ipc.dhat + MARGIN_PREDICTED * reach;
        self.rebuilds = 0;
        self.host_decided = 0;
        self.surround(dev, &xs, &predicted)?;
        self.lag_friction(dev, problem)
    }

    /// Rebuilds the candidate list and trust boxes around the model positions `x` (m), swept
    /// along `ahead` (flat model displacements, m: the rest of the step that a box cut short),
    /// with the margin doubled: called when a box limited an accepted step (module docs).
    pub(super) fn rebuild(
        &mut self,
        dev: &mut Device,
        problem: &StepProblem,
        x: &[f64],
        ahead: &[f64],
    ) -> Result<()> {
        let xs = problem.contact_positions(&self.ipc, x);
        self.margin *= 2.0;
        self.rebuilds += 1;
        self.surround(dev, &xs, ahead)
    }

    /// List rebuilds since the step began.
    pub(super) fn rebuilds(&self) -> usize {
        self.rebuilds
    }

    /// Pairs decided on the host since the step began ([`Self::certify_on_host`]).
    pub(super) fn host_decided(&self) -> usize {
        self.host_decided
    }

    /// The candidate pairs of the boxes swept from the collision positions `xs` along the model
    /// displacements `ahead` (flat, m; obstacle vertices still), grown by the margin, and the
    /// model vertices' trust boxes — each segment's box grown by margin/2, rounded inward.
    fn surround(&mut self, dev: &mut Device, xs: &[[f64; 3]], ahead: &[f64]) -> Result<()> {
        let mut ds = vec![[0.0f64; 3]; self.n_coll];
        for (d, a) in ds.iter_mut().zip(ahead.chunks_exact(3)) {
            *d = [a[0], a[1], a[2]];
        }
        let pairs = self.find_pairs(dev, xs, &ds)?;
        self.set_pairs(dev, &pairs)?;
        let half = 0.5 * self.margin;
        let mut boxes = vec![[0.0f32; 4]; 2 * self.nv.max(1)];
        for v in 0..self.nv {
            if !self.on_surface[v] {
                // Interior vertices belong to no pair: an unbounded box.
                boxes[2 * v] = [-f32::MAX, -f32::MAX, -f32::MAX, 0.0];
                boxes[2 * v + 1] = [f32::MAX, f32::MAX, f32::MAX, 0.0];
                continue;
            }
            for k in 0..3 {
                let (a, b) = (
                    xs[v][k] - self.origin[k],
                    xs[v][k] + ds[v][k] - self.origin[k],
                );
                let (lo, hi) = (a.min(b) - half, a.max(b) + half);
                // Inward by far more than the f32 rounding of the box, of a trial position
                // and of `ipc_trust`'s ratio (each a few ε_f32 of the coordinates).
                let inset = BOX_INSET * (lo.abs().max(hi.abs()) + half);
                boxes[2 * v][k] = (lo + inset) as f32;
                boxes[2 * v + 1][k] = (hi - inset) as f32;
            }
        }
        dev.write(&self.boxes, 0, &boxes)
    }
    /// The pairs whose boxes swept from `xs` along `ds` (both m, one per collision vertex) and
    /// grown by (d̂ + margin)/2 overlap, found by the device broad phase (module docs, "Pairs"):
    /// the superset of [`IpcContact::candidates_around`]'s list that f32 boxes rounded outward
    /// give, read back (one readback after the query's count) and put in a fixed order, so a
    /// run's pair order does not depend on the device's scheduling.
    fn find_pairs(
        &mut self,
        dev: &mut Device,
        xs: &[[f64; 3]],
        ds: &[[f64; 3]],
    ) -> Result<Vec<ContactPair>> {
        let x: Vec<GpuVec4> = xs.iter().map(|&p| relative_one(p, self.origin)).collect();
        let dx: Vec<GpuVec4> = ds
            .iter()
            .map(|d| [d[0] as f32, d[1] as f32, d[2] as f32, 0.0])
            .collect();
        dev.write(&self.broad_x, 0, &x)?;
        dev.write(&self.broad_dx, 0, &dx)?;
        let inflation = self.ipc.dhat + self.margin;
        let n = self
            .broad
            .find(dev, &self.broad_x, Some(&self.broad_dx), inflation)?;
        let mut found = if n > 0 {
            dev.read_range(self.broad.pairs(), 0..n)?
        } else {
            Vec::new()
        };
        found.sort_unstable_by_key(|p| (p.kind, p.v));
        Ok(found.iter().map(GpuPair::host_pair).collect())
    }

    /// Replaces the candidate list (collision ids).
    fn set_pairs(&mut self, dev: &mut Device, pairs: &[ContactPair]) -> Result<()> {
        let pinned = &self.pinned;
        self.terms
            .set_barrier(dev, pairs, self.nv, |v| !pinned[v as usize], true)?;
        let n = pairs.len().max(1);
        dev.grow(&mut self.pair_toi, "contact pair times of impact", n)?;
        dev.grow(&mut self.pair_iters, "contact pair CCD iterations", n)?;
        self.pairs = pairs.to_vec();
        Ok(())
    }

    /// Re-reads the lagged friction pairs and ε_v·h from `problem` (after
    /// [`StepProblem::lag_friction`]) and the obstacle vertices' motion over the step.
    pub(super) fn lag_friction(&mut self, dev: &mut Device, problem: &StepProblem) -> Result<()> {
        let lagged = problem.lagged_friction();
        let set = lagged.as_ref().map(|f| &f.0);
        let pinned = &self.pinned;
        self.terms
            .set_friction(dev, set, self.nv, |v| !pinned[v as usize], true)?;
        let Some(set) = set.filter(|_| self.terms.friction.is_some()) else {
            return Ok(());
        };
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
            dev.write(&self.terms.dxc, self.nv, &motion)?;
        }
        Ok(())
    }

    /// Partial sums the energies take in the readback ([`Self::rec_energy_partials`]).
    pub(super) fn partials(&self) -> usize {
        let t = &self.terms;
        t.barrier_len().div_ceil(REDUCE_BLOCK) + t.friction_len().div_ceil(REDUCE_BLOCK)
    }

    /// Records the copy of the iterate's fine parts `fine` into the collision positions' (their
    /// coarse parts, the step start's, were written by [`Self::begin_step`]).
    fn rec_positions(&self, p: &mut Plan, fine: &Buf<GpuVec4>) {
        let t = &self.terms;
        p.copy(fine, 0, &t.xc, t.fine_at as usize, self.nv);
    }

    /// Records the terms at the iterate whose model positions have the fine parts `fine` (their
    /// coarse parts are the step start's, "Data"): the pair energies, and their gradients added
    /// into `g` and the diagonal blocks of the barrier's and friction's pair Hessians into
    /// `hbar`.
    pub(super) fn rec_terms(
        &self,
        p: &mut Plan,
        fine: &Buf<GpuVec4>,
        g: &Buf<GpuVec4>,
        hbar: &Buf<GpuMat3>,
    ) {
        let t = &self.terms;
        let gather = Some(Gather {
            g,
            blocks: Some(hbar),
            rows: self.nv,
        });
        if t.barrier.is_some() {
            self.rec_positions(p, fine);
            t.rec_barrier(p, IPC_GRADIENT | IPC_HESSIAN | IPC_PROJECT, gather);
        }
        if t.friction.is_some() {
            // x − x̂ of the model's vertices, (coarse start − x̂) + fine part ("Data"); the
            // obstacles' motion was written at the lag.
            p.copy(&self.start_less_hat, 0, &t.dxc, 0, self.nv);
            // dev_combine with no scalar slots: y += f0·x over xyz.
            p.dispatch(
                Kernel::DevCombine,
                &[
                    self.no_scalars.id(),
                    fine.id(),
                    fine.id(),
                    t.dxc.id(),
                    self.combine_part.id(),
                ],
                Params {
                    u1: NO_SLOT,
                    ..Params::new()
                        .u0(NO_SLOT | NO_SLOT << 10 | NO_SLOT << 20)
                        .f0(1.0)
                },
                self.nv as u32,
            );
            t.rec_friction(p, FRICTION_GRADIENT | FRICTION_HESSIAN, gather);
        }
    }

    /// Records the first pass of the energies' sums into `readback[at..at + partials()]`.
    pub(super) fn rec_energy_partials(&self, p: &mut Plan, readback: BufferId, at: usize) {
        let mut at = at;
        for (e, n) in [
            self.terms.barrier.as_ref().map(|t| (t.energy.id(), t.n)),
            self.terms.friction.as_ref().map(|t| (t.energy.id(), t.n)),
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

    /// Records the pairs' coupling added to the Hessian-direction products `hd` of the
    /// directions `dirs` (both `count` slots of nv vectors, after `hess_vec` applied the
    /// elements and the per-vertex blocks, which hold the pairs' diagonal blocks): per slot the
    /// off-diagonal blocks of every barrier and friction pair Hessian (`ipc_pair_hvp`, into the
    /// lists' per-corner buffers, free once the gradient is gathered) gathered per vertex. The
    /// f64 backend's products use the whole pair blocks too (`contact.rs`); without the
    /// coupling, moving both sides of a contact together looks as stiff to the step's model as
    /// pressing one into the other, and JGS2's combined steps stall in contact.
    pub(super) fn rec_hess_vec(
        &self,
        p: &mut Plan,
        dirs: &Buf<GpuVec4>,
        hd: &Buf<GpuVec4>,
        count: usize,
    ) {
        let t = &self.terms;
        if t.barrier.is_none() && t.friction.is_none() {
            return;
        }
        let nv = self.nv;
        for k in 0..count {
            p.copy(dirs, k * nv, &self.ccd_dx, 0, nv);
            p.copy(hd, k * nv, &self.hd_tmp, 0, nv);
            if let Some(b) = &t.barrier {
                self.rec_pair_hvp(p, b, &t.hess);
            }
            if let Some(f) = &t.friction {
                self.rec_pair_hvp(p, f, &t.fhess);
            }
            p.copy(&self.hd_tmp, 0, hd, k * nv, nv);
        }
    }

    /// `hd_tmp += ` the coupling of `list`'s pairs (Hessians `hess`) applied to `ccd_dx`.
    fn rec_pair_hvp<T: bytemuck::Pod + Default>(
        &self,
        p: &mut Plan,
        list: &PairList<T>,
        hess: &Buf<f32>,
    ) {
        p.dispatch(
            Kernel::IpcPairHvp,
            &[
                hess.id(),
                list.stencils.id(),
                self.ccd_dx.id(),
                list.grad.id(),
            ],
            Params::new(),
            list.n as u32,
        );
        self.terms
            .rec_gather_vectors(p, list, &self.hd_tmp, self.nv);
    }

    /// Sets κ (J/m⁴) after the loop raised it.
    pub(super) fn set_kappa(&mut self, kappa: f64) {
        self.terms.kappa = kappa as f32;
    }

    /// Records the step filter of the move `step` (per model vertex, m) from the model
    /// positions `x` (fine parts `fine`): `ipc_trust` folds each vertex's trust-box bound into
    /// `bound[..nv]` and reduces its own maximum into `readback[trust_slot]`; `ipc_ccd` over
    /// the candidate pairs and `ipc_vertex_toi` give the per-256-vertex partials of the CCD
    /// bound, copied into `bound[nv..nv + groups]` (1.0 without pairs). The caller's max
    /// reduction over `bound[..nv + groups]` then finishes 1/α (module docs). `bound` must hold
    /// [`Self::bound_len`] entries.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rec_step_bound(
        &self,
        p: &mut Plan,
        x: &Buf<GpuVec4>,
        fine: &Buf<GpuVec4>,
        step: &Buf<GpuVec4>,
        bound: &Buf<f32>,
        readback: &Buf<f32>,
        trust_slot: usize,
    ) {
        let nv = self.nv;
        let groups = nv.div_ceil(TRUST_GROUP);
        p.dispatch(
            Kernel::IpcTrust,
            &[
                x.id(),
                step.id(),
                self.boxes.id(),
                bound.id(),
                self.trust_part.id(),
            ],
            Params::new(),
            nv as u32,
        );
        p.max_abs(&self.trust_part, groups as u32, readback, trust_slot as u32);
        let Some(b) = &self.terms.barrier else {
            p.copy(&self.ones, 0, bound, nv, groups);
            return;
        };
        self.rec_positions(p, fine);
        p.copy(step, 0, &self.ccd_dx, 0, nv);
        let accd = AccdParams::default();
        p.dispatch(
            Kernel::IpcCcd,
            &[
                self.terms.xc.id(),
                self.ccd_dx.id(),
                b.list.id(),
                self.pair_toi.id(),
                self.pair_iters.id(),
            ],
            Params {
                f0: 0.0,
                f1: 1.0,
                f2: accd.rescaling as f32,
                u0: CCD_CAP.min(accd.max_iterations as u32),
                u1: self.terms.fine_at,
                ..Params::new()
            },
            b.n as u32,
        );
        self.rec_vertex_min(p, b, &self.pair_toi, 1.0);
        p.copy(&self.vertex_part, 0, bound, nv, groups);
    }

    /// The candidate pairs whose time of impact from the last [`Self::rec_step_bound`]'s f32
    /// CCD is below `below`, with those times (one readback): those it could not certify apart
    /// ([`crate::gpu::twins::ccd::UNCERTIFIED`]: closer than ~20ε of the pair's size, module
    /// docs "κ and friction") and those just above that, whose rounding bound leaves a sliver
    /// of their gap.
    pub(super) fn held_pairs(&self, dev: &mut Device, below: f32) -> Result<Vec<(usize, f32)>> {
        let Some(b) = &self.terms.barrier else {
            return Ok(Vec::new());
        };
        let times = dev.read(&self.pair_toi)?;
        Ok((0..b.n)
            .filter(|&i| times[i] < below)
            .map(|i| (i, times[i]))
            .collect())
    }

    /// Decides in f64 the pairs `held` ([`Self::held_pairs`]) from the model positions `x` and
    /// the step `step` (flat, m; the obstacles still): the reference's ACCD ([`additive_ccd`])
    /// of the joint straight move, its time rounded down to f32 into the pair's time where it
    /// is longer. Returns how many pairs' times grew.
    pub(super) fn certify_on_host(
        &mut self,
        dev: &mut Device,
        problem: &StepProblem,
        x: &[f64],
        step: &[f64],
        held: &[(usize, f32)],
    ) -> Result<usize> {
        let xs = problem.contact_positions(&self.ipc, x);
        let at = |v: u32| Vector3::from(xs[v as usize]);
        let moved = |v: u32| {
            let v = v as usize;
            let d = if v < self.nv {
                Vector3::new(step[3 * v], step[3 * v + 1], step[3 * v + 2])
            } else {
                Vector3::zeros()
            };
            Vector3::from(xs[v]) + d
        };
        let accd = AccdParams::default();
        let mut grown = 0;
        for &(i, before) in held {
            let pr = &self.pairs[i];
            let t = additive_ccd(
                pr.kind,
                &pr.ids.map(at),
                &pr.ids.map(moved),
                0.0,
                1.0,
                &accd,
            )
            .t;
            let mut t32 = t as f32;
            if t32 as f64 > t {
                t32 = t32.next_down();
            }
            if t32 > before {
                dev.write(&self.pair_toi, i, &[t32])?;
                grown += 1;
            }
        }
        self.host_decided += grown;
        Ok(grown)
    }

    /// Records the step bound again from the pairs' times of impact as they stand (after
    /// [`Self::certify_on_host`] replaced some) and the trust boxes' partials of the last
    /// [`Self::rec_step_bound`]: as its tail, for the same `bound`, `readback` and slot.
    pub(super) fn rec_bound_again(
        &self,
        p: &mut Plan,
        bound: &Buf<f32>,
        readback: &Buf<f32>,
        trust_slot: usize,
    ) {
        let nv = self.nv;
        let groups = nv.div_ceil(TRUST_GROUP);
        p.max_abs(&self.trust_part, groups as u32, readback, trust_slot as u32);
        if let Some(b) = &self.terms.barrier {
            self.rec_vertex_min(p, b, &self.pair_toi, 1.0);
            p.copy(&self.vertex_part, 0, bound, nv, groups);
        }
    }

    /// `bound`'s length for [`Self::rec_step_bound`] with `nv` model vertices.
    pub(super) fn bound_len(nv: usize) -> usize {
        nv + nv.div_ceil(TRUST_GROUP)
    }

    /// Records per model vertex the minimum of `per_pair` over its pairs of `b` (and `cap`) and
    /// the per-group maximum reciprocals into `vertex_part`.
    fn rec_vertex_min(&self, p: &mut Plan, b: &PairList<GpuPair>, per_pair: &Buf<f32>, cap: f32) {
        p.dispatch(
            Kernel::IpcVertexToi,
            &[
                per_pair.id(),
                b.offsets.id(),
                b.csr_pairs.id(),
                self.vertex_min.id(),
                self.vertex_part.id(),
            ],
            Params::new().f0(cap),
            self.nv as u32,
        );
    }

    /// Records the smallest squared pair distance at the last evaluated point (after
    /// [`Self::rec_terms`]) as its reciprocal into `readback[slot]` ([`Self::min_distance_sq`]
    /// reads it): over the pairs with a free model vertex (a pair of pinned and obstacle
    /// vertices only does not move within the step), capped at d̂².
    pub(super) fn rec_min_distance(&self, p: &mut Plan, readback: &Buf<f32>, slot: usize) {
        if let Some(b) = &self.terms.barrier {
            self.rec_vertex_min(p, b, &self.terms.dist, self.terms.dhat_sq);
            let groups = self.nv.div_ceil(TRUST_GROUP);
            p.max_abs(&self.vertex_part, groups as u32, readback, slot as u32);
        }
    }

    /// The smallest squared distance of the pairs within d̂ (m², +∞ when none) from the
    /// readback value [`Self::rec_min_distance`] wrote.
    pub(super) fn min_distance_sq(&self, value: f32) -> f64 {
        if self.terms.barrier.is_none() || value.is_nan() || value <= 0.0 {
            return f64::INFINITY;
        }
        let d2 = 1.0 / value as f64;
        if d2 >= (1.0 - 1e-6) * self.terms.dhat_sq as f64 {
            f64::INFINITY
        } else {
            d2
        }
    }

    /// Whether a barrier partial carries the touching pair's sentinel (+∞ energy).
    pub(super) fn touching(&self, partials: &[f32]) -> bool {
        let n = self
            .terms
            .barrier
            .as_ref()
            .map_or(0, |t| t.n.div_ceil(REDUCE_BLOCK));
        partials[..n]
            .iter()
            .any(|&v| v.is_nan() || v >= 0.5 * IPC_SENTINEL)
    }
}
