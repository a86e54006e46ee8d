//! Broad phase: the point–triangle and edge–edge pairs of a [`CollisionMesh`] whose boxes
//! overlap, on a uniform grid built by sorting (cell, primitive) keys.
//!
//! **What is found.** Each primitive's axis-aligned box covers its corners at `x` and, for a
//! swept query, at `x + dx` (m); every box is then grown by `dhat/2` on every side, so two boxes
//! overlap exactly when their gap along every axis is at most `dhat` (m). Any pair closer than
//! `dhat` at `x` — or, swept, any pair that could come within `dhat` while moving linearly from
//! `x` to `x + dx` — is therefore a candidate. Boxes are closed: boxes that only touch overlap,
//! so zero inflation still finds touching primitives (the intersection check relies on it).
//! Excluded: point–triangle pairs whose point is a corner of the triangle, edge–edge pairs that
//! share a vertex, and body pairs [`CollisionMesh::bodies_may_touch`] rules out (two obstacles,
//! or a body with itself when its self-contact is off). Self-contact within a body and contact
//! between bodies come out of the same pass.
//!
//! **Output.** Sorted pair lists (point–triangle as `[vertex index, face index]`, edge–edge as
//! `[a, b]` with `a < b`), so a run is reproducible whatever the thread count.
//!
//! **Algorithm** (per pair kind: vertices against faces, edges against edges, and faces against
//! faces for [`face_pairs`]). A uniform grid of cell size `h` over the boxes' bounding box.
//! Every box emits one `(cell key, id)` entry per cell it covers; the entries are sorted
//! (rayon's parallel sort), and each run of equal keys — one cell — tests its pairs' boxes
//! exactly. A pair whose boxes overlap meets in several cells; it is reported only by the cell
//! holding the lower corner of the boxes' intersection (the per-axis max of the two lower
//! corners), so no pair comes out twice and no global de-duplication is needed. Cells are
//! processed in parallel and the result is sorted once. Cost: O(n log n) for the sort plus the
//! pairs in shared cells, O(n) memory for a surface of n primitives of bounded size ratio.
//! A sorted key list instead of a hash table keeps the pass allocation-light, parallel and
//! deterministic; the cell key packs the three cell coordinates exactly (21 bits each), so
//! there are no hash collisions.
//!
//! **Cell size** `h = CELL_FACTOR × mean largest box side` of the larger primitives of the pass
//! (faces for vertex–face and face–face, edges for edge–edge). Too small, and a box covers many
//! cells (entries grow as (size/h)³); too large, and a cell holds many boxes (tests grow as
//! their square). The factor was measured in `benches/contact.rs`; see the table below.
//!
//! **Large boxes.** A box that would cover more than [`LARGE_CELLS`] cells (a vertex swept
//! far in one step, a huge obstacle triangle) is kept out of the grid and tested against every
//! box of the other set directly: O(n) per large box instead of O(cells).
//!
//! The broad phase runs on the CPU (also when the barrier terms run as kernels).
//!
//! **Measured** (`cargo bench --bench contact`; see that file for the method). Filled in from
//! the bench's table:
//!
//! ```text
//! (pending)
//! ```

use super::mesh::CollisionMesh;
use crate::error::{JelloError, Result};
use rayon::prelude::*;

/// A closed axis-aligned box, m.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Aabb {
    /// Lower corner.
    pub lo: [f64; 3],
    /// Upper corner.
    pub hi: [f64; 3],
}

impl Aabb {
    /// The smallest box holding `points`, grown by `r` (m) on every side.
    pub fn around(points: impl IntoIterator<Item = [f64; 3]>, r: f64) -> Self {
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        for p in points {
            for k in 0..3 {
                lo[k] = lo[k].min(p[k]);
                hi[k] = hi[k].max(p[k]);
            }
        }
        Aabb {
            lo: lo.map(|v| v - r),
            hi: hi.map(|v| v + r),
        }
    }

    /// Whether the closed boxes share a point.
    pub fn overlaps(&self, o: &Aabb) -> bool {
        (0..3).all(|k| self.lo[k] <= o.hi[k] && o.lo[k] <= self.hi[k])
    }

    /// Largest side, m.
    pub fn max_side(&self) -> f64 {
        (0..3).map(|k| self.hi[k] - self.lo[k]).fold(0.0, f64::max)
    }
}

/// Cell size over the mean largest box side (see the module docs; measured in
/// `benches/contact.rs`).
pub const CELL_FACTOR: f64 = 2.0;

/// A box covering more cells than this is tested against all boxes directly (module docs).
pub const LARGE_CELLS: u64 = 4096;

/// Cells per axis are capped so that a cell key packs into 63 bits (`h` grows to fit).
const MAX_DIM: u64 = 1 << 21;

/// Figures of one grid pass (for benches and diagnostics).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GridStats {
    /// Cell size used, m.
    pub cell_size: f64,
    /// (cell, primitive) entries sorted.
    pub entries: usize,
    /// Box pairs tested in shared cells.
    pub tested: usize,
    /// Boxes kept out of the grid as large.
    pub large: usize,
}

impl GridStats {
    fn add(&mut self, o: GridStats) {
        self.cell_size = self.cell_size.max(o.cell_size);
        self.entries += o.entries;
        self.tested += o.tested;
        self.large += o.large;
    }
}

/// The candidate pairs of a broad-phase query (sorted; see the module docs).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Candidates {
    /// Point–triangle pairs `[vertex index, face index]`.
    pub pt: Vec<[u32; 2]>,
    /// Edge–edge pairs `[a, b]`, `a < b`.
    pub ee: Vec<[u32; 2]>,
    /// Grid figures of both passes (entries, tests and large boxes summed; the larger cell
    /// size).
    pub stats: GridStats,
}

/// Checks the inputs every query shares.
fn check(mesh: &CollisionMesh, x: &[[f64; 3]], dx: Option<&[[f64; 3]]>, dhat: f64) -> Result<()> {
    let n = mesh.num_vertices();
    if x.len() != n {
        return Err(JelloError::Invalid(format!(
            "broad phase: {} positions for a collision mesh of {n} vertices",
            x.len()
        )));
    }
    if let Some(d) = dx {
        if d.len() != n {
            return Err(JelloError::Invalid(format!(
                "broad phase: {} displacements for a collision mesh of {n} vertices",
                d.len()
            )));
        }
    }
    if !(dhat.is_finite() && dhat >= 0.0) {
        return Err(JelloError::Invalid(format!(
            "broad phase: inflation d̂ must be finite and ≥ 0 m, got {dhat}"
        )));
    }
    // Only surface vertices matter; a NaN there would silently drop pairs.
    let bad = |p: &[f64; 3]| !p.iter().all(|c| c.is_finite());
    if let Some(&v) = mesh
        .vertices
        .iter()
        .find(|&&v| bad(&x[v as usize]) || dx.is_some_and(|d| bad(&d[v as usize])))
    {
        return Err(JelloError::Invalid(format!(
            "broad phase: vertex {v} has a non-finite position or displacement"
        )));
    }
    Ok(())
}

/// Boxes of primitives with corners `ids(i)`, at `x` and (swept) `x + dx`, grown by `r`.
fn boxes<const K: usize>(
    prims: &[[u32; K]],
    x: &[[f64; 3]],
    dx: Option<&[[f64; 3]]>,
    r: f64,
) -> Vec<Aabb> {
    prims
        .par_iter()
        .map(|p| match dx {
            None => Aabb::around(p.iter().map(|&v| x[v as usize]), r),
            Some(d) => Aabb::around(
                p.iter().flat_map(|&v| {
                    let (a, s) = (x[v as usize], d[v as usize]);
                    [a, [a[0] + s[0], a[1] + s[1], a[2] + s[2]]]
                }),
                r,
            ),
        })
        .collect()
}

/// The mean largest side of `b` times [`CELL_FACTOR`]; a positive fallback when that is zero.
fn cell_size(b: &[Aabb]) -> f64 {
    // A sequential sum: a parallel one would round differently per thread count, and the cell
    // size (hence the statistics) must not depend on it.
    let mean = b.iter().map(Aabb::max_side).sum::<f64>() / b.len().max(1) as f64;
    let h = CELL_FACTOR * mean;
    if h.is_finite() && h > 0.0 {
        h
    } else {
        1.0
    }
}

/// The uniform grid of one pass.
#[derive(Clone, Copy)]
struct Grid {
    origin: [f64; 3],
    inv: f64,
    dims: [u64; 3],
}

impl Grid {
    fn new(all: &[&[Aabb]], h: f64) -> Self {
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        for b in all.iter().flat_map(|s| s.iter()) {
            for k in 0..3 {
                lo[k] = lo[k].min(b.lo[k]);
                hi[k] = hi[k].max(b.hi[k]);
            }
        }
        let extent = (0..3).map(|k| hi[k] - lo[k]).fold(0.0, f64::max);
        // Enough cells for the extent along every axis, at most MAX_DIM.
        let h = h.max(extent / (MAX_DIM - 2) as f64);
        let inv = 1.0 / h;
        let dims = [0, 1, 2].map(|k| {
            let d = ((hi[k] - lo[k]) * inv).floor();
            if d.is_finite() {
                (d as u64 + 1).min(MAX_DIM)
            } else {
                1
            }
        });
        Grid {
            origin: lo,
            inv,
            dims,
        }
    }

    /// Cell coordinate of `v` along axis `k`: monotone in `v` (so a point of a box lies in
    /// the box's cell range), clamped to the grid.
    fn coord(&self, v: f64, k: usize) -> u64 {
        let c = ((v - self.origin[k]) * self.inv).floor();
        // `as` saturates (and maps NaN to 0; inputs are checked finite).
        (c.max(0.0) as u64).min(self.dims[k] - 1)
    }

    fn key(&self, c: [u64; 3]) -> u64 {
        (c[0] * self.dims[1] + c[1]) * self.dims[2] + c[2]
    }

    /// Cell ranges of a box, inclusive.
    fn range(&self, b: &Aabb) -> ([u64; 3], [u64; 3]) {
        (
            [0, 1, 2].map(|k| self.coord(b.lo[k], k)),
            [0, 1, 2].map(|k| self.coord(b.hi[k], k)),
        )
    }

    fn count(&self, b: &Aabb) -> u64 {
        let (l, h) = self.range(b);
        (0..3).map(|k| h[k] - l[k] + 1).product()
    }

    /// Key of the cell holding the lower corner of the overlap of `a` and `b`.
    fn owner_key(&self, a: &Aabb, b: &Aabb) -> u64 {
        self.key([0, 1, 2].map(|k| self.coord(a.lo[k].max(b.lo[k]), k)))
    }
}

/// Tag bit of an entry from the second set.
const SECOND: u32 = 1 << 31;

/// Overlapping box pairs: `[i, j]` with `i` in `a` and `j` in `b`, or (`b = None`) `i < j` both
/// in `a`, for which `keep(i, j)` holds; sorted. `h` is the cell size (m).
fn grid_pairs(
    a: &[Aabb],
    b: Option<&[Aabb]>,
    h: f64,
    keep: &(dyn Fn(u32, u32) -> bool + Sync),
) -> (Vec<[u32; 2]>, GridStats) {
    let bs = b.unwrap_or(&[]);
    let grid = Grid::new(&[a, bs], h);
    let large_a: Vec<bool> = a.par_iter().map(|x| grid.count(x) > LARGE_CELLS).collect();
    let large_b: Vec<bool> = bs.par_iter().map(|x| grid.count(x) > LARGE_CELLS).collect();
    let emit = move |bx: &Aabb, id: u32| {
        let (l, h) = grid.range(bx);
        (l[0]..=h[0]).flat_map(move |i| {
            (l[1]..=h[1]).flat_map(move |j| (l[2]..=h[2]).map(move |k| (grid.key([i, j, k]), id)))
        })
    };
    let mut entries: Vec<(u64, u32)> = a
        .par_iter()
        .enumerate()
        .filter(|(i, _)| !large_a[*i])
        .flat_map_iter(|(i, bx)| emit(bx, i as u32))
        .chain(
            bs.par_iter()
                .enumerate()
                .filter(|(j, _)| !large_b[*j])
                .flat_map_iter(|(j, bx)| emit(bx, j as u32 | SECOND)),
        )
        .collect();
    entries.par_sort_unstable();
    // Runs of one key with at least one possible pair.
    let mut runs = Vec::new();
    let mut tested = 0usize;
    let mut s = 0;
    while s < entries.len() {
        let mut e = s + 1;
        while e < entries.len() && entries[e].0 == entries[s].0 {
            e += 1;
        }
        let run = &entries[s..e];
        let n_pairs = if b.is_some() {
            let split = run.partition_point(|x| x.1 & SECOND == 0);
            split * (run.len() - split)
        } else {
            run.len() * (run.len() - 1) / 2
        };
        if n_pairs > 0 {
            tested += n_pairs;
            runs.push((s, e));
        }
        s = e;
    }
    let in_cells = runs
        .par_iter()
        .fold(Vec::new, |mut out, &(s, e)| {
            let run = &entries[s..e];
            let key = run[0].0;
            match b {
                Some(bs) => {
                    let split = run.partition_point(|x| x.1 & SECOND == 0);
                    for &(_, i) in &run[..split] {
                        let ba = &a[i as usize];
                        for &(_, j) in &run[split..] {
                            let j = j & !SECOND;
                            let bb = &bs[j as usize];
                            if ba.overlaps(bb) && grid.owner_key(ba, bb) == key && keep(i, j) {
                                out.push([i, j]);
                            }
                        }
                    }
                }
                None => {
                    for (p, &(_, i)) in run.iter().enumerate() {
                        let ba = &a[i as usize];
                        for &(_, j) in &run[p + 1..] {
                            let bb = &a[j as usize];
                            if ba.overlaps(bb) && grid.owner_key(ba, bb) == key && keep(i, j) {
                                out.push([i, j]);
                            }
                        }
                    }
                }
            }
            out
        })
        .flatten_iter();
    // Large boxes: a pair with a large member is found by that member's scan; when both are
    // large, by the scan from `a` (two sets) or from the lower id (one set).
    let scan = |i: usize, others: &[Aabb], skip: &dyn Fn(usize) -> bool| -> Vec<usize> {
        others
            .iter()
            .enumerate()
            .filter(|&(j, o)| !skip(j) && a[i].overlaps(o))
            .map(|(j, _)| j)
            .collect()
    };
    let large: Vec<[u32; 2]> = match b {
        Some(bs) => {
            let from_a = (0..a.len())
                .into_par_iter()
                .filter(|&i| large_a[i])
                .flat_map_iter(|i| {
                    scan(i, bs, &|_| false)
                        .into_iter()
                        .map(move |j| [i as u32, j as u32])
                });
            let from_b = (0..bs.len())
                .into_par_iter()
                .filter(|&j| large_b[j])
                .flat_map_iter(|j| {
                    let bj = &bs[j];
                    a.iter()
                        .enumerate()
                        .filter(|&(i, x)| !large_a[i] && x.overlaps(bj))
                        .map(|(i, _)| [i as u32, j as u32])
                        .collect::<Vec<_>>()
                });
            from_a.chain(from_b).filter(|p| keep(p[0], p[1])).collect()
        }
        None => (0..a.len())
            .into_par_iter()
            .filter(|&i| large_a[i])
            .flat_map_iter(|i| {
                scan(i, a, &|j| j == i || (large_a[j] && j < i))
                    .into_iter()
                    .map(move |j| [i.min(j) as u32, i.max(j) as u32])
            })
            .filter(|p| keep(p[0], p[1]))
            .collect(),
    };
    let mut pairs: Vec<[u32; 2]> = in_cells.chain(large.into_par_iter()).collect();
    pairs.par_sort_unstable();
    let stats = GridStats {
        cell_size: 1.0 / grid.inv,
        entries: entries.len(),
        tested,
        large: large_a.iter().chain(&large_b).filter(|&&l| l).count(),
    };
    (pairs, stats)
}

/// Point–triangle and edge–edge candidates of `mesh` at positions `x` (m, length
/// [`CollisionMesh::num_vertices`]; see [`CollisionMesh::positions`]), swept to `x + dx` when
/// `dx` is given, for pairs that may come closer than `dhat` (m, ≥ 0); see the module docs.
/// Errors (one line) on mismatched lengths, a negative or non-finite `dhat`, or a non-finite
/// surface position.
pub fn candidates(
    mesh: &CollisionMesh,
    x: &[[f64; 3]],
    dx: Option<&[[f64; 3]]>,
    dhat: f64,
) -> Result<Candidates> {
    check(mesh, x, dx, dhat)?;
    let r = 0.5 * dhat;
    let vb = boxes(
        &mesh.vertices.iter().map(|&v| [v]).collect::<Vec<_>>(),
        x,
        dx,
        r,
    );
    let fb = boxes(&mesh.faces, x, dx, r);
    let eb = boxes(&mesh.edges, x, dx, r);
    let pt_keep = |v: u32, f: u32| {
        !mesh.point_in_face(v as usize, f as usize)
            && mesh.bodies_may_touch(mesh.vertex_body[v as usize], mesh.face_body[f as usize])
    };
    let ee_keep = |e: u32, g: u32| {
        !mesh.edges_share_vertex(e as usize, g as usize)
            && mesh.bodies_may_touch(mesh.edge_body[e as usize], mesh.edge_body[g as usize])
    };
    let ((pt, s1), (ee, s2)) = rayon::join(
        || grid_pairs(&vb, Some(&fb), cell_size(&fb), &pt_keep),
        || grid_pairs(&eb, None, cell_size(&eb), &ee_keep),
    );
    let mut stats = s1;
    stats.add(s2);
    Ok(Candidates { pt, ee, stats })
}

/// Face pairs `[f, g]` (`f < g`) whose boxes at `x`, grown by `inflation/2` (m), overlap, for
/// bodies that may touch — *including* pairs that share vertices (the intersection check
/// decides those). Sorted. Same errors as [`candidates`].
pub fn face_pairs(
    mesh: &CollisionMesh,
    x: &[[f64; 3]],
    inflation: f64,
) -> Result<(Vec<[u32; 2]>, GridStats)> {
    check(mesh, x, None, inflation)?;
    let fb = boxes(&mesh.faces, x, None, 0.5 * inflation);
    let keep = |f: u32, g: u32| {
        mesh.bodies_may_touch(mesh.face_body[f as usize], mesh.face_body[g as usize])
    };
    Ok(grid_pairs(&fb, None, cell_size(&fb), &keep))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_cell_lies_in_both_ranges() {
        // The de-duplication rule needs the overlap's lower corner inside both boxes' cell
        // ranges, also when it sits exactly on a cell boundary.
        let g = Grid::new(
            &[&[Aabb {
                lo: [0.0; 3],
                hi: [1.0; 3],
            }]],
            0.1,
        );
        let a = Aabb {
            lo: [0.3, 0.0, 0.2],
            hi: [0.5, 0.7, 0.2],
        };
        let b = Aabb {
            lo: [0.5, 0.1, 0.0],
            hi: [0.9, 0.2, 0.3],
        };
        assert!(a.overlaps(&b));
        let c = [0, 1, 2].map(|k| g.coord(a.lo[k].max(b.lo[k]), k));
        for bx in [&a, &b] {
            let (l, h) = g.range(bx);
            assert!(
                (0..3).all(|k| l[k] <= c[k] && c[k] <= h[k]),
                "{c:?} {l:?} {h:?}"
            );
        }
    }
}
