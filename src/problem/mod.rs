//! The physics of one time step: the [`Model`] (mesh, per-element materials, lumped masses, pins,
//! obstacles) and the incremental potential [`StepProblem`], for implicit Euler
//!
//! E(x) = ½‖x − x̃‖²_M / h² + Ψ(x) + B(x),  x̃ = xᵗ + h vᵗ + h² g,
//!
//! whose minimiser is x^{t+1} (then v^{t+1} = (x^{t+1} − xᵗ)/h), and for BDF2 the same with
//! h → ĥ = 2h/3 in the inertia term and x̃ from the last two states ([`integrator`]). Ψ is the
//! FEM elastic energy and B the IPC log-barrier against static obstacles, plus IPC contact
//! between and within the bodies when the model has it ([`Model::contact`],
//! [`crate::contact::IpcContact`]). Pinned vertices follow kinematic scripts and are removed from
//! the unknowns (their gradient rows are zero and Hessian rows identity).

mod char_norm;
mod device_elastic;
pub(crate) use device_elastic::centroid;
mod diagnose;
mod geometry;
mod hessian;
pub mod integrator;
mod invariants;
mod model;
mod obstacle;
mod pins;
pub(crate) mod potential;
pub mod surface_contact;

pub use char_norm::CharacteristicNorm;
pub use device_elastic::DeviceElastic;
pub use geometry::{
    barycentric, closest_feature_on_triangle, closest_point_on_triangle, point_box_distance,
    segment_closest, segment_distance, triangle_box_distance, triangle_box_overlap,
    TriangleFeature,
};
pub use hessian::{pack_element_hessians, HessianLayout, PackedTetHessian};
pub use integrator::{History, Integrator, StepScheme, INTEGRATORS};
pub use invariants::{InversionPolicy, StateCheck};
pub use model::{Body, Model, State, StrainLimit, STATIC_LOAD_FRACTION};
pub use obstacle::{barrier as barrier_derivatives, BarrierParams, Obstacle};
pub use pins::{ExternalForce, Phase, Pin, Script};
pub use potential::{
    strict_volume_floor, ElasticReference, ElasticTerms, StepProblem, STRICT_MIN_J,
};
