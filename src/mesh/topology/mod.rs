//! Mesh topology: boundary surface, CSR adjacency, graph colourings.

mod adjacency;
mod colouring;
mod surface;

pub use adjacency::{VertexAdjacency, VertexTets};
pub use colouring::{
    check_colouring, check_tet_colouring, check_vertex_colouring, colour_tets, colour_vertices,
    Colouring, ColouringKind,
};
pub use surface::{surface, BoundarySurface, TET_FACES};
