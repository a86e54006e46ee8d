//! Projected Newton in f64: the reference every solver is measured against.
//!
//! Each iteration assembles the PSD-projected Hessian (per-element ∂P/∂F eigenvalue filter —
//! clamp, abs or the adaptive trust-region choice, [`HessianFilter`] — barrier curvature kept PSD,
//! pinned rows identity) into a fixed pattern, refactors it with the sparse
//! Cholesky whose symbolic analysis (METIS nested dissection) was done once, solves for the
//! Newton direction, and backtracks on the true energy from [`StepProblem::step_limit`] (obstacle
//! filter, inversion trust region).

use super::augmented::ContactSystems;
use super::report::{max_vertex_norm, ms};
use super::{
    backtracking, trust_ratio, HessianFilter, IterationRecord, StepReport, StepSolver, StepTimings,
    StopRule,
};
use crate::error::{JelloError, Result};
use crate::material::EigenFilter;
use crate::problem::{ElasticTerms, HessianLayout, Model, StepProblem};
use jello_precompute::cholesky::{Ordering, SparseCholesky};
use jello_precompute::sparse::SymSparse;
use std::time::Instant;

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
        let start = Instant::now();
        let mut timings = StepTimings::default();
        let n = problem.x_start.len();
        x.clear();
        x.extend_from_slice(&problem.x_start);
        let contact = problem.model.contact.is_some();
        // IPC's κ: balanced against the potential's gradient at the start (no-op without
        // contact), always from the f64 elastic terms: a run whose elastic terms are f32
        // kernels then starts each step with the κ of the CPU reference, not one a rounding
        // apart (κ sets how far apart the surfaces rest, up to d̂). Friction lagged at the
        // step's start (IPC: normal forces and tangent frames of the pairs active at xᵗ, with
        // this step's κ); each further pass re-lags at the converged point.
        let mut passes_left = problem.begin_contact_step(problem.model);
        let mut min_gap_sq = f64::INFINITY;
        // Which factor the current direction comes from.
        let mut augmented = false;
        let mut g = vec![0.0; n];
        let mut dx = vec![0.0; n];
        let mut x_new = Vec::with_capacity(n);
        let t0 = Instant::now();
        let mut energy = problem.gradient(elastic, x, &mut g);
        timings.assembly_ms += ms(t0);
        if !energy.is_finite() || g.iter().any(|v| !v.is_finite()) {
            return Err(JelloError::Solver(problem.diagnose_non_finite(elastic, x)));
        }
        // E − E(x_start), exactly 0 here; the line search returns it for every accepted point.
        let mut change = 0.0;
        let mut residual = problem.model.char_norm.residual(&g);
        let mut filter = self.params.filter.start();
        self.filters.clear();
        self.ratios.clear();
        let mut records = trace.then(Vec::new);
        if let Some(r) = records.as_mut() {
            r.push(IterationRecord {
                residual,
                energy: change,
                alpha: 0.0,
                ..IterationRecord::default()
            });
        }
        let mut converged;
        let mut iterations = 0;
        let mut last_dx_ratio = f64::INFINITY;
        let start_converged = self.params.stop.met(residual, f64::INFINITY);
        loop {
            converged = self.params.stop.met(residual, last_dx_ratio);
            if converged && iterations > 0 && passes_left > 0 {
                // Another lagging pass: friction's normal forces and frames from this solution.
                passes_left -= 1;
                if problem.lag_friction(x) > 0 {
                    change = problem.energy_change(elastic, x);
                    energy = problem.gradient(elastic, x, &mut g);
                    residual = problem.model.char_norm.residual(&g);
                    // Dx needs a step under the new potential; CN can stop at once.
                    converged = self.params.stop.met(residual, f64::INFINITY);
                }
            }
            if StopRule::stop_now(converged, iterations, self.params.max_iterations) {
                break;
            }
            iterations += 1;
            if iterations == 1 || !self.params.lagged {
                let t0 = Instant::now();
                problem.hessian_filtered(
                    elastic,
                    x,
                    &self.layout,
                    &mut self.matrix,
                    &mut self.elem_hessians,
                    filter.current(),
                );
                self.filters.push(filter.current());
                let blocks = if contact {
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
                augmented = !needed.is_empty();
                timings.assembly_ms += ms(t0);
                let t0 = Instant::now();
                if augmented {
                    let sys = self.contact.ensure(
                        &self.layout.pattern,
                        &self.factor,
                        needed,
                        iterations == 1,
                    )?;
                    sys.load(&self.matrix);
                    problem.add_contact_hessian(&blocks, &mut sys.matrix)?;
                    refactor_with_fallback(&mut sys.factor, &mut sys.matrix, &sys.diag)?;
                } else {
                    problem.add_contact_hessian(&blocks, &mut self.matrix)?;
                    refactor_with_fallback(&mut self.factor, &mut self.matrix, &self.layout.diag)?;
                }
                timings.factor_ms += ms(t0);
            }
            let t0 = Instant::now();
            for k in 0..n {
                dx[k] = -g[k];
            }
            let factor = match (augmented, self.contact.current()) {
                (true, Some(sys)) => &sys.factor,
                _ => &self.factor,
            };
            factor
                .solve_in_place(&mut dx)
                .map_err(|e| JelloError::Solver(format!("Cholesky solve: {e}")))?;
            timings.solve_ms += ms(t0);
            let g_dot_dx: f64 = g.iter().zip(&dx).map(|(a, b)| a * b).sum();
            let t0 = Instant::now();
            let ls = backtracking(problem, elastic, x, &dx, change, g_dot_dx, &mut x_new);
            timings.line_search_ms += ms(t0);
            if !ls.accepted {
                // No decrease possible along the Newton direction: report, do not hide — unless
                // the start already met the rule and only round-off is left.
                converged = iterations == 1 && start_converged;
                break;
            }
            if filter.adapts() && !self.params.lagged {
                // ρ of the accepted step s = α·dx under the unprojected model at x_k.
                let t0 = Instant::now();
                let a = ls.alpha;
                let predicted = -(a * g_dot_dx + 0.5 * a * a * problem.model_curvature(x, &dx));
                let rho = trust_ratio(change - ls.energy, predicted);
                filter.observe(rho);
                self.ratios.push(rho);
                timings.assembly_ms += ms(t0);
            }
            last_dx_ratio = max_vertex_norm(&dx) * ls.alpha / self.extent;
            std::mem::swap(x, &mut x_new);
            change = ls.energy;
            if contact && problem.raise_contact_stiffness(x, &mut min_gap_sq) {
                // κ doubled: the objective changed, so its value relative to x_start does too.
                change = problem.energy_change(elastic, x);
            }
            let t0 = Instant::now();
            energy = problem.gradient(elastic, x, &mut g);
            timings.assembly_ms += ms(t0);
            residual = problem.model.char_norm.residual(&g);
            if let Some(r) = records.as_mut() {
                r.push(IterationRecord {
                    residual,
                    energy: change,
                    alpha: ls.alpha,
                    ..IterationRecord::default()
                });
            }
        }
        Ok(StepReport {
            iterations,
            converged,
            residual,
            energy,
            energy_change: change,
            wall_ms: ms(start),
            timings,
            work: Default::default(),
            trace: records,
            ..StepReport::default()
        })
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
