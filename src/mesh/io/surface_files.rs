//! Boundary-surface output as ASCII OBJ and PLY: only the surface vertices, renumbered.

use crate::error::{JelloError, Result};
use crate::mesh::BoundarySurface;
use crate::output::atomic_write_with;
use std::io::Write;
use std::path::Path;

fn check(path: &Path, positions: &[[f64; 3]], surf: &BoundarySurface) -> Result<()> {
    if let Some(&v) = surf
        .vertices
        .iter()
        .find(|&&v| v as usize >= positions.len())
    {
        return Err(JelloError::Invalid(format!(
            "{}: surface vertex {v} out of range ({} positions)",
            path.display(),
            positions.len()
        )));
    }
    Ok(())
}

/// Writes the surface as a Wavefront OBJ (`v` lines for the surface vertices in
/// `surf.vertices` order, 1-based `f` lines wound outward), atomically. `positions` (m) may be
/// deformed positions of the same mesh.
pub fn write_obj(path: &Path, positions: &[[f64; 3]], surf: &BoundarySurface) -> Result<()> {
    check(path, positions, surf)?;
    let tris = surf.local_triangles();
    atomic_write_with(path, |w| {
        writeln!(
            w,
            "# jello boundary surface: {} vertices, {} triangles",
            surf.vertices.len(),
            tris.len()
        )?;
        for &v in &surf.vertices {
            let p = positions[v as usize];
            writeln!(w, "v {:?} {:?} {:?}", p[0], p[1], p[2])?;
        }
        for t in &tris {
            writeln!(w, "f {} {} {}", t[0] + 1, t[1] + 1, t[2] + 1)?;
        }
        Ok(())
    })
}

/// Writes the surface as an ASCII PLY (double vertices, `vertex_indices` faces wound outward),
/// atomically.
pub fn write_ply(path: &Path, positions: &[[f64; 3]], surf: &BoundarySurface) -> Result<()> {
    check(path, positions, surf)?;
    let tris = surf.local_triangles();
    atomic_write_with(path, |w| {
        writeln!(w, "ply")?;
        writeln!(w, "format ascii 1.0")?;
        writeln!(w, "comment jello boundary surface")?;
        writeln!(w, "element vertex {}", surf.vertices.len())?;
        writeln!(w, "property double x")?;
        writeln!(w, "property double y")?;
        writeln!(w, "property double z")?;
        writeln!(w, "element face {}", tris.len())?;
        writeln!(w, "property list uchar int vertex_indices")?;
        writeln!(w, "end_header")?;
        for &v in &surf.vertices {
            let p = positions[v as usize];
            writeln!(w, "{:?} {:?} {:?}", p[0], p[1], p[2])?;
        }
        for t in &tris {
            writeln!(w, "3 {} {} {}", t[0], t[1], t[2])?;
        }
        Ok(())
    })
}
