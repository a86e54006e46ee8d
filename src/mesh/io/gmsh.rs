//! gmsh `.msh` files: reader for format 2.2, 4.0 and 4.1, ASCII and binary (either endianness,
//! detected from the `1` marker), keeping only 4-node tets (element type 4); writer for 2.2 and
//! 4.1, ASCII or binary (native little-endian).

use super::cursor::{show, Cursor, Endian};
use super::elements::{Kind, Tally, Treat};
use super::load::{Origin, RawMesh};
use crate::error::{JelloError, Result};
use crate::mesh::TetMesh;
use crate::output::atomic_write_with;
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    V2,
    V40,
    V41,
}

/// The gmsh element types this reader knows (from the gmsh reference manual), with what the
/// shared rule in [`super::elements`] does with each. `None` for unknown types.
fn kind(t: usize) -> Option<Kind> {
    use Treat::{Refuse, Skip, Tet10, Tet4};
    Some(match t {
        1 => Kind::new(2, "2-node line", Skip),
        2 => Kind::new(3, "3-node triangle", Skip),
        3 => Kind::new(4, "4-node quadrangle", Skip),
        4 => Kind::new(4, "4-node tetrahedron", Tet4),
        5 => Kind::new(8, "8-node hexahedron", Refuse),
        6 => Kind::new(6, "6-node prism", Refuse),
        7 => Kind::new(5, "5-node pyramid", Refuse),
        8 => Kind::new(3, "3-node line", Skip),
        9 => Kind::new(6, "6-node triangle", Skip),
        10 => Kind::new(9, "9-node quadrangle", Skip),
        11 => Kind::new(10, "10-node tetrahedron", Tet10),
        12 => Kind::new(27, "27-node hexahedron", Refuse),
        13 => Kind::new(18, "18-node prism", Refuse),
        14 => Kind::new(14, "14-node pyramid", Refuse),
        15 => Kind::new(1, "point", Skip),
        16 => Kind::new(8, "8-node quadrangle", Skip),
        17 => Kind::new(20, "20-node hexahedron", Refuse),
        18 => Kind::new(15, "15-node prism", Refuse),
        19 => Kind::new(13, "13-node pyramid", Refuse),
        20 => Kind::new(9, "9-node triangle", Skip),
        21 => Kind::new(10, "10-node triangle", Skip),
        22 => Kind::new(12, "12-node triangle", Skip),
        23 => Kind::new(15, "15-node triangle", Skip),
        24 => Kind::new(15, "15-node incomplete triangle", Skip),
        25 => Kind::new(21, "21-node triangle", Skip),
        26 => Kind::new(4, "4-node line", Skip),
        27 => Kind::new(5, "5-node line", Skip),
        28 => Kind::new(6, "6-node line", Skip),
        29 => Kind::new(20, "20-node tetrahedron", Refuse),
        30 => Kind::new(35, "35-node tetrahedron", Refuse),
        31 => Kind::new(56, "56-node tetrahedron", Refuse),
        92 => Kind::new(64, "64-node hexahedron", Refuse),
        93 => Kind::new(125, "125-node hexahedron", Refuse),
        _ => return None,
    })
}

fn unknown_type(t: i64) -> String {
    format!(
        "unknown gmsh element type {t} (known: 1-31, 92, 93); jello refuses elements it \
         cannot classify rather than drop them"
    )
}

struct Reader<'a> {
    c: Cursor<'a>,
    version: Version,
    /// `None` for ASCII.
    endian: Option<Endian>,
    /// Bytes of a `size_t` in binary 4.x files.
    size_t: usize,
    tags: Vec<u64>,
    node_where: Vec<u32>,
    positions: Vec<[f64; 3]>,
    map: Option<TagMap>,
    tets: Vec<[u32; 4]>,
    tet_where: Vec<u32>,
    tally: Tally,
}

/// Node tag → 0-based index; dense when the tags are compact, hashed when sparse.
enum TagMap {
    Dense(Vec<u32>),
    Sparse(HashMap<u64, u32>),
}

impl TagMap {
    fn get(&self, tag: u64) -> Option<u32> {
        match self {
            TagMap::Dense(v) => v
                .get(usize::try_from(tag).ok()?)
                .copied()
                .filter(|&i| i != u32::MAX),
            TagMap::Sparse(m) => m.get(&tag).copied(),
        }
    }
}

/// Parses a `.msh` file's bytes (`path` names it in messages).
pub(crate) fn parse(path: &Path, bytes: &[u8]) -> Result<RawMesh> {
    let mut c = Cursor::new(path, bytes);
    let first = c.token("$MeshFormat")?;
    if first != b"$MeshFormat" {
        return Err(c.err(format!(
            "not a gmsh file: expected `$MeshFormat`, found `{}`",
            show(first)
        )));
    }
    let vword = c.word("format version")?;
    let version = match vword.as_str() {
        "2" | "2.0" | "2.1" | "2.2" => Version::V2,
        "4" | "4.0" => Version::V40,
        "4.1" => Version::V41,
        v => {
            return Err(c.err(format!(
                "unsupported gmsh format version {v} (supported: 2.2, 4.0, 4.1)"
            )))
        }
    };
    let file_type = c.usize("file type")?;
    let data_size = c.usize("data size")?;
    let endian = match file_type {
        0 => None,
        1 => {
            if version == Version::V41 {
                if data_size != 4 && data_size != 8 {
                    return Err(c.err(format!("data size must be 4 or 8, found {data_size}")));
                }
            } else if data_size != 8 {
                return Err(c.err(format!("data size must be 8, found {data_size}")));
            }
            c.skip_line();
            let m = c.bytes(4, "endianness marker")?;
            if Endian::Little.i32(m) == 1 {
                Some(Endian::Little)
            } else if Endian::Big.i32(m) == 1 {
                Some(Endian::Big)
            } else {
                return Err(c.err("binary endianness marker is not the integer 1"));
            }
        }
        t => {
            return Err(c.err(format!(
                "file type must be 0 (ASCII) or 1 (binary), found {t}"
            )))
        }
    };
    expect(&mut c, b"$EndMeshFormat")?;
    let size_t = if version == Version::V41 {
        data_size
    } else {
        8
    };
    let mut r = Reader {
        c,
        version,
        endian,
        size_t,
        tags: Vec::new(),
        node_where: Vec::new(),
        positions: Vec::new(),
        map: None,
        tets: Vec::new(),
        tet_where: Vec::new(),
        tally: Tally::default(),
    };
    let mut saw_elements = false;
    while let Some(t) = r.c.next_token() {
        if t == b"$Nodes" {
            if r.map.is_some() {
                return Err(r.c.err("second $Nodes section (only one is supported)"));
            }
            r.nodes()?;
            expect(&mut r.c, b"$EndNodes")?;
            r.build_map()?;
        } else if t == b"$Elements" {
            if r.map.is_none() {
                return Err(r.c.err("$Elements before $Nodes"));
            }
            if saw_elements {
                return Err(r.c.err("second $Elements section (only one is supported)"));
            }
            r.elements()?;
            expect(&mut r.c, b"$EndElements")?;
            saw_elements = true;
        } else if t.len() > 1 && t[0] == b'$' {
            let mut end = b"$End".to_vec();
            end.extend_from_slice(&t[1..]);
            let line = r.c.token_line();
            if !r.c.skip_past(&end) {
                return Err(r.c.err_at(
                    line,
                    format!(
                        "file truncated: section `{}` is not closed by `{}`",
                        show(t),
                        show(&end)
                    ),
                ));
            }
        } else {
            return Err(r.c.err(format!(
                "expected a `$Section` keyword, found `{}`",
                show(t)
            )));
        }
    }
    if r.map.is_none() {
        return Err(JelloError::mesh(path, "no $Nodes section"));
    }
    if !saw_elements {
        return Err(JelloError::mesh(path, "no $Elements section"));
    }
    let warnings = r.tally.warnings(path, "gmsh");
    Ok(RawMesh {
        positions: r.positions,
        tets: r.tets,
        tet_where: r.tet_where,
        origin: if endian.is_some() {
            Origin::Records
        } else {
            Origin::Lines
        },
        tet_path: path.to_path_buf(),
        warnings,
    })
}

fn expect(c: &mut Cursor, word: &[u8]) -> Result<()> {
    let what = String::from_utf8_lossy(word).into_owned();
    let t = c.token(&what)?;
    if t != word {
        return Err(c.err(format!("expected `{what}`, found `{}`", show(t))));
    }
    Ok(())
}

impl Reader<'_> {
    fn nodes(&mut self) -> Result<()> {
        match (self.version, self.endian) {
            (Version::V2, None) => self.nodes_v2_ascii(),
            (Version::V2, Some(e)) => self.nodes_v2_binary(e),
            (_, None) => self.nodes_v4_ascii(),
            (_, Some(e)) => self.nodes_v4_binary(e),
        }
    }

    fn push_node(&mut self, tag: u64, p: [f64; 3], at: usize) {
        self.tags.push(tag);
        self.positions.push(p);
        self.node_where.push(at as u32);
    }

    fn reserve_nodes(&mut self, n: usize) {
        self.tags.reserve(n);
        self.positions.reserve(n);
        self.node_where.reserve(n);
    }

    fn xyz_ascii(&mut self) -> Result<[f64; 3]> {
        Ok([
            self.c.f64("x coordinate")?,
            self.c.f64("y coordinate")?,
            self.c.f64("z coordinate")?,
        ])
    }

    fn same_line(&self, line: usize, what: &str) -> Result<()> {
        if self.c.token_line() != line {
            return Err(self.c.err_at(line, format!("incomplete {what} line")));
        }
        Ok(())
    }

    /// Refuses a node count above [`crate::limits::MAX_MESH_VERTICES`].
    fn cap_nodes(&self, n: u64) -> Result<()> {
        let cap = crate::limits::MAX_MESH_VERTICES;
        if n > cap as u64 {
            let msg = format!(
                "declared {n} nodes, more than the cap of {cap} (jello::limits::MAX_MESH_VERTICES)"
            );
            return Err(if self.endian.is_some() {
                self.c.err_binary(msg)
            } else {
                self.c.err(msg)
            });
        }
        Ok(())
    }

    fn nodes_v2_ascii(&mut self) -> Result<()> {
        let n = self.c.usize("number of nodes")?;
        self.cap_nodes(n as u64)?;
        // A node line holds at least 4 numbers of 2 bytes (digit + separator).
        self.c.check_count(n, 8, "nodes")?;
        self.reserve_nodes(n);
        for _ in 0..n {
            let tag = self.c.usize("node tag")? as u64;
            let line = self.c.token_line();
            let p = self.xyz_ascii()?;
            self.same_line(line, "node")?;
            self.push_node(tag, p, line);
        }
        Ok(())
    }

    fn nodes_v2_binary(&mut self, e: Endian) -> Result<()> {
        let n = self.c.usize("number of nodes")?;
        self.cap_nodes(n as u64)?;
        self.c.skip_line();
        let rec = 4 + 24;
        if n.saturating_mul(rec) > self.c.remaining() {
            return Err(self.c.err(format!(
                "declared {n} nodes but only {} bytes remain (truncated or corrupt count)",
                self.c.remaining()
            )));
        }
        self.reserve_nodes(n);
        for i in 0..n {
            let b = self.c.bytes(rec, "node record")?;
            let tag = e.i32(b);
            let p = [e.f64(&b[4..]), e.f64(&b[12..]), e.f64(&b[20..])];
            self.check_node_binary(i, tag as i64, p)?;
            self.push_node(tag as u64, p, i);
        }
        Ok(())
    }

    fn check_node_binary(&self, i: usize, tag: i64, p: [f64; 3]) -> Result<()> {
        if tag <= 0 {
            return Err(self
                .c
                .err_binary(format!("node #{i}: invalid node tag {tag}")));
        }
        if p.iter().any(|v| !v.is_finite()) {
            return Err(self.c.err_binary(format!(
                "node #{i} (tag {tag}): non-finite coordinate {p:?}"
            )));
        }
        Ok(())
    }

    fn nodes_v4_ascii(&mut self) -> Result<()> {
        let nblocks = self.c.usize("number of entity blocks")?;
        let n = self.c.usize("number of nodes")?;
        if self.version == Version::V41 {
            self.c.usize("minimum node tag")?;
            self.c.usize("maximum node tag")?;
        }
        self.cap_nodes(n as u64)?;
        self.c.check_count(n, 8, "nodes")?;
        self.c.check_count(nblocks, 8, "node entity blocks")?;
        self.reserve_nodes(n);
        let mut total = 0usize;
        for _ in 0..nblocks {
            let (a, b) = (self.c.usize("entity")?, self.c.usize("entity")?);
            let dim = if self.version == Version::V41 { a } else { b };
            let parametric = self.c.usize("parametric flag")?;
            let count = self.c.usize("number of nodes in block")?;
            let extra = self.parametric_extra(dim, parametric)?;
            total = total.saturating_add(count);
            if total > n {
                return Err(self
                    .c
                    .err(format!("node blocks hold more nodes than the {n} declared")));
            }
            if self.version == Version::V41 {
                let start = self.tags.len();
                for _ in 0..count {
                    let tag = self.c.usize("node tag")? as u64;
                    self.tags.push(tag);
                }
                for k in 0..count {
                    let p = self.xyz_ascii()?;
                    let line = self.c.token_line();
                    for _ in 0..extra {
                        self.c.f64("parametric coordinate")?;
                    }
                    self.same_line(line, "node coordinate")?;
                    let _ = k;
                    self.positions.push(p);
                    self.node_where.push(line as u32);
                }
                debug_assert_eq!(self.tags.len(), start + count);
            } else {
                for _ in 0..count {
                    let tag = self.c.usize("node tag")? as u64;
                    let line = self.c.token_line();
                    let p = self.xyz_ascii()?;
                    for _ in 0..extra {
                        self.c.f64("parametric coordinate")?;
                    }
                    self.same_line(line, "node")?;
                    self.push_node(tag, p, line);
                }
            }
        }
        if total != n {
            return Err(self.c.err(format!(
                "node blocks hold {total} nodes but {n} were declared"
            )));
        }
        Ok(())
    }

    fn parametric_extra(&self, dim: usize, parametric: usize) -> Result<usize> {
        if dim > 3 {
            return Err(self
                .c
                .err(format!("entity dimension must be 0..3, found {dim}")));
        }
        match parametric {
            0 => Ok(0),
            1 => Ok(dim),
            p => Err(self
                .c
                .err(format!("parametric flag must be 0 or 1, found {p}"))),
        }
    }

    fn size_t(&self, b: &[u8], e: Endian) -> u64 {
        e.uint(b, self.size_t)
    }

    fn nodes_v4_binary(&mut self, e: Endian) -> Result<()> {
        self.c.skip_line();
        let st = self.size_t;
        let nhead = if self.version == Version::V41 { 4 } else { 2 };
        let h = self.c.bytes(nhead * st, "$Nodes header")?;
        let nblocks = self.size_t(h, e);
        let n = self.size_t(&h[st..], e);
        // Least bytes per node: 4.1 stores a size_t tag + 3 doubles, 4.0 an int tag + 3 doubles.
        let min_rec = if self.version == Version::V41 {
            st + 24
        } else {
            28
        };
        let block_head = 12 + st;
        if n.saturating_mul(min_rec as u64) > self.c.remaining() as u64
            || nblocks.saturating_mul(block_head as u64) > self.c.remaining() as u64
        {
            return Err(self.c.err_binary(format!(
                "declared {n} nodes in {nblocks} blocks but only {} bytes remain (truncated or corrupt count)",
                self.c.remaining()
            )));
        }
        self.cap_nodes(n)?;
        let n = n as usize;
        self.reserve_nodes(n);
        let mut total = 0usize;
        for _ in 0..nblocks {
            let bh = self.c.bytes(block_head, "node block header")?;
            let (a, b) = (e.i32(bh), e.i32(&bh[4..]));
            let dim = if self.version == Version::V41 { a } else { b };
            let parametric = e.i32(&bh[8..]);
            let count = self.size_t(&bh[12..], e);
            if !(0..=3).contains(&dim) || !(0..=1).contains(&parametric) {
                return Err(self.c.err_binary(format!(
                    "node block header: bad entity dimension {dim} or parametric flag {parametric}"
                )));
            }
            let extra = if parametric == 1 { dim as usize } else { 0 };
            if count > (n - total) as u64 {
                return Err(self
                    .c
                    .err_binary(format!("node blocks hold more nodes than the {n} declared")));
            }
            let count = count as usize;
            if self.version == Version::V41 {
                let tb = self.c.bytes(count * st, "node tags")?;
                let cb = self.c.bytes(count * 8 * (3 + extra), "node coordinates")?;
                for k in 0..count {
                    let tag = self.size_t(&tb[k * st..], e);
                    let o = k * 8 * (3 + extra);
                    let p = [e.f64(&cb[o..]), e.f64(&cb[o + 8..]), e.f64(&cb[o + 16..])];
                    self.check_node_binary(total + k, tag.min(i64::MAX as u64) as i64, p)?;
                    self.push_node(tag, p, total + k);
                }
            } else {
                let rec = 4 + 8 * (3 + extra);
                let b = self.c.bytes(count * rec, "node records")?;
                for k in 0..count {
                    let r = &b[k * rec..];
                    let tag = e.i32(r);
                    let p = [e.f64(&r[4..]), e.f64(&r[12..]), e.f64(&r[20..])];
                    self.check_node_binary(total + k, tag as i64, p)?;
                    self.push_node(tag as u64, p, total + k);
                }
            }
            total += count;
        }
        if total != n {
            return Err(self.c.err_binary(format!(
                "node blocks hold {total} nodes but {n} were declared"
            )));
        }
        Ok(())
    }

    fn build_map(&mut self) -> Result<()> {
        let n = self.tags.len();
        let max = self.tags.iter().copied().max().unwrap_or(0);
        let dup = |r: &Self, tag: u64, i: usize| -> JelloError {
            let msg = format!("node tag {tag} appears more than once");
            if r.endian.is_some() {
                JelloError::mesh(&r.c.path, format!("node #{}: {msg}", r.node_where[i]))
            } else {
                JelloError::parse(&r.c.path, r.node_where[i] as usize, msg)
            }
        };
        // Dense lookup when tags are compact enough that the table costs at most ~4 slots per node.
        let map = if max <= (4 * n as u64 + 1024) {
            let mut v = vec![u32::MAX; max as usize + 1];
            for (i, &t) in self.tags.iter().enumerate() {
                if v[t as usize] != u32::MAX {
                    return Err(dup(self, t, i));
                }
                v[t as usize] = i as u32;
            }
            TagMap::Dense(v)
        } else {
            let mut m = HashMap::with_capacity(n);
            for (i, &t) in self.tags.iter().enumerate() {
                if m.insert(t, i as u32).is_some() {
                    return Err(dup(self, t, i));
                }
            }
            TagMap::Sparse(m)
        };
        self.map = Some(map);
        self.tags = Vec::new();
        self.node_where = Vec::new();
        Ok(())
    }

    fn lookup(&self, tag: u64, ordinal: usize) -> Result<u32> {
        let found = self.map.as_ref().and_then(|m| m.get(tag));
        found.ok_or_else(|| {
            let msg =
                format!("element references node tag {tag}, which is out of range (not in $Nodes)");
            if self.endian.is_some() {
                JelloError::mesh(
                    &self.c.path,
                    format!("element #{ordinal} (binary data): {msg}"),
                )
            } else {
                self.c.err(msg)
            }
        })
    }

    fn elements(&mut self) -> Result<()> {
        match (self.version, self.endian) {
            (Version::V2, None) => self.elements_v2_ascii(),
            (Version::V2, Some(e)) => self.elements_v2_binary(e),
            (_, None) => self.elements_v4_ascii(),
            (_, Some(e)) => self.elements_v4_binary(e),
        }
    }

    /// Reads the `nodes` node tags of a tetrahedron (4, or 10 for a quadratic one) on `line`
    /// and keeps its corners (the first four).
    fn read_tet_ascii(&mut self, line: usize, nodes: usize) -> Result<()> {
        let mut tet = [0u32; 4];
        for k in 0..nodes {
            let tag = self.c.usize("node tag")? as u64;
            let v = self.lookup(tag, 0)?;
            if let Some(slot) = tet.get_mut(k) {
                *slot = v;
            }
        }
        self.same_line(line, "element")?;
        self.tets.push(tet);
        self.tet_where.push(line as u32);
        Ok(())
    }

    /// The kind of element type `etype`, or the error for an unknown type (`at` locates it).
    fn kind_or_err(&self, etype: i64, at: Option<usize>) -> Result<Kind> {
        usize::try_from(etype)
            .ok()
            .and_then(kind)
            .ok_or_else(|| self.locate(at, unknown_type(etype)))
    }

    /// An error at the last token (ASCII) or at element record `at` (binary).
    fn locate(&self, at: Option<usize>, msg: String) -> JelloError {
        match at {
            Some(i) => self.c.err_binary(format!("element #{i}: {msg}")),
            None => self.c.err(msg),
        }
    }

    /// Refuses an element count above [`crate::limits::MAX_MESH_ELEMENTS`].
    fn cap_elements(&self, m: u64) -> Result<()> {
        let cap = crate::limits::MAX_MESH_ELEMENTS;
        if m > cap as u64 {
            let msg = format!(
                "declared {m} elements, more than the cap of {cap} (jello::limits::MAX_MESH_ELEMENTS)"
            );
            return Err(if self.endian.is_some() {
                self.c.err_binary(msg)
            } else {
                self.c.err(msg)
            });
        }
        Ok(())
    }

    fn elements_v2_ascii(&mut self) -> Result<()> {
        let m = self.c.usize("number of elements")?;
        self.cap_elements(m as u64)?;
        // At least tag, type, tag count and one node: 4 numbers of 2 bytes.
        self.c.check_count(m, 8, "elements")?;
        for _ in 0..m {
            self.c.usize("element tag")?;
            let line = self.c.token_line();
            let etype = self.c.usize("element type")?;
            let k = self.kind_or_err(etype as i64, None)?;
            let ntags = self.c.usize("number of element tags")?;
            for _ in 0..ntags {
                self.c.i64("element tag value")?;
            }
            self.same_line(line, "element")?;
            match k.treat {
                Treat::Tet4 => self.read_tet_ascii(line, 4)?,
                Treat::Tet10 => {
                    self.read_tet_ascii(line, 10)?;
                    self.tally.convert(1);
                }
                Treat::Skip => {
                    self.tally.skip(&format!("type {etype}"), &k, 1);
                    self.c.skip_line();
                }
                Treat::Refuse => {
                    return Err(self
                        .c
                        .err_at(line, k.refusal(&format!("gmsh element type {etype}"))))
                }
            }
        }
        Ok(())
    }

    fn elements_v2_binary(&mut self, e: Endian) -> Result<()> {
        let m = self.c.usize("number of elements")?;
        self.c.skip_line();
        // Least bytes per element: int tag + one int node.
        if m.saturating_mul(8) > self.c.remaining() {
            return Err(self.c.err_binary(format!(
                "declared {m} elements but only {} bytes remain (truncated or corrupt count)",
                self.c.remaining()
            )));
        }
        let mut read = 0usize;
        while read < m {
            let h = self.c.bytes(12, "element block header")?;
            let etype = e.i32(h);
            let follow = e.i32(&h[4..]);
            let ntags = e.i32(&h[8..]);
            if follow <= 0 || ntags < 0 {
                return Err(self.c.err_binary(format!(
                    "element #{read}: bad block header (count {follow}, tags {ntags})"
                )));
            }
            let k = self.kind_or_err(etype as i64, Some(read))?;
            if k.treat == Treat::Refuse {
                return Err(
                    self.locate(Some(read), k.refusal(&format!("gmsh element type {etype}")))
                );
            }
            let nn = k.nodes;
            let (follow, ntags) = (follow as usize, ntags as usize);
            if follow > m - read {
                return Err(self.c.err_binary(format!(
                    "element blocks hold more elements than the {m} declared"
                )));
            }
            let len = (1 + ntags + nn)
                .checked_mul(4)
                .and_then(|rec| follow.checked_mul(rec))
                .ok_or_else(|| {
                    self.c
                        .err_binary(format!("element #{read}: block size overflows"))
                })?;
            let rec = 4 * (1 + ntags + nn);
            let b = self.c.bytes(len, "element records")?;
            if k.treat == Treat::Skip {
                self.tally.skip(&format!("type {etype}"), &k, follow);
            } else {
                for q in 0..follow {
                    let r = &b[q * rec + 4 * (1 + ntags)..];
                    let mut tet = [0u32; 4];
                    for j in 0..nn {
                        let tag = e.i32(&r[4 * j..]);
                        let v = self.lookup(tag.max(0) as u64, read + q)?;
                        if let Some(slot) = tet.get_mut(j) {
                            *slot = v;
                        }
                    }
                    self.tets.push(tet);
                    self.tet_where.push((read + q) as u32);
                }
                if k.treat == Treat::Tet10 {
                    self.tally.convert(follow);
                }
            }
            read += follow;
        }
        Ok(())
    }

    fn elements_v4_ascii(&mut self) -> Result<()> {
        let nblocks = self.c.usize("number of entity blocks")?;
        let m = self.c.usize("number of elements")?;
        if self.version == Version::V41 {
            self.c.usize("minimum element tag")?;
            self.c.usize("maximum element tag")?;
        }
        self.cap_elements(m as u64)?;
        // At least a tag and one node: 2 numbers of 2 bytes.
        self.c.check_count(m, 4, "elements")?;
        self.c.check_count(nblocks, 8, "element entity blocks")?;
        let mut total = 0usize;
        for _ in 0..nblocks {
            self.c.usize("entity")?;
            self.c.usize("entity")?;
            let etype = self.c.usize("element type")?;
            let head_line = self.c.token_line();
            let k = self.kind_or_err(etype as i64, None)?;
            let count = self.c.usize("number of elements in block")?;
            total = total.saturating_add(count);
            if total > m {
                return Err(self.c.err(format!(
                    "element blocks hold more elements than the {m} declared"
                )));
            }
            if k.treat == Treat::Refuse && count > 0 {
                return Err(self.c.err_at(
                    head_line,
                    format!(
                        "block of {count} elements: {}",
                        k.refusal(&format!("gmsh element type {etype}"))
                    ),
                ));
            }
            if matches!(k.treat, Treat::Tet4 | Treat::Tet10) {
                for _ in 0..count {
                    self.c.usize("element tag")?;
                    let line = self.c.token_line();
                    self.read_tet_ascii(line, k.nodes)?;
                }
                if k.treat == Treat::Tet10 {
                    self.tally.convert(count);
                }
            } else {
                self.tally.skip(&format!("type {etype}"), &k, count);
                self.c.skip_line();
                for _ in 0..count {
                    if self.c.remaining() == 0 {
                        return Err(self.c.err("file truncated inside an element block"));
                    }
                    self.c.skip_line();
                }
            }
        }
        if total != m {
            return Err(self.c.err(format!(
                "element blocks hold {total} elements but {m} were declared"
            )));
        }
        Ok(())
    }

    fn elements_v4_binary(&mut self, e: Endian) -> Result<()> {
        self.c.skip_line();
        let st = self.size_t;
        // 4.0 stores element tags and nodes as int, 4.1 as size_t.
        let it = if self.version == Version::V41 { st } else { 4 };
        let nhead = if self.version == Version::V41 { 4 } else { 2 };
        let h = self.c.bytes(nhead * st, "$Elements header")?;
        let nblocks = self.size_t(h, e);
        let m = self.size_t(&h[st..], e);
        let block_head = 12 + st;
        if m.saturating_mul(2 * it as u64) > self.c.remaining() as u64
            || nblocks.saturating_mul(block_head as u64) > self.c.remaining() as u64
        {
            return Err(self.c.err_binary(format!(
                "declared {m} elements in {nblocks} blocks but only {} bytes remain (truncated or corrupt count)",
                self.c.remaining()
            )));
        }
        self.cap_elements(m)?;
        let m = m as usize;
        let mut total = 0usize;
        for _ in 0..nblocks {
            let bh = self.c.bytes(block_head, "element block header")?;
            let etype = e.i32(&bh[8..]);
            let count = self.size_t(&bh[12..], e);
            if count > (m - total) as u64 {
                return Err(self.c.err_binary(format!(
                    "element blocks hold more elements than the {m} declared"
                )));
            }
            let count = count as usize;
            let k = self.kind_or_err(etype as i64, Some(total))?;
            if k.treat == Treat::Refuse && count > 0 {
                return Err(self.locate(
                    Some(total),
                    format!(
                        "block of {count} elements: {}",
                        k.refusal(&format!("gmsh element type {etype}"))
                    ),
                ));
            }
            let nn = k.nodes;
            let rec = it * (1 + nn);
            let len = count.checked_mul(rec).ok_or_else(|| {
                self.c
                    .err_binary(format!("element #{total}: block size overflows"))
            })?;
            let b = self.c.bytes(len, "element records")?;
            if k.treat == Treat::Skip {
                self.tally.skip(&format!("type {etype}"), &k, count);
            } else {
                for q in 0..count {
                    let r = &b[q * rec + it..];
                    let mut tet = [0u32; 4];
                    for j in 0..nn {
                        let tag = e.uint(&r[it * j..], it);
                        let v = self.lookup(tag, total + q)?;
                        if let Some(slot) = tet.get_mut(j) {
                            *slot = v;
                        }
                    }
                    self.tets.push(tet);
                    self.tet_where.push((total + q) as u32);
                }
                if k.treat == Treat::Tet10 {
                    self.tally.convert(count);
                }
            }
            total += count;
        }
        if total != m {
            return Err(self.c.err_binary(format!(
                "element blocks hold {total} elements but {m} were declared"
            )));
        }
        Ok(())
    }
}

/// Which gmsh flavour [`write_gmsh`] produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GmshFormat {
    /// MSH 2.2, text.
    V22Ascii,
    /// MSH 2.2, binary (little-endian).
    V22Binary,
    /// MSH 4.1, text.
    V41Ascii,
    /// MSH 4.1, binary (little-endian, 8-byte size_t).
    V41Binary,
}

/// Writes `mesh` as a gmsh `.msh` file (node tags 1..=n, element tags 1..=m, one volume
/// entity), atomically.
pub fn write_gmsh(path: &Path, mesh: &TetMesh, format: GmshFormat) -> Result<()> {
    atomic_write_with(path, |w| match format {
        GmshFormat::V22Ascii => write_v22(w, mesh, false),
        GmshFormat::V22Binary => write_v22(w, mesh, true),
        GmshFormat::V41Ascii => write_v41(w, mesh, false),
        GmshFormat::V41Binary => write_v41(w, mesh, true),
    })
}

fn write_v22(w: &mut impl Write, mesh: &TetMesh, binary: bool) -> std::io::Result<()> {
    writeln!(w, "$MeshFormat")?;
    if binary {
        writeln!(w, "2.2 1 8")?;
        w.write_all(&1i32.to_le_bytes())?;
        writeln!(w)?;
    } else {
        writeln!(w, "2.2 0 8")?;
    }
    writeln!(w, "$EndMeshFormat")?;
    writeln!(w, "$Nodes\n{}", mesh.positions.len())?;
    for (i, p) in mesh.positions.iter().enumerate() {
        if binary {
            w.write_all(&(i as i32 + 1).to_le_bytes())?;
            for v in p {
                w.write_all(&v.to_le_bytes())?;
            }
        } else {
            writeln!(w, "{} {:?} {:?} {:?}", i + 1, p[0], p[1], p[2])?;
        }
    }
    if binary {
        writeln!(w)?;
    }
    writeln!(w, "$EndNodes")?;
    writeln!(w, "$Elements\n{}", mesh.tets.len())?;
    if binary && !mesh.tets.is_empty() {
        // One block: type 4, all elements, 2 tags (physical, elementary).
        for v in [4i32, mesh.tets.len() as i32, 2] {
            w.write_all(&v.to_le_bytes())?;
        }
    }
    for (i, t) in mesh.tets.iter().enumerate() {
        if binary {
            for v in [i as i32 + 1, 1, 1] {
                w.write_all(&v.to_le_bytes())?;
            }
            for &v in t {
                w.write_all(&(v as i32 + 1).to_le_bytes())?;
            }
        } else {
            writeln!(
                w,
                "{} 4 2 1 1 {} {} {} {}",
                i + 1,
                t[0] + 1,
                t[1] + 1,
                t[2] + 1,
                t[3] + 1
            )?;
        }
    }
    if binary {
        writeln!(w)?;
    }
    writeln!(w, "$EndElements")
}

fn write_v41(w: &mut impl Write, mesh: &TetMesh, binary: bool) -> std::io::Result<()> {
    let n = mesh.positions.len() as u64;
    let m = mesh.tets.len() as u64;
    let (lo, hi) = mesh.bounding_box().unwrap_or(([0.0; 3], [0.0; 3]));
    writeln!(w, "$MeshFormat")?;
    writeln!(w, "4.1 {} 8", if binary { 1 } else { 0 })?;
    if binary {
        w.write_all(&1i32.to_le_bytes())?;
        writeln!(w)?;
    }
    writeln!(w, "$EndMeshFormat")?;
    // One volume entity (tag 1) with no physical tags and no bounding surfaces.
    writeln!(w, "$Entities")?;
    if binary {
        for v in [0u64, 0, 0, 1] {
            w.write_all(&v.to_le_bytes())?;
        }
        w.write_all(&1i32.to_le_bytes())?;
        for v in lo.iter().chain(hi.iter()) {
            w.write_all(&v.to_le_bytes())?;
        }
        w.write_all(&0u64.to_le_bytes())?;
        w.write_all(&0u64.to_le_bytes())?;
        writeln!(w)?;
    } else {
        writeln!(w, "0 0 0 1")?;
        writeln!(
            w,
            "1 {:?} {:?} {:?} {:?} {:?} {:?} 0 0",
            lo[0], lo[1], lo[2], hi[0], hi[1], hi[2]
        )?;
    }
    writeln!(w, "$EndEntities")?;
    writeln!(w, "$Nodes")?;
    if binary {
        for v in [1u64, n, 1, n] {
            w.write_all(&v.to_le_bytes())?;
        }
        for v in [3i32, 1, 0] {
            w.write_all(&v.to_le_bytes())?;
        }
        w.write_all(&n.to_le_bytes())?;
        for i in 1..=n {
            w.write_all(&i.to_le_bytes())?;
        }
        for p in &mesh.positions {
            for v in p {
                w.write_all(&v.to_le_bytes())?;
            }
        }
        writeln!(w)?;
    } else {
        writeln!(w, "1 {n} 1 {n}")?;
        writeln!(w, "3 1 0 {n}")?;
        for i in 1..=n {
            writeln!(w, "{i}")?;
        }
        for p in &mesh.positions {
            writeln!(w, "{:?} {:?} {:?}", p[0], p[1], p[2])?;
        }
    }
    writeln!(w, "$EndNodes")?;
    writeln!(w, "$Elements")?;
    if binary {
        for v in [1u64, m, 1, m] {
            w.write_all(&v.to_le_bytes())?;
        }
        for v in [3i32, 1, 4] {
            w.write_all(&v.to_le_bytes())?;
        }
        w.write_all(&m.to_le_bytes())?;
        for (i, t) in mesh.tets.iter().enumerate() {
            w.write_all(&(i as u64 + 1).to_le_bytes())?;
            for &v in t {
                w.write_all(&(v as u64 + 1).to_le_bytes())?;
            }
        }
        writeln!(w)?;
    } else {
        writeln!(w, "1 {m} 1 {m}")?;
        writeln!(w, "3 1 4 {m}")?;
        for (i, t) in mesh.tets.iter().enumerate() {
            writeln!(
                w,
                "{} {} {} {} {}",
                i + 1,
                t[0] + 1,
                t[1] + 1,
                t[2] + 1,
                t[3] + 1
            )?;
        }
    }
    writeln!(w, "$EndElements")
}
