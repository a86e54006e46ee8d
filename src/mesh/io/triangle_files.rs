//! Triangle-mesh readers for obstacles (issue 12): Wavefront OBJ, PLY (ASCII and binary, either
//! endianness) and STL (ASCII and binary), chosen by extension. The result feeds
//! [`crate::contact::CollisionMesh::add_obstacle`].
//!
//! - OBJ: `v x y z [...]` and `f` lines (`i`, `i/t`, `i/t/n`, `i//n`; negative indices count
//!   back from the last vertex read); other statements (`vn`, `vt`, `o`, `g`, `s`, `l`,
//!   `usemtl`, ...) are skipped.
//! - PLY: the `vertex` element's `x`, `y`, `z` (any scalar type) and the `face` element's
//!   `vertex_indices` (or `vertex_index`) list; other elements and properties are skipped.
//! - STL: facets are unindexed, so corners with bit-identical coordinates are welded into one
//!   vertex (the collision mesh needs shared vertices to exclude adjacent pairs); facets that
//!   collapse (two equal corners) are dropped with a warning. Binary is recognised by its size
//!   (84 + 50 × count bytes), ASCII by `solid` otherwise.
//!
//! Polygons with more than three corners are split into a fan of triangles. Every failure is
//! one line naming the file and the line (text) or byte offset (binary): unknown extension,
//! malformed or non-finite numbers, coordinates beyond [`crate::limits::MAX_COORDINATE`],
//! out-of-range or repeated indices, counts above the caps or beyond what the file holds, no
//! triangles.

use super::cursor::{read_bytes, show, Cursor, Endian};
use crate::error::{JelloError, Result};
use crate::limits::{MAX_COORDINATE, MAX_MESH_ELEMENTS, MAX_MESH_VERTICES};
use std::collections::HashMap;
use std::path::Path;

/// A triangle soup with shared vertices, m.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TriangleMesh {
    /// Vertex positions, m.
    pub positions: Vec<[f64; 3]>,
    /// Triangles (indices into `positions`, three distinct corners each), in file order.
    pub triangles: Vec<[u32; 3]>,
    /// What was dropped or changed on the way (one line each).
    pub warnings: Vec<String>,
}

/// Reads a triangle mesh (`.obj`, `.ply`, `.stl`, any case); see the module docs.
pub fn read_triangle_mesh(path: &Path) -> Result<TriangleMesh> {
    // Check the extension before reading a possibly large file.
    format_of(path)?;
    parse_triangle_mesh(path, &read_bytes(path)?)
}

/// Parses a triangle mesh's bytes (`path` names the file and its extension the format).
pub fn parse_triangle_mesh(path: &Path, bytes: &[u8]) -> Result<TriangleMesh> {
    let mut m = match format_of(path)? {
        Format::Obj => obj(path, bytes)?,
        Format::Ply => ply(path, bytes)?,
        Format::Stl => stl(path, bytes)?,
    };
    if m.triangles.is_empty() {
        return Err(JelloError::mesh(path, "has no triangles"));
    }
    if m.positions.len() > MAX_MESH_VERTICES {
        return Err(JelloError::mesh(
            path,
            format!(
                "{} vertices, more than the cap of {MAX_MESH_VERTICES} (jello::limits::MAX_MESH_VERTICES)",
                m.positions.len()
            ),
        ));
    }
    m.positions.shrink_to_fit();
    Ok(m)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Obj,
    Ply,
    Stl,
}

fn format_of(path: &Path) -> Result<Format> {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "obj" => Ok(Format::Obj),
        "ply" => Ok(Format::Ply),
        "stl" => Ok(Format::Stl),
        _ => Err(JelloError::mesh(
            path,
            format!("unknown triangle-mesh extension `.{ext}` (expected .obj, .ply or .stl)"),
        )),
    }
}

/// A coordinate checked against [`MAX_COORDINATE`] (finite already, or checked here).
fn coordinate(v: f64, err: impl FnOnce(String) -> JelloError) -> Result<f64> {
    if !v.is_finite() || v.abs() > MAX_COORDINATE {
        return Err(err(format!(
            "coordinate {v:e} is not finite or beyond {MAX_COORDINATE:e} m (jello::limits::MAX_COORDINATE)"
        )));
    }
    Ok(v)
}

/// Splits polygon `corners` (indices, already in range) into a fan; `err` names the polygon.
fn fan(
    corners: &[u32],
    out: &mut Vec<[u32; 3]>,
    err: impl FnOnce(String) -> JelloError,
) -> Result<()> {
    if corners.len() < 3 {
        return Err(err(format!(
            "a face needs at least 3 corners, found {}",
            corners.len()
        )));
    }
    for (i, &a) in corners.iter().enumerate() {
        if corners[i + 1..].contains(&a) {
            return Err(err(format!("the face repeats vertex {a}")));
        }
    }
    if out.len() + corners.len() - 2 > MAX_MESH_ELEMENTS {
        return Err(err(format!(
            "more than {MAX_MESH_ELEMENTS} triangles (jello::limits::MAX_MESH_ELEMENTS)"
        )));
    }
    for k in 1..corners.len() - 1 {
        out.push([corners[0], corners[k], corners[k + 1]]);
    }
    Ok(())
}

fn obj(path: &Path, bytes: &[u8]) -> Result<TriangleMesh> {
    let mut c = Cursor::new(path, bytes);
    let mut positions: Vec<[f64; 3]> = Vec::new();
    let mut triangles = Vec::new();
    while let Some(text) = c.line_text() {
        let line = c.token_line();
        let err = |m: String| JelloError::parse(path, line, m);
        // Comments run to the end of the line.
        let text = text.split(|&b| b == b'#').next().unwrap_or(&[]);
        let mut words = text
            .split(|b| b.is_ascii_whitespace())
            .filter(|w| !w.is_empty());
        match words.next() {
            Some(b"v") => {
                let mut p = [0.0; 3];
                for (k, v) in p.iter_mut().enumerate() {
                    let w = words
                        .next()
                        .ok_or_else(|| err(format!("a vertex needs 3 coordinates, found {k}")))?;
                    let x = std::str::from_utf8(w)
                        .ok()
                        .and_then(|s| s.parse::<f64>().ok())
                        .ok_or_else(|| {
                            err(format!("expected a coordinate, found `{}`", show(w)))
                        })?;
                    *v = coordinate(x, err)?;
                }
                if positions.len() >= MAX_MESH_VERTICES {
                    return Err(err(format!(
                        "more than {MAX_MESH_VERTICES} vertices (jello::limits::MAX_MESH_VERTICES)"
                    )));
                }
                positions.push(p);
            }
            Some(b"f") => {
                let mut corners = Vec::with_capacity(4);
                for w in words {
                    let head = w.split(|&b| b == b'/').next().unwrap_or(&[]);
                    let i = super::cursor::parse_i64(head).ok_or_else(|| {
                        err(format!("expected a vertex index, found `{}`", show(w)))
                    })?;
                    let n = positions.len() as i64;
                    // 1-based; negative counts back from the last vertex read so far.
                    let idx = if i > 0 { i - 1 } else { n + i };
                    if i == 0 || idx < 0 || idx >= n {
                        return Err(err(format!(
                            "vertex index {i} out of range ({n} vertices read so far)"
                        )));
                    }
                    corners.push(idx as u32);
                }
                fan(&corners, &mut triangles, err)?;
            }
            _ => {}
        }
    }
    Ok(TriangleMesh {
        positions,
        triangles,
        warnings: Vec::new(),
    })
}

/// A PLY scalar type: its size in bytes and whether it is a float.
#[derive(Clone, Copy)]
struct PlyType {
    size: usize,
    float: bool,
    signed: bool,
}

fn ply_type(name: &[u8]) -> Option<PlyType> {
    let t = |size, float, signed| {
        Some(PlyType {
            size,
            float,
            signed,
        })
    };
    match name {
        b"char" | b"int8" => t(1, false, true),
        b"uchar" | b"uint8" => t(1, false, false),
        b"short" | b"int16" => t(2, false, true),
        b"ushort" | b"uint16" => t(2, false, false),
        b"int" | b"int32" => t(4, false, true),
        b"uint" | b"uint32" => t(4, false, false),
        b"float" | b"float32" => t(4, true, true),
        b"double" | b"float64" => t(8, true, true),
        _ => None,
    }
}

impl PlyType {
    /// The value of `b` (exactly `size` bytes).
    fn read(self, b: &[u8], e: Endian) -> f64 {
        let mut a = [0u8; 8];
        match e {
            Endian::Little => a[..self.size].copy_from_slice(b),
            Endian::Big => {
                for (k, &x) in b.iter().rev().enumerate() {
                    a[k] = x;
                }
            }
        }
        let u = u64::from_le_bytes(a);
        match (self.float, self.size) {
            (true, 4) => f32::from_bits(u as u32) as f64,
            (true, _) => f64::from_bits(u),
            (false, s) if self.signed => {
                // Sign-extend from `s` bytes.
                let shift = 64 - 8 * s as u32;
                ((u << shift) as i64 >> shift) as f64
            }
            (false, _) => u as f64,
        }
    }
}

/// One property of a PLY element: a scalar, or a list (count type, item type).
struct PlyProp {
    name: Vec<u8>,
    ty: PlyType,
    list: Option<PlyType>,
}

struct PlyElement {
    name: Vec<u8>,
    count: usize,
    props: Vec<PlyProp>,
    /// Line of its `element` header line.
    line: usize,
}

fn ply(path: &Path, bytes: &[u8]) -> Result<TriangleMesh> {
    let mut c = Cursor::new(path, bytes);
    let first = c.line_text().unwrap_or(&[]);
    if first.trim_ascii() != b"ply" {
        return Err(c.err("not a PLY file: the first line must be `ply`"));
    }
    let mut format = None;
    let mut elements: Vec<PlyElement> = Vec::new();
    loop {
        let Some(text) = c.line_text() else {
            return Err(c.err("file truncated: no `end_header` line"));
        };
        let line = c.token_line();
        let err = |m: String| JelloError::parse(path, line, m);
        let words: Vec<&[u8]> = text
            .split(|b| b.is_ascii_whitespace())
            .filter(|w| !w.is_empty())
            .collect();
        match words.first().copied() {
            Some(b"end_header") => break,
            Some(b"comment") | Some(b"obj_info") | None => {}
            Some(b"format") => {
                format = Some(match words.get(1).copied() {
                    Some(b"ascii") => None,
                    Some(b"binary_little_endian") => Some(Endian::Little),
                    Some(b"binary_big_endian") => Some(Endian::Big),
                    other => {
                        return Err(err(format!(
                            "unknown format `{}`",
                            show(other.unwrap_or(&[]))
                        )))
                    }
                });
            }
            Some(b"element") => {
                let (Some(name), Some(n)) = (words.get(1), words.get(2)) else {
                    return Err(err("`element` needs a name and a count".into()));
                };
                let count = super::cursor::parse_usize(n)
                    .ok_or_else(|| err(format!("bad element count `{}`", show(n))))?;
                let (cap, cap_name) = if *name == b"vertex" {
                    (MAX_MESH_VERTICES, "MAX_MESH_VERTICES")
                } else {
                    (MAX_MESH_ELEMENTS, "MAX_MESH_ELEMENTS")
                };
                if count > cap {
                    return Err(err(format!(
                        "declared {count} {}, more than the cap of {cap} (jello::limits::{cap_name})",
                        show(name)
                    )));
                }
                elements.push(PlyElement {
                    name: name.to_vec(),
                    count,
                    props: Vec::new(),
                    line,
                });
            }
            Some(b"property") => {
                let Some(el) = elements.last_mut() else {
                    return Err(err("`property` before any `element`".into()));
                };
                let bad = |t: &[u8]| err(format!("unknown property type `{}`", show(t)));
                let prop = if words.get(1).copied() == Some(b"list") {
                    let (Some(ct), Some(it), Some(name)) =
                        (words.get(2), words.get(3), words.get(4))
                    else {
                        return Err(err(
                            "`property list` needs a count type, an item type and a name".into(),
                        ));
                    };
                    let count_ty = ply_type(ct).ok_or_else(|| bad(ct))?;
                    if count_ty.float {
                        return Err(err("a list count must be an integer type".into()));
                    }
                    PlyProp {
                        name: name.to_vec(),
                        ty: ply_type(it).ok_or_else(|| bad(it))?,
                        list: Some(count_ty),
                    }
                } else {
                    let (Some(t), Some(name)) = (words.get(1), words.get(2)) else {
                        return Err(err("`property` needs a type and a name".into()));
                    };
                    PlyProp {
                        name: name.to_vec(),
                        ty: ply_type(t).ok_or_else(|| bad(t))?,
                        list: None,
                    }
                };
                el.props.push(prop);
            }
            Some(w) => return Err(err(format!("unknown header line `{}`", show(w)))),
        }
    }
    let Some(endian) = format else {
        return Err(c.err("the header has no `format` line"));
    };
    let mut positions: Vec<[f64; 3]> = Vec::new();
    let mut faces: Vec<Vec<u32>> = Vec::new();
    let mut face_lines: Vec<usize> = Vec::new();
    for el in &elements {
        let is_vertex = el.name == b"vertex";
        let is_face = el.name == b"face";
        let xyz = [b"x".as_slice(), b"y", b"z"].map(|n| {
            el.props
                .iter()
                .position(|p| p.name == n && p.list.is_none())
        });
        let idx_prop = el.props.iter().position(|p| {
            p.list.is_some() && (p.name == b"vertex_indices" || p.name == b"vertex_index")
        });
        if is_vertex && xyz.iter().any(|p| p.is_none()) {
            return Err(JelloError::parse(
                path,
                el.line,
                "element `vertex` needs scalar properties x, y and z",
            ));
        }
        if is_face && idx_prop.is_none() {
            return Err(JelloError::parse(
                path,
                el.line,
                "element `face` needs a list property `vertex_indices`",
            ));
        }
        // At least one byte (binary) or two (text: a digit and a separator) per property.
        let per = el.props.len().max(1) * if endian.is_some() { 1 } else { 2 };
        c.check_count(el.count, per, &String::from_utf8_lossy(&el.name))?;
        if is_vertex {
            positions.reserve(el.count);
        }
        for _ in 0..el.count {
            let mut p = [0.0; 3];
            let mut list = Vec::new();
            let mut line = 0;
            for (k, prop) in el.props.iter().enumerate() {
                let values = ply_values(&mut c, prop, endian)?;
                line = c.token_line();
                if is_vertex {
                    if let Some(a) = xyz.iter().position(|&x| x == Some(k)) {
                        let e = |m: String| ply_err(&c, endian, m);
                        p[a] = coordinate(values[0], e)?;
                    }
                } else if is_face && Some(k) == idx_prop {
                    list = values;
                }
            }
            if is_vertex {
                positions.push(p);
            } else if is_face {
                let e = |m: String| ply_err(&c, endian, m);
                let corners = list
                    .iter()
                    .map(|&v| {
                        if v.fract() == 0.0 && v >= 0.0 && v < u32::MAX as f64 {
                            Ok(v as u32)
                        } else {
                            Err(e(format!("vertex index {v} is not a valid index")))
                        }
                    })
                    .collect::<Result<Vec<u32>>>()?;
                faces.push(corners);
                face_lines.push(line);
            }
        }
    }
    let mut triangles = Vec::new();
    let n = positions.len();
    for (f, corners) in faces.iter().enumerate() {
        let err = |m: String| {
            if endian.is_some() {
                JelloError::mesh(path, format!("face {f}: {m}"))
            } else {
                JelloError::parse(path, face_lines[f], m)
            }
        };
        if let Some(&v) = corners.iter().find(|&&v| v as usize >= n) {
            return Err(err(format!("vertex index {v} out of range ({n} vertices)")));
        }
        fan(corners, &mut triangles, err)?;
    }
    Ok(TriangleMesh {
        positions,
        triangles,
        warnings: Vec::new(),
    })
}

/// An error at the cursor: the line for ASCII, the byte offset for binary.
fn ply_err(c: &Cursor, endian: Option<Endian>, m: String) -> JelloError {
    if endian.is_some() {
        c.err_binary(m)
    } else {
        c.err(m)
    }
}

/// The values of one property of one element instance (one for a scalar).
fn ply_values(c: &mut Cursor, prop: &PlyProp, endian: Option<Endian>) -> Result<Vec<f64>> {
    let what = String::from_utf8_lossy(&prop.name).into_owned();
    let one = |c: &mut Cursor, ty: PlyType| -> Result<f64> {
        match endian {
            None => c.f64(&what),
            Some(e) => Ok(ty.read(c.bytes(ty.size, &what)?, e)),
        }
    };
    match prop.list {
        None => Ok(vec![one(c, prop.ty)?]),
        Some(ct) => {
            let n = one(c, ct)?;
            if !(n.fract() == 0.0 && (0.0..=1e6).contains(&n)) {
                return Err(ply_err(
                    c,
                    endian,
                    format!("list `{what}` has a bad length {n}"),
                ));
            }
            (0..n as usize).map(|_| one(c, prop.ty)).collect()
        }
    }
}

fn stl(path: &Path, bytes: &[u8]) -> Result<TriangleMesh> {
    let mut corners: Vec<[f64; 3]> = Vec::new();
    let binary_count = (bytes.len() >= 84)
        .then(|| u32::from_le_bytes([bytes[80], bytes[81], bytes[82], bytes[83]]) as usize);
    if let Some(n) = binary_count.filter(|&n| 84 + 50 * n == bytes.len()) {
        if n > MAX_MESH_ELEMENTS {
            return Err(JelloError::mesh(
                path,
                format!("{n} triangles, more than the cap of {MAX_MESH_ELEMENTS}"),
            ));
        }
        corners.reserve(3 * n);
        for f in 0..n {
            let rec = &bytes[84 + 50 * f..84 + 50 * (f + 1)];
            for k in 0..3 {
                let mut p = [0.0; 3];
                for (a, v) in p.iter_mut().enumerate() {
                    let o = 12 + 12 * k + 4 * a;
                    let x = f32::from_le_bytes([rec[o], rec[o + 1], rec[o + 2], rec[o + 3]]);
                    *v = coordinate(x as f64, |m| {
                        JelloError::mesh(path, format!("byte offset {}: {m}", 84 + 50 * f + o))
                    })?;
                }
                corners.push(p);
            }
        }
    } else {
        let mut c = Cursor::new(path, bytes);
        if c.peek_token() != Some(b"solid") {
            return Err(match binary_count {
                Some(n) => JelloError::mesh(
                    path,
                    format!(
                        "neither ASCII STL (no `solid`) nor binary STL ({n} triangles need {} bytes, the file has {})",
                        84u128 + 50 * n as u128,
                        bytes.len()
                    ),
                ),
                None => JelloError::mesh(path, "not an STL file (too short, no `solid`)"),
            });
        }
        let expect = |c: &mut Cursor, word: &[u8]| -> Result<()> {
            let t = c.token(&String::from_utf8_lossy(word))?;
            if !t.eq_ignore_ascii_case(word) {
                return Err(c.err(format!(
                    "expected `{}`, found `{}`",
                    String::from_utf8_lossy(word),
                    show(t)
                )));
            }
            Ok(())
        };
        while let Some(t) = c.next_token() {
            if t.eq_ignore_ascii_case(b"solid") {
                // The solid's name runs to the end of the line.
                c.line_text();
            } else if t.eq_ignore_ascii_case(b"endsolid") {
                c.line_text();
            } else if t.eq_ignore_ascii_case(b"facet") {
                expect(&mut c, b"normal")?;
                for _ in 0..3 {
                    c.f64("a normal component")?;
                }
                expect(&mut c, b"outer")?;
                expect(&mut c, b"loop")?;
                for _ in 0..3 {
                    expect(&mut c, b"vertex")?;
                    let mut p = [0.0; 3];
                    for v in &mut p {
                        let x = c.f64("a coordinate")?;
                        *v = coordinate(x, |m| c.err(m))?;
                    }
                    corners.push(p);
                }
                expect(&mut c, b"endloop")?;
                expect(&mut c, b"endfacet")?;
                if corners.len() / 3 > MAX_MESH_ELEMENTS {
                    return Err(c.err(format!(
                        "more than {MAX_MESH_ELEMENTS} facets (jello::limits::MAX_MESH_ELEMENTS)"
                    )));
                }
            } else {
                return Err(c.err(format!(
                    "expected `facet` or `endsolid`, found `{}`",
                    show(t)
                )));
            }
        }
    }
    Ok(weld(&corners))
}

/// Welds bit-identical corners (−0 taken as +0) into shared vertices, first appearance first,
/// and drops facets that collapse.
fn weld(corners: &[[f64; 3]]) -> TriangleMesh {
    let mut ids: HashMap<[u64; 3], u32> = HashMap::new();
    let mut positions = Vec::new();
    let mut triangles = Vec::with_capacity(corners.len() / 3);
    let mut dropped = 0;
    for tri in corners.chunks_exact(3) {
        let t: [u32; 3] = [0, 1, 2].map(|k| {
            let p = tri[k].map(|v| if v == 0.0 { 0.0 } else { v });
            *ids.entry(p.map(f64::to_bits)).or_insert_with(|| {
                positions.push(p);
                (positions.len() - 1) as u32
            })
        });
        if t[0] == t[1] || t[1] == t[2] || t[2] == t[0] {
            dropped += 1;
        } else {
            triangles.push(t);
        }
    }
    let mut warnings = Vec::new();
    if dropped > 0 {
        warnings.push(format!(
            "{dropped} facets with two equal corners dropped (zero area)"
        ));
    }
    TriangleMesh {
        positions,
        triangles,
        warnings,
    }
}
