//! Versioned, checksummed binary file format for a [`Jgs2Basis`].
//!
//! Layout (all little-endian):
//! ```text
//! offset  size  field
//! 0       8     magic  b"JELLOJG2"
//! 8       4     format version (u32, currently 5)
//! 12      8     cache key (u64, chosen by the caller: hash of mesh + material + h + pins)
//! 20      8     payload length in bytes (u64)
//! 28      L     payload
//! 28+L    8     FNV-1a-64 of bytes [0, 28+L)
//! ```
//! Payload: `n_vertices: u32`, `n_perm: u32`, `n_nodes: u32`, stats (`n_free`, `n_modes`,
//! `n_nodes` as u64, then 14 f64 in [`Jgs2Stats`] declaration order, the last reserved), the
//! cluster tree (`n_perm × u32` permutation, then per node `start, end, left, right, parent`
//! as u32 with `u32::MAX` for none), then per vertex: `Â` (9 f64), `S` (9 f64), far residual (f64),
//! `n_near: u32`, `n_near × u32` vertices, `n_near × 9 × f64` blocks, `n_far: u32`,
//! `n_far × u32` tree nodes, `n_far × f64` weights, `n_far × 9 × f64` blocks, `n_slopes: u32`
//! (0 or `n_far`), `n_slopes × 27 × f64` first-order slopes. Then the H-matrix far field
//! (`Jgs2Options::far_hmatrix`, version 5 on): `has: u32` (0 or 1), and when 1 its statistics
//! (`hmatrix_s`, `hmatrix_mean_rank` as f64, `hmatrix_max_rank: u32`, `hmatrix_blocks: u64`)
//! and every array of [`HMatrix`] in declaration order, each a `u64` count followed by its
//! entries (pairs as two u32, offsets as u64, values as f64, ids and ranks as u32). Its `S_i`
//! are the vertex records' `S`.
//!
//! Files are written to a temporary sibling and renamed, so a reader never sees half a file.
//! Reading checks magic, version, key, length and checksum before decoding, and decoding
//! bounds-checks every count, so arbitrary bytes give an [`ArtifactError`], never a panic.
//! A checksum only proves the bytes are the ones written: decoding then checks the content
//! too (every number finite, the tree's ranges nested and its permutation distinct, near
//! vertices ascending and in range, the counts in the stats matching the data, and for the
//! H-matrix: leaf pairs and blocks over the tree's nodes, every offset array starting at 0 and
//! stepping by exactly its block's size, ranks within their node's size and the per-node lists
//! equal to the ones the pairs and blocks imply), so a file poisoned with a NaN and a
//! recomputed checksum is refused as [`ArtifactErrorKind::Malformed`].

use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::hmatrix::HMatrix;
use crate::jgs2::{Jgs2Basis, Jgs2Stats, VertexSubspaceData};
use crate::tree::ClusterTree;

/// File magic.
pub const MAGIC: [u8; 8] = *b"JELLOJG2";
/// Current format version.
/// Version 5 added the H-matrix far field section.
pub const FORMAT_VERSION: u32 = 5;
const HEADER: usize = 28;
/// Largest artifact [`read`] opens: 64 GiB (the 114k-vertex armadillo's is about 0.5 GB).
/// Anything larger, and anything that is not a regular file, is refused from its metadata.
pub const MAX_ARTIFACT_BYTES: u64 = 64 << 30;

/// Why an artifact could not be read or written.
#[derive(Debug, Error)]
pub enum ArtifactErrorKind {
    /// File system failure.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The file does not start with [`MAGIC`].
    #[error("not a jello artifact of this kind (bad magic)")]
    BadMagic,
    /// Written by another format version.
    #[error("format version {found}, expected {expected}")]
    WrongVersion {
        /// Version in the file.
        found: u32,
        /// Version this build reads.
        expected: u32,
    },
    /// The cache key differs (mesh, material, h or pins changed).
    #[error("cache key {found:#018x} does not match expected {expected:#018x}")]
    KeyMismatch {
        /// Key in the file.
        found: u64,
        /// Key the caller expects.
        expected: u64,
    },
    /// The file is shorter than its header says.
    #[error("truncated: {needed} bytes needed, {len} present")]
    Truncated {
        /// Bytes required.
        needed: u64,
        /// Bytes present.
        len: u64,
    },
    /// The checksum does not match the content.
    #[error("checksum mismatch (stored {stored:#018x}, computed {computed:#018x})")]
    ChecksumMismatch {
        /// Stored checksum.
        stored: u64,
        /// Checksum of the bytes read.
        computed: u64,
    },
    /// The path is a directory, FIFO, device or other non-regular file.
    #[error("not a regular file (refused before opening it)")]
    NotAFile,
    /// The file is larger than [`MAX_ARTIFACT_BYTES`].
    #[error("{len} bytes, larger than the {MAX_ARTIFACT_BYTES}-byte cap")]
    TooLarge {
        /// Its size in bytes.
        len: u64,
    },
    /// The payload is inconsistent (checksum passed, content invalid).
    #[error("malformed payload: {0}")]
    Malformed(String),
}

/// An artifact error together with the file it concerns.
#[derive(Debug, Error)]
#[error("{}: {kind}", path.display())]
pub struct ArtifactError {
    /// The artifact file.
    pub path: PathBuf,
    /// What went wrong.
    pub kind: ArtifactErrorKind,
}

/// FNV-1a, 64-bit.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h = Fnv1a64::default();
    h.update(bytes);
    h.0
}

/// Running FNV-1a-64: [`fnv1a64`] of a byte stream fed in pieces.
struct Fnv1a64(u64);

impl Default for Fnv1a64 {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a64 {
    fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// Serialises `basis` with `key` into the file format (in memory, one allocation of the
/// exact size).
pub fn encode(basis: &Jgs2Basis, key: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload_len(basis) + 8);
    emit(basis, key, &mut |b| out.extend_from_slice(b));
    out
}

/// `fnv1a64(&encode(basis, key))` without building the bytes: a digest of the artifact for
/// comparing two builds (the bench's), whose peak memory is then the basis alone. Building
/// the bytes held a second copy of the basis (1 GB on armadillo_114k, twice that while the
/// buffer grew by doubling).
pub fn encoded_fnv1a64(basis: &Jgs2Basis, key: u64) -> u64 {
    let mut h = Fnv1a64::default();
    emit(basis, key, &mut |b| h.update(b));
    h.0
}

/// Payload bytes of `basis` (see the layout in the module docs).
fn payload_len(basis: &Jgs2Basis) -> usize {
    let t = &basis.tree;
    let mut len = 3 * 4 + 3 * 8 + N_STATS_F64 * 8 + 4 * t.perm.len() + 5 * 4 * t.len();
    for v in &basis.vertices {
        len += 19 * 8 + 4 + v.near_vertices.len() * (4 + 72);
        len += 4 + v.far_nodes.len() * 4 + v.far_weights.len() * 8 + v.far_blocks.len() * 72;
        len += 4 + v.far_slopes.len() * 27 * 8;
    }
    len + 4 + basis.far_hmatrix.as_ref().map_or(0, hmatrix_len)
}

/// Bytes of the H-matrix section after its `has` flag: statistics, then per array a u64 count
/// and its entries.
fn hmatrix_len(h: &HMatrix) -> usize {
    2 * 8
        + 4
        + 8
        + 13 * 8
        + 8 * h.near_pairs.len()
        + 8 * h.near_ptr.len()
        + 8 * h.near.len()
        + 4 * h.node_near.len()
        + 8 * h.node_near_ptr.len()
        + 4 * h.rank.len()
        + 8 * h.basis_ptr.len()
        + 8 * h.basis.len()
        + 8 * h.blocks.len()
        + 8 * h.coupling_ptr.len()
        + 8 * h.coupling.len()
        + 4 * h.node_blocks.len()
        + 8 * h.node_block_ptr.len()
}

/// The framed artifact of `basis` fed to `out` in pieces ([`emit_framed`]).
fn emit(basis: &Jgs2Basis, key: u64, out: &mut dyn FnMut(&[u8])) {
    emit_framed(
        &MAGIC,
        FORMAT_VERSION,
        key,
        payload_len(basis),
        &mut |p| emit_payload(basis, p),
        out,
    );
}

/// A sink of bytes fed in pieces.
type Sink<'a> = dyn FnMut(&[u8]) + 'a;

/// The file framing shared by every precompute artifact (see [`frame`]), fed to `out` in
/// pieces: the header, the `len` payload bytes `payload` feeds to its argument, and the
/// checksum, computed on the way.
fn emit_framed(
    magic: &[u8; 8],
    version: u32,
    key: u64,
    len: usize,
    payload: &mut dyn FnMut(&mut Sink<'_>),
    out: &mut Sink<'_>,
) {
    let mut sum = Fnv1a64::default();
    let mut put = |b: &[u8]| {
        sum.update(b);
        out(b);
    };
    put(magic);
    put(&version.to_le_bytes());
    put(&key.to_le_bytes());
    put(&(len as u64).to_le_bytes());
    payload(&mut put);
    let sum = sum.0.to_le_bytes();
    out(&sum);
}

fn emit_payload(basis: &Jgs2Basis, p: &mut dyn FnMut(&[u8])) {
    let u32s = |p: &mut dyn FnMut(&[u8]), x: u32| p(&x.to_le_bytes());
    let f64s = |p: &mut dyn FnMut(&[u8]), x: f64| p(&x.to_le_bytes());
    u32s(p, basis.vertices.len() as u32);
    let t = &basis.tree;
    u32s(p, t.perm.len() as u32);
    u32s(p, t.len() as u32);
    let s = &basis.stats;
    for x in [s.n_free, s.n_modes, s.n_nodes] {
        p(&(x as u64).to_le_bytes());
    }
    for x in stats_f64(s) {
        f64s(p, x);
    }
    for &v in &t.perm {
        u32s(p, v);
    }
    for c in 0..t.len() {
        let (l, r) = t.children[c].unwrap_or((u32::MAX, u32::MAX));
        for x in [t.start[c], t.end[c], l, r, t.parent[c]] {
            u32s(p, x);
        }
    }
    for v in &basis.vertices {
        for &x in v.a_hat.iter().chain(&v.schur) {
            f64s(p, x);
        }
        f64s(p, v.far_residual);
        u32s(p, v.near_vertices.len() as u32);
        for &j in &v.near_vertices {
            u32s(p, j);
        }
        for &x in v.near_blocks.iter().flatten() {
            f64s(p, x);
        }
        u32s(p, v.far_nodes.len() as u32);
        for &c in &v.far_nodes {
            u32s(p, c);
        }
        for &w in &v.far_weights {
            f64s(p, w);
        }
        for &x in v.far_blocks.iter().flatten() {
            f64s(p, x);
        }
        u32s(p, v.far_slopes.len() as u32);
        for &x in v.far_slopes.iter().flatten() {
            f64s(p, x);
        }
    }
    u32s(p, basis.far_hmatrix.is_some() as u32);
    if let Some(h) = &basis.far_hmatrix {
        emit_hmatrix(h, s, p);
    }
}

/// The H-matrix section (see the module docs) after its flag.
fn emit_hmatrix(h: &HMatrix, s: &Jgs2Stats, p: &mut dyn FnMut(&[u8])) {
    let count = |p: &mut dyn FnMut(&[u8]), n: usize| p(&(n as u64).to_le_bytes());
    let pairs = |p: &mut dyn FnMut(&[u8]), x: &[(u32, u32)]| {
        count(p, x.len());
        for &(i, j) in x {
            p(&i.to_le_bytes());
            p(&j.to_le_bytes());
        }
    };
    let offsets = |p: &mut dyn FnMut(&[u8]), x: &[usize]| {
        count(p, x.len());
        for &o in x {
            p(&(o as u64).to_le_bytes());
        }
    };
    let values = |p: &mut dyn FnMut(&[u8]), x: &[f64]| {
        count(p, x.len());
        for &v in x {
            p(&v.to_le_bytes());
        }
    };
    let ids = |p: &mut dyn FnMut(&[u8]), x: &[u32]| {
        count(p, x.len());
        for &v in x {
            p(&v.to_le_bytes());
        }
    };
    p(&s.hmatrix_s.to_le_bytes());
    p(&s.hmatrix_mean_rank.to_le_bytes());
    p(&s.hmatrix_max_rank.to_le_bytes());
    p(&(s.hmatrix_blocks as u64).to_le_bytes());
    pairs(p, &h.near_pairs);
    offsets(p, &h.near_ptr);
    values(p, &h.near);
    ids(p, &h.node_near);
    offsets(p, &h.node_near_ptr);
    ids(p, &h.rank);
    offsets(p, &h.basis_ptr);
    values(p, &h.basis);
    pairs(p, &h.blocks);
    offsets(p, &h.coupling_ptr);
    values(p, &h.coupling);
    ids(p, &h.node_blocks);
    offsets(p, &h.node_block_ptr);
}

/// The file framing shared by every precompute artifact: magic, version, key, payload
/// length, payload, FNV-1a-64 of everything before it.
pub(crate) fn frame(magic: &[u8; 8], version: u32, key: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload.len() + 8);
    emit_framed(
        magic,
        version,
        key,
        payload.len(),
        &mut |p| p(payload),
        &mut |b| out.extend_from_slice(b),
    );
    out
}

const N_STATS_F64: usize = 14;

fn stats_f64(s: &Jgs2Stats) -> [f64; N_STATS_F64] {
    [
        s.residual_min,
        s.residual_median,
        s.residual_p90,
        s.residual_max,
        s.fraction_on_target,
        s.mean_samples,
        s.mean_near,
        s.factor_s,
        s.basis_s,
        s.eigen_s,
        s.cubature_s,
        s.total_s,
        s.bytes_per_vertex,
        0.0, // reserved
    ]
}

/// The payload of a framed artifact ([`frame`]) after checking its magic, version, length,
/// checksum and key, in that order.
pub(crate) fn unframe<'a>(
    bytes: &'a [u8],
    magic: &[u8; 8],
    expected_version: u32,
    key: u64,
) -> Result<&'a [u8], ArtifactErrorKind> {
    use ArtifactErrorKind as K;
    if bytes.len() < magic.len() || bytes[..magic.len()] != magic[..] {
        return Err(if bytes.len() < magic.len() && magic.starts_with(bytes) {
            K::Truncated {
                needed: HEADER as u64 + 8,
                len: bytes.len() as u64,
            }
        } else {
            K::BadMagic
        });
    }
    if bytes.len() < HEADER {
        return Err(K::Truncated {
            needed: HEADER as u64 + 8,
            len: bytes.len() as u64,
        });
    }
    let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap_or([0; 4]));
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap_or([0; 8]));
    let version = u32_at(8);
    if version != expected_version {
        return Err(K::WrongVersion {
            found: version,
            expected: expected_version,
        });
    }
    let payload_len = u64_at(20);
    let needed = (HEADER as u64)
        .saturating_add(payload_len)
        .saturating_add(8);
    if (bytes.len() as u64) < needed {
        return Err(K::Truncated {
            needed,
            len: bytes.len() as u64,
        });
    }
    if (bytes.len() as u64) > needed {
        return Err(K::Malformed(format!(
            "{} trailing bytes",
            bytes.len() as u64 - needed
        )));
    }
    let end = HEADER + payload_len as usize;
    let stored = u64_at(end);
    let computed = fnv1a64(&bytes[..end]);
    if stored != computed {
        return Err(K::ChecksumMismatch { stored, computed });
    }
    // Key after the checksum: a corrupt key field reads as corruption, a valid file built for
    // other inputs as a key mismatch.
    let found = u64_at(12);
    if found != key {
        return Err(K::KeyMismatch {
            found,
            expected: key,
        });
    }
    Ok(&bytes[HEADER..end])
}

/// Parses bytes produced by [`encode`], checking the expected `key`.
pub fn decode(bytes: &[u8], key: u64) -> Result<Jgs2Basis, ArtifactErrorKind> {
    use ArtifactErrorKind as K;
    let payload = unframe(bytes, &MAGIC, FORMAT_VERSION, key)?;
    let mut r = Reader { b: payload, pos: 0 };
    let nv = r.u32()? as usize;
    let n_perm = r.u32()? as usize;
    let n_nodes = r.u32()? as usize;
    let mut stats = Jgs2Stats {
        n_free: r.u64()? as usize,
        n_modes: r.u64()? as usize,
        n_nodes: r.u64()? as usize,
        ..Default::default()
    };
    let mut f = [0.0; N_STATS_F64];
    for x in &mut f {
        *x = r.f64()?;
    }
    [
        stats.residual_min,
        stats.residual_median,
        stats.residual_p90,
        stats.residual_max,
        stats.fraction_on_target,
        stats.mean_samples,
        stats.mean_near,
        stats.factor_s,
        stats.basis_s,
        stats.eigen_s,
        stats.cubature_s,
        stats.total_s,
        stats.bytes_per_vertex,
    ] = [
        f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10], f[11], f[12],
    ];
    // Bound allocations by what is present: 4 bytes per permutation entry, 20 per node, at
    // least 19·8 + 12 per vertex.
    if n_perm > nv || n_perm > r.remaining() / 4 || n_nodes > r.remaining() / 20 {
        return Err(K::Malformed(format!(
            "tree of {n_perm} vertices and {n_nodes} nodes cannot fit in {} bytes",
            r.remaining()
        )));
    }
    let mut tree = ClusterTree::default();
    for _ in 0..n_perm {
        let v = r.u32()?;
        if v as usize >= nv {
            return Err(K::Malformed(format!("tree vertex {v} of {nv}")));
        }
        tree.perm.push(v);
    }
    for c in 0..n_nodes {
        let [start, end, l, rr, parent] = [r.u32()?, r.u32()?, r.u32()?, r.u32()?, r.u32()?];
        let bad_child = |x: u32| x as usize >= n_nodes || x as usize <= c;
        if start > end
            || end as usize > n_perm
            || (l == u32::MAX) != (rr == u32::MAX)
            || (l != u32::MAX && (bad_child(l) || bad_child(rr)))
            || (parent != u32::MAX && parent as usize >= c)
            || (parent == u32::MAX && c != 0)
        {
            return Err(K::Malformed(format!("tree node {c} is inconsistent")));
        }
        tree.start.push(start);
        tree.end.push(end);
        tree.children.push((l != u32::MAX).then_some((l, rr)));
        tree.parent.push(parent);
    }
    if nv > r.remaining() / (19 * 8 + 16) {
        return Err(K::Malformed(format!(
            "{nv} vertices cannot fit in {} bytes",
            r.remaining()
        )));
    }
    let block = |r: &mut Reader<'_>| -> Result<[f64; 9], ArtifactErrorKind> {
        let mut b = [0.0; 9];
        for x in &mut b {
            *x = r.f64()?;
        }
        Ok(b)
    };
    let mut vertices = Vec::with_capacity(nv);
    for v in 0..nv {
        let mut rec = VertexSubspaceData {
            a_hat: block(&mut r)?,
            schur: block(&mut r)?,
            far_residual: r.f64()?,
            ..Default::default()
        };
        let n_near = r.u32()? as usize;
        if n_near > r.remaining() / (4 + 9 * 8) {
            return Err(K::Malformed(format!(
                "vertex {v}: {n_near} near vertices exceed the payload"
            )));
        }
        for _ in 0..n_near {
            let j = r.u32()?;
            if j as usize >= nv {
                return Err(K::Malformed(format!("vertex {v}: near vertex {j} of {nv}")));
            }
            rec.near_vertices.push(j);
        }
        for _ in 0..n_near {
            rec.near_blocks.push(block(&mut r)?);
        }
        let n_far = r.u32()? as usize;
        if n_far > r.remaining() / (4 + 8 + 9 * 8) {
            return Err(K::Malformed(format!(
                "vertex {v}: {n_far} far samples exceed the payload"
            )));
        }
        for _ in 0..n_far {
            let c = r.u32()?;
            if c as usize >= n_nodes {
                return Err(K::Malformed(format!(
                    "vertex {v}: far node {c} of {n_nodes}"
                )));
            }
            rec.far_nodes.push(c);
        }
        for _ in 0..n_far {
            let w = r.f64()?;
            if !(w.is_finite() && w >= 0.0) {
                return Err(K::Malformed(format!("vertex {v}: weight {w}")));
            }
            rec.far_weights.push(w);
        }
        for _ in 0..n_far {
            rec.far_blocks.push(block(&mut r)?);
        }
        let n_slopes = r.u32()? as usize;
        if n_slopes != 0 && n_slopes != n_far {
            return Err(K::Malformed(format!(
                "vertex {v}: {n_slopes} slope sets for {n_far} far samples"
            )));
        }
        if n_slopes > r.remaining() / (27 * 8) {
            return Err(K::Malformed(format!(
                "vertex {v}: {n_slopes} slope sets exceed the payload"
            )));
        }
        for _ in 0..n_slopes {
            let mut b = [0.0; 27];
            for x in &mut b {
                *x = r.f64()?;
            }
            rec.far_slopes.push(b);
        }
        vertices.push(rec);
    }
    let far_hmatrix = match r.u32()? {
        0 => None,
        1 => Some(read_hmatrix(&mut r, &tree, &mut stats)?),
        x => {
            return Err(K::Malformed(format!(
                "H-matrix flag {x} is neither 0 nor 1"
            )))
        }
    };
    if r.remaining() != 0 {
        return Err(K::Malformed(format!(
            "{} unread payload bytes",
            r.remaining()
        )));
    }
    let basis = Jgs2Basis {
        vertices,
        tree,
        far_hmatrix,
        stats,
    };
    check_content(&basis, &f).map_err(K::Malformed)?;
    Ok(basis)
}

/// What a checksum cannot vouch for: the content of a file whose bytes are intact. `stats_f64`
/// holds the stats' floats as stored (reserved slot included).
fn check_content(b: &Jgs2Basis, stats_f64: &[f64]) -> Result<(), String> {
    let t = &b.tree;
    let (nv, n_perm, n_nodes) = (b.vertices.len(), t.perm.len(), t.len());
    if let Some(x) = stats_f64.iter().find(|x| !(x.is_finite() && **x >= 0.0)) {
        return Err(format!("statistic {x} is not a finite non-negative number"));
    }
    if b.stats.n_free != n_perm || b.stats.n_nodes != n_nodes {
        return Err(format!(
            "stats count {} free vertices and {} tree nodes, the data {n_perm} and {n_nodes}",
            b.stats.n_free, b.stats.n_nodes
        ));
    }
    // The tree: a permutation of distinct vertices, the root covering it, children splitting
    // their parent's range in two.
    let mut seen = vec![false; nv];
    for &v in &t.perm {
        if std::mem::replace(&mut seen[v as usize], true) {
            return Err(format!("vertex {v} appears twice in the tree"));
        }
    }
    if (n_nodes == 0) != (n_perm == 0)
        || (n_nodes > 0 && (t.start[0], t.end[0]) != (0, n_perm as u32))
    {
        return Err(format!(
            "the tree's root does not cover its {n_perm} vertices"
        ));
    }
    for c in 0..n_nodes {
        if let Some((l, r)) = t.children[c] {
            let (l, r) = (l as usize, r as usize);
            if t.start[l] != t.start[c]
                || t.end[l] != t.start[r]
                || t.end[r] != t.end[c]
                || t.start[l] == t.end[l]
                || t.start[r] == t.end[r]
                || t.parent[l] != c as u32
                || t.parent[r] != c as u32
            {
                return Err(format!("tree node {c}'s children do not split its range"));
            }
        }
    }
    for (v, rec) in b.vertices.iter().enumerate() {
        let finite = rec
            .a_hat
            .iter()
            .chain(&rec.schur)
            .chain(rec.near_blocks.iter().flatten())
            .chain(rec.far_blocks.iter().flatten())
            .chain(rec.far_slopes.iter().flatten())
            .all(|x| x.is_finite());
        if !(finite && rec.far_residual.is_finite() && rec.far_residual >= 0.0) {
            return Err(format!("vertex {v}: a non-finite number"));
        }
        if rec.near_vertices.windows(2).any(|w| w[0] >= w[1])
            || rec.near_vertices.contains(&(v as u32))
        {
            return Err(format!(
                "vertex {v}: near vertices are not ascending, repeat or include the vertex itself"
            ));
        }
    }
    Ok(())
}

/// Reads the H-matrix section after its flag (see the module docs) over `tree`, filling the
/// H-matrix statistics into `stats`. Every count is checked against the bytes left before it is
/// allocated, and the structure (ids, offsets, ranks, per-node lists) against `tree`.
fn read_hmatrix(
    r: &mut Reader<'_>,
    tree: &ClusterTree,
    stats: &mut Jgs2Stats,
) -> Result<HMatrix, ArtifactErrorKind> {
    use ArtifactErrorKind as K;
    stats.hmatrix_s = r.f64()?;
    stats.hmatrix_mean_rank = r.f64()?;
    stats.hmatrix_max_rank = r.u32()?;
    stats.hmatrix_blocks = r.u64()? as usize;
    if !(stats.hmatrix_s.is_finite()
        && stats.hmatrix_s >= 0.0
        && stats.hmatrix_mean_rank.is_finite()
        && stats.hmatrix_mean_rank >= 0.0)
    {
        return Err(K::Malformed(
            "H-matrix statistics are not finite and ≥ 0".into(),
        ));
    }
    // A count, refused when its entries (`bytes` each) cannot fit in what is left.
    let count = |r: &mut Reader<'_>, bytes: usize, what: &str| -> Result<usize, K> {
        let n = r.u64()?;
        if n > (r.remaining() / bytes) as u64 {
            return Err(K::Malformed(format!(
                "H-matrix: {n} {what} exceed the {} payload bytes left",
                r.remaining()
            )));
        }
        Ok(n as usize)
    };
    let pairs = |r: &mut Reader<'_>, what: &str| -> Result<Vec<(u32, u32)>, K> {
        let n = count(r, 8, what)?;
        (0..n).map(|_| Ok((r.u32()?, r.u32()?))).collect()
    };
    let offsets = |r: &mut Reader<'_>, what: &str| -> Result<Vec<usize>, K> {
        let n = count(r, 8, what)?;
        (0..n).map(|_| Ok(r.u64()? as usize)).collect()
    };
    let values = |r: &mut Reader<'_>, what: &str| -> Result<Vec<f64>, K> {
        let n = count(r, 8, what)?;
        (0..n)
            .map(|_| {
                let x = r.f64()?;
                if x.is_finite() {
                    Ok(x)
                } else {
                    Err(K::Malformed(format!(
                        "H-matrix {what}: a non-finite number"
                    )))
                }
            })
            .collect()
    };
    let ids = |r: &mut Reader<'_>, what: &str| -> Result<Vec<u32>, K> {
        let n = count(r, 4, what)?;
        (0..n).map(|_| r.u32()).collect()
    };
    let h = HMatrix {
        near_pairs: pairs(r, "near pairs")?,
        near_ptr: offsets(r, "near offsets")?,
        near: values(r, "near blocks")?,
        node_near: ids(r, "per-node near pairs")?,
        node_near_ptr: offsets(r, "per-node near offsets")?,
        rank: ids(r, "ranks")?,
        basis_ptr: offsets(r, "basis offsets")?,
        basis: values(r, "bases")?,
        blocks: pairs(r, "far blocks")?,
        coupling_ptr: offsets(r, "coupling offsets")?,
        coupling: values(r, "couplings")?,
        node_blocks: ids(r, "per-node blocks")?,
        node_block_ptr: offsets(r, "per-node block offsets")?,
    };
    h.check(tree)
        .map_err(|e| K::Malformed(format!("H-matrix: {e}")))?;
    Ok(h)
}

pub(crate) struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader over `b` from its start.
    pub(crate) fn new(b: &'a [u8]) -> Self {
        Reader { b, pos: 0 }
    }
    pub(crate) fn take<const N: usize>(&mut self) -> Result<[u8; N], ArtifactErrorKind> {
        let s = self.b.get(self.pos..self.pos + N).ok_or_else(|| {
            ArtifactErrorKind::Malformed(format!("payload ends at byte {}", self.pos))
        })?;
        self.pos += N;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    pub(crate) fn u32(&mut self) -> Result<u32, ArtifactErrorKind> {
        Ok(u32::from_le_bytes(self.take()?))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, ArtifactErrorKind> {
        Ok(u64::from_le_bytes(self.take()?))
    }
    pub(crate) fn f64(&mut self) -> Result<f64, ArtifactErrorKind> {
        Ok(f64::from_le_bytes(self.take()?))
    }
    pub(crate) fn remaining(&self) -> usize {
        self.b.len() - self.pos
    }
}

/// Writes `basis` (its H-matrix far field included) to `path` atomically (temporary sibling +
/// rename).
pub fn write(path: &Path, basis: &Jgs2Basis, key: u64) -> Result<(), ArtifactError> {
    // Streamed through a buffer rather than encoded first: the bytes are as large as the basis.
    write_with(path, |f| {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
        let mut res = Ok(());
        emit(basis, key, &mut |b| {
            if res.is_ok() {
                res = std::io::Write::write_all(&mut w, b);
            }
        });
        res?;
        std::io::Write::flush(&mut w)
    })
}

/// Writes `bytes` to `path` atomically (temporary sibling, sync, rename).
pub(crate) fn write_bytes(path: &Path, bytes: &[u8]) -> Result<(), ArtifactError> {
    write_with(path, |f| std::io::Write::write_all(f, bytes))
}

/// Creates a temporary sibling of `path`, lets `fill` write it, syncs it and renames it to
/// `path`; the temporary file is removed on failure.
fn write_with(
    path: &Path,
    fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> Result<(), ArtifactError> {
    let err = |e: std::io::Error| ArtifactError {
        path: path.to_owned(),
        kind: e.into(),
    };
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "artifact".into());
    let tmp = path.with_file_name(format!(".{file_name}.tmp{}", std::process::id()));
    let res = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        fill(&mut f)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res.map_err(err)
}

/// Reads and validates the artifact at `path` against the expected `key`. A directory, FIFO,
/// device or a file above [`MAX_ARTIFACT_BYTES`] is refused from its metadata, before it is
/// opened (opening a FIFO would block).
pub fn read(path: &Path, key: u64) -> Result<Jgs2Basis, ArtifactError> {
    let bytes = read_bytes(path)?;
    decode(&bytes, key).map_err(|kind| ArtifactError {
        path: path.to_owned(),
        kind,
    })
}

/// The bytes of the regular file at `path`, refused from its metadata when it is not a
/// regular file or is above [`MAX_ARTIFACT_BYTES`].
pub(crate) fn read_bytes(path: &Path) -> Result<Vec<u8>, ArtifactError> {
    use std::io::Read;
    let err = |kind: ArtifactErrorKind| ArtifactError {
        path: path.to_owned(),
        kind,
    };
    let meta = std::fs::metadata(path).map_err(|e| err(e.into()))?;
    if !meta.is_file() {
        return Err(err(ArtifactErrorKind::NotAFile));
    }
    if meta.len() > MAX_ARTIFACT_BYTES {
        return Err(err(ArtifactErrorKind::TooLarge { len: meta.len() }));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_ARTIFACT_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| err(e.into()))?;
    if bytes.len() as u64 > MAX_ARTIFACT_BYTES {
        return Err(err(ArtifactErrorKind::TooLarge {
            len: bytes.len() as u64,
        }));
    }
    Ok(bytes)
}
