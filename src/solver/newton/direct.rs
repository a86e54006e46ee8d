//! Projected Newton in f64: the reference every solver is measured against.
//!
//! Each iteration assembles the PSD-projected Hessian (per-element ∂P/∂F eigenvalue filter —
//! clamp, abs or the adaptive trust-region choice, [`HessianFilter`] — barrier curvature kept PSD,
//! pinned rows identity) into a fixed pattern, refactors it with the sparse
//! Cholesky whose symbolic analysis (METIS nested dissection) was done once, solves for the
//! Newton direction, and backtracks on the true energy from [`StepProblem::step_limit`] (obstacle
//! filter, inversion trust region) — the shared loop of [`super::outer`], whose direction here is
//! the direct solve. Each factorisation counts in [`StepWork::refactorisations`].

use super::outer::{newton_loop, InnerSolve, Iterate};
use crate::clock::Instant;
use crate::error::{JelloError, Result};
use crate::material::EigenFilter;
use crate::problem::{ElasticTerms, HessianLayout, Model, StepProblem};
use crate::solver::augmented::ContactSystems;
use crate::solver::report::ms;
use crate::solver::{
    trust_ratio, FilterState, HessianFilter, LineSearchResult, StepReport, StepSolver, StepTimings,
    StepWork, StopRule,
};
use jello_precompute::cholesky::{Ordering, SparseCholesky};
use jello_precompute::sparse::SymSparse;

/// Newton's parameters.
#[derive(Clone, Copy, Debug)]
pub struct NewtonParams {
    /// Stop rule (default: characteristic norm, ε = 1e-5).
    pub stop: StopRule,
    /// Iteration cap (default 100).
    pub max_iterations: usize,
    /// Fill-reducing ordering (default METIS nested dissection on the vertex graph).
    pub ordering: Ordering,
    /// Modified (chord) Newton: assemble and factor the Hessian only at the first iteration of
    /// each step and reuse it (default false). A yardstick for methods that precondition with a
    /// fixed linearisation, such as JGS2's rest-shape subspaces (`benches/convergence.rs`).
    pub lagged: bool,
    /// Eigenvalue filter of the element Hessians (default clamp; `[solver] eigen_filter`).
    pub filter: HessianFilter,
}

impl Default for NewtonParams {
    fn default() -> Self {
        NewtonParams {
            stop: StopRule::default(),
            max_iterations: 100,
            ordering: Ordering::default(),
            lagged: false,
            filter: HessianFilter::Clamp,
        }
    }
}

/// Projected Newton with a once-analysed sparse Cholesky.
pub struct NewtonSolver {
    params: NewtonParams,
    layout: HessianLayout,
    matrix: SymSparse,
    factor: SparseCholesky,
    elem_hessians: Vec<crate::problem::PackedTetHessian>,
    /// Largest extent of the model's rest bounding box (m), for the Dx stop rule.
    extent: f64,
    /// The filter each Hessian of the last step applied, in order.
    filters: Vec<EigenFilter>,
    /// The adaptive filter's trust-region ratio of each accepted step of the last step.
    ratios: Vec<f64>,
    /// With IPC contact: the elastic pattern grown by the contact couplings.
    contact: ContactSystems,
    /// The eigenvalue filter's state within the step.
    filter: FilterState,
    /// Whether the current factor is the contact-augmented one.
    augmented: bool,
}

impl NewtonSolver {
    /// Builds the pattern and the symbolic factorisation for `model`.
    pub fn new(model: &Model, params: NewtonParams) -> Result<Self> {
        let layout = HessianLayout::new(model)?;
        let factor = SparseCholesky::analyze(layout.pattern.clone(), params.ordering)
            .map_err(|e| JelloError::Solver(format!("Cholesky analysis: {e}")))?;
        let matrix = layout.zeros();
        let extent = model.largest_extent();
        Ok(NewtonSolver {
            params,
            layout,
            matrix,
            factor,
            elem_hessians: Vec::new(),
            extent,
            filters: Vec::new(),
            ratios: Vec::new(),
            contact: ContactSystems::default(),
            filter: params.filter.start(),
            augmented: false,
        })
    }

    /// The eigenvalue filter each Hessian assembly of the last step applied, in order (one per
    /// iteration; one per step when lagged).
    pub fn last_filters(&self) -> &[EigenFilter] {
        &self.filters
    }

    /// With [`HessianFilter::Adaptive`]: the trust-region ratio ρ of each accepted step of the
    /// last step (empty otherwise).
    pub fn last_trust_ratios(&self) -> &[f64] {
        &self.ratios
    }

    /// Number of stored entries in the Cholesky factor of the elastic pattern (a measure of
    /// fill).
    pub fn factor_nnz(&self) -> usize {
        self.factor.factor_nnz()
    }

    /// With IPC contact: how many symbolic analyses of a contact-augmented pattern this solver
    /// has done (the elastic pattern grown by contact couplings, reusing its ordering).
    pub fn contact_analyses(&self) -> usize {
        self.contact.analyses
    }
}

impl StepSolver for NewtonSolver {
    fn name(&self) -> String {
        if self.params.lagged {
            "newton-lagged".into()
        } else {
            "newton".into()
        }
    }

    fn step(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        x: &mut Vec<f64>,
        trace: bool,
    ) -> Result<StepReport> {
        newton_loop(self, problem, elastic, x, trace)
    }
}

impl InnerSolve for NewtonSolver {
    fn max_iterations(&self) -> usize {
        self.params.max_iterations
    }

    fn extent(&self) -> f64 {
        self.extent
    }

    fn begin_step(&mut self, _problem: &StepProblem) -> Result<()> {
        self.filter = self.params.filter.start();
        self.filters.clear();
        self.ratios.clear();
        Ok(())
    }

    fn stop_met(&self, residual: f64, moved: Option<f64>) -> bool {
        self.params
            .stop
            .met(residual, moved.unwrap_or(f64::INFINITY))
    }

    /// The Newton direction `H⁻¹(−g)` by the Cholesky factor; the Hessian assembled, projected
    /// and refactored at every iteration (at the first only, when lagged).
    fn direction(
        &mut self,
        at: &Iterate,
        dx: &mut Vec<f64>,
        timings: &mut StepTimings,
        work: &mut StepWork,
    ) -> Result<Option<f64>> {
        let (problem, x, g) = (at.problem, at.x, at.g);
        if at.iteration == 1 || !self.params.lagged {
            let t0 = Instant::now();
            problem.hessian_filtered(
                at.elastic,
                x,
                &self.layout,
                &mut self.matrix,
                &mut self.elem_hessians,
                self.filter.current(),
            );
            self.filters.push(self.filter.current());
            let blocks = if problem.model.contact.is_some() {
                problem.contact_hessian_blocks(x)
            } else {
                Vec::new()
            };
            // Couplings the elastic pattern lacks (pairs of vertices sharing no tet).
            let needed: Vec<[u32; 2]> = problem
                .contact_couplings(&blocks)
                .into_iter()
                .filter(|&[a, b]| {
                    self.layout
                        .pattern
                        .find(3 * a as usize, 3 * b as usize)
                        .is_none()
                })
                .collect();
            self.augmented = !needed.is_empty();
            timings.assembly_ms += ms(t0);
            timings.hessian_ms += ms(t0);
            let t0 = Instant::now();
            if self.augmented {
                let sys = self.contact.ensure(
                    &self.layout.pattern,
                    &self.factor,
                    needed,
                    at.iteration == 1,
                )?;
                sys.load(&self.matrix);
                problem.add_contact_hessian(&blocks, &mut sys.matrix)?;
                refactor_with_fallback(&mut sys.factor, &mut sys.matrix, &sys.diag)?;
            } else {
                problem.add_contact_hessian(&blocks, &mut self.matrix)?;
                refactor_with_fallback(&mut self.factor, &mut self.matrix, &self.layout.diag)?;
            }
            work.refactorisations += 1;
            timings.factor_ms += ms(t0);
        }
        let t0 = Instant::now();
        dx.clear();
        dx.extend(g.iter().map(|v| -v));
        let factor = match (self.augmented, self.contact.current()) {
            (true, Some(sys)) => &sys.factor,
            _ => &self.factor,
        };
        factor
            .solve_in_place(dx)
            .map_err(|e| JelloError::Solver(format!("Cholesky solve: {e}")))?;
        timings.solve_ms += ms(t0);
        Ok(Some(g.iter().zip(dx.iter()).map(|(a, b)| a * b).sum()))
    }

    fn accepted(
        &mut self,
        problem: &StepProblem,
        x: &[f64],
        dx: &[f64],
        g_dot_dx: f64,
        e0: f64,
        ls: &LineSearchResult,
        timings: &mut StepTimings,
    ) {
        if self.filter.adapts() && !self.params.lagged {
            // ρ of the accepted step s = α·dx under the unprojected model at x_k.
            let t0 = Instant::now();
            let a = ls.alpha;
            let predicted = -(a * g_dot_dx + 0.5 * a * a * problem.model_curvature(x, dx));
            let rho = trust_ratio(e0 - ls.energy, predicted);
            self.filter.observe(rho);
            self.ratios.push(rho);
            timings.assembly_ms += ms(t0);
        }
    }
}

/// Numeric factorisation of `matrix`; if round-off made the projected Hessian lose definiteness,
/// retry with a growing diagonal shift (reported through the residual, never silent divergence).
fn refactor_with_fallback(
    factor: &mut SparseCholesky,
    matrix: &mut SymSparse,
    diag: &[usize],
) -> Result<()> {
    if factor.refactor(matrix).is_ok() {
        return Ok(());
    }
    let mean_diag =
        diag.iter().map(|&k| matrix.values()[k].abs()).sum::<f64>() / diag.len().max(1) as f64;
    let mut shift = 1e-8 * mean_diag.max(1e-300);
    for _ in 0..12 {
        for &k in diag {
            matrix.values_mut()[k] += shift;
        }
        if factor.refactor(matrix).is_ok() {
            return Ok(());
        }
        shift *= 10.0;
    }
    Err(JelloError::Solver(
        "Hessian is not positive definite even after shifting".into(),
    ))
}
