//! JGS2 (Lan et al. 2025) and its baseline VBD (Chen et al. 2024): per-vertex parallel relaxation
//! of the incremental potential.
//!
//! Each iteration solves, for every free vertex i, a 3×3 system
//!
//!   A_i δx_i = −r_i,   A_i = Σ_e w_e U_eᵀ H_e U_e,   r_i = Σ_e w_e U_eᵀ ∇E_e,
//!
//! where H_e = ∇²Ψ_e (PSD-projected) + M_e/h² and ∇E_e = ∇Ψ_e + M_e(x − x̃)/h² are element e's
//! Hessian and gradient of the incremental potential (M_e: each corner's lumped-mass share), and
//! U_e (12×3) says how e's four vertices move when x_i moves by one unit:
//! - **VBD**: U_e = [I at i, 0 elsewhere] over the elements incident to i — the plain local Newton
//!   step on inertia + incident elements, coloured Gauss–Seidel.
//! - **JGS2**: U_e = blkdiag(R_a..R_d) Ū_{i,e} R_iᵀ, the precomputed rest-shape perturbation
//!   subspace (paper Eq. 23) co-rotated by per-vertex rotations (Eq. 14). Incident elements are
//!   summed exactly (w = 1); the rest of the mesh enters through 4–6 cubature elements with NNLS
//!   weights (Eq. 17). With U from the exact current Hessian and every element, A_i is the Schur
//!   complement and δx_i equals the global Newton step on vertex i (§4.2; tested).
//!
//! Choices where the paper is vague (measured effects in the module docs of `precompute` and the
//! issue note): the per-vertex deformation gradient for R_j is the volume-weighted mean of the
//! incident elements' F, refreshed every iteration; incident elements are never cubature samples
//! (they are exact); Gauss–Seidel uses the per-vertex Ū (not group-wise subspaces); obstacle
//! barriers act on the vertex's own 3×3 system, with a per-vertex step filter so no vertex
//! crosses an obstacle.

mod device;
mod local;
mod solver;
mod subspace;

pub use device::DeviceJgs2;
pub use local::{
    barrier_hessian, element_pass, hess_vec, jgs2_system, local_system, rest_frame_gradients,
    rotations, vbd_system, vertex_gradient, ElementCache, GradTerm, HessTerm,
};
pub use solver::{Jgs2Params, Jgs2Solver, Variant};
pub use subspace::{
    build_subspace, cache_key, load_or_build, Jgs2Subspace, SubspaceOptions, SubspaceOrigin,
    VertexSubspace,
};
