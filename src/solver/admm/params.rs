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
        }
    }
}
