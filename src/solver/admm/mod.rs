//! ADMM-PD (Overby, Brown, Li, Narain 2017, "ADMM ⊇ Projective Dynamics"): `--solver admm`,
//! f64 on the CPU.
//!
//! The step's objective E(x) = ½‖x − x̃‖²_M/h² + Σ_e U_e(D_e x) is split on z = Dx with ρ = 1
//! and W_e = w_e I, and solved by the paper's Algorithm 1 with the local step first:
//!
//! ```text
//! per step:   x ← x_start; ū ← 0
//! per iteration:
//!   per element:  v_e = D_e x + ū_e;  z_e = prox_e(v_e);  ū_e ← v_e − z_e        (z, u steps)
//!   A x = M x̃/h² + Σ_e w_e² D_eᵀ(z_e − ū_e)   (pins eliminated, prefactored)    (x step)
//!   r = W(Dx − z),  s = DᵀW²(zⁿ⁺¹ − zⁿ)                                         (--trace)
//! ```
//!
//! # The matrix, and its scaling
//! The paper's x-step matrix is M + h² DᵀW²D; divided by h² it is A = M/h² + Σ_e w_e² D_eᵀD_e,
//! which is exactly the projective-dynamics matrix of [`crate::solver::pd::GlobalSystem`]
//! (mass weight `problem.inertia` = 1/h², element weights V_e k_e × `weight_scale`) when
//! w_e² = V_e k_e — so ADMM reuses that factor (one faer Cholesky per pin set and h, three
//! right-hand sides per solve) and its right-hand side is b = M x̃/h² + Σ w_e² D_eᵀ(z_e − ū_e),
//! the paper's (44). Default w_e² = V_e k_e, k_e the least-squares fit of the material's 1-D
//! stress curve on [0.5, 1.5] (the digest's suggestion "k_i = V_i κ"; for ARAP k = 2μ, i.e.
//! w² is PD's weight, with which ADMM *is* PD on affine constraint sets — `tests/admm.rs` T1).
//! `[solver] weight_scale` multiplies every w_e² (the paper's Fig. 10/11 sweeps: w = ½√k is
//! `weight_scale = 0.25`); it changes the rate, not the solution (T6).
//! The factor is made once per run (per pin set and h), never per step or iteration
//! ([`GlobalSystem::factorizations`]).
//!
//! In this module z and ū are stored as deformation gradients F = Σ_a x_a ∇N_aᵀ (the
//! transpose of the PD operator's D_e x = Fᵀ; the transpose is an isometry, so norms,
//! weights and proxes are unchanged), and D_eᵀG adds G∇N_a to vertex a.
//!
//! # z-step
//! [`prox`]: the PD projection (`prox = "pd"`, ARAP-like energies, exact for any w) and the
//! isotropic hyperelastic prox on signed singular values (`prox = "hyperelastic"`, default,
//! every material; damped Newton on σ — see the module for the solver and its tolerance).
//!
//! # Stopping
//! - `mode = "rule"` (default): jello's shared rule (`--stop cn|dx`) evaluated on the true
//!   gradient of [`crate::problem::StepProblem`] after every iteration (one extra element pass
//!   per iteration; the same rule and meaning of `converged` as every solver), capped by
//!   `max_iterations` (default 1000). ADMM converges linearly and stalls at tight tolerances:
//!   a step that reaches the cap ends there, reported not converged, with its residual.
//! - `mode = "fixed"`, `iterations = N`: the paper's fixed count (Table 2: 7–40); the step
//!   reports `converged` as the rule's verdict where it ended.
//!
//! The paper's r/s rule is not used to stop (it gives no thresholds, and ‖r‖, ‖s‖ small does
//! not bound the true gradient in jello's units); r and s are in every `--trace` record
//! (`primal`, `dual`).
//!
//! # Choices the paper leaves open
//! - **Start.** x ← `problem.x_start` (x̃ pulled back where it would invert an element or
//!   cross an obstacle, or xᵗ when that has lower energy: every jello solver's start), ū ← 0,
//!   z⁰ = D x_start (for the first iteration's s only). Nothing is carried between steps
//!   (the paper mentions no warm start).
//! - **Inversion.** Nothing in the solver: the hyperelastic prox keeps J > 0 for models
//!   infinite through inversion (Neo-Hookean), but x from the global step may invert an
//!   element; the step's true residual is then +∞ (not met) and the iterations continue; the
//!   simulation's state check reports what is left at the end.
//! - **Static solves and obstacles** are refused with one line (the splitting needs the
//!   inertia term; contact — the paper's Uzawa CG / tangent-space Gauss–Seidel global steps —
//!   is the next step).
//! - **Device.** f64 CPU only for now: the per-element prox kernels (WGSL) and the
//!   backend-generic loop ([`crate::solver::backend`]) are the next step; a GPU request is a
//!   one-line error, `auto` runs it on the CPU.
//!
//! # Measured
//! See `tests/admm.rs` (printed figures) and the commit messages.

mod params;
pub mod prox;
mod solver;

pub use params::{AdmmMode, AdmmParams};
pub use prox::ProxKind;
pub use solver::{AdmmIteration, AdmmSolver, CustomProx};
