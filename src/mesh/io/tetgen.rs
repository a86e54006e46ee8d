//! TetGen `.node` / `.ele` files: reader (0- or 1-based, detected from the first `.node` index;
//! optional attribute and boundary-marker columns; 4- or 10-node tets, corners kept) and writer
//! (0-based, no attributes).

use super::cursor::Cursor;
use super::elements::Tally;
use super::load::{Origin, RawMesh};
use crate::error::Result;
use crate::mesh::TetMesh;
use crate::output::atomic_write_with;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The `(node, ele)` pair for a path naming either file (or neither extension).
pub fn tetgen_paths(path: &Path) -> (PathBuf, PathBuf) {
    (path.with_extension("node"), path.with_extension("ele"))
}

/// Least bytes per number on a line: one digit and one separator.
const MIN_BYTES_PER_NUMBER: usize = 2;

/// The points of a `.node` file and its index base (0 or 1).
pub(crate) struct Nodes {
    pub positions: Vec<[f64; 3]>,
    pub base: usize,
}

/// Parses an `.ele` file's bytes against the points of its `.node` file.
pub(crate) fn parse_ele(path: &Path, bytes: &[u8], nodes: Nodes) -> Result<RawMesh> {
    let (tets, lines, npt) = read_ele(path, bytes, nodes.base, nodes.positions.len())?;
    let mut tally = Tally::default();
    if npt == 10 {
        tally.convert(tets.len());
    }
    Ok(RawMesh {
        positions: nodes.positions,
        tets,
        tet_where: lines,
        origin: Origin::Lines,
        tet_path: path.to_path_buf(),
        warnings: tally.warnings(path, "TetGen"),
    })
}

/// Parses a `.node` file's bytes.
pub(crate) fn parse_node(path: &Path, bytes: &[u8]) -> Result<Nodes> {
    let (positions, base) = read_node(path, bytes)?;
    Ok(Nodes { positions, base })
}

fn read_node(path: &Path, bytes: &[u8]) -> Result<(Vec<[f64; 3]>, usize)> {
    let mut c = Cursor::new(path, bytes).with_hash_comments();
    let n = c.usize("number of points")?;
    let header_line = c.token_line();
    let dim = c.usize("dimension")?;
    let nattr = c.usize("number of attributes")?;
    let nbm = c.usize("boundary-marker flag")?;
    if c.token_line() != header_line {
        return Err(c.err("the .node header needs 4 numbers on one line"));
    }
    if dim != 3 {
        return Err(c.err(format!("dimension must be 3, found {dim}")));
    }
    if nbm > 1 {
        return Err(c.err(format!("boundary-marker flag must be 0 or 1, found {nbm}")));
    }
    if n == 0 {
        return Err(c.err("the .node file declares 0 points"));
    }
    c.check_cap(
        n,
        crate::limits::MAX_MESH_VERTICES,
        "points",
        "MAX_MESH_VERTICES",
    )?;
    let per = nattr.saturating_add(4 + nbm);
    c.check_count(n, per.saturating_mul(MIN_BYTES_PER_NUMBER), "points")?;
    let mut positions = Vec::with_capacity(n);
    let mut base = 0usize;
    for i in 0..n {
        let idx = c.i64("point index")?;
        let line = c.token_line();
        if i == 0 {
            base = match idx {
                0 => 0,
                1 => 1,
                _ => return Err(c.err(format!("first point index must be 0 or 1, found {idx}"))),
            };
        }
        if idx != (i + base) as i64 {
            return Err(c.err(format!(
                "point indices must be consecutive: expected {}, found {idx}",
                i + base
            )));
        }
        let x = c.f64("x coordinate")?;
        let y = c.f64("y coordinate")?;
        let z = c.f64("z coordinate")?;
        for _ in 0..nattr + nbm {
            c.f64("point attribute or boundary marker")?;
        }
        if c.token_line() != line {
            return Err(c.err_at(line, format!("expected {per} numbers on this point line")));
        }
        positions.push([x, y, z]);
    }
    Ok((positions, base))
}

fn read_ele(
    path: &Path,
    bytes: &[u8],
    base: usize,
    num_points: usize,
) -> Result<(Vec<[u32; 4]>, Vec<u32>, usize)> {
    let mut c = Cursor::new(path, bytes).with_hash_comments();
    let n = c.usize("number of tetrahedra")?;
    let header_line = c.token_line();
    let npt = c.usize("nodes per tetrahedron")?;
    let nattr = c.usize("number of attributes")?;
    if c.token_line() != header_line {
        return Err(c.err("the .ele header needs 3 numbers on one line"));
    }
    if npt != 4 && npt != 10 {
        return Err(c.err(format!(
            "nodes per tetrahedron must be 4 or 10, found {npt}"
        )));
    }
    c.check_cap(
        n,
        crate::limits::MAX_MESH_ELEMENTS,
        "tetrahedra",
        "MAX_MESH_ELEMENTS",
    )?;
    let per = nattr.saturating_add(1 + npt);
    c.check_count(n, per.saturating_mul(MIN_BYTES_PER_NUMBER), "tetrahedra")?;
    let mut tets = Vec::with_capacity(n);
    let mut lines = Vec::with_capacity(n);
    for _ in 0..n {
        c.i64("tetrahedron index")?;
        let line = c.token_line();
        let mut tet = [0u32; 4];
        for k in 0..npt {
            let v = c.i64("vertex index")?;
            // Every node is range-checked, mid-edge ones of 10-node tets included.
            let i = v.saturating_sub(base as i64);
            if i < 0 || i >= num_points as i64 {
                return Err(c.err(format!(
                    "vertex index {v} out of range ({base}-based, {num_points} points)"
                )));
            }
            if let Some(slot) = tet.get_mut(k) {
                *slot = i as u32;
            }
        }
        for _ in 0..nattr {
            c.f64("tetrahedron attribute")?;
        }
        if c.token_line() != line {
            return Err(c.err_at(
                line,
                format!("expected {per} numbers on this tetrahedron line"),
            ));
        }
        tets.push(tet);
        lines.push(line as u32);
    }
    Ok((tets, lines, npt))
}

/// Writes `mesh` as TetGen `.node` + `.ele` (0-based, no attributes or markers) next to `path`
/// (whose extension, if any, is replaced). Each file is written atomically.
pub fn write_tetgen(path: &Path, mesh: &TetMesh) -> Result<()> {
    let (node_path, ele_path) = tetgen_paths(path);
    atomic_write_with(&node_path, |w| {
        writeln!(w, "{} 3 0 0", mesh.positions.len())?;
        for (i, p) in mesh.positions.iter().enumerate() {
            // `{:?}` prints the shortest representation that round-trips exactly.
            writeln!(w, "{i} {:?} {:?} {:?}", p[0], p[1], p[2])?;
        }
        Ok(())
    })?;
    atomic_write_with(&ele_path, |w| {
        writeln!(w, "{} 4 0", mesh.tets.len())?;
        for (i, t) in mesh.tets.iter().enumerate() {
            writeln!(w, "{i} {} {} {} {}", t[0], t[1], t[2], t[3])?;
        }
        Ok(())
    })
}
