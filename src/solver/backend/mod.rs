//! One solver loop, two precisions: the backend traits a solver's host loop is written against.
//!
//! A solver is a short host-side loop over [`Backend`] (vectors, scalars, fused vector updates
//! and reductions, and the bridge to a host f64 routine such as a prefactored solve) and
//! [`PotentialBackend`] (the incremental potential of one step on that backend: gradient,
//! step filter, line-search trials with their energy change, acceptance). It is generic over
//! the backend type (`QnSolver<B: PotentialBackend>`), so the same loop runs
//!
//! * in f64 on the CPU ([`CpuBackend`]): vectors are `Vec<f64>`, scalars are f64 values, and
//!   the potential is [`StepProblem`]'s own f64 energy, gradient and step filter — every
//!   obstacle kind, static increments and the strict inversion filter included. Operations run
//!   when called. This is the embedded default and the precision a tight stop rule needs;
//! * in f32 on a [`crate::gpu::Device`] ([`DeviceBackend`]): vectors are device buffers,
//!   operations are recorded into one [`crate::gpu::Plan`] and submitted when the host needs a
//!   value ([`Backend::read`], [`Backend::host_solve`]), and scalars produced by reductions stay
//!   on the device in a scalar buffer that later kernels take their coefficients from — so
//!   the two-loop recursion of L-BFGS records as one plan with no read-back inside it. The
//!   same device runs the WGSL kernels on a GPU or their CPU twins ([`crate::gpu::Device::cpu`]).
//!
//! Scalars are handles ([`Backend::Scalar`]): a solver allocates the ones it keeps (history
//! coefficients) once with [`Backend::scalar`] and names them as outputs; the potential's
//! operations return handles to their results, valid until the same operation is recorded
//! again. Only [`Backend::read`] turns handles into host numbers — on a device that is the only
//! synchronisation besides the host solve, so where a loop reads decides how often it waits.
//!
//! What the two backends cannot share is said in the types, not hidden: a device evaluates the
//! inversion part of the step filter per trial ([`TrialScalars::inverted`]) because the f64
//! `StepProblem::step_limit` needs positions on the host; and each backend says how much
//! round-off an energy comparison must allow ([`PotentialBackend::energy_slack`]).
//!
//! # Why a trait and not scalar-generic twins
//! The alternative — CPU twins generic over the scalar, f64 for the reference, f32 for the
//! GPU's mirror — would keep the f64 path on the twins' data layout (vec4 positions relative
//! to a centroid, per-vertex contact records, f32-shaped kernels) and lose what the f64 path
//! has today through [`StepProblem`]: surface contact with spheres and boxes, static load
//! increments, the strict inversion filter, per-element energy differences. With the trait the
//! f64 backend *is* `StepProblem`, and the device backend is free to fuse (a dot product in
//! the same pass as the vector update it follows, energies and speculative gradients in one
//! plan) without the solver knowing.

mod cpu;
mod device;

pub use cpu::{CpuBackend, CpuScalar, CpuVector};
pub use device::{
    DeviceBackend, DeviceScalar, DeviceVector, HostSolveStats, DEVICE_ENERGY_SLACK, MAX_SLOTS,
};

use crate::error::Result;
use crate::material::EigenFilter;
use crate::problem::{ElasticTerms, StepProblem};

/// A scalar coefficient computed where the scalars live:
/// c = `base`·(a, or 1 without `a`) − `ratio`·(num/den), where num/den is 0 without `num` and
/// whenever den ≤ 0 or is not finite (a curvature pair that fails the guard contributes
/// nothing). With `store`, num/den (guarded) is also written there.
#[derive(Clone, Copy, Debug)]
pub struct Coef<S> {
    /// Multiplier of `a` (or the constant when `a` is `None`).
    pub base: f64,
    /// Optional scalar factor of the first term.
    pub a: Option<S>,
    /// Multiplier of the ratio.
    pub ratio: f64,
    /// Ratio numerator.
    pub num: Option<S>,
    /// Ratio denominator.
    pub den: Option<S>,
    /// Where to store the ratio.
    pub store: Option<S>,
}

impl<S> Coef<S> {
    /// The constant `c`.
    pub fn constant(c: f64) -> Self {
        Coef {
            base: c,
            a: None,
            ratio: 0.0,
            num: None,
            den: None,
            store: None,
        }
    }
}

/// How [`Backend::combine`] writes its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Combine {
    /// y ← y + c·x.
    Add,
    /// y ← c·x.
    Set,
}

/// Which dot products [`Backend::dots`] computes (a·b, a·a, b·b), and where.
#[derive(Clone, Copy, Debug)]
pub struct Dots<S> {
    /// a·b.
    pub ab: Option<S>,
    /// a·a.
    pub aa: Option<S>,
    /// b·b.
    pub bb: Option<S>,
}

/// Vectors of one 3-vector per mesh vertex, scalars, fused updates and reductions, and the
/// bridge to host f64 routines. See the module docs.
pub trait Backend {
    /// Handle to a per-vertex 3-vector field (3n numbers).
    type Vector: Copy + std::fmt::Debug;
    /// Handle to a scalar.
    type Scalar: Copy + std::fmt::Debug;

    /// What runs the work ("cpu-f64", or the device's adapter name).
    fn name(&self) -> String;
    /// Whether vectors and scalars are f64 (the CPU reference) or f32 (a device).
    fn is_f64(&self) -> bool;
    /// A new zero vector (allocated once, when the solver is built).
    fn vector(&mut self, label: &str) -> Result<Self::Vector>;
    /// A new zero vector of `len` plain numbers (`len` a multiple of 4), not a per-vertex
    /// field: a coarse space's coordinates (the multilevel levels' 12 per handle). `combine`,
    /// `dots`, `host_solve`, `write_vector` and `read_vector` treat its numbers alike and take
    /// it only with vectors of its own kind and length; on a device it is `len / 4` vec4s worked
    /// on all four lanes. Allocated once, when the solver is built.
    fn flat_vector(&mut self, label: &str, len: usize) -> Result<Self::Vector>;
    /// A new scalar slot (allocated once, when the solver is built).
    fn scalar(&mut self) -> Result<Self::Scalar>;
    /// v ← `values` (3n interleaved for a per-vertex field, m or N; a flat vector's `len`).
    fn write_vector(&mut self, v: Self::Vector, values: &[f64]) -> Result<()>;
    /// The values of `v` on the host, as [`Self::write_vector`] takes them (waits for
    /// everything recorded before).
    fn read_vector(&mut self, v: Self::Vector) -> Result<Vec<f64>>;
    /// y ← (y +) c·x per `mode`, with c from `coef`; with `dot = Some((z, s))` also
    /// s ← z·y (after the update), fused into the same pass. `y` must differ from `x` and `z`.
    fn combine(
        &mut self,
        y: Self::Vector,
        coef: Coef<Self::Scalar>,
        x: Self::Vector,
        mode: Combine,
        dot: Option<(Self::Vector, Self::Scalar)>,
    ) -> Result<()>;
    /// The requested dot products of `a` and `b` in one pass.
    fn dots(&mut self, a: Self::Vector, b: Self::Vector, out: Dots<Self::Scalar>) -> Result<()>;
    /// The values of `scalars` on the host (waits for everything recorded before).
    fn read(&mut self, scalars: &[Self::Scalar]) -> Result<Vec<f64>>;
    /// r ← f(q) by a host routine working in f64 in place on q's 3n interleaved values
    /// (`[x0 y0 z0 x1 …]`; a flat vector's `len`): on a device q crosses the bus, then r back.
    fn host_solve(
        &mut self,
        q: Self::Vector,
        r: Self::Vector,
        f: &mut dyn FnMut(&mut [f64]) -> Result<()>,
    ) -> Result<()>;
    /// Waits until everything recorded has run (for per-phase timings).
    fn sync(&mut self) -> Result<()>;
}

/// The two position states a line search keeps: the current iterate and a trial.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Point {
    /// The current iterate.
    Current,
    /// The last trial.
    Trial,
}

/// What [`PotentialBackend::gradient`] reports.
#[derive(Clone, Copy, Debug)]
pub struct GradientScalars<S> {
    /// The characteristic-norm residual of the gradient ([`crate::problem::CharacteristicNorm`]).
    pub residual: S,
}

/// What [`PotentialBackend::trial`] reports.
#[derive(Clone, Copy, Debug)]
pub struct TrialScalars<S> {
    /// E(trial) − E(x_start), J, summed per element and per vertex (+∞ when infeasible).
    pub energy: S,
    /// Elements the inversion filter forbids at the trial (positive at the current iterate and
    /// not at the trial — or below the strict floor under `strict_inversion`); always 0 on a
    /// backend whose [`PotentialBackend::step_bound`] already includes the inversion filter.
    pub inverted: S,
    /// Largest per-vertex move of the trial, m.
    pub max_move: S,
    /// The step fraction α of the trial (scale × bound).
    pub alpha: S,
    /// The characteristic-norm residual of the gradient at the trial, when it was asked for.
    pub residual: Option<S>,
}

/// The incremental potential of one step ([`StepProblem`]) on a backend: two position states
/// (current, trial), gradients, the step filter and line-search trials.
pub trait PotentialBackend: Backend {
    /// Whether this backend can solve `problem` (a device without surface contact or static
    /// increments says which and why).
    fn check(&self, problem: &StepProblem) -> Result<()>;
    /// Starts a step: current ← `problem.x_start`, and the energy references of the start.
    fn begin_step(&mut self, problem: &StepProblem, elastic: &dyn ElasticTerms) -> Result<()>;
    /// g ← ∇E at `at` (zero on pinned DOFs).
    fn gradient(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        at: Point,
        g: Self::Vector,
    ) -> Result<GradientScalars<Self::Scalar>>;
    /// The largest α ∈ [0, 1] of a move from the current iterate along `d` that the step
    /// filter allows (obstacles; inversion where [`TrialScalars::inverted`] says so).
    fn step_bound(&mut self, problem: &StepProblem, d: Self::Vector) -> Result<Self::Scalar>;
    /// trial ← current + α·d with α = `scale` × `bound`, `step` ← α·d, and the trial's
    /// energy change; with `gradient`, also ∇E at the trial there (what a quasi-Newton line
    /// search evaluates speculatively: the f64 backend gets the energy change from the same
    /// element pass, [`StepProblem::gradient_and_change`]).
    #[allow(clippy::too_many_arguments)]
    fn trial(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        d: Self::Vector,
        scale: f64,
        bound: Self::Scalar,
        step: Self::Vector,
        gradient: Option<Self::Vector>,
    ) -> Result<TrialScalars<Self::Scalar>>;
    /// The trial becomes the current iterate.
    fn accept(&mut self);
    /// The current iterate's positions (3n, m) on the host in f64, for the contact updates a
    /// loop makes between iterations (IPC's κ raise and friction passes read the surface
    /// pairs there); `None` where the positions live on a device, whose [`Self::check`]
    /// refuses IPC scenes.
    fn host_positions(&self) -> Option<&[f64]> {
        None
    }
    /// The element Hessians of the elastic energy at the step's start `problem.x_start`
    /// (N/m; 12×12 per element, row-major, DOFs vertex-major, pinned DOFs included), their
    /// ∂P/∂F eigenvalues passed through `filter` — on the host in f64, for a preconditioner to assemble and
    /// factor (DOT's subdomain matrices). A device computes them in its `elastic` kernel, reads
    /// them back (576 bytes per element) and keeps them for [`Self::start_curvature`]. Call
    /// after [`Self::begin_step`].
    fn start_element_hessians(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        filter: EigenFilter,
    ) -> Result<&[[f64; 144]]>;
    /// `out` ← dᵀ H d (J for `d` in m), H the Hessian at x_start that
    /// [`StepProblem::assemble`] builds from the element Hessians of the last
    /// [`Self::start_element_hessians`] call of this step (inertia and barrier terms at x_start
    /// included, pinned DOFs ignored): the curvature DOT's first trial length is fitted to. On
    /// a device it is one pass over the stored element Hessians and a reduction: the direction
    /// never leaves the device.
    fn start_curvature(
        &mut self,
        problem: &StepProblem,
        d: Self::Vector,
        out: Self::Scalar,
    ) -> Result<()>;
    /// The obstacle barrier's curvature at the current iterate as rank-1 terms (f64, host),
    /// for a contact-aware preconditioner ([`crate::solver::pd::contact`]).
    fn contact_terms(
        &mut self,
        problem: &StepProblem,
        out: &mut Vec<crate::solver::pd::ContactTerm>,
    ) -> Result<()>;
    /// Round-off allowance (J) of an energy comparison near the energy change `e` (J) between
    /// the current iterate and trials near it (the f64 backend's allowance grows with the
    /// current iterate's distance from the start: [`StepProblem::energy_slack`]).
    fn energy_slack(&self, problem: &StepProblem, elastic: &dyn ElasticTerms, e: f64) -> f64;
    /// The current iterate into `x` (3n, m) and the f64 energy E(x) and E(x) − E(x_start) for
    /// the report (`change` is the loop's own value of the latter).
    fn finish_step(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        change: f64,
        x: &mut Vec<f64>,
    ) -> Result<(f64, f64)>;
}
