//! MEDIT `.mesh` files (ASCII): the `Vertices`, `Tetrahedra` and `TetrahedraP2` (corners kept)
//! sections, 1-based. Element sections of lower dimension (`Edges`, `Triangles`,
//! `Quadrilaterals`, ...) are skipped with a count, other volume sections (`Hexahedra`,
//! `Prisms`, `Pyramids`, ...) are refused (see [`super::elements`]); sections holding no
//! elements (`Corners`, `Ridges`, `Normals`, ...) are skipped.

use super::cursor::{show, Cursor};
use super::elements::{Kind, Tally, Treat};
use super::load::{Origin, RawMesh};
use crate::error::{JelloError, Result};
use std::path::Path;

/// MEDIT element sections other than `Vertices` (lower-case), with the shared rule for each.
const SECTIONS: [(&str, Kind); 11] = [
    (
        "tetrahedra",
        Kind::new(4, "4-node tetrahedron", Treat::Tet4),
    ),
    (
        "tetrahedrap2",
        Kind::new(10, "10-node tetrahedron", Treat::Tet10),
    ),
    ("edges", Kind::new(2, "edge", Treat::Skip)),
    ("edgesp2", Kind::new(3, "3-node edge", Treat::Skip)),
    ("triangles", Kind::new(3, "triangle", Treat::Skip)),
    ("trianglesp2", Kind::new(6, "6-node triangle", Treat::Skip)),
    ("quadrilaterals", Kind::new(4, "quadrilateral", Treat::Skip)),
    (
        "quadrilateralsq2",
        Kind::new(9, "9-node quadrilateral", Treat::Skip),
    ),
    ("hexahedra", Kind::new(8, "hexahedron", Treat::Refuse)),
    ("prisms", Kind::new(6, "prism", Treat::Refuse)),
    ("pyramids", Kind::new(5, "pyramid", Treat::Refuse)),
];

/// Parses a `.mesh` file's bytes (`path` names it in messages).
pub(crate) fn parse(path: &Path, bytes: &[u8]) -> Result<RawMesh> {
    let mut c = Cursor::new(path, bytes).with_hash_comments();
    let mut tally = Tally::default();
    let mut positions: Option<Vec<[f64; 3]>> = None;
    let mut raw_tets: Vec<[i64; 4]> = Vec::new();
    // Per tet, its smallest and largest vertex index (mid-edge nodes of TetrahedraP2 included).
    let mut extreme: Vec<(i64, i64)> = Vec::new();
    let mut lines: Vec<u32> = Vec::new();
    // Bit 0: a Tetrahedra section seen, bit 1: a TetrahedraP2 section.
    let mut saw_tets = 0u8;
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
                c.check_cap(
                    n,
                    crate::limits::MAX_MESH_VERTICES,
                    "vertices",
                    "MAX_MESH_VERTICES",
                )?;
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
            "tetrahedra" | "tetrahedrap2" => {
                let p2 = key == "tetrahedrap2";
                let nodes = if p2 { 10 } else { 4 };
                let bit = if p2 { 2 } else { 1 };
                if saw_tets & bit != 0 {
                    return Err(c.err(format!("second {} section", show(t))));
                }
                saw_tets |= bit;
                let m = c.usize("number of tetrahedra")?;
                c.check_cap(
                    m,
                    crate::limits::MAX_MESH_ELEMENTS,
                    "tetrahedra",
                    "MAX_MESH_ELEMENTS",
                )?;
                // `nodes` indices and a reference, at least 2 bytes each.
                c.check_count(m, 2 * (nodes + 1), "tetrahedra")?;
                raw_tets.reserve(m);
                lines.reserve(m);
                for _ in 0..m {
                    let mut tet = [0i64; 4];
                    let mut line = 0;
                    // Smallest and largest index on the line (mid-edge nodes included).
                    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
                    for k in 0..nodes {
                        let v = c.i64("vertex index")?;
                        if k == 0 {
                            line = c.token_line();
                        }
                        // Corners go to the tet; every index is range-checked (through its
                        // line's extremes) once the vertices are known.
                        if let Some(slot) = tet.get_mut(k) {
                            *slot = v;
                        }
                        (lo, hi) = (lo.min(v), hi.max(v));
                    }
                    c.i64("tetrahedron reference")?;
                    if c.token_line() != line {
                        return Err(c.err_at(
                            line,
                            format!(
                                "incomplete tetrahedron line ({nodes} vertices and a reference)"
                            ),
                        ));
                    }
                    raw_tets.push(tet);
                    extreme.push((lo, hi));
                    lines.push(line as u32);
                }
                if p2 {
                    tally.convert(m);
                }
            }
            "end" => break,
            _ => {
                if let Some((_, kind)) = SECTIONS.iter().find(|(name, _)| *name == key) {
                    let section = format!("section {}", show(t));
                    let line = c.token_line();
                    let count = c
                        .peek_token()
                        .and_then(super::cursor::parse_usize)
                        .unwrap_or(0);
                    if kind.treat == Treat::Refuse && count > 0 {
                        return Err(c.err_at(
                            line,
                            format!(
                                "{count} elements: {}",
                                kind.refusal(&format!("MEDIT {section}"))
                            ),
                        ));
                    }
                    tally.skip(&section, kind, count);
                }
                // Unused section (Triangles, Edges, Corners, ...): its body is numbers only, so
                // skip up to the next keyword.
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
    for ((t, line), &(lo, hi)) in raw_tets.iter().zip(&lines).zip(&extreme) {
        if let Some(x) = [lo, hi].into_iter().find(|&x| x < 1 || x > nv) {
            return Err(c.err_at(
                *line as usize,
                format!("vertex index {x} out of range (1-based, {nv} vertices)"),
            ));
        }
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
        warnings: tally.warnings(path, "MEDIT"),
    })
}
