//! How the PSD projection treats the negative eigenvalues of ∂P/∂F.
//!
//! ∂P/∂F of an isotropic model has a closed-form eigen-decomposition (nine modes: three scaling,
//! three flip, three twist; see [`super::evaluate`]). Projected Newton needs a PSD element
//! Hessian V·Bᵀ(∂P/∂F)B, which it gets by changing those nine eigenvalues λ_k and keeping the
//! eigenvectors:
//! - [`EigenFilter::Clamp`]: λ_k → max(λ_k, 0) (Teran et al. 2005) — the closest PSD matrix in
//!   the Frobenius norm; drops every negative mode's curvature.
//! - [`EigenFilter::Abs`]: λ_k → |λ_k| (Chen et al. 2024, "Stabler Neo-Hookean Simulation:
//!   Absolute Eigenvalue Filtering for Projected Newton") — keeps the magnitude of a negative
//!   mode's curvature, so the step along it is damped instead of unbounded.
//!
//! Which one a solver applies per iteration (including the adaptive trust-region choice between
//! the two) is `jello::solver::HessianFilter`'s business; this enum is only what one element
//! evaluation does.

use nalgebra::RealField;

/// The per-element eigenvalue filter applied to ∂P/∂F when a PSD Hessian is asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum EigenFilter {
    /// λ → max(λ, 0) (the default; jello's behaviour before the filter was an option).
    #[default]
    Clamp,
    /// λ → |λ|.
    Abs,
}

impl EigenFilter {
    /// The filtered eigenvalue.
    #[inline]
    pub fn apply<T: RealField + Copy>(self, lambda: T) -> T {
        match self {
            EigenFilter::Clamp => lambda.max(T::zero()),
            EigenFilter::Abs => lambda.abs(),
        }
    }

    /// Lower-case name ("clamp", "abs"), as in scene files and reports.
    pub fn name(self) -> &'static str {
        match self {
            EigenFilter::Clamp => "clamp",
            EigenFilter::Abs => "abs",
        }
    }
}
