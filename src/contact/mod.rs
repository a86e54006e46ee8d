//! IPC contact between deformable surfaces (Li et al. 2020, "Incremental Potential Contact").
//!
//! The numerical core of each primitive pair — squared distances with their closest-feature
//! classification and exact derivatives ([`distance`]), the edge–edge mollifier ([`mollifier`]),
//! the log barrier and its adaptive stiffness ([`barrier`]), and additive continuous collision
//! detection for the step filter ([`ccd`]) — and the mesh-level parts: the collision mesh of a
//! model's bodies and triangle-mesh obstacles ([`mesh`]; static or scripted, [`obstacles`]),
//! the broad phase that finds point–triangle and edge–edge pairs closer than d̂ or swept within
//! it ([`broad`]), and the
//! exact triangle–triangle intersection check that certifies a state intersection-free
//! ([`intersect`]; also what warns when objects of a scene without contact cross:
//! [`crossings`]) — and the contact potential that puts them together ([`potential`]), which
//! [`crate::problem::StepProblem`] adds to a step's energy when the model has
//! [`crate::problem::Model::contact`]. All f64 on the CPU, SI units (distances in m, squared distances in m²;
//! positions are global-vertex-indexed `[[f64; 3]]` arrays in metres).

pub mod barrier;
pub mod broad;
pub mod ccd;
pub mod crossings;
pub mod distance;
pub mod friction;
pub mod intersect;
pub mod mesh;
pub mod mollifier;
pub mod obstacles;
pub mod potential;

pub use broad::{
    candidates, candidates_with, face_pairs, Aabb, BroadParams, Candidates, GridStats,
};
pub use crossings::{Crossing, CrossingWatch};
pub use intersect::{
    check_intersection_free, faces_intersect, intersecting_pairs, triangles_intersect,
};
pub use mesh::{BodyKind, CollisionBody, CollisionMesh};
pub use obstacles::{JumpConflict, ObstacleMesh};
pub use potential::{ContactPair, IpcContact};
