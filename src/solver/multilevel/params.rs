//! The multilevel solver's parameters, with the paper's values as defaults.

use crate::solver::StopRule;
use jello_precompute::sms::CubatureTargets;

/// When the lagged elastic Hessian of the full-space smoother is rebuilt.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LagRefresh {
    /// The paper's (§3.7.2): at the start of every step, and when the moving average of the
    /// last `window` line-search step lengths drops below `threshold`, at most once every
    /// `min_gap` iterations (the paper: "at most once every five iterations"; window and
    /// threshold it leaves open — defaults 3 and 0.5).
    Adaptive {
        /// Step lengths averaged (≥ 1).
        window: usize,
        /// Average step length below which the Hessian is rebuilt, in (0, 1].
        threshold: f64,
        /// Fewest iterations between two rebuilds within a step (≥ 1).
        min_gap: usize,
    },
    /// Every Newton iteration (the smoother then works on the current Hessian: with enough
    /// iterations the direction is exactly Newton's).
    Iteration,
    /// Once per step only.
    Step,
}

impl Default for LagRefresh {
    fn default() -> Self {
        LagRefresh::Adaptive {
            window: 3,
            threshold: 0.5,
            min_gap: 5,
        }
    }
}

impl LagRefresh {
    /// Name as in `[solver] lag_refresh`.
    pub fn name(&self) -> &'static str {
        match self {
            LagRefresh::Adaptive { .. } => "adaptive",
            LagRefresh::Iteration => "iteration",
            LagRefresh::Step => "step",
        }
    }
}

/// When a step stops.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MultilevelStop {
    /// jello's shared rule ([`StopRule`]; CN by default), the one every comparison with Newton
    /// uses.
    Shared(StopRule),
    /// The paper's (§3.7): stop when the largest per-vertex norm of the subspace direction
    /// `d_s` (of `d` when there is no subspace level) over `h` times the rest bounding-box
    /// diagonal is below `tol` (1/s; the paper's 1e-3).
    Subspace {
        /// Tolerance, 1/s.
        tol: f64,
    },
}

impl MultilevelStop {
    /// Whether the rule holds: the shared rule's [`StopRule::met`] at `residual` and
    /// `dx_ratio`, or the subspace rule's `ds_ratio` (‖d_s‖∞ / (h · diagonal), 1/s) below its
    /// tolerance. Pass `f64::INFINITY` for the ratios where no iteration led to the point.
    pub fn met(&self, residual: f64, dx_ratio: f64, ds_ratio: f64) -> bool {
        match *self {
            MultilevelStop::Shared(rule) => rule.met(residual, dx_ratio),
            MultilevelStop::Subspace { tol } => ds_ratio < tol,
        }
    }
}

/// Preconditioner of the full-space PCG (the smoother, and Newton-PCG's only solve).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Preconditioner {
    /// The diagonal of the lagged Hessian, classical PCG (the paper's).
    #[default]
    Jacobi,
    /// One JGS2 Jacobi step as a linear map ([`crate::solver::jgs2::Jgs2Preconditioner`],
    /// frozen at the Newton iterate), in flexible PCG (the map is not exactly symmetric).
    /// Needs a JGS2 subspace ([`super::MultilevelSolver::set_jgs2_subspace`]).
    Jgs2,
}

impl Preconditioner {
    /// Name as in `[solver] smoother`.
    pub fn name(&self) -> &'static str {
        match self {
            Preconditioner::Jacobi => "jacobi",
            Preconditioner::Jgs2 => "jgs2",
        }
    }
}

/// Parameters of [`super::MultilevelSolver`].
#[derive(Clone, Copy, Debug)]
pub struct MultilevelParams {
    /// SMS handles (`None`: [`default_handles`]; 0: no SMS level).
    pub handles: Option<usize>,
    /// Whether the affine level runs (default true).
    pub affine: bool,
    /// Full-space Jacobi-PCG iterations per Newton iteration (`None`: the SMS precompute's
    /// N_cg rule, 20 or 40; without an SMS level 40).
    pub n_cg: Option<usize>,
    /// Relative residual at which the full-space PCG stops early (default 0: always exactly
    /// N_cg iterations, the paper's fixed-count smoother).
    pub full_tolerance: f64,
    /// Jump factor c of the partitioning metric (default 0.25; the paper uses 0.1–0.5).
    pub jump_factor: f64,
    /// Relative residual of the affine and SMS block-Jacobi PCG solves (default 1e-4, the
    /// paper's).
    pub subspace_tolerance: f64,
    /// Iteration cap of each subspace PCG solve (default 200).
    pub subspace_max_iterations: usize,
    /// Lagged-Hessian refresh rule (default the paper's adaptive rule).
    pub lag: LagRefresh,
    /// Stop rule (default the shared CN rule).
    pub stop: MultilevelStop,
    /// Newton iteration cap per step (default 100).
    pub max_iterations: usize,
    /// What the cubature fits (default [`CubatureTargets::Weights`], the precompute's
    /// default: products of the scalar weights; `WeightsAffine` adds `φ_h·(x − o_h)`).
    pub cubature: CubatureTargets,
    /// Precondition the SMS solve with block Jacobi plus an additive coarse correction on
    /// the objects' affine motions (default true; false: block Jacobi alone, the paper's).
    pub sms_coarse: bool,
    /// Preconditioner of the full-space PCG (default [`Preconditioner::Jacobi`], the
    /// paper's).
    pub smoother: Preconditioner,
    /// Stall rescue (jello's, not the paper's; default [`Rescue::default`]): a step still
    /// unconverged after this many Newton iterations continues as Newton-PCG — the Hessian
    /// refreshed every iteration and the full-space PCG (warm-started at the levels' direction)
    /// run to relative [`Rescue::tolerance`] instead of N_cg iterations. `None`: the paper's
    /// loop to the iteration cap.
    pub rescue: Option<Rescue>,
    /// Solve each subspace level exactly by a dense Cholesky of its assembled Galerkin matrix
    /// instead of block-Jacobi PCG to [`Self::subspace_tolerance`] (beyond the paper; levels
    /// up to [`super::SUBSPACE_DIRECT_MAX_DIM`] DOFs, larger ones keep the PCG;
    /// CPU path only). Default false.
    pub subspace_direct: bool,
    /// With a device attached ([`super::MultilevelSolver::attach_device`]): evaluate the line
    /// search's trials on it ([`super::device_energy`]), deciding the Armijo test there when
    /// the device's change clears the threshold by more than its round-off bound and in f64
    /// on the host otherwise. `false`: every trial in f64 on the host. Default true.
    pub device_line_search: bool,
}

/// When and how the multilevel loop stops trusting its inexact directions (see
/// [`MultilevelParams::rescue`] and the module docs' "Stall rescue").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rescue {
    /// Newton iterations of a step before the rescue starts (default 10).
    pub after: usize,
    /// Relative residual of the rescue's full-space PCG (default 1e-4, the paper's IPC-PCG
    /// baseline's).
    pub tolerance: f64,
    /// Iteration cap of the rescue's full-space PCG (default 10,000).
    pub max_cg: usize,
}

impl Default for Rescue {
    fn default() -> Self {
        Rescue {
            after: 10,
            tolerance: 1e-4,
            max_cg: 10_000,
        }
    }
}

impl Default for MultilevelParams {
    fn default() -> Self {
        MultilevelParams {
            handles: None,
            affine: true,
            n_cg: None,
            full_tolerance: 0.0,
            jump_factor: 0.25,
            subspace_tolerance: 1e-4,
            subspace_max_iterations: 200,
            lag: LagRefresh::default(),
            stop: MultilevelStop::Shared(StopRule::default()),
            max_iterations: 100,
            cubature: CubatureTargets::Weights,
            sms_coarse: true,
            smoother: Preconditioner::Jacobi,
            rescue: Some(Rescue::default()),
            subspace_direct: false,
            device_line_search: true,
        }
    }
}

impl MultilevelParams {
    /// Newton with Jacobi PCG (the paper's "IPC-PCG" baseline) on the same loop: no subspace
    /// level, the full-space PCG on the current Hessian to relative `tolerance` (at most
    /// `max_cg` iterations). Jacobi-preconditioned; set [`Self::smoother`] to
    /// [`Preconditioner::Jgs2`] for Newton with JGS2-preconditioned (flexible) PCG.
    pub fn newton_pcg(tolerance: f64, max_cg: usize) -> Self {
        MultilevelParams {
            handles: Some(0),
            affine: false,
            n_cg: Some(max_cg),
            full_tolerance: tolerance,
            lag: LagRefresh::Iteration,
            rescue: None,
            ..MultilevelParams::default()
        }
    }
}

/// Default SMS handle count for `n` vertices: about one handle per 500 vertices (the paper's
/// hoop, basketball and kooshball use 375–500 vertices per handle), at least `min(16, n/4)`
/// so small meshes still get a real subspace, at most 400 (the paper's largest), and never
/// below 1.
pub fn default_handles(n: usize) -> usize {
    n.div_ceil(500).max(16.min(n / 4)).clamp(1, 400)
}
