//! # jello — GPU-first elastodynamics
//!
//! Tetrahedral FEM with hyperelastic materials and implicit-Euler time stepping. Every solver is
//! written once over a device API that a wgpu backend (f32 WGSL kernels) and a CPU backend
//! (the kernels' Rust twins) both implement; projected Newton in f64 is the reference.
//!
//! Units are SI throughout: metres, seconds, kilograms, pascals.
//!
//! Data flow: [`scene::Scene`] (TOML) → [`problem::Model`] (mesh, materials, pins, obstacles) →
//! per step a [`problem::StepProblem`] (the incremental potential) → a [`solver`] → a
//! [`solver::StepReport`].

pub mod adjoint;
/// The clock every timing reads: std's `Instant` natively, the host's `performance.now()` on
/// wasm32 (where std's panics); one definition, in `jello_precompute::clock`.
pub use jello_precompute::clock;
pub mod compare;
pub mod contact;
pub mod error;
pub mod gpu;
pub mod limits;
pub mod material;
pub mod mesh;
pub mod output;
pub mod problem;
pub mod render;
pub mod runner;
pub mod scene;
pub mod sim;
pub mod solver;

pub use error::{JelloError, Result};
