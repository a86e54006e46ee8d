//! `jello mesh convert`: read any supported format, write by the output extension.

use super::gmsh::{write_gmsh, GmshFormat};
use super::load::{read_mesh, LoadedMesh};
use super::surface_files::{write_obj, write_ply};
use super::tetgen::write_tetgen;
use super::vtu::write_vtu;
use crate::error::{JelloError, Result};
use crate::mesh::{surface, TetMesh};
use std::path::Path;

/// Writes `mesh` in the format named by `output`'s extension: `.vtu` (VTK XML), `.obj` / `.ply`
/// (boundary surface only), `.node` / `.ele` (TetGen pair), `.msh` (gmsh 2.2 ASCII).
pub fn write_mesh(output: &Path, mesh: &TetMesh) -> Result<()> {
    let ext = output
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "vtu" => write_vtu(output, &mesh.positions, &mesh.tets, &[], &[]),
        "obj" => write_obj(output, &mesh.positions, &surface(mesh)),
        "ply" => write_ply(output, &mesh.positions, &surface(mesh)),
        "node" | "ele" => write_tetgen(output, mesh),
        "msh" => write_gmsh(output, mesh, GmshFormat::V22Ascii),
        _ => Err(JelloError::Invalid(format!(
            "{}: unsupported output format `.{ext}` (supported: .vtu, .obj, .ply, .node/.ele, .msh)",
            output.display()
        ))),
    }
}

/// Reads `input` (any format [`read_mesh`] takes) and writes it to `output` (see
/// [`write_mesh`]). Returns the loaded mesh with its warnings.
pub fn convert(input: &Path, output: &Path) -> Result<LoadedMesh> {
    let loaded = read_mesh(input)?;
    write_mesh(output, &loaded.mesh)?;
    Ok(loaded)
}
