//! VTK XML output for ParaView: one `.vtu` unstructured grid per frame (Float64 points, Int64
//! connectivity/offsets, UInt8 types, optional point and cell data), data arrays inline as
//! base64 binary, and a `.pvd` collection mapping times to frame files.

use crate::error::{JelloError, Result};
use crate::output::atomic_write_with;
use std::io::Write;
use std::path::{Path, PathBuf};

/// VTK cell type of a linear tetrahedron.
const VTK_TETRA: u8 = 10;

/// A field attached to points or cells. Lengths must match the point or cell count.
#[derive(Clone, Copy, Debug)]
pub enum Field<'a> {
    /// One f64 per item.
    Scalar(&'a [f64]),
    /// Three f64 per item (e.g. displacement in m, velocity in m/s).
    Vector(&'a [[f64; 3]]),
    /// One f32 per item (GPU readbacks).
    ScalarF32(&'a [f32]),
    /// Three f32 per item (GPU readbacks).
    VectorF32(&'a [[f32; 3]]),
    /// One i32 per item (ids: material, object), so ParaView can colour them categorically.
    ScalarI32(&'a [i32]),
}

impl Field<'_> {
    fn len(&self) -> usize {
        match self {
            Field::Scalar(v) => v.len(),
            Field::Vector(v) => v.len(),
            Field::ScalarF32(v) => v.len(),
            Field::VectorF32(v) => v.len(),
            Field::ScalarI32(v) => v.len(),
        }
    }
    fn components(&self) -> usize {
        match self {
            Field::Scalar(_) | Field::ScalarF32(_) | Field::ScalarI32(_) => 1,
            Field::Vector(_) | Field::VectorF32(_) => 3,
        }
    }
    fn vtk_type(&self) -> &'static str {
        match self {
            Field::Scalar(_) | Field::Vector(_) => "Float64",
            Field::ScalarF32(_) | Field::VectorF32(_) => "Float32",
            Field::ScalarI32(_) => "Int32",
        }
    }
    fn bytes(&self) -> Vec<u8> {
        match self {
            Field::Scalar(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Field::Vector(v) => v.iter().flatten().flat_map(|x| x.to_le_bytes()).collect(),
            Field::ScalarF32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Field::VectorF32(v) => v.iter().flatten().flat_map(|x| x.to_le_bytes()).collect(),
            Field::ScalarI32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        }
    }
}

/// Writes one frame as a VTK XML unstructured grid (`.vtu`), atomically.
///
/// `positions` (m) may be the deformed configuration; `tets` index into it. `point_data` and
/// `cell_data` are `(name, field)` pairs; a field whose length differs from the point or cell
/// count is refused with [`JelloError::Invalid`].
pub fn write_vtu(
    path: &Path,
    positions: &[[f64; 3]],
    tets: &[[u32; 4]],
    point_data: &[(&str, Field)],
    cell_data: &[(&str, Field)],
) -> Result<()> {
    for (name, f) in point_data {
        if f.len() != positions.len() {
            return Err(JelloError::Invalid(format!(
                "{}: point field `{name}` has {} values for {} points",
                path.display(),
                f.len(),
                positions.len()
            )));
        }
    }
    for (name, f) in cell_data {
        if f.len() != tets.len() {
            return Err(JelloError::Invalid(format!(
                "{}: cell field `{name}` has {} values for {} cells",
                path.display(),
                f.len(),
                tets.len()
            )));
        }
    }
    if let Some(&bad) = tets
        .iter()
        .flatten()
        .find(|&&i| i as usize >= positions.len())
    {
        return Err(JelloError::Invalid(format!(
            "{}: tet vertex index {bad} out of range ({} points)",
            path.display(),
            positions.len()
        )));
    }
    atomic_write_with(path, |w| {
        writeln!(w, "<?xml version=\"1.0\"?>")?;
        writeln!(
            w,
            "<VTKFile type=\"UnstructuredGrid\" version=\"1.0\" byte_order=\"LittleEndian\" header_type=\"UInt64\">"
        )?;
        writeln!(w, "  <UnstructuredGrid>")?;
        writeln!(
            w,
            "    <Piece NumberOfPoints=\"{}\" NumberOfCells=\"{}\">",
            positions.len(),
            tets.len()
        )?;
        writeln!(w, "      <Points>")?;
        let pts: Vec<u8> = positions
            .iter()
            .flatten()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        data_array(w, "Float64", "Points", 3, &pts)?;
        writeln!(w, "      </Points>")?;
        writeln!(w, "      <Cells>")?;
        let conn: Vec<u8> = tets
            .iter()
            .flatten()
            .flat_map(|&i| (i as i64).to_le_bytes())
            .collect();
        data_array(w, "Int64", "connectivity", 1, &conn)?;
        let offs: Vec<u8> = (1..=tets.len())
            .flat_map(|i| (4 * i as i64).to_le_bytes())
            .collect();
        data_array(w, "Int64", "offsets", 1, &offs)?;
        data_array(w, "UInt8", "types", 1, &vec![VTK_TETRA; tets.len()])?;
        writeln!(w, "      </Cells>")?;
        for (tag, fields) in [("PointData", point_data), ("CellData", cell_data)] {
            if fields.is_empty() {
                continue;
            }
            writeln!(w, "      <{tag}>")?;
            for (name, f) in fields {
                data_array(
                    w,
                    f.vtk_type(),
                    &xml_escape(name),
                    f.components(),
                    &f.bytes(),
                )?;
            }
            writeln!(w, "      </{tag}>")?;
        }
        writeln!(w, "    </Piece>")?;
        writeln!(w, "  </UnstructuredGrid>")?;
        writeln!(w, "</VTKFile>")
    })
}

/// One inline binary `DataArray`: base64 of (u64 byte count ‖ little-endian data).
fn data_array(
    w: &mut impl Write,
    ty: &str,
    name: &str,
    components: usize,
    data: &[u8],
) -> std::io::Result<()> {
    writeln!(
        w,
        "        <DataArray type=\"{ty}\" Name=\"{name}\" NumberOfComponents=\"{components}\" format=\"binary\">"
    )?;
    let mut block = Vec::with_capacity(8 + data.len());
    block.extend_from_slice(&(data.len() as u64).to_le_bytes());
    block.extend_from_slice(data);
    w.write_all(b"          ")?;
    w.write_all(base64_encode(&block).as_bytes())?;
    writeln!(w)?;
    writeln!(w, "        </DataArray>")
}

/// Standard base64 (RFC 4648 alphabet, `=` padding).
pub(crate) fn base64_encode(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        out.push(A[(n >> 18) as usize & 63] as char);
        out.push(A[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 {
            A[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if chunk.len() > 2 {
            A[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A ParaView `.pvd` collection: an ordered list of `(time s, frame file)` entries. Rewrite it
/// after each frame with [`PvdCollection::write`] so an interrupted run stays viewable.
#[derive(Clone, Debug)]
pub struct PvdCollection {
    /// Path of the `.pvd` file.
    pub path: PathBuf,
    /// `(time in s, frame file)`; file paths are written relative to the `.pvd`'s directory when
    /// they lie inside it.
    pub entries: Vec<(f64, PathBuf)>,
}

impl PvdCollection {
    /// An empty collection that will be written to `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        PvdCollection {
            path: path.into(),
            entries: Vec::new(),
        }
    }

    /// Adds a frame at `time` (s).
    pub fn push(&mut self, time: f64, file: impl Into<PathBuf>) {
        self.entries.push((time, file.into()));
    }

    /// Writes the collection atomically.
    pub fn write(&self) -> Result<()> {
        write_pvd(&self.path, &self.entries)
    }
}

/// Writes a `.pvd` collection listing `entries` (time in s → `.vtu` file), atomically.
pub fn write_pvd(path: &Path, entries: &[(f64, PathBuf)]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new(""));
    atomic_write_with(path, |w| {
        writeln!(w, "<?xml version=\"1.0\"?>")?;
        writeln!(
            w,
            "<VTKFile type=\"Collection\" version=\"0.1\" byte_order=\"LittleEndian\">"
        )?;
        writeln!(w, "  <Collection>")?;
        for (t, file) in entries {
            let rel = file.strip_prefix(dir).unwrap_or(file);
            // ParaView wants forward slashes in paths.
            let shown = rel.to_string_lossy().replace('\\', "/");
            writeln!(
                w,
                "    <DataSet timestep=\"{t:?}\" group=\"\" part=\"0\" file=\"{}\"/>",
                xml_escape(&shown)
            )?;
        }
        writeln!(w, "  </Collection>")?;
        writeln!(w, "</VTKFile>")
    })
}
