//! What JGS2 / VBD need from a backend: the per-vertex local systems and their sweeps (Jacobi,
//! coloured Gauss–Seidel), the safeguard's directions with their Hessian products and dot
//! products, trials along a combination of those directions, and acceptance.
//! [`super::Jgs2Solver`] is written once over [`Jgs2Backend`] — one step, one stop test, one
//! quadratic-model minimiser ([`model_coefficients`]), one safeguard and backtracking. Its
//! implementations: [`crate::solver::backend::CpuBackend`] in f64 (`cpu.rs`, the reference,
//! its state in the backend's extension slot, its points the backend's current and trial
//! points) and [`crate::solver::backend::DeviceBackend`] in f32 (`device.rs`, its state in the
//! backend's extension slot, on the backend's device, model and point pair).
//!
//! # A sub-trait of `PotentialBackend`
//! The loop needs nothing of [`PotentialBackend`] beyond starting a step, the energy
//! comparison's allowance and reading the result, and those are methods here
//! ([`Jgs2Backend::jgs2_begin`], [`Jgs2Backend::jgs2_slack`], [`Jgs2Backend::jgs2_finish`]): the
//! f64 backend forwards them to its `PotentialBackend` methods; the device's evaluate a point
//! in one plan with what the next iteration needs (below), which `begin_step`/`gradient` would
//! split into several readbacks. The supertrait says which backends JGS2/VBD run on (the two
//! every other solver runs on) and gives the loop the backend's vectors and scalars should it
//! need them.
//!
//! # Why the methods are this coarse
//! Every method is one evaluation of a point and returns its scalars on the host
//! ([`Jgs2Sample`], [`Jgs2Trial`]): on a device each is one plan and one readback, and a trial
//! evaluates speculatively at the trial point what the next iteration needs there (`next`:
//! the primary direction, or the model's three directions with their Hessian products and
//! dots), so an accepted trial — the usual case — costs no second sync (lavapipe counts in
//! `tests/gpu/gpu_counts.rs`: one readback per plain iteration, 1.75 per safeguarded one). The
//! f64 backend runs when called: it evaluates a trial's energy only and the rest at
//! [`Jgs2Backend::jgs2_accept`].
//!
//! What the backends cannot share is said here, not hidden in the loop:
//! - [`Jgs2Backend::jgs2_plain_moves_filtered`]: the f64 backend limits every vertex's move so
//!   each incident element stays above its strict floor (`keep_oriented`) and bounds the
//!   combined step by the f64 inversion filter (`StepProblem::max_step`), and filters every
//!   group's local moves by IPC's CCD; the device filters only the safeguarded combined step
//!   (its trials with an element below one floor are rejected through a sentinel energy, its
//!   IPC moves by CCD over the step's candidate list), so the loop forces the safeguard on
//!   there under `strict_inversion` or IPC contact;
//! - [`Jgs2Backend::jgs2_eigen_cutoff`]: the model minimiser's relative eigenvalue cut-off, as
//!   fine as the backend's dots resolve (f64 1e-10, f32 1e-6);
//! - [`Jgs2Backend::jgs2_slack`]: the energy comparison's round-off allowance (f64:
//!   `StepProblem::energy_slack`, per-element energy differences; f32: 1e-6 of the summed
//!   terms' magnitude).
//!
//! # Contact
//! IPC's κ and friction passes are the loop's ([`Jgs2Backend::jgs2_raise_stiffness`],
//! [`Jgs2Backend::jgs2_lag_friction`], as Newton's outer loop does them); the barrier and
//! friction terms, the per-vertex CCD filter and VBD's local line search are the backend's
//! per-vertex work (the f64 backend: `contact.rs`; the device: `device_ipc.rs`, which filters
//! only the safeguarded step's whole move, so the loop keeps the safeguard on there —
//! [`Jgs2Backend::jgs2_plain_moves_filtered`]).

use super::solver::Variant;
use super::subspace::Jgs2Subspace;
use crate::error::Result;
use crate::problem::{ElasticTerms, StepProblem};
use crate::solver::backend::PotentialBackend;
use nalgebra::Matrix3;
use std::sync::Arc;

/// What a JGS2 / VBD solver sets up on the f64 backend once, when it is built.
#[derive(Clone, Debug)]
pub struct Jgs2Setup {
    /// Sweep order.
    pub variant: Variant,
    /// The precomputed subspaces (JGS2), or `None` (VBD).
    pub subspace: Option<Arc<Jgs2Subspace>>,
    /// Per-vertex rotations at the state the subspace was linearised at (`None`: the rest
    /// shape; an f64 diagnostic, see `Jgs2Solver::linearised_at`).
    pub origin: Option<Vec<Matrix3<f64>>>,
}

/// Per-step choices of the loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Jgs2StepFlags {
    /// Whether iterates go through the safeguard (trials, energies).
    pub safeguard: bool,
    /// Whether every sample carries the energy change (the safeguard's test, or a trace).
    pub energy: bool,
}

/// What the next iteration needs at a point (evaluated speculatively at a trial on a device).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// A plain iteration follows ([`Jgs2Backend::jgs2_plain`]): the residual only.
    Plain,
    /// The primary direction δ and gᵀδ ([`crate::solver::jgs2::Safeguard::Cut`]'s plain trial).
    Primary,
    /// The model's directions {δ, block-Jacobi (VBD) step with a subspace, previous step when
    /// non-zero}, their Hessian products and dots.
    Model,
}

/// The scalars of a point, on the host.
#[derive(Clone, Copy, Debug, Default)]
pub struct Jgs2Sample {
    /// Characteristic-norm residual of the assembled gradient.
    pub residual: f64,
    /// E − E(x_start), J, when asked for ([`Jgs2StepFlags::energy`]; else 0).
    pub energy: f64,
    /// Largest per-vertex move of the step that led here, m (∞ at the step's start).
    pub max_move: f64,
    /// Whether every position is finite.
    pub finite: bool,
    /// Which of the three directions (primary, block-Jacobi, previous) exist at this point.
    pub present: [bool; 3],
    /// gᵀd_k (J), for present directions.
    pub gd: [f64; 3],
    /// ½(d_pᵀHd_q + d_qᵀHd_p) (J), for present directions under [`Next::Model`].
    pub dhd: [[f64; 3]; 3],
}

/// The scalars of a trial, on the host.
#[derive(Clone, Copy, Debug, Default)]
pub struct Jgs2Trial {
    /// E(trial) − E(x_start), J (+∞ when infeasible).
    pub energy: f64,
    /// The step filter's bound of the combined direction (the trial's α = scale × bound).
    pub bound: f64,
}

/// JGS2 / VBD's per-vertex work on a backend (see the module docs). Call order per step:
/// [`Self::jgs2_begin`], then per iteration either [`Self::jgs2_plain`] or trials
/// ([`Self::jgs2_trial`], possibly after [`Self::jgs2_evaluate`]) and [`Self::jgs2_accept`];
/// finally [`Self::jgs2_finish`].
pub trait Jgs2Backend: PotentialBackend {
    /// Number of vertex colours (Gauss–Seidel sweeps per iteration).
    fn jgs2_num_colours(&self) -> usize;
    /// Whether plain (unsafeguarded) iterations keep every filter `problem` asks for: each
    /// element above its strict floor under `strict_inversion`, and IPC contact's CCD on every
    /// group's moves (see the module docs). When not, the loop keeps the safeguard on.
    fn jgs2_plain_moves_filtered(&self, problem: &StepProblem) -> bool;
    /// The model minimiser's relative eigenvalue cut-off.
    fn jgs2_eigen_cutoff(&self) -> f64;
    /// Starts a step: current ← `problem.x_start` (on a device: the step's upload), evaluated
    /// for `next`.
    fn jgs2_begin(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        flags: Jgs2StepFlags,
        next: Next,
    ) -> Result<Jgs2Sample>;
    /// Evaluates the current point again for `next` (after a rejected plain trial: the model's
    /// directions).
    fn jgs2_evaluate(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        next: Next,
    ) -> Result<Jgs2Sample>;
    /// One plain iteration in place: every free vertex's local step at once (Jacobi) or one
    /// coloured sweep (Gauss–Seidel), then the new point's sample.
    fn jgs2_plain(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
    ) -> Result<Jgs2Sample>;
    /// trial ← current + scale·bound·Σ_k coef_k d_k over the present directions, bound the step
    /// filter's for Σ_k coef_k d_k (computed once per coefficients), and the trial's energy; a
    /// device evaluates there speculatively what `next` asks for.
    fn jgs2_trial(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        coef: [f64; 3],
        scale: f64,
        next: Next,
    ) -> Result<Jgs2Trial>;
    /// The last trial becomes the current point (its step the previous direction) and its
    /// sample, for the `next` of that trial.
    fn jgs2_accept(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
    ) -> Result<Jgs2Sample>;
    /// IPC's κ raise after an accepted iterate ([`StepProblem::raise_contact_stiffness`] at the
    /// current point; `prev_min_sq`, m², the previous iterate's smallest squared pair distance,
    /// updated). When κ changed, the current point is evaluated again for `next` (gradient and
    /// energy change under the new potential) and that sample returned; `None` when nothing
    /// changed, always without IPC contact.
    fn jgs2_raise_stiffness(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        prev_min_sq: &mut f64,
        next: Next,
    ) -> Result<Option<Jgs2Sample>>;
    /// Another friction lagging pass at the current point ([`StepProblem::lag_friction`]): when
    /// any pair was lagged, the current point evaluated again for `next` under the new
    /// potential; `None` otherwise, always without IPC friction.
    fn jgs2_lag_friction(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        next: Next,
    ) -> Result<Option<Jgs2Sample>>;
    /// Round-off allowance (J) of an energy comparison near the energy change `e` (J) of the
    /// current point (f64: [`StepProblem::energy_slack`]; f32: a fraction of the summed terms'
    /// magnitude).
    fn jgs2_slack(&self, problem: &StepProblem, elastic: &dyn ElasticTerms, e: f64) -> f64;
    /// The current point into `x` (3n, m, f64) in the middle of a step, changing nothing (for
    /// [`super::Jgs2Solver::with_iterate_observer`]).
    fn jgs2_current(&mut self, x: &mut Vec<f64>) -> Result<()>;
    /// The current point into `x` (3n, m, f64).
    fn jgs2_finish(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        x: &mut Vec<f64>,
    ) -> Result<()>;
}

/// Coefficients c minimising gᵀ(Σ c_k d_k) + ½ (Σ c_k d_k)ᵀ H (Σ c_k d_k) over the present
/// directions of `s` (absent ones get 0). The directions are first scaled to unit H-norm, so
/// one huge direction cannot hide the others; directions that are (numerically) dependent on
/// the others — eigenvalues of the scaled matrix below `cutoff` × the largest — get no weight,
/// and a non-finite coefficient becomes 0.
pub fn model_coefficients(s: &Jgs2Sample, cutoff: f64) -> [f64; 3] {
    let slots: Vec<usize> = (0..3).filter(|&k| s.present[k]).collect();
    let k = slots.len();
    let raw = |p: usize, q: usize| s.dhd[slots[p]][slots[q]];
    let scale: Vec<f64> = (0..k)
        .map(|p| {
            let d = raw(p, p);
            if d > 0.0 && d.is_finite() {
                1.0 / d.sqrt()
            } else {
                0.0
            }
        })
        .collect();
    let a = nalgebra::DMatrix::from_fn(k, k, |p, q| raw(p, q) * scale[p] * scale[q]);
    let b = nalgebra::DVector::from_fn(k, |p, _| -s.gd[slots[p]] * scale[p]);
    // Symmetric eigen-solve with a relative cut-off: a pseudo-inverse on the well-determined
    // part of span{d_k}.
    let eig = a.symmetric_eigen();
    let top = eig.eigenvalues.iter().fold(0.0f64, |m, v| m.max(*v));
    let mut c = nalgebra::DVector::zeros(k);
    for (j, &lam) in eig.eigenvalues.iter().enumerate() {
        if lam > cutoff * top {
            let v = eig.eigenvectors.column(j);
            c += v * (v.dot(&b) / lam);
        }
    }
    let mut out = [0.0; 3];
    for (p, &sl) in slots.iter().enumerate() {
        let v = c[p] * scale[p];
        if v.is_finite() {
            out[sl] = v;
        }
    }
    out
}
