//! TetGen `.node` / `.ele` files: reader (0- or 1-based, detected from the first `.node` index;
//! optional attribute and boundary-marker columns; 4- or 10-node tets, corners kept) and writer
//! (0-based, no attributes).

use super::cursor::{read_bytes, Cursor};
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

pub(crate) fn read(path: &Path) -> Result<RawMesh> {
    let (node_path, ele_path) = tetgen_paths(path);
    let node_bytes = read_bytes(&node_path)?;
    let (positions, base) = read_node(&node_path, &node_bytes)?;
    drop(node_bytes);
    let ele_bytes = read_bytes(&ele_path)?;
    let (tets, lines) = read_ele(&ele_path, &ele_bytes, base, positions.len())?;
    Ok(RawMesh {
        positions,
        tets,
        tet_where: lines,
        origin: Origin::Lines,
        tet_path: ele_path,
        warnings: Vec::new(),
    })
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
    let per = 4 + nattr + nbm;
    c.check_count(n, per * MIN_BYTES_PER_NUMBER, "points")?;
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
) -> Result<(Vec<[u32; 4]>, Vec<u32>)> {
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
    let per = 1 + npt + nattr;
    c.check_count(n, per * MIN_BYTES_PER_NUMBER, "tetrahedra")?;
    let mut tets = Vec::with_capacity(n);
    let mut lines = Vec::with_capacity(n);
    for _ in 0..n {
        c.i64("tetrahedron index")?;
        let line = c.token_line();
        let mut tet = [0u32; 4];
        for k in 0..npt {
            let v = c.i64("vertex index")?;
            if let Some(slot) = tet.get_mut(k) {
                let i = v - base as i64;
                if i < 0 || i >= num_points as i64 {
                    return Err(c.err(format!(
                        "vertex index {v} out of range ({base}-based, {num_points} points)"
                    )));
                }
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
    Ok((tets, lines))
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
