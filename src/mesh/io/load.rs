//! Loading entry point: dispatch by extension, then the checks every format shares
//! (empty mesh, degenerate and inverted tets, unreferenced vertices).

use super::cursor::read_bytes;
use super::{gmsh, medit, tetgen, vtk_legacy};
use crate::error::{JelloError, Result};
use crate::mesh::TetMesh;
use rayon::slice::ParallelSliceMut;
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

/// The mesh formats, by file extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Gmsh,
    TetGen,
    Medit,
    Vtk,
}

fn format_of(path: &Path) -> Result<Format> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
        .unwrap_or_default();
    Ok(match ext.as_str() {
        "msh" => Format::Gmsh,
        "node" | "ele" => Format::TetGen,
        "mesh" => Format::Medit,
        "vtk" => Format::Vtk,
        _ => {
            return Err(JelloError::mesh(
                path,
                format!(
                    "unsupported mesh format `.{ext}` (supported: .msh, .node/.ele, .mesh, .vtk)"
                ),
            ))
        }
    })
}

/// Reads a tetrahedral mesh, choosing the format by extension:
/// `.msh` (gmsh 2.2 / 4.0 / 4.1, ASCII or binary), `.node`/`.ele` (TetGen, either name),
/// `.mesh` (MEDIT), `.vtk` (legacy VTK unstructured grid, ASCII or binary). Text may start with
/// a UTF-8 byte-order mark.
///
/// Fails (naming the file and line, or element index for binary data) on out-of-range indices,
/// non-finite coordinates, degenerate tets (see [`DEGENERATE_REL_VOLUME`]), duplicate tets (the
/// same four vertices in any order: both are named), counts the file cannot hold or above the
/// caps in [`crate::limits`], truncated files, malformed numbers, volume elements other than
/// tetrahedra and meshes without tets. Anything but a regular file no larger than
/// [`crate::limits::MAX_MESH_FILE_BYTES`] (a directory, a FIFO, a device) is refused before it is
/// opened. Negatively oriented tets are reoriented, unreferenced vertices kept, 10-node tets read
/// by their corners and lower-dimensional elements skipped; all are reported in `warnings` (the
/// element rule is in the docs of `mesh/io/elements.rs` and the book's scene format, `docs/src/scene-format.md#mesh-files`).
pub fn read_mesh(path: &Path) -> Result<LoadedMesh> {
    let format = format_of(path)?;
    if format == Format::TetGen {
        let (node_path, ele_path) = tetgen::tetgen_paths(path);
        // One file in memory at a time.
        let nodes = tetgen::parse_node(&node_path, &read_bytes(&node_path)?)?;
        return finish(tetgen::parse_ele(
            &ele_path,
            &read_bytes(&ele_path)?,
            nodes,
        )?);
    }
    parse_mesh(path, &read_bytes(path)?)
}

/// Parses the bytes of a single-file mesh (`.msh`, `.mesh`, `.vtk`: the format is chosen by
/// `path`'s extension, and `path` names the file in messages) with every check of
/// [`read_mesh`]; TetGen pairs go through [`parse_tetgen`]. Nothing is read from disk.
pub fn parse_mesh(path: &Path, bytes: &[u8]) -> Result<LoadedMesh> {
    let raw = match format_of(path)? {
        Format::Gmsh => gmsh::parse(path, bytes)?,
        Format::Medit => medit::parse(path, bytes)?,
        Format::Vtk => vtk_legacy::parse(path, bytes)?,
        Format::TetGen => {
            return Err(JelloError::mesh(
                path,
                "a TetGen mesh is two files: parse it with parse_tetgen",
            ))
        }
    };
    finish(raw)
}

/// Parses a TetGen `.node` / `.ele` pair from memory (the paths name the files in messages)
/// with every check of [`read_mesh`].
pub fn parse_tetgen(
    node_path: &Path,
    node: &[u8],
    ele_path: &Path,
    ele: &[u8],
) -> Result<LoadedMesh> {
    let nodes = tetgen::parse_node(node_path, node)?;
    finish(tetgen::parse_ele(ele_path, ele, nodes)?)
}

/// A mesh from flat arrays in memory (`positions`: x, y, z per vertex in m; `tets`: four 0-based
/// vertex indices per tet), with every check of [`read_mesh`]; `name` names it in messages (the
/// elements are numbered as records, 0-based). An out-of-range index, a non-finite or
/// out-of-range coordinate or a length that is not a multiple of 3 (4) is an error.
pub fn mesh_from_arrays(name: &Path, positions: &[f64], tets: &[u32]) -> Result<LoadedMesh> {
    let err = |msg: String| JelloError::mesh(name, msg);
    if !positions.len().is_multiple_of(3) || !tets.len().is_multiple_of(4) {
        return Err(err(format!(
            "{} coordinate(s) and {} tet index(es): want 3 per vertex and 4 per tet",
            positions.len(),
            tets.len()
        )));
    }
    let n = positions.len() / 3;
    if n > crate::limits::MAX_MESH_VERTICES || tets.len() / 4 > crate::limits::MAX_MESH_ELEMENTS {
        return Err(err(format!(
            "{n} vertices and {} tets: above the caps in jello::limits",
            tets.len() / 4
        )));
    }
    let max = crate::limits::MAX_COORDINATE;
    if let Some(k) = positions
        .iter()
        .position(|x| !(x.is_finite() && x.abs() <= max))
    {
        return Err(err(format!(
            "vertex {}: coordinate {} is not finite or beyond {max:e} m",
            k / 3,
            positions[k]
        )));
    }
    if let Some(k) = tets.iter().position(|&i| i as usize >= n) {
        return Err(err(format!(
            "element #{}: vertex index {} outside 0..{n}",
            k / 4,
            tets[k]
        )));
    }
    finish(RawMesh {
        positions: positions
            .chunks_exact(3)
            .map(|p| [p[0], p[1], p[2]])
            .collect(),
        tets: tets
            .chunks_exact(4)
            .map(|t| [t[0], t[1], t[2], t[3]])
            .collect(),
        tet_where: (0..tets.len() as u32 / 4).collect(),
        origin: Origin::Records,
        tet_path: name.to_path_buf(),
        warnings: Vec::new(),
    })
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

/// The first pair `(earlier, later)` of tets with the same four vertices (in any order), by the
/// later one's position; `None` when all are distinct. Sorts tet indices by their sorted vertex
/// lists (4 bytes per tet, in parallel), so it stays cheap on large meshes.
fn duplicate_tets(tets: &[[u32; 4]]) -> Option<(usize, usize)> {
    let key = |t: u32| {
        let mut k = tets[t as usize];
        k.sort_unstable();
        (k, t)
    };
    let mut order: Vec<u32> = (0..tets.len() as u32).collect();
    order.par_sort_unstable_by_key(|&t| key(t));
    order
        .windows(2)
        .filter(|w| key(w[0]).0 == key(w[1]).0)
        .map(|w| (w[0] as usize, w[1] as usize))
        .min_by_key(|&(_, later)| later)
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
    if let Some((first, second)) = duplicate_tets(&mesh.tets) {
        let mut shared = mesh.tets[second];
        shared.sort_unstable();
        let [a, b, c, d] = shared;
        let first_at = match raw.origin {
            Origin::Lines => format!("line {}", raw.tet_where[first]),
            Origin::Records => format!("element #{}", raw.tet_where[first]),
        };
        return Err(locate(
            &raw,
            second,
            format!(
                "duplicate tetrahedron: same vertices {a} {b} {c} {d} (0-based) as the one at \
                 {first_at}"
            ),
        ));
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
