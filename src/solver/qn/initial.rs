//! QN's initial inverse Hessian: the projective-dynamics matrix A's prefactored inverse, with
//! the obstacle barrier's curvature added around the fixed factor.

use super::params::QnParams;
use crate::error::Result;
use crate::problem::{ElasticTerms, Model, StepProblem};
use crate::solver::backend::PotentialBackend;
use crate::solver::lbfgs::{InitialInverse, Refresh};
use crate::solver::pd::{ContactCorrection, ContactTerm, GlobalSystem};

/// H₀ = A⁻¹ (Liu et al. 2017), with the contact correction of [`crate::solver::pd::contact`].
pub struct PdInverse {
    params: QnParams,
    system: GlobalSystem,
    correction: ContactCorrection,
    terms: Vec<ContactTerm>,
    /// The vertices of the last direction's contact terms (sorted).
    contact_set: Vec<u32>,
    /// Whether this iteration's H₀ carries the contact correction.
    correct: bool,
}

impl PdInverse {
    /// A's weights for `model` now; its factor at the first step.
    pub fn new(model: &Model, params: QnParams) -> Result<Self> {
        Ok(PdInverse {
            params,
            system: GlobalSystem::new(model, params.global)?,
            correction: ContactCorrection::new(),
            terms: Vec::new(),
            contact_set: Vec::new(),
            correct: params.contact_correction,
        })
    }

    /// The parameters.
    pub fn params(&self) -> &QnParams {
        &self.params
    }

    /// The global matrix.
    pub fn system(&self) -> &GlobalSystem {
        &self.system
    }
}

impl<B: PotentialBackend> InitialInverse<B> for PdInverse {
    fn name(&self) -> String {
        "qn".into()
    }

    fn begin_step(
        &mut self,
        problem: &StepProblem,
        _elastic: &dyn ElasticTerms,
        _backend: &mut B,
    ) -> Result<bool> {
        // A for this step: pins from the problem, mass weight 1/h² (a static increment has no
        // inertia; its pseudo-time's 1/h² keeps A definite where no pin holds a body — A only
        // preconditions, the objective is unchanged).
        let nv = problem.model.num_vertices();
        let pinned: Vec<bool> = (0..nv).map(|v| problem.fixed[3 * v]).collect();
        self.contact_set.clear();
        self.system
            .prepare(problem.model, &pinned, problem.mass_weight())
    }

    fn begin_iteration(&mut self) {
        self.correct = self.params.contact_correction;
    }

    fn refresh(&mut self, problem: &StepProblem, backend: &mut B) -> Result<Refresh> {
        self.terms.clear();
        if self.correct && !problem.model.obstacles.is_empty() {
            backend.contact_terms(problem, &mut self.terms)?;
        }
        let mut set: Vec<u32> = self.terms.iter().map(|t| t.vertex).collect();
        set.sort_unstable();
        set.dedup();
        let changed = set != self.contact_set;
        if changed {
            self.contact_set = set;
        }
        Ok(Refresh {
            terms: self.terms.len(),
            changed,
        })
    }

    fn apply(&mut self, v: &mut [f64]) -> Result<()> {
        self.correction.apply(&mut self.system, &self.terms, v)
    }

    /// The plain PD direction −A⁻¹∇E, a descent direction whatever the round-off (A is SPD):
    /// the Woodbury correction can lose definiteness to cancellation when a barrier term's β
    /// is huge (a vertex within 1e-9 of an obstacle: β ~ 1e12) — a ball thrown at 30 m/s into
    /// the ground met it.
    fn fallback(&mut self) -> bool {
        if self.correct && !self.terms.is_empty() {
            self.correct = false;
            true
        } else {
            false
        }
    }
}
