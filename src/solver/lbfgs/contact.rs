//! IPC contact in the L-BFGS loop: the protocol of Newton's outer loop
//! ([`crate::solver::newton`]) on a [`PotentialBackend`] whose positions are on the host.
//!
//! The barrier, its κ and the lagged friction are part of the potential
//! ([`StepProblem::gradient`], [`StepProblem::energy_change`]) and the additive CCD is part of
//! the step filter ([`StepProblem::step_limit`], which the f64 backend's
//! [`PotentialBackend::step_bound`] is), so every trial of the line search lies on the
//! intersection-free side of the filter. What the loop adds is when the potential changes:
//! κ balanced and friction lagged at the step's start, κ doubled after an accepted iterate
//! whose smallest gap shrank below IPC's raise distance, and the further friction passes
//! re-lagged at a point that meets the stop rule — exactly Newton's, so both solve the same
//! sequence of potentials and their answers agree to the stop tolerance.
//!
//! Each change drops the L-BFGS history: its pairs t = ∇E(x + s) − ∇E(x) were measured
//! under the old κ or friction, and where the barrier is stiffest (the pairs that set the
//! next direction's length) they understate the new curvature by up to the factor κ grew.
//! Changes are rare (a few per step), so the restart costs little.
//!
//! The barrier stays out of the initial inverse Hessians (both papers' rule: contact in the
//! energy and gradient only). QN's correction around its factor takes per-vertex rank-1
//! terms against analytic obstacles ([`crate::solver::pd::contact`]); an IPC pair's
//! curvature couples up to four vertices of two bodies.

use crate::error::{JelloError, Result};
use crate::problem::StepProblem;
use crate::solver::backend::PotentialBackend;

/// Where a step stands in the contact protocol.
pub(super) struct ContactSchedule {
    /// Whether the scene has IPC contact (everything below is a no-op without).
    on: bool,
    /// Friction lagging passes left after the one at the step's start.
    passes_left: usize,
    /// The smallest pair distance squared at the last accepted iterate, m² (IPC's κ rule
    /// compares it with the next one).
    min_gap_sq: f64,
}

impl ContactSchedule {
    /// Starts a step: κ balanced at `problem.x_start` and friction lagged at xᵗ
    /// ([`StepProblem::begin_contact_step`], from the f64 model's elastic terms as Newton
    /// does). Errors when the scene has IPC contact and `backend` keeps its positions on a
    /// device.
    pub(super) fn begin<B: PotentialBackend>(
        problem: &StepProblem,
        backend: &B,
        name: &str,
    ) -> Result<Self> {
        let on = problem.model.contact.is_some();
        if on && backend.host_positions().is_none() {
            return Err(JelloError::Invalid(format!(
                "{name}: IPC contact (contact.ipc) runs on the CPU backend, not {}",
                backend.name()
            )));
        }
        let passes_left = if on {
            problem.begin_contact_step(problem.model)
        } else {
            0
        };
        Ok(ContactSchedule {
            on,
            passes_left,
            min_gap_sq: f64::INFINITY,
        })
    }

    /// After an accepted iterate: doubles κ when IPC's rule asks
    /// ([`StepProblem::raise_contact_stiffness`]). Returns whether the potential changed.
    pub(super) fn after_accept<B: PotentialBackend>(
        &mut self,
        problem: &StepProblem,
        backend: &B,
    ) -> bool {
        if !self.on {
            return false;
        }
        let x = backend.host_positions().expect("checked in begin");
        problem.raise_contact_stiffness(x, &mut self.min_gap_sq)
    }

    /// At a point meeting the stop rule: with friction passes left, re-lags friction there
    /// ([`StepProblem::lag_friction`]). Returns whether the potential changed.
    pub(super) fn lag_friction<B: PotentialBackend>(
        &mut self,
        problem: &StepProblem,
        backend: &B,
    ) -> bool {
        if !self.on || self.passes_left == 0 {
            return false;
        }
        self.passes_left -= 1;
        let x = backend.host_positions().expect("checked in begin");
        problem.lag_friction(x) > 0
    }
}
