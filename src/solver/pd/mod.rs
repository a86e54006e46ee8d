//! Shared machinery of the projective-dynamics family (quasi-Newton L-BFGS-PD of Liu, Bouaziz
//! and Kavan 2017 — [`crate::solver::qn`] — and, next, ADMM-PD of Overby et al. 2017): the
//! per-element operator D_e ([`operator`]), the per-element weights from the materials' 1-D
//! stress curves ([`stiffness`]), and the constant global matrix
//! A = w_M·M + Σ_e w_e D_eᵀD_e with its prefactored solve ([`global`]).
//!
//! Both methods use the same A with different weights: QN takes w_e = V_e k_e (QN Eq. 11);
//! ADMM's M + h²DᵀW²D with ρ = 1 and W_e² = V_e k_e is h² times the same matrix, and its
//! weight sweeps (w = ½√k, …) are a global multiplier on w_e ([`GlobalOptions::weight_scale`]).
//! Obstacles never enter A (QN's rule and ADMM's constant-factor contact): A is factored once
//! per time step size and pin set; QN adds the barrier's curvature around the factor
//! ([`contact`]), ADMM's Uzawa and projected Gauss–Seidel contact steps will use the same
//! factor and [`GlobalSystem::solve_fields`] for their columns.
//!
//! A solver reaches the factor through [`crate::solver::backend::Backend::host_solve`]: on the
//! f64 CPU backend it is a call; on a device the n × 3 vector crosses the bus (read q, solve in
//! f64 on the CPU, write r) — 2 × 12·n bytes per solve.

pub mod carry;
pub mod contact;
pub mod global;
pub mod operator;
pub mod stiffness;

pub use carry::PinCarry;
pub use contact::{contact_terms, ContactCorrection, ContactTerm};
pub use global::{GlobalOptions, GlobalSystem};
pub use operator::{apply_operator, element_operator, operator_gram, ElementOperator};
pub use stiffness::{element_weights, fit_stiffness, gauss_legendre, stress_curve, PAPER_INTERVAL};
