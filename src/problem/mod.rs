//! The physics of one time step: the [`Model`] (mesh, per-element materials, lumped masses, pins,
//! obstacles) and the implicit-Euler incremental potential [`StepProblem`]
//!
//! E(x) = ½‖x − x̃‖²_M / h² + Ψ(x) + B(x),  x̃ = xᵗ + h vᵗ + h² g,
//!
//! whose minimiser is x^{t+1} (then v^{t+1} = (x^{t+1} − xᵗ)/h). Ψ is the FEM elastic energy and B
//! the IPC log-barrier against static obstacles. Pinned vertices follow kinematic scripts and are
//! removed from the unknowns (their gradient rows are zero and Hessian rows identity).

mod char_norm;
mod hessian;
mod model;
mod obstacle;
mod pins;
mod potential;

pub use char_norm::CharacteristicNorm;
pub use hessian::HessianLayout;
pub use model::{Body, Model, State};
pub use obstacle::{barrier as barrier_derivatives, BarrierParams, Obstacle};
pub use pins::{ExternalForce, Pin, Script};
pub use potential::{ElasticTerms, StepProblem};
