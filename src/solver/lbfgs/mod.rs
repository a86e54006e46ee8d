//! L-BFGS on the step's incremental potential, written once for every initial inverse Hessian.
//!
//! Quasi-Newton L-BFGS-PD ([`crate::solver::qn`], H₀ = the projective-dynamics matrix's
//! inverse) and DOT / LBFGS-H ([`crate::solver::dot`], H₀ = a domain-decomposed or full
//! projected Hessian at the step's start) differ only in H₀ and in how the line search
//! starts. The loop is [`LbfgsSolver`], generic over the backend
//! ([`crate::solver::backend::PotentialBackend`]: f64 CPU or f32 device) and over
//! [`InitialInverse`], a host-side f64 object applied between the two loops of the recursion
//! through [`crate::solver::backend::Backend::host_solve`]:
//!
//! ```text
//! per step:   H₀.begin_step(problem) ; x ← x_start; history ← ∅; g ← ∇E(x)
//! per iteration:
//!   q ← −g; for i newest..oldest: ζ_i ← s_iᵀq/ρ_i; q ← q − ζ_i t_i        (first loop)
//!   d ← H₀ q                                                              (host, f64)
//!   for i oldest..newest: η ← t_iᵀd/ρ_i; d ← d + (ζ_i − η) s_i             (second loop)
//!   α₀ ← H₀.start_length(∇Eᵀd, dᵀH d), or the last pair's α* (TrialRule::Carry), or 1
//!   α ← min(α₀, filter bound)
//!   reduce α until E(x + αd) ≤ E(x) + γ α ∇Eᵀd       (Armijo; halving or TrialRule's fit)
//!   s ← αd; t ← ∇E(x + αd) − ∇E(x); keep (s, t) if sᵀt > 0 (to round-off); x ← x + αd
//! ```
//!
//! No scaling of H₀ by sᵀt/tᵀt (both papers apply their H₀ as it is). A direction that is
//! not a descent direction, or whose line search fails, is retried without the history and
//! then with H₀'s safer variants ([`InitialInverse::fallback`]) before the step gives up —
//! reported, never hidden. IPC contact between objects (f64 backend only) follows Newton's
//! protocol — κ balanced and raised, friction passes — in `contact.rs`; the barrier is in E,
//! ∇E and the step filter, not in H₀. The per-backend details (one plan per iteration on a device, one
//! read per trial) are in [`crate::solver::qn`]'s docs.

mod contact;
mod solver;

pub use solver::{LbfgsIteration, LbfgsPhases, LbfgsSolver};

use crate::error::{JelloError, Result};
use crate::problem::{ElasticTerms, StepProblem};
use crate::solver::backend::PotentialBackend;
use crate::solver::QnMode;
use crate::solver::StopRule;

/// The largest history a solver may ask for (each pair holds two n × 3 vectors).
pub const MAX_HISTORY: usize = 100;

/// Parameters of the L-BFGS loop itself (what every initial inverse Hessian shares).
#[derive(Clone, Copy, Debug)]
pub struct LbfgsParams {
    /// History m (both papers: 5; 0 applies H₀ alone every iteration).
    pub history: usize,
    /// Stopping mode.
    pub mode: QnMode,
    /// The stop rule of [`QnMode::Rule`]; in [`QnMode::Fixed`] only what `converged` reports.
    pub stop: StopRule,
    /// Iteration cap of [`QnMode::Rule`].
    pub max_iterations: usize,
    /// Armijo constant γ of the sufficient-decrease test, in (0, 1).
    pub armijo: f64,
    /// Reductions of the line search before it gives up (each at least halves α; α stays
    /// ≥ 2^−`max_halvings` of the first trial's).
    pub max_halvings: usize,
    /// How the line search places its trials.
    pub trials: TrialRule,
    /// Wait for the backend after every phase so the per-phase times are exact.
    pub profile: bool,
}

impl LbfgsParams {
    /// One line naming what is wrong, if anything.
    pub fn validate(&self) -> Result<()> {
        if self.history > MAX_HISTORY {
            return Err(JelloError::Invalid(format!(
                "history {} is above {MAX_HISTORY}",
                self.history
            )));
        }
        if let QnMode::Fixed(0) = self.mode {
            return Err(JelloError::Invalid(
                "a fixed iteration count must be ≥ 1".into(),
            ));
        }
        if !(self.armijo > 0.0 && self.armijo < 1.0) {
            return Err(JelloError::Invalid(format!(
                "the Armijo constant must lie in (0, 1), got {}",
                self.armijo
            )));
        }
        Ok(())
    }
}

/// How the line search places its trials along a direction d (α in units of d; the step
/// filter's bound caps every α).
///
/// Every trial evaluates E and ∇E in one element pass, so a rejected trial costs as much as an
/// iteration's accepted one; the quadratic rules spend what the loop already has — E(x),
/// ∇Eᵀd, the rejected trial's energy, the accepted pair's sᵀt — to reject fewer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrialRule {
    /// The papers': the first trial at α = 1 (or the initial inverse Hessian's start length,
    /// [`InitialInverse::start_length`]), halved after each rejection.
    Halving,
    /// As `Halving`, but after a rejection α moves to the minimiser of the parabola through
    /// E(x), ∇E(x)ᵀd and the rejected trial's energy (Nocedal & Wright Eq. 3.57), kept within
    /// [0.1, 0.5] of the rejected α (the usual safeguard: no collapse, at least a halving).
    Interpolate,
    /// As `Interpolate`, and the first trial comes from the last iteration's curvature: its
    /// accepted pair gives the secant curvature along its direction, c = sᵀt/α², and the
    /// minimiser α* = −∇Eᵀd/c; when that α* says α = 1 would fail Armijo on a quadratic
    /// (α* < 1/(2(1 − γ))), the next direction starts at α* (bounded by the filter) instead
    /// of spending a trial at 1 (one read of the filter's bound then, as for a start
    /// length). A step's first direction starts at 1 (nothing is carried across steps). An
    /// initial inverse Hessian's own start length wins.
    Carry,
}

impl TrialRule {
    /// The factor of α for the trial after a rejection at `alpha`, from the slope ∇Eᵀd (< 0)
    /// and the rejected trial's energy change `de` relative to the current point.
    pub fn reduction(self, slope: f64, alpha: f64, de: f64) -> f64 {
        if self == TrialRule::Halving {
            return 0.5;
        }
        // E(α) ≈ E + α·slope + α²c/2 through the trial: c = 2(de − α·slope)/α²; the
        // minimiser −slope/c as a fraction of α.
        let fraction = -slope * alpha / (2.0 * (de - slope * alpha));
        if fraction.is_finite() && fraction > 0.0 {
            fraction.clamp(0.1, 0.5)
        } else {
            0.5
        }
    }

    /// The next direction's first trial from the accepted pair of the last (slope ∇Eᵀd,
    /// accepted α, ρ = sᵀt) under Armijo constant `armijo`: Some(α*) when the quadratic along
    /// that direction says α = 1 fails; None starts at 1.
    pub fn carried(self, slope: f64, alpha: f64, rho: f64, armijo: f64) -> Option<f64> {
        if self != TrialRule::Carry {
            return None;
        }
        let minimiser = -slope * alpha * alpha / rho;
        (minimiser.is_finite() && minimiser > 0.0 && minimiser < 0.5 / (1.0 - armijo))
            .then_some(minimiser)
    }
}

/// What [`InitialInverse::refresh`] reports.
#[derive(Clone, Copy, Debug, Default)]
pub struct Refresh {
    /// Contact curvature terms now in H₀ (QN's barrier correction; 0 otherwise).
    pub terms: usize,
    /// Whether H₀ changed enough since the last direction that the history must go.
    pub changed: bool,
}

/// The initial inverse Hessian of [`LbfgsSolver`]: a host-side f64 operator applied between
/// the two loops. See the module docs.
pub trait InitialInverse<B: PotentialBackend> {
    /// The solver's name in scenes and stats ("qn", "dot", "lbfgs-h").
    fn name(&self) -> String;
    /// Start of a step, after the backend's ([`PotentialBackend::begin_step`]): build what
    /// this step needs (a factorisation; DOT takes its element Hessians from the backend).
    /// Returns whether anything was (re)built, for the per-phase times.
    fn begin_step(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        backend: &mut B,
    ) -> Result<bool>;
    /// Start of an iteration: back to the default variant after a fallback.
    fn begin_iteration(&mut self) {}
    /// Before each application: refresh what depends on the current iterate (QN's barrier
    /// terms).
    fn refresh(&mut self, _problem: &StepProblem, _backend: &mut B) -> Result<Refresh> {
        Ok(Refresh::default())
    }
    /// v ← H₀ v on 3n interleaved values.
    fn apply(&mut self, v: &mut [f64]) -> Result<()>;
    /// Switch to a safer H₀ for the rest of this iteration (after the history-free direction
    /// failed); false when there is none left.
    fn fallback(&mut self) -> bool {
        false
    }
    /// Whether [`Self::start_length`] is used (then the loop asks for [`Self::curvature`]
    /// of each direction).
    fn wants_start_length(&self) -> bool {
        false
    }
    /// Records `out` ← dᵀH d of a model Hessian H for the direction `d` on the backend (the
    /// direction stays where it is).
    fn curvature(
        &mut self,
        _problem: &StepProblem,
        _backend: &mut B,
        _d: B::Vector,
        _out: B::Scalar,
    ) -> Result<()> {
        Err(JelloError::Solver(format!(
            "{}: no model curvature",
            self.name()
        )))
    }
    /// The first trial's step length from the slope ∇Eᵀd and the curvature dᵀH d; None
    /// starts at 1.
    fn start_length(&self, _slope: f64, _curvature: f64) -> Option<f64> {
        None
    }
}
