//! Tetrahedral meshes: the [`TetMesh`] type, readers and writers, generators, validation,
//! boundary surface, adjacency and colouring.

mod tet_mesh;

pub use tet_mesh::TetMesh;
