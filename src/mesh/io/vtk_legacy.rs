//! Legacy VTK `.vtk` unstructured grids, ASCII or binary (big-endian): `POINTS`, `CELLS` (classic
//! count-prefixed lists, or the 5.x `OFFSETS`/`CONNECTIVITY` pair) and `CELL_TYPES`; cells of type
//! 10 (VTK_TETRA) are kept, 24 (VTK_QUADRATIC_TETRA) read by their corners, lower-dimensional
//! cells skipped with a count and other volume cells refused (see [`super::elements`]). Point
//! and cell data are not read.

use super::cursor::{show, Cursor, Endian};
use super::elements::{Kind, Tally, Treat};
use super::load::{Origin, RawMesh};
use crate::error::{JelloError, Result};
use std::path::Path;

/// The VTK cell types (vtkCellType.h) with the shared rule for each; `nodes` is the point count
/// a tetrahedron needs (0 for the others, whose point counts vary). `None` for unknown types.
fn cell_kind(t: i64) -> Option<Kind> {
    use Treat::{Refuse, Skip, Tet10, Tet4};
    let k = |name, treat| Kind::new(0, name, treat);
    Some(match t {
        0 => k("empty cell", Skip),
        1 => k("vertex", Skip),
        2 => k("poly-vertex", Skip),
        3 => k("line", Skip),
        4 => k("poly-line", Skip),
        5 => k("triangle", Skip),
        6 => k("triangle strip", Skip),
        7 => k("polygon", Skip),
        8 => k("pixel", Skip),
        9 => k("quad", Skip),
        10 => Kind::new(4, "tetra", Tet4),
        11 => k("voxel", Refuse),
        12 => k("hexahedron", Refuse),
        13 => k("wedge", Refuse),
        14 => k("pyramid", Refuse),
        15 => k("pentagonal prism", Refuse),
        16 => k("hexagonal prism", Refuse),
        21 => k("quadratic edge", Skip),
        22 => k("quadratic triangle", Skip),
        23 => k("quadratic quad", Skip),
        24 => Kind::new(10, "quadratic tetra", Tet10),
        25 => k("quadratic hexahedron", Refuse),
        26 => k("quadratic wedge", Refuse),
        27 => k("quadratic pyramid", Refuse),
        28 => k("biquadratic quad", Skip),
        29 => k("triquadratic hexahedron", Refuse),
        30 => k("quadratic-linear quad", Skip),
        31 => k("quadratic-linear wedge", Refuse),
        32 => k("biquadratic-quadratic wedge", Refuse),
        33 => k("biquadratic-quadratic hexahedron", Refuse),
        34 => k("biquadratic triangle", Skip),
        35 => k("cubic line", Skip),
        36 => k("quadratic polygon", Skip),
        37 => k("triquadratic pyramid", Refuse),
        42 => k("polyhedron", Refuse),
        60 => k("higher-order edge", Skip),
        61 => k("higher-order triangle", Skip),
        62 => k("higher-order quad", Skip),
        63 => k("higher-order polygon", Skip),
        64 => k("higher-order tetrahedron", Refuse),
        65 => k("higher-order wedge", Refuse),
        66 => k("higher-order pyramid", Refuse),
        67 => k("higher-order hexahedron", Refuse),
        68 => k("Lagrange curve", Skip),
        69 => k("Lagrange triangle", Skip),
        70 => k("Lagrange quadrilateral", Skip),
        71 => k("Lagrange tetrahedron", Refuse),
        72 => k("Lagrange hexahedron", Refuse),
        73 => k("Lagrange wedge", Refuse),
        74 => k("Lagrange pyramid", Refuse),
        75 => k("Bezier curve", Skip),
        76 => k("Bezier triangle", Skip),
        77 => k("Bezier quadrilateral", Skip),
        78 => k("Bezier tetrahedron", Refuse),
        79 => k("Bezier hexahedron", Refuse),
        80 => k("Bezier wedge", Refuse),
        81 => k("Bezier pyramid", Refuse),
        _ => return None,
    })
}

/// Section keywords of an unstructured grid.
const SECTIONS: [&[u8]; 6] = [
    b"POINTS",
    b"CELLS",
    b"CELL_TYPES",
    b"POINT_DATA",
    b"CELL_DATA",
    b"FIELD",
];

/// Cells as offsets into a connectivity list.
struct Cells {
    offsets: Vec<usize>,
    conn: Vec<i64>,
    /// Line (ASCII) or cell index (binary) of each cell.
    at: Vec<u32>,
}

struct Reader<'a> {
    c: Cursor<'a>,
    binary: bool,
}

/// Parses a `.vtk` file's bytes (`path` names it in messages).
pub(crate) fn parse(path: &Path, bytes: &[u8]) -> Result<RawMesh> {
    let mut r = Reader {
        c: Cursor::new(path, bytes),
        binary: false,
    };
    let c = &mut r.c;
    let head = c.line_text().unwrap_or_default();
    if !head.starts_with(b"# vtk DataFile") {
        return Err(
            c.err("not a legacy VTK file: the first line must be `# vtk DataFile Version x.y`")
        );
    }
    if c.line_text().is_none() {
        return Err(c.err("file truncated: missing the title line"));
    }
    let kind = c.token("ASCII or BINARY")?;
    r.binary = match kind {
        b"ASCII" | b"ascii" => false,
        b"BINARY" | b"binary" => true,
        k => {
            return Err(r
                .c
                .err(format!("expected ASCII or BINARY, found `{}`", show(k))))
        }
    };
    let ds = r.c.token("DATASET")?;
    let grid = r.c.token("dataset type")?;
    if ds != b"DATASET" || grid != b"UNSTRUCTURED_GRID" {
        return Err(r.c.err(format!(
            "only `DATASET UNSTRUCTURED_GRID` is supported, found `{} {}`",
            show(ds),
            show(grid)
        )));
    }
    let mut positions: Option<Vec<[f64; 3]>> = None;
    let mut cells: Option<Cells> = None;
    let mut types: Option<(Vec<i64>, usize)> = None;
    while let Some(t) = r.c.next_token() {
        match t {
            b"POINTS" => positions = Some(r.points()?),
            b"CELLS" => cells = Some(r.cells()?),
            b"CELL_TYPES" => {
                let line = r.c.token_line();
                types = Some((r.cell_types()?, line));
            }
            // Attribute data follows the geometry; nothing after it is needed.
            b"POINT_DATA" | b"CELL_DATA" => break,
            // Dataset-level field data (e.g. TIME) may come before the geometry.
            b"FIELD" => r.skip_field()?,
            // 5.x array metadata (text) follows an array; skip to the next section.
            b"METADATA" => {
                while let Some(t) = r.c.peek_token() {
                    if SECTIONS.contains(&t) {
                        break;
                    }
                    r.c.next_token();
                }
            }
            _ => {
                return Err(r.c.err(format!(
                    "unexpected keyword `{}` in an unstructured grid",
                    show(t)
                )))
            }
        }
    }
    let positions = positions.ok_or_else(|| JelloError::mesh(path, "no POINTS section"))?;
    let cells = cells.ok_or_else(|| JelloError::mesh(path, "no CELLS section"))?;
    let (types, types_line) =
        types.ok_or_else(|| JelloError::mesh(path, "no CELL_TYPES section"))?;
    let ncells = cells.offsets.len() - 1;
    if types.len() != ncells {
        return Err(JelloError::parse(
            path,
            types_line,
            format!(
                "CELL_TYPES lists {} cells but CELLS has {ncells}",
                types.len()
            ),
        ));
    }
    let where_err = |i: usize, msg: String| -> JelloError {
        if r.binary {
            JelloError::mesh(path, format!("cell #{i} (binary data): {msg}"))
        } else {
            JelloError::parse(path, cells.at[i] as usize, msg)
        }
    };
    let nv = positions.len() as i64;
    let mut tets = Vec::new();
    let mut tet_where = Vec::new();
    let mut tally = Tally::default();
    for (i, &ty) in types.iter().enumerate() {
        let k = cell_kind(ty).ok_or_else(|| {
            where_err(
                i,
                format!(
                    "unknown VTK cell type {ty}; jello refuses cells it cannot classify rather \
                     than drop them"
                ),
            )
        })?;
        match k.treat {
            Treat::Skip => {
                tally.skip(&format!("type {ty}"), &k, 1);
                continue;
            }
            Treat::Refuse => return Err(where_err(i, k.refusal(&format!("VTK cell type {ty}")))),
            Treat::Tet4 | Treat::Tet10 => {}
        }
        let ids = &cells.conn[cells.offsets[i]..cells.offsets[i + 1]];
        if ids.len() != k.nodes {
            return Err(where_err(
                i,
                format!(
                    "a {} cell (type {ty}) needs {} points, found {}",
                    k.name,
                    k.nodes,
                    ids.len()
                ),
            ));
        }
        let mut tet = [0u32; 4];
        for (q, &id) in ids.iter().enumerate() {
            if id < 0 || id >= nv {
                return Err(where_err(
                    i,
                    format!("point index {id} out of range (0-based, {nv} points)"),
                ));
            }
            if let Some(slot) = tet.get_mut(q) {
                *slot = id as u32;
            }
        }
        if k.treat == Treat::Tet10 {
            tally.convert(1);
        }
        tets.push(tet);
        tet_where.push(cells.at[i]);
    }
    Ok(RawMesh {
        positions,
        tets,
        tet_where,
        origin: if r.binary {
            Origin::Records
        } else {
            Origin::Lines
        },
        tet_path: path.to_path_buf(),
        warnings: tally.warnings(path, "VTK"),
    })
}

impl Reader<'_> {
    /// Reads `count` integers (ASCII tokens or big-endian binary of `size` bytes).
    fn ints(&mut self, count: usize, size: usize, what: &str) -> Result<(Vec<i64>, Vec<u32>)> {
        let mut v = Vec::with_capacity(count);
        let mut at = Vec::new();
        if self.binary {
            self.c.skip_line();
            let b = self.c.bytes(count * size, what)?;
            for k in 0..count {
                v.push(if size == 8 {
                    Endian::Big.i64(&b[8 * k..])
                } else {
                    Endian::Big.i32(&b[4 * k..]) as i64
                });
            }
        } else {
            at.reserve(count);
            for _ in 0..count {
                v.push(self.c.i64(what)?);
                at.push(self.c.token_line() as u32);
            }
        }
        Ok((v, at))
    }

    fn check(
        &self,
        count: usize,
        ascii_bytes: usize,
        binary_bytes: usize,
        what: &str,
    ) -> Result<()> {
        if self.binary {
            if count.saturating_mul(binary_bytes) > self.c.remaining() {
                return Err(self.c.err(format!(
                    "declared {count} {what} but only {} bytes remain (truncated or corrupt count)",
                    self.c.remaining()
                )));
            }
            Ok(())
        } else {
            self.c.check_count(count, ascii_bytes, what)
        }
    }

    fn points(&mut self) -> Result<Vec<[f64; 3]>> {
        let n = self.c.usize("number of points")?;
        self.c.check_cap(
            n,
            crate::limits::MAX_MESH_VERTICES,
            "points",
            "MAX_MESH_VERTICES",
        )?;
        let ty = self.c.word("point data type")?;
        let size = match ty.as_str() {
            "float" => 4,
            "double" => 8,
            _ if !self.binary => 8,
            _ => {
                return Err(self
                    .c
                    .err(format!("binary points must be float or double, found {ty}")))
            }
        };
        self.check(n, 6, 3 * size, "points")?;
        let mut p = Vec::with_capacity(n);
        if self.binary {
            self.c.skip_line();
            let b = self.c.bytes(n * 3 * size, "point coordinates")?;
            for i in 0..n {
                let mut q = [0.0; 3];
                for (k, v) in q.iter_mut().enumerate() {
                    let o = (3 * i + k) * size;
                    *v = if size == 4 {
                        Endian::Big.f32(&b[o..]) as f64
                    } else {
                        Endian::Big.f64(&b[o..])
                    };
                }
                if q.iter().any(|v| !v.is_finite()) {
                    return Err(JelloError::mesh(
                        &self.c.path,
                        format!("point #{i} (binary data): non-finite coordinate {q:?}"),
                    ));
                }
                p.push(q);
            }
        } else {
            for _ in 0..n {
                p.push([
                    self.c.f64("x coordinate")?,
                    self.c.f64("y coordinate")?,
                    self.c.f64("z coordinate")?,
                ]);
            }
        }
        Ok(p)
    }

    fn int_size(&self, ty: &str) -> Result<usize> {
        match ty {
            "vtktypeint64" | "vtktypeuint64" | "long" | "unsigned_long" => Ok(8),
            "vtktypeint32" | "vtktypeuint32" | "int" | "unsigned_int" => Ok(4),
            _ => Err(self.c.err(format!("unsupported integer type `{ty}`"))),
        }
    }

    fn cells(&mut self) -> Result<Cells> {
        let a = self.c.usize("number of cells")?;
        // 5.x gives one offset more than there are cells.
        self.c.check_cap(
            a,
            crate::limits::MAX_MESH_ELEMENTS + 1,
            "cells",
            "MAX_MESH_ELEMENTS",
        )?;
        let b = self.c.usize("cell list size")?;
        if self.c.peek_token() == Some(b"OFFSETS") {
            // VTK 5.x: `a` offsets then `b` connectivity entries.
            self.c.next_token();
            let ty = self.c.word("offset type")?;
            let size = self.int_size(&ty)?;
            self.check(a, 2, size, "cell offsets")?;
            let (offs, at) = self.ints(a, size, "cell offset")?;
            let t = self.c.token("CONNECTIVITY")?;
            if t != b"CONNECTIVITY" {
                return Err(self
                    .c
                    .err(format!("expected CONNECTIVITY, found `{}`", show(t))));
            }
            let ty = self.c.word("connectivity type")?;
            let size = self.int_size(&ty)?;
            self.check(b, 2, size, "connectivity entries")?;
            let (conn, _) = self.ints(b, size, "connectivity entry")?;
            if a == 0 {
                return Err(self.c.err("CELLS needs at least one offset"));
            }
            let mut offsets = Vec::with_capacity(a);
            let mut prev = 0usize;
            for (i, &o) in offs.iter().enumerate() {
                if o < prev as i64 || o as usize > conn.len() || (i == 0 && o != 0) {
                    return Err(self.c.err(format!("bad cell offset {o} at position {i}")));
                }
                prev = o as usize;
                offsets.push(prev);
            }
            let at = if self.binary {
                (0..a as u32).collect()
            } else {
                at
            };
            return Ok(Cells { offsets, conn, at });
        }
        // Classic layout: per cell, a point count followed by the point indices.
        self.check(b, 2, 4, "cell list entries")?;
        if a > b {
            return Err(self
                .c
                .err(format!("{a} cells cannot fit in a list of {b} numbers")));
        }
        let (list, at_list) = self.ints(b, 4, "cell list entry")?;
        let mut offsets = Vec::with_capacity(a + 1);
        let mut conn = Vec::with_capacity(b);
        let mut at = Vec::with_capacity(a);
        let mut k = 0usize;
        offsets.push(0);
        for i in 0..a {
            let loc = if self.binary {
                i as u32
            } else {
                at_list.get(k).copied().unwrap_or(0)
            };
            let cnt = *list
                .get(k)
                .ok_or_else(|| self.c.err(format!("cell list ends before cell {i} of {a}")))?;
            if cnt < 0 || k + 1 + cnt as usize > list.len() {
                return Err(self.c.err(format!("cell {i}: bad point count {cnt}")));
            }
            conn.extend_from_slice(&list[k + 1..k + 1 + cnt as usize]);
            k += 1 + cnt as usize;
            offsets.push(conn.len());
            at.push(loc);
        }
        if k != list.len() {
            return Err(self.c.err(format!(
                "CELLS declares a list of {b} numbers but its {a} cells use {k}"
            )));
        }
        Ok(Cells { offsets, conn, at })
    }

    /// Skips `FIELD name n` and its `n` arrays (`name components tuples type` + values).
    fn skip_field(&mut self) -> Result<()> {
        self.c.token("field name")?;
        let n = self.c.usize("number of field arrays")?;
        self.check(n, 8, 8, "field arrays")?;
        for _ in 0..n {
            self.c.token("array name")?;
            let comps = self.c.usize("number of components")?;
            let tuples = self.c.usize("number of tuples")?;
            let ty = self.c.word("array type")?;
            let size = match ty.as_str() {
                "char" | "unsigned_char" | "bit" => 1,
                "short" | "unsigned_short" => 2,
                "int" | "unsigned_int" | "float" | "vtktypeint32" | "vtktypeuint32" => 4,
                "long" | "unsigned_long" | "double" | "vtktypeint64" | "vtktypeuint64" => 8,
                _ => return Err(self.c.err(format!("unsupported field array type `{ty}`"))),
            };
            let count = comps
                .checked_mul(tuples)
                .ok_or_else(|| self.c.err("field array size overflows"))?;
            self.check(count, 2, size, "field values")?;
            if self.binary {
                self.c.skip_line();
                self.c.bytes(count * size, "field values")?;
            } else {
                for _ in 0..count {
                    self.c.token("field value")?;
                }
            }
        }
        Ok(())
    }

    fn cell_types(&mut self) -> Result<Vec<i64>> {
        let n = self.c.usize("number of cell types")?;
        self.c.check_cap(
            n,
            crate::limits::MAX_MESH_ELEMENTS,
            "cell types",
            "MAX_MESH_ELEMENTS",
        )?;
        self.check(n, 2, 4, "cell types")?;
        Ok(self.ints(n, 4, "cell type")?.0)
    }
}
