//! Time-step solvers. Each minimises the [`crate::problem::StepProblem`] of one step and returns a
//! [`StepReport`]. Shared pieces (stop rules, line search) live here once.

pub mod backend;
pub mod jgs2;
mod line_search;
mod newton;
pub mod pd;
mod report;
mod stop;

pub use line_search::{backtracking, LineSearchResult};
pub use newton::{NewtonParams, NewtonSolver};
pub use report::{IterationRecord, StepReport, StepTimings};
pub use stop::StopRule;

use crate::error::Result;
use crate::problem::{ElasticTerms, StepProblem};

/// A time-step solver: minimises one step's incremental potential starting from
/// `problem.x_start`, writing the result into `x`.
pub trait StepSolver {
    /// Solver name as in scene files and stats ("newton", "jgs2", ...).
    fn name(&self) -> String;
    /// Solves one step. A non-converged step is reported (`converged = false`), not hidden.
    fn step(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        x: &mut Vec<f64>,
        trace: bool,
    ) -> Result<StepReport>;
}
