//! Loading entry point: dispatch by extension, then the checks every format shares
//! (empty mesh, degenerate and inverted tets, unreferenced vertices).

use super::{gmsh, medit, tetgen, vtk_legacy};
use crate::error::{JelloError, Result};
use crate::mesh::TetMesh;
use std::path::{Path, PathBuf};

/// A tet is refused as degenerate when `|volume| <= DEGENERATE_REL_VOLUME * h³`, where `h` is the
/// mesh's mean edge length. 1e-12 only catches tets that are flat to round-off (coincident or
/// coplanar vertices); badly shaped but genuine slivers pass and show up in the quality stats.
pub const DEGENERATE_REL_VOLUME: f64 = 1e-12;

/// A mesh as loaded from a file, with what the loader had to fix or wants to tell.
#[derive(Clone, Debug, Default)]
pub struct LoadedMesh {
    /// The mesh, every tet positively oriented.
    pub mesh: TetMesh,
    /// Human-readable warnings (reoriented tets, unreferenced vertices, ignored elements).
    pub warnings: Vec<String>,
    /// Number of tets that were negatively oriented in the file and got two vertices swapped.
    pub reoriented: usize,
    /// Number of vertices no tet uses (kept, they are simply free-floating).
    pub unreferenced: usize,
}

/// Where an element came from, for error messages.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Origin {
    /// Text formats: `tet_where` holds 1-based line numbers.
    Lines,
    /// Binary formats: `tet_where` holds the 0-based element index in the file.
    Records,
}

/// What a reader produces: 0-based, range-checked, finite; not yet checked for orientation.
pub(crate) struct RawMesh {
    pub positions: Vec<[f64; 3]>,
    pub tets: Vec<[u32; 4]>,
    /// Line or record of each tet (see `origin`).
    pub tet_where: Vec<u32>,
    pub origin: Origin,
    /// File holding the elements (differs from the node file for TetGen).
    pub tet_path: PathBuf,
    /// Extra warnings from the reader (e.g. ignored element types).
    pub warnings: Vec<String>,
}

/// Reads a tetrahedral mesh, choosing the format by extension:
/// `.msh` (gmsh 2.2 / 4.0 / 4.1, ASCII or binary), `.node`/`.ele` (TetGen, either name),
/// `.mesh` (MEDIT), `.vtk` (legacy VTK unstructured grid, ASCII or binary).
///
/// Fails (naming the file and line, or element index for binary data) on out-of-range indices,
/// non-finite coordinates, degenerate tets (see [`DEGENERATE_REL_VOLUME`]), counts the file
/// cannot hold, truncated files, malformed numbers and meshes without tets. Negatively oriented
/// tets are reoriented and unreferenced vertices kept; both are reported in `warnings`.
pub fn read_mesh(path: &Path) -> Result<LoadedMesh> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
        .unwrap_or_default();
    let raw = match ext.as_str() {
        "msh" => gmsh::read(path)?,
        "node" | "ele" => tetgen::read(path)?,
        "mesh" => medit::read(path)?,
        "vtk" => vtk_legacy::read(path)?,
        _ => {
            return Err(JelloError::mesh(
                path,
                format!(
                    "unsupported mesh format `.{ext}` (supported: .msh, .node/.ele, .mesh, .vtk)"
                ),
            ))
        }
    };
    finish(raw)
}

fn locate(raw: &RawMesh, t: usize, msg: String) -> JelloError {
    match raw.origin {
        Origin::Lines => JelloError::parse(&raw.tet_path, raw.tet_where[t] as usize, msg),
        Origin::Records => JelloError::mesh(
            &raw.tet_path,
            format!("element #{} (binary data): {msg}", raw.tet_where[t]),
        ),
    }
}

/// Shared post-processing of every reader.
pub(crate) fn finish(mut raw: RawMesh) -> Result<LoadedMesh> {
    if raw.tets.is_empty() {
        return Err(JelloError::mesh(
            &raw.tet_path,
            "the mesh has no tetrahedra (only 4-node tets are read)",
        ));
    }
    let mut mesh = TetMesh {
        positions: std::mem::take(&mut raw.positions),
        tets: std::mem::take(&mut raw.tets),
    };
    let h = mesh.mean_edge_length();
    let tol = DEGENERATE_REL_VOLUME * h * h * h;
    let mut reoriented = 0;
    for t in 0..mesh.tets.len() {
        let v = mesh.signed_volume(t);
        if v.abs() <= tol || !v.is_finite() {
            let [a, b, c, d] = mesh.tets[t];
            return Err(locate(
                &raw,
                t,
                format!(
                    "degenerate tetrahedron (vertices {a} {b} {c} {d}, 0-based): volume {v:.3e} m³ \
                     is below {DEGENERATE_REL_VOLUME:e} × (mean edge {h:.3e} m)³"
                ),
            ));
        }
        if v < 0.0 {
            mesh.tets[t].swap(2, 3);
            reoriented += 1;
        }
    }
    let mut warnings = raw.warnings;
    if reoriented > 0 {
        warnings.push(format!(
            "{}: {reoriented} negatively oriented tetrahedra reoriented (two vertices swapped)",
            raw.tet_path.display()
        ));
    }
    let unreferenced = mesh.unreferenced_vertices().len();
    if unreferenced > 0 {
        warnings.push(format!(
            "{}: {unreferenced} vertices are not used by any tetrahedron (kept, free-floating)",
            raw.tet_path.display()
        ));
    }
    Ok(LoadedMesh {
        mesh,
        warnings,
        reoriented,
        unreferenced,
    })
}
