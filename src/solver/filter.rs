//! Which eigenvalue filter a second-order solver applies to the element Hessians, iteration by
//! iteration: always clamp, always absolute value, or the adaptive trust-region choice of
//! Chen et al. 2024.
//!
//! # The adaptive rule (trust-region eigenvalue filtering)
//! Chen, Liu, Jacobson, Levin, Zheng, "Trust-Region Eigenvalue Filtering for Projected Newton",
//! SIGGRAPH Asia 2024 (arXiv 2410.10102). Sources read: the paper's abstract and introduction
//! (arxiv.org/html/2410.10102v1) and the authors' reference implementation
//! (github.com/honglin-c/trust-region-newton, `main.cpp`), whose rule is:
//! - after each accepted step s = α·d from x_k, the trust-region ratio
//!   ρ = (E(x_k) − E(x_k + s)) / −(gᵀs + ½ sᵀH₀s), with H₀ the *unprojected* Hessian at x_k —
//!   how well the true second-order model predicted the decrease the line search obtained;
//! - the next iteration clamps when |ρ − 1| < τ (the model is trusted: take the filter closest
//!   to the true Hessian) and uses absolute values otherwise (the model is not trusted: keep a
//!   negative mode's curvature magnitude, which damps the step along it);
//! - τ = 0.01 (the implementation's default `--tr`), and the ratio before the first step is 0,
//!   so every solve starts with absolute values.
//!
//! Choices the paper leaves open, as made here:
//! - **Per time step.** The paper solves one quasi-static problem; jello solves one per time
//!   step, and each starts untrusted (ρ := 0, so abs first), as the paper's solve does.
//! - **H₀ of an incremental potential.** H₀ = inertia M/h² + the true elastic Hessian (f64,
//!   [`crate::problem::Model::elastic_curvature`]) + the barrier terms exactly as the projected
//!   Hessian holds them: the barrier's curvature is made PSD its own way (vertex barriers drop
//!   b'∇²d where it is negative, surface pairs are projected whole,
//!   `StepProblem::assemble`) and no eigenvalue filter touches it, so it is identical in H₀
//!   and in the filtered Hessian. See [`crate::problem::StepProblem::model_curvature`].
//! - **Lagged (chord) Newton** builds its Hessian once per step, so only the first iteration's
//!   filter (abs) matters there and the ratio is not computed.
//! - A ratio that is not finite (a zero predicted decrease at round-off level) counts as
//!   untrusted.
//!
//! # Measured
//! On a stable Neo-Hookean cantilever sagging near equilibrium (static, 5 load increments) all
//! three filters converge linearly and clamp is the fastest — abs doubles the error of every
//! negative mode (|λ| − λ = 2|λ| against clamp's |λ|) and takes 1.6–1.7× clamp's iterations
//! (46.0 against 27.4 per increment at 1,025 vertices); adaptive starts each solve with abs and
//! clamps once ρ is within 1% of 1, ending 7–9% above clamp (29.2). The twist bar converges in
//! one or two iterations whatever the filter. The adaptive ratio costs one extra pass over the
//! elements per iteration (an SVD and the nine mode projections of δF, no 9×9 or 12×12
//! matrices): about 1 ms on the 1,920-tet bar, 1–2 ms on the 3,840-tet beam. The paper's gains
//! are on near-incompressible (ν → 0.5) stable Neo-Hookean under large initial volume change,
//! which these scenes are not. The table (iterations, ms per step and per iteration, both
//! scenes and two sizes): `JELLO_BENCH_FILTERS_ONLY=1 cargo bench --bench newton`, in the
//! book's docs/src/benchmarks/solvers.md ("Newton's eigenvalue filters").

use crate::material::EigenFilter;

/// τ: the next Hessian clamps when |ρ − 1| < τ (Chen et al. 2024's reference value).
pub const TRUST_RATIO_TOLERANCE: f64 = 0.01;

/// The solver-level eigenvalue filter option (`[solver] eigen_filter`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HessianFilter {
    /// Clamp negative ∂P/∂F eigenvalues at 0 every iteration (default).
    #[default]
    Clamp,
    /// Absolute values every iteration.
    Abs,
    /// Chen et al. 2024: abs, or clamp after a step whose trust-region ratio was within
    /// [`TRUST_RATIO_TOLERANCE`] of 1.
    Adaptive,
}

impl HessianFilter {
    /// Every option, in scene-file order.
    pub const ALL: [HessianFilter; 3] = [
        HessianFilter::Clamp,
        HessianFilter::Abs,
        HessianFilter::Adaptive,
    ];

    /// The scene-file name.
    pub fn name(self) -> &'static str {
        match self {
            HessianFilter::Clamp => "clamp",
            HessianFilter::Abs => "abs",
            HessianFilter::Adaptive => "adaptive",
        }
    }

    /// Parses a scene-file name (see [`HessianFilter::name`]).
    pub fn from_name(s: &str) -> Option<Self> {
        HessianFilter::ALL.into_iter().find(|f| f.name() == s)
    }

    /// The per-solve state: what the first iteration applies.
    pub fn start(self) -> FilterState {
        FilterState {
            mode: self,
            current: match self {
                HessianFilter::Clamp => EigenFilter::Clamp,
                // ρ before the first step is 0: untrusted.
                HessianFilter::Abs | HessianFilter::Adaptive => EigenFilter::Abs,
            },
        }
    }
}

/// ρ = actual decrease / predicted decrease (both J); NaN when the prediction is not a positive,
/// finite decrease.
pub fn trust_ratio(actual_decrease: f64, predicted_decrease: f64) -> f64 {
    if predicted_decrease > 0.0 && predicted_decrease.is_finite() {
        actual_decrease / predicted_decrease
    } else {
        f64::NAN
    }
}

/// The filter of one solve, iteration by iteration.
#[derive(Clone, Copy, Debug)]
pub struct FilterState {
    mode: HessianFilter,
    current: EigenFilter,
}

impl FilterState {
    /// The filter the next Hessian applies.
    pub fn current(&self) -> EigenFilter {
        self.current
    }

    /// Whether the solver must report trust-region ratios ([`Self::observe`]).
    pub fn adapts(&self) -> bool {
        self.mode == HessianFilter::Adaptive
    }

    /// Takes the ratio ρ of the step just accepted and picks the next filter (adaptive only).
    pub fn observe(&mut self, ratio: f64) {
        if self.adapts() {
            self.current = if (ratio - 1.0).abs() < TRUST_RATIO_TOLERANCE {
                EigenFilter::Clamp
            } else {
                EigenFilter::Abs
            };
        }
    }
}
