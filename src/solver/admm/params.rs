//! ADMM-PD parameters.

use super::contact::ContactParams;
use super::prox::ProxKind;
use crate::solver::pd::GlobalOptions;
use crate::solver::qn::QnMode;
use crate::solver::StopRule;

/// How an ADMM step decides it is done: the shared stop rule with a cap ([`QnMode::Rule`], the
/// default) or the paper's fixed iteration count ([`QnMode::Fixed`]; Table 2 uses 7–40). The
/// same enum (and the same `[solver] mode` / `iterations` keys) as QN.
pub type AdmmMode = QnMode;

/// Parameters of [`super::AdmmSolver`].
#[derive(Clone, Copy, Debug)]
pub struct AdmmParams {
    /// z-step backend (default [`ProxKind::Hyperelastic`]).
    pub prox: ProxKind,
    /// Stopping mode (default the stop rule).
    pub mode: AdmmMode,
    /// The stop rule, evaluated on the true gradient of the step's objective (default
    /// characteristic norm, ε = 1e-5); in fixed mode only what `converged` reports.
    pub stop: StopRule,
    /// Iteration cap of the rule mode (default 1000: ADMM converges linearly at best and
    /// stalls at tight tolerances; a step at the cap ends unconverged).
    pub max_iterations: usize,
    /// The global matrix; its `weight_scale` is the global multiplier on w² (default 1,
    /// `[solver] weight_scale`).
    pub global: GlobalOptions,
    /// Obstacle contact and friction ([`super::contact`]; used when the model has obstacles).
    pub contact: ContactParams,
    /// Anderson acceleration of the (z, ū) map: the number of differences kept (0: off;
    /// default 5; `[solver] anderson`), with the combined-residual safeguard
    /// (`anderson.rs`).
    pub anderson: usize,
    /// Residual-balancing penalty update (`[solver] penalty`).
    pub penalty: PenaltyParams,
}

/// Residual balancing (Boyd et al. 2011 §3.4.1) on ADMM's penalty: every w_e² times one factor
/// ρ (1 at the start of a run, kept from step to step). At every `interval`-th iteration the
/// primal part ‖W(Dx − z)‖ and the z-change ‖W(zⁿ⁺¹ − zⁿ)‖ of the combined residual (both √J
/// under the current weights) are compared; when one exceeds `band` times the other, ρ is
/// multiplied (primal larger) or divided (z-change larger) by `factor`, the scaled dual ū
/// divided by the same factor, and the x-step's matrix refactored (or a cached factor reused).
/// A check that finds the combined residual stalled (less than `stall` of it taken off since
/// the previous check) multiplies ρ as well: a larger w convexifies the z-step of a nonconvex
/// energy and breaks the cycle plain ADMM settles into there (stiff_soft.toml, armadillo).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PenaltyParams {
    /// Whether the penalty adapts (default on; `penalty = "balance"`, off: `"fixed"`).
    pub adapt: bool,
    /// Ratio that triggers an update, > 1 (default 10, Boyd's μ).
    pub band: f64,
    /// Factor of one update, > 1 (default 2, Boyd's τ).
    pub factor: f64,
    /// Iterations between checks, ≥ 1 (default 10).
    pub interval: usize,
    /// Updates per step at most (default 4): the bound on a step's refactorisations, and what
    /// lets the iteration settle on one map.
    pub max_updates: usize,
    /// ρ stays within [1/`range`, `range`] (default 64).
    pub range: f64,
    /// Fraction of the combined residual a check interval must take off not to count as
    /// stalled, in [0, 1) (default 0.1).
    pub stall: f64,
}

impl PenaltyParams {
    /// A fixed penalty (the paper's algorithm).
    pub fn fixed() -> Self {
        PenaltyParams {
            adapt: false,
            ..PenaltyParams::default()
        }
    }
}

impl AdmmParams {
    /// The paper's Algorithm 1 as published: no Anderson acceleration, a fixed penalty (the
    /// other fields at their defaults).
    pub fn plain() -> Self {
        AdmmParams {
            anderson: 0,
            penalty: PenaltyParams::fixed(),
            ..AdmmParams::default()
        }
    }
}

impl Default for PenaltyParams {
    fn default() -> Self {
        PenaltyParams {
            adapt: true,
            band: 10.0,
            factor: 2.0,
            interval: 10,
            max_updates: 4,
            range: 64.0,
            stall: 0.1,
        }
    }
}

impl Default for AdmmParams {
    fn default() -> Self {
        AdmmParams {
            prox: ProxKind::Hyperelastic,
            mode: QnMode::Rule,
            stop: StopRule::default(),
            max_iterations: 1000,
            global: GlobalOptions::default(),
            contact: ContactParams::default(),
            anderson: 5,
            penalty: PenaltyParams::default(),
        }
    }
}
