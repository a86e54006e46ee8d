//! Versioned, checksummed binary file format for a [`Jgs2Basis`].
//!
//! Layout (all little-endian):
//! ```text
//! offset  size  field
//! 0       8     magic  b"JELLOJG2"
//! 8       4     format version (u32, currently 2)
//! 12      8     cache key (u64, chosen by the caller: hash of mesh + material + h + pins)
//! 20      8     payload length in bytes (u64)
//! 28      L     payload
//! 28+L    8     FNV-1a-64 of bytes [0, 28+L)
//! ```
//! Payload: `n_vertices: u32`, 13 stats fields (`n_free`, `n_modes` as u64; the rest f64, in
//! [`Jgs2Stats`] declaration order), then per vertex: `count: u32`, `residual: f64`,
//! `count × u32` element ids, `count × f64` weights, `count × 36 × f64` blocks, then
//! `n_inc: u32`, `n_inc × u32` incident element ids, `n_inc × 36 × f64` incident blocks,
//! `n_s: u32`, `n_s × u32` support vertices, `n_s × 9 × f64` support blocks,
//! `grad_residual: f64`, `n_g: u32`, `n_g × u32` gradient vertices, `n_g × f64` weights,
//! `n_g × 9 × f64` blocks.
//!
//! Files are written to a temporary sibling and renamed, so a reader never sees half a file.
//! Reading checks magic, version, key, length and checksum before decoding, and decoding
//! bounds-checks every count, so arbitrary bytes give an [`ArtifactError`], never a panic.

use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::jgs2::{Jgs2Basis, Jgs2Stats, VertexCubature};

/// File magic.
pub const MAGIC: [u8; 8] = *b"JELLOJG2";
/// Current format version.
pub const FORMAT_VERSION: u32 = 2;
const HEADER: usize = 28;

/// Why an artifact could not be read or written.
#[derive(Debug, Error)]
pub enum ArtifactErrorKind {
    /// File system failure.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The file does not start with [`MAGIC`].
    #[error("not a jello JGS2 artifact (bad magic)")]
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
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Serialises `basis` with `key` into the file format (in memory).
pub fn encode(basis: &Jgs2Basis, key: u64) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&(basis.vertices.len() as u32).to_le_bytes());
    let s = &basis.stats;
    p.extend_from_slice(&(s.n_free as u64).to_le_bytes());
    p.extend_from_slice(&(s.n_modes as u64).to_le_bytes());
    for x in stats_f64(s) {
        p.extend_from_slice(&x.to_le_bytes());
    }
    for v in &basis.vertices {
        p.extend_from_slice(&(v.elements.len() as u32).to_le_bytes());
        p.extend_from_slice(&v.residual.to_le_bytes());
        for e in &v.elements {
            p.extend_from_slice(&e.to_le_bytes());
        }
        for w in &v.weights {
            p.extend_from_slice(&w.to_le_bytes());
        }
        for b in &v.blocks {
            for x in b {
                p.extend_from_slice(&x.to_le_bytes());
            }
        }
        p.extend_from_slice(&(v.incident_elements.len() as u32).to_le_bytes());
        for e in &v.incident_elements {
            p.extend_from_slice(&e.to_le_bytes());
        }
        for b in &v.incident_blocks {
            for x in b {
                p.extend_from_slice(&x.to_le_bytes());
            }
        }
        p.extend_from_slice(&(v.support_vertices.len() as u32).to_le_bytes());
        for j in &v.support_vertices {
            p.extend_from_slice(&j.to_le_bytes());
        }
        for b in &v.support_blocks {
            for x in b {
                p.extend_from_slice(&x.to_le_bytes());
            }
        }
        p.extend_from_slice(&v.grad_residual.to_le_bytes());
        p.extend_from_slice(&(v.grad_vertices.len() as u32).to_le_bytes());
        for j in &v.grad_vertices {
            p.extend_from_slice(&j.to_le_bytes());
        }
        for w in &v.grad_weights {
            p.extend_from_slice(&w.to_le_bytes());
        }
        for b in &v.grad_blocks {
            for x in b {
                p.extend_from_slice(&x.to_le_bytes());
            }
        }
    }
    let mut out = Vec::with_capacity(HEADER + p.len() + 8);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&key.to_le_bytes());
    out.extend_from_slice(&(p.len() as u64).to_le_bytes());
    out.extend_from_slice(&p);
    let sum = fnv1a64(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

fn stats_f64(s: &Jgs2Stats) -> [f64; 13] {
    [
        s.residual_min,
        s.residual_median,
        s.residual_p90,
        s.residual_max,
        s.fraction_on_target,
        s.mean_elements,
        s.factor_s,
        s.basis_s,
        s.eigen_s,
        s.cubature_s,
        s.total_s,
        s.bytes_per_vertex,
        0.0, // reserved
    ]
}

/// Parses bytes produced by [`encode`], checking the expected `key`.
pub fn decode(bytes: &[u8], key: u64) -> Result<Jgs2Basis, ArtifactErrorKind> {
    use ArtifactErrorKind as K;
    if bytes.len() < MAGIC.len() || bytes[..MAGIC.len()] != MAGIC {
        return Err(if bytes.len() < MAGIC.len() && MAGIC.starts_with(bytes) {
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
    if version != FORMAT_VERSION {
        return Err(K::WrongVersion {
            found: version,
            expected: FORMAT_VERSION,
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
    let mut r = Reader {
        b: &bytes[HEADER..end],
        pos: 0,
    };
    let nv = r.u32()? as usize;
    let mut stats = Jgs2Stats {
        n_free: r.u64()? as usize,
        n_modes: r.u64()? as usize,
        ..Default::default()
    };
    let mut f = [0.0; 13];
    for x in &mut f {
        *x = r.f64()?;
    }
    [
        stats.residual_min,
        stats.residual_median,
        stats.residual_p90,
        stats.residual_max,
        stats.fraction_on_target,
        stats.mean_elements,
        stats.factor_s,
        stats.basis_s,
        stats.eigen_s,
        stats.cubature_s,
        stats.total_s,
        stats.bytes_per_vertex,
    ] = [
        f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10], f[11],
    ];
    // each vertex needs at least 12 bytes: bound the allocation by what is present
    if nv > r.remaining() / 12 {
        return Err(K::Malformed(format!(
            "{nv} vertices cannot fit in {} bytes",
            r.remaining()
        )));
    }
    let mut vertices = Vec::with_capacity(nv);
    for v in 0..nv {
        let count = r.u32()? as usize;
        let residual = r.f64()?;
        let per = 4 + 8 + 36 * 8;
        if count > r.remaining() / per {
            return Err(K::Malformed(format!(
                "vertex {v}: {count} elements exceed the payload"
            )));
        }
        let mut rec = VertexCubature {
            residual,
            ..Default::default()
        };
        for _ in 0..count {
            rec.elements.push(r.u32()?);
        }
        for _ in 0..count {
            let w = r.f64()?;
            if !(w.is_finite() && w >= 0.0) {
                return Err(K::Malformed(format!("vertex {v}: weight {w}")));
            }
            rec.weights.push(w);
        }
        for _ in 0..count {
            let mut b = [0.0; 36];
            for x in &mut b {
                *x = r.f64()?;
            }
            rec.blocks.push(b);
        }
        let n_inc = r.u32()? as usize;
        if n_inc > r.remaining() / (4 + 36 * 8) {
            return Err(K::Malformed(format!(
                "vertex {v}: {n_inc} incident elements exceed the payload"
            )));
        }
        for _ in 0..n_inc {
            rec.incident_elements.push(r.u32()?);
        }
        for _ in 0..n_inc {
            let mut b = [0.0; 36];
            for x in &mut b {
                *x = r.f64()?;
            }
            rec.incident_blocks.push(b);
        }
        let n_s = r.u32()? as usize;
        if n_s > r.remaining() / (4 + 9 * 8) {
            return Err(K::Malformed(format!(
                "vertex {v}: {n_s} support vertices exceed the payload"
            )));
        }
        for _ in 0..n_s {
            rec.support_vertices.push(r.u32()?);
        }
        for _ in 0..n_s {
            let mut b = [0.0; 9];
            for x in &mut b {
                *x = r.f64()?;
            }
            rec.support_blocks.push(b);
        }
        rec.grad_residual = r.f64()?;
        let n_g = r.u32()? as usize;
        if n_g > r.remaining() / (4 + 8 + 9 * 8) {
            return Err(K::Malformed(format!(
                "vertex {v}: {n_g} gradient samples exceed the payload"
            )));
        }
        for _ in 0..n_g {
            rec.grad_vertices.push(r.u32()?);
        }
        for _ in 0..n_g {
            let w = r.f64()?;
            if !(w.is_finite() && w >= 0.0) {
                return Err(K::Malformed(format!("vertex {v}: gradient weight {w}")));
            }
            rec.grad_weights.push(w);
        }
        for _ in 0..n_g {
            let mut b = [0.0; 9];
            for x in &mut b {
                *x = r.f64()?;
            }
            rec.grad_blocks.push(b);
        }
        vertices.push(rec);
    }
    if r.remaining() != 0 {
        return Err(K::Malformed(format!(
            "{} unread payload bytes",
            r.remaining()
        )));
    }
    Ok(Jgs2Basis { vertices, stats })
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], ArtifactErrorKind> {
        let s = self.b.get(self.pos..self.pos + N).ok_or_else(|| {
            ArtifactErrorKind::Malformed(format!("payload ends at byte {}", self.pos))
        })?;
        self.pos += N;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    fn u32(&mut self) -> Result<u32, ArtifactErrorKind> {
        Ok(u32::from_le_bytes(self.take()?))
    }
    fn u64(&mut self) -> Result<u64, ArtifactErrorKind> {
        Ok(u64::from_le_bytes(self.take()?))
    }
    fn f64(&mut self) -> Result<f64, ArtifactErrorKind> {
        Ok(f64::from_le_bytes(self.take()?))
    }
    fn remaining(&self) -> usize {
        self.b.len() - self.pos
    }
}

/// Writes `basis` to `path` atomically (temporary sibling + rename).
pub fn write(path: &Path, basis: &Jgs2Basis, key: u64) -> Result<(), ArtifactError> {
    let err = |e: std::io::Error| ArtifactError {
        path: path.to_owned(),
        kind: e.into(),
    };
    let bytes = encode(basis, key);
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "artifact".into());
    let tmp = path.with_file_name(format!(".{file_name}.tmp{}", std::process::id()));
    let res = (|| {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res.map_err(err)
}

/// Reads and validates the artifact at `path` against the expected `key`.
pub fn read(path: &Path, key: u64) -> Result<Jgs2Basis, ArtifactError> {
    let bytes = std::fs::read(path).map_err(|e| ArtifactError {
        path: path.to_owned(),
        kind: e.into(),
    })?;
    decode(&bytes, key).map_err(|kind| ArtifactError {
        path: path.to_owned(),
        kind,
    })
}
