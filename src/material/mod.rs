//! Hyperelastic materials: energy density Ψ(F), first Piola–Kirchhoff stress P(F), the stress
//! derivative ∂P/∂F and its PSD projection, and the per-tetrahedron energy, gradient and Hessian.
//!
//! Everything is generic over the scalar `T: nalgebra::RealField + Copy`: `f64` is the reference,
//! `f32` is the CPU twin of the WGSL kernels. Isotropic models are written in singular-value space
//! (`sigma`), which gives P, ∂P/∂F and an exact eigen-decomposition of ∂P/∂F (Teran et al. 2005,
//! Smith et al. 2019) — the PSD projection filters those nine eigenvalues ([`EigenFilter`]: clamped
//! at zero by default, or replaced by their absolute value).
//!
//! Conventions: `vec(F)` is column-major (index `i + 3j` for `F[(i, j)]`, nalgebra's storage
//! order); element vectors are vertex-major `[x0 y0 z0 x1 … z3]`. Stresses are in Pa, energy
//! densities in J/m³, element energies in J.

mod element;
mod filter;
mod model;
mod sigma;
mod stress;
mod svd;

pub use element::{
    element_corner, element_energy, element_gradient, element_gradients_lanes, element_hessian,
    element_hessian_filtered, element_hessian_reference, element_hessians_filtered_lanes,
    element_local_corner, ElementRest, ElementState, ELEMENT_LANES,
};
pub use filter::EigenFilter;
pub use model::{lame_from_young_poisson, Material, MaterialModel};
pub use sigma::{sigma_derivatives, stable_nh_alpha, SigmaDerivatives};
pub use stress::{
    dpdf, dpdf_curvature, dpdf_filtered, dpdf_reference, energy_density, evaluate,
    evaluate_filtered, pk1, rest_tensor, stress_and_block, stress_and_exact_block, Mat9,
    StressEval,
};
pub(crate) use stress::{filtered_modes_of, stress_needs_svd, svd_stress, SigmaModes};
pub use svd::{svd3, svd3_fast, svd3_fast_lanes, symmetric_eigen3, symmetric_eigen3_lanes, Svd3};

/// Converts an `f64` literal into the generic scalar.
#[inline(always)]
pub(crate) fn c<T: nalgebra::RealField + Copy>(x: f64) -> T {
    nalgebra::convert(x)
}
