//! Time stepping: a [`Simulation`] owns a model, its state and a solver, and advances by
//! implicit-Euler steps.

use crate::error::{JelloError, Result};
use crate::problem::{ElasticTerms, Model, State, StepProblem};
use crate::solver::{StepReport, StepSolver};

/// A running simulation.
pub struct Simulation {
    /// The model (mesh, materials, pins, obstacles).
    pub model: Model,
    /// Current positions and velocities.
    pub state: State,
    /// Time step, s.
    pub h: f64,
    solver: Box<dyn StepSolver>,
    /// Evaluates Ψ on another backend (e.g. the GPU); `None` uses the f64 CPU reference.
    elastic: Option<Box<dyn ElasticTerms + Send>>,
    x_buf: Vec<f64>,
}

impl Simulation {
    /// A simulation starting from `state`.
    pub fn new(model: Model, state: State, h: f64, solver: Box<dyn StepSolver>) -> Result<Self> {
        if !(h.is_finite() && h > 0.0) {
            return Err(JelloError::Invalid(format!(
                "time step h must be > 0 s, got {h}"
            )));
        }
        Ok(Simulation {
            model,
            state,
            h,
            solver,
            elastic: None,
            x_buf: Vec::new(),
        })
    }

    /// Routes elastic-energy evaluation through `elastic` (e.g. a GPU evaluator).
    pub fn set_elastic_backend(&mut self, elastic: Box<dyn ElasticTerms + Send>) {
        self.elastic = Some(elastic);
    }

    /// Name of the backend evaluating Ψ.
    pub fn elastic_backend_name(&self) -> String {
        match &self.elastic {
            Some(e) => e.backend_name(),
            None => self.model.backend_name(),
        }
    }

    /// The solver's name.
    pub fn solver_name(&self) -> String {
        self.solver.name()
    }

    /// Advances one step of `h`. The state is updated even when the solver did not converge
    /// (the report says so); a NaN state is an error.
    pub fn step(&mut self, trace: bool) -> Result<StepReport> {
        let problem = StepProblem::new(&self.model, &self.state, self.h);
        let elastic: &dyn ElasticTerms = match &self.elastic {
            Some(e) => e.as_ref(),
            None => &self.model,
        };
        let report = self
            .solver
            .step(&problem, elastic, &mut self.x_buf, trace)?;
        if self.x_buf.iter().any(|v| !v.is_finite()) {
            return Err(JelloError::Solver(format!(
                "non-finite positions after step at t = {:.4} s",
                problem.t_end
            )));
        }
        let inv_h = 1.0 / self.h;
        for k in 0..self.x_buf.len() {
            self.state.v[k] = (self.x_buf[k] - self.state.x[k]) * inv_h;
        }
        std::mem::swap(&mut self.state.x, &mut self.x_buf);
        self.state.t = problem.t_end;
        Ok(report)
    }
}
