//! DOT's parameters.

use crate::material::EigenFilter;
use crate::solver::lbfgs::{LbfgsParams, TrialRule};
use crate::solver::qn::QnMode;
use crate::solver::StopRule;
use jello_precompute::cholesky::Ordering;

/// How D₁ gathers the subdomains' back-solves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gather {
    /// B Sᵀ: average each vertex's copies (the paper's D₁; not symmetric in general).
    Average,
    /// Sᵀ: sum the copies (symmetric positive definite; the descent fallback).
    Sum,
}

/// Parameters of [`super::DotSolver`] (and of LBFGS-H, its one-subdomain case).
#[derive(Clone, Copy, Debug)]
pub struct DotParams {
    /// Subdomains s (default: the rayon thread count, the paper's "one per core"; 1 is
    /// LBFGS-H, the full projected Hessian factored once per step).
    pub subdomains: usize,
    /// L-BFGS history m (default 5, the paper's).
    pub history: usize,
    /// Stopping mode (default [`QnMode::Rule`]).
    pub mode: QnMode,
    /// Stop rule (default: characteristic norm, ε = 1e-5, the paper's).
    pub stop: StopRule,
    /// Iteration cap of [`QnMode::Rule`] (default 1000).
    pub max_iterations: usize,
    /// Armijo constant γ (default 1e-4; the paper gives none, see the module docs).
    pub armijo: f64,
    /// Halvings of the line search before it gives up (default 30).
    pub max_halvings: usize,
    /// Fill-reducing ordering of each subdomain factor (default METIS nested dissection of
    /// the vertex graph; the paper used CHOLMOD's AMD).
    pub ordering: Ordering,
    /// Eigenvalue filter of the element Hessians at x_start (default clamp, the paper's
    /// projection; abs keeps each negative mode's curvature magnitude).
    pub filter: EigenFilter,
    /// How D₁ gathers (default [`Gather::Average`], the paper's).
    pub gather: Gather,
    /// Start the line search at the quadratic model's minimiser −∇Eᵀd / dᵀH(x_start)d
    /// (default true, Eq. 14); false starts at α = 1.
    pub quadratic_start: bool,
    /// Floor of the quadratic start (default 0.1, Eq. 14).
    pub start_floor: f64,
    /// Wait for the backend after every phase so the per-phase times are exact.
    pub profile: bool,
}

impl Default for DotParams {
    fn default() -> Self {
        DotParams {
            subdomains: rayon::current_num_threads().max(1),
            history: 5,
            mode: QnMode::Rule,
            stop: StopRule::default(),
            max_iterations: 1000,
            armijo: 1e-4,
            max_halvings: 30,
            ordering: Ordering::default(),
            filter: EigenFilter::Clamp,
            gather: Gather::Average,
            quadratic_start: true,
            start_floor: 0.1,
            profile: false,
        }
    }
}

impl DotParams {
    /// LBFGS-H's parameters: one subdomain, otherwise the defaults.
    pub fn lbfgs_h() -> Self {
        DotParams {
            subdomains: 1,
            ..DotParams::default()
        }
    }

    /// The L-BFGS loop's share of the parameters.
    pub fn lbfgs(&self) -> LbfgsParams {
        LbfgsParams {
            history: self.history,
            mode: self.mode,
            stop: self.stop,
            max_iterations: self.max_iterations,
            armijo: self.armijo,
            max_halvings: self.max_halvings,
            trials: TrialRule::Halving,
            profile: self.profile,
        }
    }
}
