//! Differentiable simulation: exact adjoint gradients through implicit steps.
//!
//! A [`Tape`] records a run — implicit-Euler or BDF2 steps of a fixed [`crate::problem::Model`]
//! solved by the f64 projected-Newton reference to a tight characteristic-norm tolerance — and
//! [`Tape::backward`] turns the gradient of a loss on any set of states (dL/dxˢ, dL/dvˢ,
//! [`Seeds`]) into gradients with respect to the initial state, the per-tet material
//! parameters (μ and λ, or E and ν), the per-tet densities, the pinned vertices' targets per
//! step and per-vertex external forces per step ([`Param`], [`Gradients`]).
//!
//! # The step's derivative
//! Step s solves r(y) = ∇_f E(y) = 0 on the free DOFs, E = ½‖y − x̃‖²_M/ĥ² + Ψ(y) + B(y) with
//! the pinned DOFs at their targets (see [`crate::problem::integrator`] for ĥ, x̂, x̃). By the
//! implicit function theorem, dy_f = −H_ff⁻¹ ∂r/∂q dq for every input q, H = ∇²E at the
//! converged y. Reverse mode solves H_ff λ = ȳ_f once per step (ȳ = dL/dy + dL/dv'/ĥ) and
//! sends −λᵀ∂r/∂q to each input ([`step`]): M λ/ĥ² to x̃ (hence x̂ and ĥ v̂, and through BDF2's
//! 4/3, −1/3 to the two previous states), λ itself to the step's forces, −V·P_μ:δF(λ) and
//! −V·P_λ:δF(λ) to each tet's μ and λ, the inertia, force and barrier terms' mass derivatives
//! to each vertex's mass (then ρ_e V_e/4), and ȳ_P − (H_Pf λ) to the pinned targets.
//!
//! # Where it is exact
//! H is the true Hessian at the converged state — no eigenvalue filter: Newton's PSD
//! projection of ∂P/∂F ([`crate::material::EigenFilter`]) changes H wherever an element has a
//! negative stress-derivative mode (compressed or twisted elements), and a filtered H would
//! give a wrong λ there. At a converged strict local minimum the true H is positive definite,
//! so the same sparse Cholesky (analysed once) factors it; where it is not (a saddle, a
//! degenerate minimum) the step's solution is not locally unique and the backward pass
//! refuses with an error naming the step. The obstacles' vertex barriers are exact
//! (b''∇d∇dᵀ + b'∇²d); so are IPC's pair barriers between meshes, whose Hessians Newton
//! projects pair by pair and the adjoint takes unprojected
//! ([`crate::contact::IpcContact::exact_hessian_blocks`]), and the other contact terms
//! ([`contact`]). Where an IPC contact pair couples vertices that share no tet, the matrix is
//! Newton's augmented system ([`crate::solver::augmented`]).
//!
//! The gradient is the exact derivative of the discrete map *at an exact stationary point*:
//! a step stopped at residual ε carries an O(ε) relative error. (Finite differences of the
//! forward pass measure something slightly different, the derivative of Newton's last iterate
//! as a function of the inputs, which is off by about the error of the iterate before it; a
//! comparison needs the forward solved a step of Newton beyond where ε alone would stop.) The tape solves to
//! [`RecordOptions::tolerance`] (default 1e-10) and refuses, or flags, steps that did not
//! reach it ([`Unconverged`]). Things held fixed within a step: the set of active barrier
//! pairs (harmless: IPC's barrier is C² at d̂, b = b' = b'' = 0 there, so a pair entering or
//! leaving changes nothing to second order; what is not smooth is a pair's closest-feature
//! type switching, where the squared distance is only C¹), the IPC stiffness κ the step
//! ended with, and the Newton start (any start that converges to the same minimum gives the
//! same state). A fixed κ (`contact.ipc_kappa`) is itself an input ([`Param::ContactStiffness`]);
//! an adaptive κ is chosen by the solver from the state, a choice the derivative does not
//! follow.
//!
//! # Memory and time
//! The backward pass needs each step's start and end states, last step first. They are kept
//! ([`Checkpointing::All`]) or recomputed from checkpoints (uniform [`Checkpointing::Every`],
//! or Griewank's binomial schedule [`Checkpointing::Binomial`]) by re-solving the steps with
//! the same Newton solver, which reproduces them bit for bit. [`BackwardStats`] reports the
//! wall times, the steps re-solved and the most states held at once. Each visited step costs
//! one numeric Cholesky factorisation and one solve against Newton's several per step. A tape
//! that observes a simulation ([`Tape::observing_with`], Python's `sim.record(checkpointing)`)
//! checkpoints the same way: it keeps each step's pin positions (the simulation may set them
//! between steps) and re-solves the dropped states with its own f64 Newton, which agrees with
//! the simulation's solver to their tolerances rather than bit for bit. `benches/adjoint.rs`
//! measures the time ratio and memory of each mode.

mod backward;
mod contact;
mod hessian;
mod options;
mod params;
mod schedule;
mod step;
mod tape;

pub use backward::{BackwardStats, Seeds};
pub use options::{Checkpointing, RecordOptions, Unconverged};
pub use params::{stress_parameter_derivatives, young_poisson_jacobian, Gradients, Param};
pub use tape::{StepRecord, Tape};
