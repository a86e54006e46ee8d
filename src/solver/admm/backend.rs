//! What ADMM-PD needs from a backend beyond [`PotentialBackend`]: per-element 3×3 fields (z and
//! the scaled dual ū, as deformation gradients), the local step, the scatter Σ_e w_e² D_eᵀ(·)
//! into a per-vertex vector, the primal and dual residuals, and the x-step's bridge to a host
//! f64 routine. [`super::AdmmSolver`] is written once over it; the f64 CPU implementation is
//! in `cpu.rs`, the f32 device one (kernels `admm_*`) in `device.rs`, both on the backends'
//! crate-visible parts (the backends know no solver).

use super::ProxKind;
use crate::error::Result;
use crate::problem::{ElasticTerms, Model, StepProblem};
use crate::solver::backend::PotentialBackend;
use nalgebra::Matrix3;

/// The x-step routine a backend hands the right-hand side to: `(rhs, x)` with rhs the
/// Σ_e w_e² D_eᵀ(z_e − ū_e) part (3n f64, interleaved) and x the current positions (3n f64, m);
/// it writes the new positions into x (the solver adds the inertial term, subtracts the pins
/// and solves on the prefactored matrix — or, later, a contact-aware solve).
pub type GlobalStep<'a> = dyn FnMut(&mut [f64], &mut [f64]) -> Result<()> + 'a;

/// Scalars a local step produces.
#[derive(Clone, Copy, Debug)]
pub struct LocalScalars<S> {
    /// The dual residual ‖s‖ = ‖DᵀW²(zⁿ⁺¹ − zⁿ)‖ over the free vertices, N.
    pub dual: S,
}

/// ADMM-PD's per-element work on a backend (see the module docs). Fields hold one 3×3 matrix
/// per element, in F form (F = Σ_a x_a∇N_aᵀ: the transpose of the PD operator's D_e x).
pub trait AdmmBackend: PotentialBackend {
    /// Handle to a per-element 3×3 field.
    type Field: Copy + std::fmt::Debug;

    /// A new zero field (allocated once, when the solver is built).
    fn field(&mut self, label: &str) -> Result<Self::Field>;
    /// Uploads the per-element constants: w_e² (J; ρ = 1, W_e = w_e I) and which prox the
    /// local step runs. Called once, when the solver is built.
    fn admm_setup(&mut self, model: &Model, w2: &[f64], prox: ProxKind) -> Result<()>;
    /// Algorithm 1's start of a step: z ← D x (at the current point), ū ← 0.
    fn admm_reset(&mut self, z: Self::Field, u: Self::Field) -> Result<()>;
    /// The local step at the current point: v = D x + ū, z ← prox(v), ū ← v − z; then
    /// `rhs` ← Σ_e w_e² D_eᵀ(z_e − ū_e) per vertex, and the dual residual of the z change
    /// over `problem`'s free vertices.
    fn admm_local(
        &mut self,
        problem: &StepProblem,
        z: Self::Field,
        u: Self::Field,
        rhs: Self::Vector,
    ) -> Result<LocalScalars<Self::Scalar>>;
    /// The x-step: `rhs` goes to `step` as 3n f64 values together with the host positions
    /// `x`; the positions `step` writes become the current point. On a device rhs crosses the
    /// bus (16·n bytes) and the new positions go back (16·n bytes); x itself never crosses
    /// (the host keeps the f64 positions of the last x-step).
    fn admm_global(
        &mut self,
        rhs: Self::Vector,
        x: &mut [f64],
        step: &mut GlobalStep<'_>,
    ) -> Result<()>;
    /// The primal residual ‖r‖ = ‖W(D x − z)‖ at the current point, √J.
    fn admm_primal(&mut self, z: Self::Field) -> Result<Self::Scalar>;
    /// ∇E at the current point into `g` and (residual, E − E(x_start)) from one element pass.
    fn admm_gradient(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        g: Self::Vector,
    ) -> Result<(Self::Scalar, Self::Scalar)>;
    /// A field's values on the host (tests, and Anderson's history), f64.
    fn read_field(&mut self, f: Self::Field) -> Result<Vec<Matrix3<f64>>>;
    /// Overwrites a field with host values (Anderson's mixed state; a device narrows to f32).
    fn write_field(&mut self, f: Self::Field, values: &[Matrix3<f64>]) -> Result<()>;
    /// Replaces the per-element weights w_e² (J) the local step and the primal residual use
    /// (the penalty update: every w_e² times one factor); fields are kept.
    fn admm_weights(&mut self, w2: &[f64]) -> Result<()>;
}
