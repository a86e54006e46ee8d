//! The per-vertex residual picture (`jello run --png --residual-iteration K`): which vertices
//! still carry force after K iterations of a step (the DOT paper's Fig. 8, where the early
//! residual sits on the subdomain interfaces).
//!
//! Solver-agnostic by construction: for a pictured step the run re-solves that step from its
//! start state with a second solver built exactly as the run's ([`make_solver`], on the f64
//! CPU path) but capped at K iterations, takes the iterate x_K it stops at, evaluates ∇E(x_K)
//! of the step's incremental potential in f64 ([`StepProblem::gradient`]) and reports ‖∇E‖ per
//! vertex (N; 0 on pinned vertices, whose rows are not unknowns). A solver that meets its stop
//! rule before K stops there, as in the run; the picture then shows the converged residual.
//! The re-solve is a plain solve (not the strict retries of `inversion = "forbid"`), and its
//! cost is counted in the frame's `output_ms`.

use super::setup::make_solver;
use crate::error::{JelloError, Result};
use crate::problem::{Model, State, StepProblem};
use crate::scene::RunConfig;
use crate::solver::qn::QnMode;
use crate::solver::StepSolver;
use std::path::Path;

/// The most iterations a residual picture may ask for (far above any solver's default cap).
pub const MAX_RESIDUAL_ITERATION: usize = 1_000_000;

/// A step's residual after K iterations.
#[derive(Clone, Debug, PartialEq)]
pub struct ResidualField {
    /// The iterate the capped solve stopped at, m (3n).
    pub x: Vec<f64>,
    /// ‖∇E(x)‖ per vertex, N (0 on pinned vertices).
    pub norms: Vec<f64>,
    /// Per vertex: pinned (no residual of its own).
    pub pinned: Vec<bool>,
    /// Iterations the capped solve ran (K, or fewer if it met the stop rule first).
    pub iterations: usize,
}

/// Re-solves steps with the run's solver capped at K iterations.
pub struct ResidualProbe {
    solver: Box<dyn StepSolver>,
    iterations: usize,
}

impl ResidualProbe {
    /// The run's solver (`config`, `model`, `cache_dir` as for [`make_solver`]) capped at
    /// `iterations` per step: `max_iterations = K`, and a fixed-count QN/ADMM runs K.
    /// `iterations` must be in 1..=[`MAX_RESIDUAL_ITERATION`].
    pub fn new(
        config: &RunConfig,
        model: &Model,
        cache_dir: Option<&Path>,
        iterations: usize,
    ) -> Result<Self> {
        if !(1..=MAX_RESIDUAL_ITERATION).contains(&iterations) {
            return Err(JelloError::Invalid(format!(
                "--residual-iteration: must be in 1..={MAX_RESIDUAL_ITERATION}, got {iterations}"
            )));
        }
        let mut capped = config.clone();
        capped.max_iterations = Some(iterations);
        if let QnMode::Fixed(_) = capped.qn_mode {
            capped.qn_mode = QnMode::Fixed(iterations);
        }
        Ok(ResidualProbe {
            solver: make_solver(&capped, model, cache_dir)?,
            iterations,
        })
    }

    /// K.
    pub fn iterations(&self) -> usize {
        self.iterations
    }

    /// The residual of the step of length `h` (s) that starts at `start`, after K iterations.
    /// `static_increments` is the simulation's ([`crate::sim::Simulation::static_increments`]):
    /// a static solve's increment applies the load fraction the run's does.
    pub fn probe(
        &mut self,
        model: &Model,
        start: &State,
        h: f64,
        static_increments: Option<usize>,
    ) -> Result<ResidualField> {
        let problem = step_problem(model, start, h, static_increments);
        let mut x = Vec::new();
        let report = self.solver.step(&problem, model, &mut x, false)?;
        let (norms, pinned) = vertex_residuals(&problem, model, &x);
        Ok(ResidualField {
            x,
            norms,
            pinned,
            iterations: report.iterations,
        })
    }
}

/// The incremental potential of the step of length `h` (s) from `start`, as the simulation
/// builds it: with `static_increments` (the simulation's), the load fraction of the increment
/// that ends at `start.t + h`. Shared by residual pictures and the VTU residual field so that
/// both evaluate the problem the run solved.
///
/// With IPC contact the problem gets the step's contact stiffness κ (balanced at the step's
/// start, as Newton sets it) and its friction lagged at the step's start, as Newton's first
/// pass does; without them its contact gradient would use the initial κ bound and no friction.
/// A κ raised within the step, or friction re-lagged by further passes, is not reproduced.
pub fn step_problem<'a>(
    model: &'a Model,
    start: &State,
    h: f64,
    static_increments: Option<usize>,
) -> StepProblem<'a> {
    let problem = match static_increments {
        Some(n) => {
            let fraction = (((start.t + h) / h) / n as f64).min(1.0);
            StepProblem::new_static(model, start, h, fraction)
        }
        None => StepProblem::new(model, start, h),
    };
    problem.begin_contact_step(model);
    problem
}

/// ‖∇E(x)‖ per vertex of `problem` (N, f64 on the CPU reference `model`) and which vertices
/// are pinned (their norm is 0: [`StepProblem::gradient`] zeroes pinned rows).
pub fn vertex_residuals(problem: &StepProblem, model: &Model, x: &[f64]) -> (Vec<f64>, Vec<bool>) {
    let mut g = vec![0.0; x.len()];
    problem.gradient(model, x, &mut g);
    let pinned: Vec<bool> = problem.fixed.chunks_exact(3).map(|f| f[0]).collect();
    let norms = g
        .chunks_exact(3)
        .zip(&pinned)
        .map(|(g, &p)| {
            if p {
                0.0
            } else {
                (g[0] * g[0] + g[1] * g[1] + g[2] * g[2]).sqrt()
            }
        })
        .collect();
    (norms, pinned)
}
