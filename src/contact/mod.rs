//! IPC contact between surfaces (issue 12): the collision mesh of a model's bodies and
//! triangle-mesh obstacles ([`mesh`]), the broad phase that finds point–triangle and edge–edge
//! pairs closer than d̂ or swept within it ([`broad`]), and the exact triangle–triangle
//! intersection check that certifies a state intersection-free ([`intersect`]). Positions are
//! global-vertex-indexed `[[f64; 3]]` arrays in metres; everything here runs on the CPU.

pub mod broad;
pub mod intersect;
pub mod mesh;

pub use broad::{
    candidates, candidates_with, face_pairs, Aabb, BroadParams, Candidates, GridStats,
};
pub use intersect::{
    check_intersection_free, faces_intersect, intersecting_pairs, triangles_intersect,
};
pub use mesh::{BodyKind, CollisionBody, CollisionMesh};
