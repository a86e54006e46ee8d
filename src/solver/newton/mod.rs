//! Newton-type solvers: one outer loop ([`outer`]) shared by projected Newton ([`direct`]: the
//! direction by a sparse Cholesky of the projected Hessian) and the multilevel solver
//! ([`crate::solver::multilevel`]: the direction by subspace levels and a PCG smoother).
//!
//! The two loops were near copies — IPC's κ balanced at the step's start and doubled when the
//! gap shrinks, friction lagged at the start and re-lagged at each converged point, the stop
//! test, the CCD/inversion-filtered backtracking line search on the true potential, the trace
//! — and differed only in how one iteration finds its direction, which stop rule it reads
//! (multilevel also offers the paper's subspace rule) and what it learns from an accepted step
//! (Newton's adaptive eigenvalue filter, multilevel's lag refresh). Those are the
//! [`InnerSolve`] trait's methods; everything else is written once, so a fix to κ or to the
//! friction passes reaches both.

mod direct;
mod outer;

pub use direct::{NewtonParams, NewtonSolver};
pub(crate) use outer::{newton_loop, InnerSolve, Iterate};
