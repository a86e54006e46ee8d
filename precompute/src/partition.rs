//! Non-overlapping domain decomposition of a tet mesh (DOT, Li et al. 2019, §4.3), and its
//! cache artifact.
//!
//! The elements are split into s subdomains by METIS k-way partitioning of the element dual
//! graph (two tets are adjacent when they share a face: `METIS_MeshToDual` with 3 common
//! nodes). The paper names METIS, not the call: the dual graph keeps every element in exactly
//! one subdomain (what DOT's penalty formulation needs), balances element counts (what the
//! per-subdomain Hessian work scales with) and minimises the cut faces, so few vertices are
//! shared. A vertex belongs to every subdomain one of its elements is in; its copy count n_v
//! gives the averaging weight B = 1/n_v of DOT's gather.
//!
//! METIS is a C library, absent from a build without the `metis` feature (wasm32): there a
//! partition into more than one subdomain is an error ([`PrecomputeError::Unavailable`]), not a
//! different partitioner, so that a partition is always the one METIS gives for its key.
//!
//! The partition depends only on the mesh and s, and METIS is deterministic for a fixed seed,
//! so the cache ([`encode`]/[`decode`], [`write()`]/[`read()`]) stores just the element → subdomain
//! map under the same versioned, checksummed, keyed framing as the JGS2 artifact
//! ([`crate::artifact`]); everything else is rebuilt from it in linear time and validated.

use std::path::Path;

use crate::artifact::{self, ArtifactError, ArtifactErrorKind, Reader};
use crate::{PrecomputeError, Result};

/// File magic of a partition artifact.
pub const MAGIC: [u8; 8] = *b"JELLODOT";
/// Current format version of a partition artifact.
pub const FORMAT_VERSION: u32 = 1;

/// A non-overlapping element partition and the vertex sets it induces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decomposition {
    /// Subdomain of each element, in `0..len()`.
    pub element_part: Vec<u32>,
    /// Per subdomain, its vertices (interior and interface), ascending global indices.
    pub vertices: Vec<Vec<u32>>,
    /// Per vertex, the number of subdomains that hold it (n_v; 0 for a vertex of no element).
    pub copies: Vec<u32>,
}

/// Size figures of a [`Decomposition`] (for logs and benches).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DecompositionStats {
    /// Subdomains.
    pub subdomains: usize,
    /// Fewest and most elements in a subdomain.
    pub elements_min: usize,
    /// See `elements_min`.
    pub elements_max: usize,
    /// Fewest and most vertices in a subdomain (interface copies included).
    pub vertices_min: usize,
    /// See `vertices_min`.
    pub vertices_max: usize,
    /// Vertices held by more than one subdomain.
    pub interface_vertices: usize,
    /// Σ_j |V_j| / n: the duplication factor n̂/n of the scattered vector.
    pub duplication: f64,
}

impl Decomposition {
    /// Partitions `tets` (over `n_vertices` vertices) into `parts` subdomains with METIS.
    /// Without the `metis` feature only `parts == 1` succeeds.
    ///
    /// `parts` must lie in `1..=tets.len()`. METIS may leave a requested part empty on a
    /// small or disconnected mesh; empty parts are dropped, so [`Self::len`] can be below
    /// `parts` (never zero for a non-empty mesh).
    pub fn new(n_vertices: usize, tets: &[[u32; 4]], parts: usize) -> Result<Self> {
        if tets.is_empty() {
            return Err(PrecomputeError::Invalid(
                "domain decomposition of a mesh with no elements".into(),
            ));
        }
        if parts == 0 || parts > tets.len() {
            return Err(PrecomputeError::Invalid(format!(
                "subdomains must lie in 1..={} (the element count), got {parts}",
                tets.len()
            )));
        }
        check_tets(n_vertices, tets)?;
        let element_part = if parts == 1 {
            vec![0; tets.len()]
        } else {
            metis_dual_kway(n_vertices, tets, parts)?
        };
        Self::from_parts(n_vertices, tets, element_part)
    }

    /// The decomposition induced by a given element → subdomain map (subdomain ids are
    /// renumbered densely in order of first appearance of each id's smallest element, so
    /// empty ids disappear).
    pub fn from_parts(
        n_vertices: usize,
        tets: &[[u32; 4]],
        element_part: Vec<u32>,
    ) -> Result<Self> {
        if element_part.len() != tets.len() {
            return Err(PrecomputeError::Invalid(format!(
                "{} subdomain ids for {} elements",
                element_part.len(),
                tets.len()
            )));
        }
        check_tets(n_vertices, tets)?;
        // Dense renumbering, keeping the ids' order.
        let max_id = element_part.iter().copied().max().unwrap_or(0) as usize;
        let mut used = vec![false; max_id + 1];
        for &p in &element_part {
            used[p as usize] = true;
        }
        let mut new_id = vec![u32::MAX; max_id + 1];
        let mut count = 0u32;
        for (id, u) in used.iter().enumerate() {
            if *u {
                new_id[id] = count;
                count += 1;
            }
        }
        let element_part: Vec<u32> = element_part.iter().map(|&p| new_id[p as usize]).collect();
        let s = count as usize;
        // Vertex sets: a vertex is in every subdomain one of its elements is in.
        let mut mark = vec![u32::MAX; n_vertices];
        let mut vertices: Vec<Vec<u32>> = vec![Vec::new(); s];
        let mut by_part: Vec<Vec<u32>> = vec![Vec::new(); s];
        for (e, &p) in element_part.iter().enumerate() {
            by_part[p as usize].push(e as u32);
        }
        let mut copies = vec![0u32; n_vertices];
        for (j, elems) in by_part.iter().enumerate() {
            for &e in elems {
                for &v in &tets[e as usize] {
                    if mark[v as usize] != j as u32 {
                        mark[v as usize] = j as u32;
                        vertices[j].push(v);
                        copies[v as usize] += 1;
                    }
                }
            }
            vertices[j].sort_unstable();
        }
        Ok(Decomposition {
            element_part,
            vertices,
            copies,
        })
    }

    /// Number of subdomains.
    pub fn len(&self) -> usize {
        self.vertices.len()
    }

    /// Whether there are no subdomains (never, for a decomposition built by [`Self::new`]).
    pub fn is_empty(&self) -> bool {
        self.vertices.is_empty()
    }

    /// Size figures.
    pub fn stats(&self) -> DecompositionStats {
        let s = self.len();
        let mut elems = vec![0usize; s];
        for &p in &self.element_part {
            elems[p as usize] += 1;
        }
        let sizes: Vec<usize> = self.vertices.iter().map(Vec::len).collect();
        let n_in = self.copies.iter().filter(|&&c| c > 0).count().max(1);
        DecompositionStats {
            subdomains: s,
            elements_min: elems.iter().copied().min().unwrap_or(0),
            elements_max: elems.iter().copied().max().unwrap_or(0),
            vertices_min: sizes.iter().copied().min().unwrap_or(0),
            vertices_max: sizes.iter().copied().max().unwrap_or(0),
            interface_vertices: self.copies.iter().filter(|&&c| c > 1).count(),
            duplication: sizes.iter().sum::<usize>() as f64 / n_in as f64,
        }
    }
}

fn check_tets(n_vertices: usize, tets: &[[u32; 4]]) -> Result<()> {
    if let Some((e, _)) = tets
        .iter()
        .enumerate()
        .find(|(_, t)| t.iter().any(|&v| v as usize >= n_vertices))
    {
        return Err(PrecomputeError::Invalid(format!(
            "element {e} names a vertex outside 0..{n_vertices}"
        )));
    }
    Ok(())
}

/// METIS k-way partition of the face-adjacency dual graph.
#[cfg(feature = "metis")]
fn metis_dual_kway(n_vertices: usize, tets: &[[u32; 4]], parts: usize) -> Result<Vec<u32>> {
    let too_large = || PrecomputeError::Ordering("mesh too large for 32-bit METIS".into());
    if tets.len() * 4 >= i32::MAX as usize || n_vertices >= i32::MAX as usize {
        return Err(too_large());
    }
    let eptr: Vec<metis::Idx> = (0..=tets.len()).map(|e| 4 * e as metis::Idx).collect();
    let eind: Vec<metis::Idx> = tets.iter().flatten().map(|&v| v as metis::Idx).collect();
    let _metis = crate::metis_lock();
    let dual = metis::mesh_to_dual(&eptr, &eind, 3)
        .map_err(|e| PrecomputeError::Ordering(format!("METIS_MeshToDual: {e}")))?;
    let mut part = vec![0 as metis::Idx; tets.len()];
    if dual.adjncy().is_empty() {
        // No two elements share a face: any balanced split cuts nothing.
        for (e, p) in part.iter_mut().enumerate() {
            *p = (e * parts / tets.len()) as metis::Idx;
        }
    } else {
        metis::Graph::new(1, parts as metis::Idx, dual.xadj(), dual.adjncy())
            .map_err(|e| PrecomputeError::Ordering(format!("METIS graph: {e}")))?
            .part_kway(&mut part)
            .map_err(|e| PrecomputeError::Ordering(format!("METIS_PartGraphKway: {e}")))?;
    }
    Ok(part.into_iter().map(|p| p as u32).collect())
}

#[cfg(not(feature = "metis"))]
fn metis_dual_kway(_n_vertices: usize, _tets: &[[u32; 4]], parts: usize) -> Result<Vec<u32>> {
    Err(PrecomputeError::Unavailable(format!(
        "a METIS partition into {parts} subdomains (the `metis` feature, which wasm32 builds lack)"
    )))
}

/// Serialises the element → subdomain map with `key` (payload: `n_elements: u32`,
/// `n_vertices: u32`, then one u32 per element).
pub fn encode(d: &Decomposition, key: u64) -> Vec<u8> {
    let mut p = Vec::with_capacity(8 + 4 * d.element_part.len());
    p.extend_from_slice(&(d.element_part.len() as u32).to_le_bytes());
    p.extend_from_slice(&(d.copies.len() as u32).to_le_bytes());
    for &x in &d.element_part {
        p.extend_from_slice(&x.to_le_bytes());
    }
    artifact::frame(&MAGIC, FORMAT_VERSION, key, &p)
}

/// Parses bytes produced by [`encode`] for the mesh `tets` over `n_vertices` vertices and the
/// expected `key`; the map must cover exactly this mesh.
pub fn decode(
    bytes: &[u8],
    key: u64,
    n_vertices: usize,
    tets: &[[u32; 4]],
) -> std::result::Result<Decomposition, ArtifactErrorKind> {
    use ArtifactErrorKind as K;
    let payload = artifact::unframe(bytes, &MAGIC, FORMAT_VERSION, key)?;
    let mut r = Reader::new(payload);
    let ne = r.u32()? as usize;
    let nv = r.u32()? as usize;
    if ne != tets.len() || nv != n_vertices {
        return Err(K::Malformed(format!(
            "built for {ne} elements and {nv} vertices, the mesh has {} and {n_vertices}",
            tets.len()
        )));
    }
    if r.remaining() != 4 * ne {
        return Err(K::Malformed(format!(
            "{} payload bytes for {ne} subdomain ids",
            r.remaining()
        )));
    }
    let mut parts = Vec::with_capacity(ne);
    for _ in 0..ne {
        let p = r.u32()?;
        if p as usize >= ne {
            return Err(K::Malformed(format!("subdomain id {p} for {ne} elements")));
        }
        parts.push(p);
    }
    Decomposition::from_parts(n_vertices, tets, parts).map_err(|e| K::Malformed(e.to_string()))
}

/// Writes the partition to `path` atomically.
pub fn write(path: &Path, d: &Decomposition, key: u64) -> std::result::Result<(), ArtifactError> {
    artifact::write_bytes(path, &encode(d, key))
}

/// Reads and validates the partition at `path` for this mesh and `key`.
pub fn read(
    path: &Path,
    key: u64,
    n_vertices: usize,
    tets: &[[u32; 4]],
) -> std::result::Result<Decomposition, ArtifactError> {
    let bytes = artifact::read_bytes(path)?;
    decode(&bytes, key, n_vertices, tets).map_err(|kind| ArtifactError {
        path: path.to_owned(),
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A structured box of `nx × ny × nz` cells, 6 tets per cell.
    fn grid(nx: usize, ny: usize, nz: usize) -> (usize, Vec<[u32; 4]>) {
        let id = |i: usize, j: usize, k: usize| (i + (nx + 1) * (j + (ny + 1) * k)) as u32;
        let mut tets = Vec::new();
        for k in 0..nz {
            for j in 0..ny {
                for i in 0..nx {
                    let c = [
                        id(i, j, k),
                        id(i + 1, j, k),
                        id(i + 1, j + 1, k),
                        id(i, j + 1, k),
                        id(i, j, k + 1),
                        id(i + 1, j, k + 1),
                        id(i + 1, j + 1, k + 1),
                        id(i, j + 1, k + 1),
                    ];
                    for t in [
                        [0, 1, 2, 6],
                        [0, 2, 3, 6],
                        [0, 3, 7, 6],
                        [0, 7, 4, 6],
                        [0, 4, 5, 6],
                        [0, 5, 1, 6],
                    ] {
                        tets.push([c[t[0]], c[t[1]], c[t[2]], c[t[3]]]);
                    }
                }
            }
        }
        ((nx + 1) * (ny + 1) * (nz + 1), tets)
    }

    #[cfg(feature = "metis")]
    #[test]
    fn vertex_sets_copies_and_balance() {
        let (nv, tets) = grid(8, 4, 4);
        for s in [1, 2, 3, 8] {
            let d = Decomposition::new(nv, &tets, s).unwrap();
            assert_eq!(d.len(), s, "s = {s}");
            // Every element's vertices are in its subdomain's set.
            for (e, t) in tets.iter().enumerate() {
                let set = &d.vertices[d.element_part[e] as usize];
                assert!(t.iter().all(|v| set.binary_search(v).is_ok()));
            }
            // n_v counts the sets holding v: Σ_j |V_j| = Σ_v n_v, so B Sᵀ S = I.
            let mut count = vec![0u32; nv];
            for set in &d.vertices {
                assert!(set.windows(2).all(|w| w[0] < w[1]));
                for &v in set {
                    count[v as usize] += 1;
                }
            }
            assert_eq!(count, d.copies);
            let st = d.stats();
            // METIS's default imbalance tolerance is 3%; allow a little more for rounding.
            let mean = tets.len() as f64 / s as f64;
            assert!(
                st.elements_max as f64 <= 1.05 * mean + 1.0,
                "s = {s}: {st:?}"
            );
            if s == 1 {
                assert_eq!(st.interface_vertices, 0);
            } else {
                assert!(st.interface_vertices > 0);
                // Few interface vertices: against the same counts dealt round-robin (a
                // partition that ignores adjacency), METIS's cut shares far fewer vertices.
                let dealt: Vec<u32> = (0..tets.len()).map(|e| (e % s) as u32).collect();
                let scattered = Decomposition::from_parts(nv, &tets, dealt).unwrap().stats();
                assert!(
                    (st.duplication - 1.0) < 0.5 * (scattered.duplication - 1.0),
                    "s = {s}: {st:?} against dealt {scattered:?}"
                );
            }
        }
    }

    #[test]
    fn bad_counts_are_errors() {
        let (nv, tets) = grid(2, 1, 1);
        assert!(Decomposition::new(nv, &tets, 0).is_err());
        assert!(Decomposition::new(nv, &tets, tets.len() + 1).is_err());
        assert!(Decomposition::new(nv, &[], 1).is_err());
        assert!(Decomposition::new(3, &tets, 1).is_err());
    }

    #[cfg(not(feature = "metis"))]
    #[test]
    fn without_metis_only_one_subdomain_is_built() {
        let (nv, tets) = grid(2, 2, 2);
        let one = Decomposition::new(nv, &tets, 1).unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(one.copies, vec![1; nv]);
        let e = Decomposition::new(nv, &tets, 2).unwrap_err();
        assert!(matches!(e, PrecomputeError::Unavailable(_)), "{e}");
        assert!(e.to_string().contains("`metis` feature"), "{e}");
    }

    #[cfg(feature = "metis")]
    #[test]
    fn artifact_round_trip_and_refusals() {
        let (nv, tets) = grid(4, 2, 2);
        let d = Decomposition::new(nv, &tets, 4).unwrap();
        let bytes = encode(&d, 7);
        assert_eq!(decode(&bytes, 7, nv, &tets).unwrap(), d);
        assert!(matches!(
            decode(&bytes, 8, nv, &tets),
            Err(ArtifactErrorKind::KeyMismatch { .. })
        ));
        assert!(matches!(
            decode(&bytes, 7, nv, &tets[1..]),
            Err(ArtifactErrorKind::Malformed(_))
        ));
        let mut bad = bytes.clone();
        let k = bad.len() / 2;
        bad[k] ^= 1;
        assert!(matches!(
            decode(&bad, 7, nv, &tets),
            Err(ArtifactErrorKind::ChecksumMismatch { .. })
        ));
        assert!(decode(&bytes[..bytes.len() - 3], 7, nv, &tets).is_err());
        let jgs2 = crate::artifact::frame(&crate::artifact::MAGIC, 1, 7, &[]);
        assert!(matches!(
            decode(&jgs2, 7, nv, &tets),
            Err(ArtifactErrorKind::BadMagic)
        ));
    }
}
