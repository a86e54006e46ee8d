//! MEDIT `.mesh` files (ASCII): the `Vertices` and `Tetrahedra` sections, 1-based; every other
//! section is skipped.

use super::cursor::{read_bytes, show, Cursor};
use super::load::{Origin, RawMesh};
use crate::error::{JelloError, Result};
use std::path::Path;

pub(crate) fn read(path: &Path) -> Result<RawMesh> {
    let bytes = read_bytes(path)?;
    let mut c = Cursor::new(path, &bytes).with_hash_comments();
    let mut positions: Option<Vec<[f64; 3]>> = None;
    let mut raw_tets: Vec<[i64; 4]> = Vec::new();
    let mut lines: Vec<u32> = Vec::new();
    let mut saw_tets = false;
    while let Some(t) = c.next_token() {
        if !t[0].is_ascii_alphabetic() {
            return Err(c.err(format!("expected a section keyword, found `{}`", show(t))));
        }
        let key = String::from_utf8_lossy(t).to_ascii_lowercase();
        match key.as_str() {
            "meshversionformatted" => {
                c.usize("mesh version")?;
            }
            "dimension" => {
                let d = c.usize("dimension")?;
                if d != 3 {
                    return Err(c.err(format!("dimension must be 3, found {d}")));
                }
            }
            "vertices" => {
                if positions.is_some() {
                    return Err(c.err("second Vertices section"));
                }
                let n = c.usize("number of vertices")?;
                // x y z ref: 4 numbers of at least 2 bytes each.
                c.check_count(n, 8, "vertices")?;
                let mut p = Vec::with_capacity(n);
                for _ in 0..n {
                    let x = c.f64("x coordinate")?;
                    let line = c.token_line();
                    let y = c.f64("y coordinate")?;
                    let z = c.f64("z coordinate")?;
                    c.i64("vertex reference")?;
                    if c.token_line() != line {
                        return Err(c.err_at(line, "incomplete vertex line (x y z ref)"));
                    }
                    p.push([x, y, z]);
                }
                positions = Some(p);
            }
            "tetrahedra" => {
                if saw_tets {
                    return Err(c.err("second Tetrahedra section"));
                }
                saw_tets = true;
                let m = c.usize("number of tetrahedra")?;
                c.check_count(m, 10, "tetrahedra")?;
                raw_tets.reserve(m);
                lines.reserve(m);
                for _ in 0..m {
                    let a = c.i64("vertex index")?;
                    let line = c.token_line();
                    let b = c.i64("vertex index")?;
                    let cc = c.i64("vertex index")?;
                    let d = c.i64("vertex index")?;
                    c.i64("tetrahedron reference")?;
                    if c.token_line() != line {
                        return Err(c.err_at(line, "incomplete tetrahedron line (v1 v2 v3 v4 ref)"));
                    }
                    raw_tets.push([a, b, cc, d]);
                    lines.push(line as u32);
                }
            }
            "end" => break,
            _ => {
                // Unknown or unused section (Triangles, Edges, Corners, ...): its body is numbers
                // only, so skip up to the next keyword.
                while let Some(n) = c.peek_token() {
                    if n[0].is_ascii_alphabetic() {
                        break;
                    }
                    c.next_token();
                }
            }
        }
    }
    let positions = positions.ok_or_else(|| JelloError::mesh(path, "no Vertices section"))?;
    let nv = positions.len() as i64;
    let mut tets = Vec::with_capacity(raw_tets.len());
    for (t, line) in raw_tets.iter().zip(&lines) {
        let mut tet = [0u32; 4];
        for k in 0..4 {
            if t[k] < 1 || t[k] > nv {
                return Err(c.err_at(
                    *line as usize,
                    format!(
                        "vertex index {} out of range (1-based, {nv} vertices)",
                        t[k]
                    ),
                ));
            }
            tet[k] = (t[k] - 1) as u32;
        }
        tets.push(tet);
    }
    Ok(RawMesh {
        positions,
        tets,
        tet_where: lines,
        origin: Origin::Lines,
        tet_path: path.to_path_buf(),
        warnings: Vec::new(),
    })
}
