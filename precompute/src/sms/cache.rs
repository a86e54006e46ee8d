//! Cache artifact of an [`SmsBasis`] with its cubature and N_cg (magic `JELLOSMS`), in the
//! versioned, checksummed, keyed framing every precompute artifact shares
//! ([`crate::artifact`]).
//!
//! The key ([`sms_cache_key`]) is an FNV-1a hash of every input of [`super::build_sms`]:
//! positions, tets, Young's moduli, pins and all options (f64 by their bits), so a file built
//! for another mesh, modulus, pin set or option reads as [`ArtifactErrorKind::KeyMismatch`]
//! (stale), never as a valid basis.
//!
//! Payload (little-endian): `n: u32`, `n_tets: u32`, `m: u32`; the partition (`n × u32`
//! labels, `m × u32` centroids, per handle `count: u32` + neighbour ids, Lloyd iterations and
//! repaired vertices as u64); per vertex `count: u32` + handles (u32) + weights (f64); `n × f64`
//! pinned weights; per partition `count: u32` + elements (u32) + weights (f64), then its fit
//! (`elements, targets, sampled, samples: u32`, `fit_error: f64`, `full_rule: u32`); the N_cg
//! rule (`m × u32` radii, mean f64, `n_cg: u64`, `overridden: u32`); the stats (6 f64 times in
//! declaration order, then `bytes, cubature_bytes, nnz, fallback_vertices` as u64).
//! Rest positions, handle origins and the per-handle transpose are rebuilt from the caller's
//! mesh (the key vouches it is the same). Decoding bounds-checks every count and checks the
//! content (indices in range, ascending lists, finite non-negative numbers), so arbitrary
//! bytes give an [`ArtifactErrorKind`], never a panic.

use std::path::Path;

use super::cubature::{CubatureTargets, NcgRule, PartitionFit, SmsCubature};
use super::kmeans::Partitioning;
use super::{SmsBasis, SmsOptions, SmsStats};
use crate::artifact::{self, fnv1a64, ArtifactError, ArtifactErrorKind, Reader};

/// File magic of an SMS artifact.
pub const MAGIC: [u8; 8] = *b"JELLOSMS";
/// Current format version of an SMS artifact.
pub const FORMAT_VERSION: u32 = 1;

/// Cache key of [`super::build_sms`]'s inputs: FNV-1a-64 over positions (m), tets, moduli
/// (Pa), pins and every option, with the format version.
pub fn sms_cache_key(
    positions: &[[f64; 3]],
    tets: &[[u32; 4]],
    youngs: &[f64],
    pinned: &[bool],
    opts: &SmsOptions,
) -> u64 {
    let mut b = Vec::with_capacity(24 * positions.len() + 24 * tets.len() + pinned.len() + 128);
    b.extend_from_slice(&MAGIC);
    b.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    for len in [positions.len(), tets.len(), youngs.len(), pinned.len()] {
        b.extend_from_slice(&(len as u64).to_le_bytes());
    }
    for x in positions.iter().flatten().chain(youngs) {
        b.extend_from_slice(&x.to_bits().to_le_bytes());
    }
    for v in tets.iter().flatten() {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend(pinned.iter().map(|&p| p as u8));
    let p = &opts.partition;
    for x in [p.k, p.prune_every, p.max_iters] {
        b.extend_from_slice(&(x as u64).to_le_bytes());
    }
    b.extend_from_slice(&p.seed.to_le_bytes());
    let c = &opts.cubature;
    for x in [p.jump_factor, p.oversample, p.prune_ratio, c.tolerance] {
        b.extend_from_slice(&x.to_bits().to_le_bytes());
    }
    b.extend_from_slice(&(c.batch as u64).to_le_bytes());
    b.push(match c.targets {
        CubatureTargets::Weights => 0,
        CubatureTargets::WeightsAffine => 1,
    });
    let n_cg = opts.n_cg.map_or(u64::MAX, |x| x as u64);
    b.extend_from_slice(&n_cg.to_le_bytes());
    fnv1a64(&b)
}

struct W(Vec<u8>);
impl W {
    fn u32(&mut self, x: u32) {
        self.0.extend_from_slice(&x.to_le_bytes());
    }
    fn u64(&mut self, x: u64) {
        self.0.extend_from_slice(&x.to_le_bytes());
    }
    fn f64(&mut self, x: f64) {
        self.0.extend_from_slice(&x.to_le_bytes());
    }
}

/// Serialises `basis` (built on a mesh of `n_tets` tets) with `key`.
pub fn encode(basis: &SmsBasis, n_tets: usize, key: u64) -> Vec<u8> {
    let mut w = W(Vec::new());
    let n = basis.n_vertices();
    let m = basis.n_handles();
    let p = &basis.partition;
    w.u32(n as u32);
    w.u32(n_tets as u32);
    w.u32(m as u32);
    p.part.iter().for_each(|&x| w.u32(x));
    p.centroid.iter().for_each(|&x| w.u32(x));
    for nb in &p.neighbours {
        w.u32(nb.len() as u32);
        nb.iter().for_each(|&x| w.u32(x));
    }
    w.u64(p.lloyd_iters as u64);
    w.u64(p.repaired_vertices as u64);
    for v in 0..n {
        let r = basis.vertex_ptr[v]..basis.vertex_ptr[v + 1];
        w.u32(r.len() as u32);
        basis.vertex_handle[r.clone()]
            .iter()
            .for_each(|&x| w.u32(x));
        basis.vertex_weight[r].iter().for_each(|&x| w.f64(x));
    }
    basis.pinned_weight.iter().for_each(|&x| w.f64(x));
    let c = &basis.cubature;
    for (h, fit) in c.fits.iter().enumerate() {
        let r = c.ptr[h]..c.ptr[h + 1];
        w.u32(r.len() as u32);
        c.element[r.clone()].iter().for_each(|&x| w.u32(x));
        c.weight[r].iter().for_each(|&x| w.f64(x));
        for x in [fit.elements, fit.targets, fit.sampled, fit.samples] {
            w.u32(x);
        }
        w.f64(fit.fit_error);
        w.u32(fit.full_rule as u32);
    }
    let g = &basis.n_cg;
    g.radius.iter().for_each(|&x| w.u32(x));
    w.f64(g.mean_radius);
    w.u64(g.n_cg as u64);
    w.u32(g.overridden as u32);
    let s = &basis.stats;
    for x in [
        s.geodesic_factor_s,
        s.partition_s,
        s.weights_s,
        s.storage_s,
        s.cubature_s,
        s.total_s,
    ] {
        w.f64(x);
    }
    for x in [s.bytes, s.cubature_bytes, s.nnz, s.fallback_vertices] {
        w.u64(x as u64);
    }
    artifact::frame(&MAGIC, FORMAT_VERSION, key, &w.0)
}

/// Parses bytes produced by [`encode`] for the mesh (`positions`, `tets`) and `key`.
pub fn decode(
    bytes: &[u8],
    key: u64,
    positions: &[[f64; 3]],
    tets: &[[u32; 4]],
) -> Result<SmsBasis, ArtifactErrorKind> {
    use ArtifactErrorKind as K;
    let bad = |s: String| Err(K::Malformed(s));
    let payload = artifact::unframe(bytes, &MAGIC, FORMAT_VERSION, key)?;
    let mut r = Reader::new(payload);
    let n = r.u32()? as usize;
    let nt = r.u32()? as usize;
    let m = r.u32()? as usize;
    if n != positions.len() || nt != tets.len() {
        return bad(format!(
            "built for {n} vertices and {nt} tets, the mesh has {} and {}",
            positions.len(),
            tets.len()
        ));
    }
    if m == 0 || m > n {
        return bad(format!("{m} handles for {n} vertices"));
    }
    // Every vertex and handle needs at least 4 bytes; refuse before allocating.
    if 4 * (n + m) > r.remaining() {
        return bad(format!(
            "{n} vertices cannot fit in {} bytes",
            r.remaining()
        ));
    }
    let ids = |r: &mut Reader<'_>, count: usize, bound: usize, what: &str| {
        let mut out = Vec::with_capacity(count.min(r.remaining() / 4));
        for _ in 0..count {
            let x = r.u32()?;
            if x as usize >= bound {
                return Err(K::Malformed(format!("{what} {x} of {bound}")));
            }
            out.push(x);
        }
        Ok(out)
    };
    let count = |r: &mut Reader<'_>, per: usize, what: &str| -> Result<usize, ArtifactErrorKind> {
        let c = r.u32()? as usize;
        if c.saturating_mul(per) > r.remaining() {
            return Err(K::Malformed(format!("{c} {what} exceed the payload")));
        }
        Ok(c)
    };
    let ascending = |v: &[u32]| v.windows(2).all(|w| w[0] < w[1]);
    let part = ids(&mut r, n, m, "partition")?;
    let centroid = ids(&mut r, m, n, "centroid")?;
    for (h, &c) in centroid.iter().enumerate() {
        if part[c as usize] as usize != h {
            return bad(format!("centroid {c} lies outside partition {h}"));
        }
    }
    let mut neighbours = Vec::with_capacity(m);
    for h in 0..m {
        let c = count(&mut r, 4, "neighbours")?;
        let nb = ids(&mut r, c, m, "neighbour")?;
        if !ascending(&nb) || nb.contains(&(h as u32)) {
            return bad(format!("neighbours of partition {h} are not ascending"));
        }
        neighbours.push(nb);
    }
    let lloyd_iters = r.u64()? as usize;
    let repaired_vertices = r.u64()? as usize;
    let finite_nonneg = |x: f64| x.is_finite() && x >= 0.0;
    let mut vertex_ptr = Vec::with_capacity(n + 1);
    vertex_ptr.push(0);
    let (mut vertex_handle, mut vertex_weight) = (Vec::new(), Vec::new());
    for v in 0..n {
        let c = count(&mut r, 12, "vertex weights")?;
        let hs = ids(&mut r, c, m, "handle")?;
        if !ascending(&hs) {
            return bad(format!("handles of vertex {v} are not ascending"));
        }
        vertex_handle.extend_from_slice(&hs);
        for _ in 0..c {
            let x = r.f64()?;
            if !finite_nonneg(x) {
                return bad(format!("vertex {v}: weight {x}"));
            }
            vertex_weight.push(x);
        }
        vertex_ptr.push(vertex_handle.len());
    }
    if 8 * n > r.remaining() {
        return bad("pinned weights exceed the payload".into());
    }
    let mut pinned_weight = Vec::with_capacity(n);
    for v in 0..n {
        let x = r.f64()?;
        if !(finite_nonneg(x) && x <= 1.0) {
            return bad(format!("vertex {v}: pinned weight {x}"));
        }
        pinned_weight.push(x);
    }
    let mut cub = SmsCubature {
        ptr: vec![0],
        ..Default::default()
    };
    for h in 0..m {
        let c = count(&mut r, 12, "cubature samples")?;
        let el = ids(&mut r, c, nt, "cubature element")?;
        if !ascending(&el) {
            return bad(format!(
                "cubature elements of partition {h} are not ascending"
            ));
        }
        cub.element.extend_from_slice(&el);
        for _ in 0..c {
            let x = r.f64()?;
            if !(x.is_finite() && x > 0.0) {
                return bad(format!("partition {h}: cubature weight {x}"));
            }
            cub.weight.push(x);
        }
        cub.ptr.push(cub.element.len());
        let fit = PartitionFit {
            elements: r.u32()?,
            targets: r.u32()?,
            sampled: r.u32()?,
            samples: r.u32()?,
            fit_error: r.f64()?,
            full_rule: match r.u32()? {
                0 => false,
                1 => true,
                x => return bad(format!("partition {h}: full-rule flag {x}")),
            },
        };
        if fit.samples as usize != c || !finite_nonneg(fit.fit_error) {
            return bad(format!("partition {h}: fit figures do not match its rule"));
        }
        cub.fits.push(fit);
    }
    if 4 * m > r.remaining() {
        return bad("radii exceed the payload".into());
    }
    let mut radius = Vec::with_capacity(m);
    for _ in 0..m {
        radius.push(r.u32()?);
    }
    let mean_radius = r.f64()?;
    let n_cg = r.u64()? as usize;
    let overridden = match r.u32()? {
        0 => false,
        1 => true,
        x => return bad(format!("n_cg override flag {x}")),
    };
    if !finite_nonneg(mean_radius) {
        return bad(format!("mean radius {mean_radius}"));
    }
    let mut t = [0.0; 6];
    for x in &mut t {
        *x = r.f64()?;
        if !finite_nonneg(*x) {
            return bad(format!("timing {x}"));
        }
    }
    let mut z = [0usize; 4];
    for x in &mut z {
        *x = r.u64()? as usize;
    }
    if r.remaining() != 0 {
        return bad(format!("{} unread payload bytes", r.remaining()));
    }
    let stats = SmsStats {
        geodesic_factor_s: t[0],
        partition_s: t[1],
        weights_s: t[2],
        storage_s: t[3],
        cubature_s: t[4],
        total_s: t[5],
        bytes: z[0],
        cubature_bytes: z[1],
        nnz: z[2],
        fallback_vertices: z[3],
    };
    if stats.nnz != vertex_handle.len() {
        return bad(format!(
            "stats count {} weights, the data {}",
            stats.nnz,
            vertex_handle.len()
        ));
    }
    let (handle_ptr, handle_vertex, handle_weight) =
        super::transpose(n, m, &vertex_ptr, &vertex_handle, &vertex_weight);
    let origin = centroid.iter().map(|&c| positions[c as usize]).collect();
    Ok(SmsBasis {
        partition: Partitioning {
            part,
            centroid,
            neighbours,
            lloyd_iters,
            repaired_vertices,
        },
        rest: positions.to_vec(),
        origin,
        vertex_ptr,
        vertex_handle,
        vertex_weight,
        handle_ptr,
        handle_vertex,
        handle_weight,
        pinned_weight,
        cubature: cub,
        n_cg: NcgRule {
            radius,
            mean_radius,
            n_cg,
            overridden,
        },
        stats,
    })
}

/// Writes `basis` (built on `tets`) to `path` atomically.
pub fn write(
    path: &Path,
    basis: &SmsBasis,
    tets: &[[u32; 4]],
    key: u64,
) -> Result<(), ArtifactError> {
    artifact::write_bytes(path, &encode(basis, tets.len(), key))
}

/// Reads and validates the SMS artifact at `path` for this mesh and `key`; errors name the
/// file.
pub fn read(
    path: &Path,
    key: u64,
    positions: &[[f64; 3]],
    tets: &[[u32; 4]],
) -> Result<SmsBasis, ArtifactError> {
    let bytes = artifact::read_bytes(path)?;
    decode(&bytes, key, positions, tets).map_err(|kind| ArtifactError {
        path: path.to_owned(),
        kind,
    })
}
