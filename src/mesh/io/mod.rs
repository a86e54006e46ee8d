//! Mesh files: readers (gmsh, TetGen, MEDIT, legacy VTK; OBJ/PLY/STL triangle meshes for
//! obstacles) and writers (VTK XML + PVD, OBJ/PLY surfaces, TetGen, gmsh).

mod convert;
mod cursor;
mod elements;
mod gmsh;
mod load;
mod medit;
mod surface_files;
mod tetgen;
mod triangle_files;
mod vtk_legacy;
mod vtu;

pub use convert::{convert, write_mesh};
pub use gmsh::{write_gmsh, GmshFormat};
pub use load::{
    mesh_from_arrays, parse_mesh, parse_tetgen, read_mesh, LoadedMesh, DEGENERATE_REL_VOLUME,
};
pub use surface_files::{write_obj, write_ply};
pub use tetgen::{tetgen_paths, write_tetgen};
pub use triangle_files::{parse_triangle_mesh, read_triangle_mesh, TriangleMesh};
pub use vtu::{write_pvd, write_vtu, Field, PvdCollection};
