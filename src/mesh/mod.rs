//! Tetrahedral meshes: the [`TetMesh`] type, readers and writers, generators, validation,
//! boundary surface, adjacency and colouring.

mod generate;
mod io;
mod measure;
mod stats;
mod tet_mesh;
mod topology;
mod transform;

pub use generate::{ball, box_grid, ring, ring_net, ring_net_clearance, RingNet};
pub use io::{
    convert, mesh_from_arrays, parse_mesh, parse_tetgen, parse_triangle_mesh, read_mesh,
    read_triangle_mesh, tetgen_paths, write_gmsh, write_mesh, write_obj, write_ply, write_pvd,
    write_tetgen, write_vtu, Field, GmshFormat, LoadedMesh, PvdCollection, TriangleMesh,
    DEGENERATE_REL_VOLUME,
};
pub use measure::TET_EDGES;
pub use stats::MeshInfo;
pub use tet_mesh::TetMesh;
pub use topology::{
    check_colouring, check_tet_colouring, check_vertex_colouring, colour_tets, colour_vertices,
    surface, BoundarySurface, Colouring, ColouringKind, VertexAdjacency, VertexTets, TET_FACES,
};
