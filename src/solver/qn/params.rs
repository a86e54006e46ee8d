//! Quasi-Newton parameters.

use crate::solver::lbfgs::{LbfgsParams, TrialRule};
use crate::solver::pd::GlobalOptions;
use crate::solver::StopRule;

pub use crate::solver::stop::QnMode;

/// Parameters of [`super::QnSolver`].
#[derive(Clone, Copy, Debug)]
pub struct QnParams {
    /// L-BFGS history m (default 5, the paper's; 0 gives the projective-dynamics step).
    pub history: usize,
    /// Stopping mode (default [`QnMode::Rule`]).
    pub mode: QnMode,
    /// The stop rule of [`QnMode::Rule`] (default: characteristic norm, ε = 1e-5); in
    /// [`QnMode::Fixed`] only what `converged` reports.
    pub stop: StopRule,
    /// Iteration cap of [`QnMode::Rule`] (default 1000: QN converges linearly).
    pub max_iterations: usize,
    /// Armijo constant γ (default 0.3, the paper's).
    pub armijo: f64,
    /// Halvings of the line search before it gives up (default 30, α ≥ 2⁻³⁰ of the filter's
    /// bound; see the module docs).
    pub max_halvings: usize,
    /// How the line search places its trials (default [`TrialRule::Carry`]; the paper's
    /// halving from α = 1 is [`TrialRule::Halving`]).
    pub trials: TrialRule,
    /// The global matrix (ordering, k interval, weight scale).
    pub global: GlobalOptions,
    /// Add the obstacle barrier's curvature to the initial inverse Hessian by a low-rank
    /// update around the fixed factor ([`crate::solver::pd::contact`]; default true). False is
    /// the paper's rule: contact in the energy and gradient only.
    pub contact_correction: bool,
    /// Wait for the backend after every phase so the per-phase times are exact (benches; a
    /// device otherwise runs phases asynchronously and the times fall where it waits).
    pub profile: bool,
}

impl Default for QnParams {
    fn default() -> Self {
        QnParams {
            history: 5,
            mode: QnMode::Rule,
            stop: StopRule::default(),
            max_iterations: 1000,
            armijo: 0.3,
            max_halvings: 30,
            trials: TrialRule::Carry,
            global: GlobalOptions::default(),
            contact_correction: true,
            profile: false,
        }
    }
}

impl QnParams {
    /// The L-BFGS loop's share of the parameters.
    pub fn lbfgs(&self) -> LbfgsParams {
        LbfgsParams {
            history: self.history,
            mode: self.mode,
            stop: self.stop,
            max_iterations: self.max_iterations,
            armijo: self.armijo,
            max_halvings: self.max_halvings,
            trials: self.trials,
            profile: self.profile,
        }
    }
}

/// The paper's fixed iteration count (Table I).
pub const PAPER_ITERATIONS: usize = 10;
