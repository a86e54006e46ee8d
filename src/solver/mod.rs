//! Time-step solvers. Each minimises the [`crate::problem::StepProblem`] of one step and returns a
//! [`StepReport`]. Shared pieces (stop rules, line search) live here once.
//!
//! # One loop, two precisions
//! A solver's host loop is written once, generic over the backend traits of [`backend`]
//! ([`backend::Backend`]: vectors, scalar slots, fused updates and reductions, reads, the bridge
//! to a host f64 routine; [`backend::PotentialBackend`]: the step's potential — gradient, step
//! filter, line-search trials). [`backend::CpuBackend`] runs it in f64 on `StepProblem` itself
//! (every scene; the embedded default and what tight stop rules need);
//! [`backend::DeviceBackend`] runs it in f32 WGSL kernels on a GPU or on their CPU twins,
//! recording each iteration into one plan and waiting only where the host decides. The first
//! solver on it is [`qn`] (`QnSolver<B>`); the projective-dynamics family's shared global matrix
//! is [`pd`]. Newton (f64, with optional GPU element work) and JGS2/VBD (an f64 solver and a
//! separate device solver) predate it. Why a trait rather than scalar-generic twins, the rules
//! for the next solvers and what folding JGS2/VBD in would remove: `ARCHITECTURE.md`.

pub mod admm;
pub(crate) mod augmented;
pub mod backend;
pub mod dot;
pub mod filter;
pub mod jgs2;
pub mod lbfgs;
mod line_search;
pub mod multilevel;
mod newton;
pub mod pcg;
pub mod pd;
pub mod qn;
mod report;
mod stop;

pub use filter::{trust_ratio, FilterState, HessianFilter, TRUST_RATIO_TOLERANCE};
pub use line_search::{backtracking, LineSearchResult};
pub use newton::{NewtonParams, NewtonSolver};
pub use report::{IterationRecord, StepReport, StepTimings, StepWork};
pub use stop::{QnMode, StopRule};

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
