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
//! corners), so no pair comes out twice and no global de-duplication is needed. Since the cell
//! map is monotone, that cell is per axis the later of the two boxes' start cells, so each
//! entry carries three bits "the box starts in this cell along x, y, z" and a cell tests a pair
//! only when the OR of their bits is all three: most pairs sharing a cell are skipped before
//! their boxes are read. Boxes are gathered into entry order after the sort, so a cell's tests
//! read contiguous memory. Cells are processed in parallel and the result is sorted once.
//! Cost: O(n log n) for the sort plus the pairs in shared cells, O(n) memory for a surface of n
//! primitives of bounded size ratio.
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
//! **Measured** (`cargo bench --bench contact`, release, rayon's 2 threads on the 2-core
//! development machine shared with other builds — load average 3.8 during the run, so the
//! times are pessimistic and noisy by ±20 %; medians of 7 runs). d̂ = 10⁻³ × bounding-box
//! diagonal; "swept": every vertex displaced by a random vector of up to half the mean edge
//! length. Boxes are n³-cell `box_grid`s of 12 n² triangles; the others are ../shared/meshes.
//!
//! ```text
//! case             faces   edges  rest ms  rest pt+ee      swept ms  swept pt+ee     intersect ms
//! box 16³           3072    4608     2.2   3072+10728         3.2    3370+11717          26.6
//! box 32³          12288   18432     8.9   12288+42984       11.8    14333+49773        109.4
//! box 64³          49152   73728    40.7   49152+172008      54.3    62725+215728       459.0
//! box 96³         110592  165888    94.3   110592+387048    125.7    156770+534234     1022.4
//! armadillo_18k     7608   11412     6.8   688+3674          10.6    11057+36044         21.0
//! bunny_20k         8302   12453     7.2   776+3859          11.4    12399+39401         21.3
//! armadillo_114k   39924   59886    43.5   12168+45611       68.1    90290+271653        89.0
//! bunny_110k       35708   53562    37.1   9296+35126        59.6    77696+232472        75.4
//! ```
//!
//! On the boxes' flat sides every vertex's box (flat across the side) touches the boxes of the
//! coplanar triangles whose bounding square it is a corner of: at rest, one point–triangle
//! candidate per face at a distance of an edge length, which the exact distance then drops.
//!
//! Least-squares exponent of time in the number of faces (log–log, all ten cases / the eight
//! with ≥ 2,000 faces): broad phase at rest 1.05 / 1.06, swept 1.06 / 1.04, the candidate count
//! 1.08 / 1.09, the intersection check 0.96 / 1.06 — linear, as a grid should be (the sort's
//! log n does not show). The flat sides of the boxes are the intersection check's worst case:
//! every touching coplanar pair takes the exact predicates' slowest (exactly-zero) path.
//!
//! Cell factor (swept, ms on armadillo_114k / box 96³): 0.5 → 186 / 417, 1 → 85 / 175,
//! 1.5 → 73 / 166, 2 → 68 / 123, 3 → 66 / 136, 4 → 67 / 125. Below 1.5 the (cell, primitive)
//! entries dominate (1.6 M at 0.5 against 0.29 M at 2 on the armadillo); above 3 the pairs
//! sharing a cell do (11 M at 4 against 5.5 M at 2). 2 sits in the flat optimum for both
//! surfaces; [`CELL_FACTOR`]. A profile (perf, one thread, armadillo_114k swept, 57 ms) splits
//! as the in-cell loops ~40 %, the two sorts ~30 %, emitting entries ~10 %. Tried and dropped:
//! sweep-and-prune along x inside each cell (sorting each cell cost what it saved).

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
    #[inline]
    pub fn overlaps(&self, o: &Aabb) -> bool {
        (self.lo[0] <= o.hi[0])
            & (o.lo[0] <= self.hi[0])
            & (self.lo[1] <= o.hi[1])
            & (o.lo[1] <= self.hi[1])
            & (self.lo[2] <= o.hi[2])
            & (o.lo[2] <= self.hi[2])
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
    /// Pairs of boxes sharing a cell (before the start-bit filter: an upper bound on the box
    /// tests).
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

/// Tuning of the grid (the defaults are the measured choice).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BroadParams {
    /// Cell size over the mean largest box side of the pass ([`CELL_FACTOR`]).
    pub cell_factor: f64,
}

impl Default for BroadParams {
    fn default() -> Self {
        BroadParams {
            cell_factor: CELL_FACTOR,
        }
    }
}

/// The mean largest side of `b` times `factor`; a positive fallback when that is zero.
fn cell_size(b: &[Aabb], factor: f64) -> f64 {
    // A sequential sum: a parallel one would round differently per thread count, and the cell
    // size (hence the statistics) must not depend on it.
    let mean = b.iter().map(Aabb::max_side).sum::<f64>() / b.len().max(1) as f64;
    let h = factor * mean;
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
        let c = (v - self.origin[k]) * self.inv;
        // For c ≥ 0 truncation is floor (and cheaper: `floor` is a libm call on baseline
        // x86-64); `as` saturates (inputs are checked finite).
        if c > 0.0 {
            (c as u64).min(self.dims[k] - 1)
        } else {
            0
        }
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
}

/// Tag bit of an entry from the second set.
const SECOND: u32 = 1 << 31;

/// Overlapping box pairs: `[i, j]` with `i` in `a` and `j` in `b`, or (`b = None`) `i < j` both
/// in `a`, for which `keep(i, j)` holds; sorted. `h` is the cell size (m).
fn grid_pairs(
    a: &[Aabb],
    b: Option<&[Aabb]>,
    h: f64,
    keep: &(impl Fn(u32, u32) -> bool + Sync),
) -> (Vec<[u32; 2]>, GridStats) {
    let bs = b.unwrap_or(&[]);
    let grid = Grid::new(&[a, bs], h);
    let large_a: Vec<bool> = a.par_iter().map(|x| grid.count(x) > LARGE_CELLS).collect();
    let large_b: Vec<bool> = bs.par_iter().map(|x| grid.count(x) > LARGE_CELLS).collect();
    // Each entry carries, per axis, whether the box starts in that cell (bits 0, 1, 2): the
    // owner cell of a pair is, per axis, the later of the two start cells (the cell map is
    // monotone), so a cell owns a pair iff on every axis one of the two boxes starts there.
    let emit = move |bx: &Aabb, id: u32| {
        let (l, h) = grid.range(bx);
        (l[0]..=h[0]).flat_map(move |i| {
            (l[1]..=h[1]).flat_map(move |j| {
                (l[2]..=h[2]).map(move |k| {
                    let starts =
                        u8::from(i == l[0]) | u8::from(j == l[1]) << 1 | u8::from(k == l[2]) << 2;
                    (grid.key([i, j, k]), id, starts)
                })
            })
        })
    };
    let mut entries: Vec<(u64, u32, u8)> = a
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
    // The boxes in entry order: the tests in a cell then read contiguous memory instead of
    // two random boxes per test (one gather per entry, and entries ≪ tests).
    let sorted: Vec<Aabb> = entries
        .par_iter()
        .map(|&(_, id, _)| {
            if id & SECOND == 0 {
                a[id as usize]
            } else {
                bs[(id & !SECOND) as usize]
            }
        })
        .collect();
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
            let boxes = &sorted[s..e];
            // Two sets: `a` entries sort before `b` entries (tag bit); one set: all pairs.
            let split = if b.is_some() {
                run.partition_point(|x| x.1 & SECOND == 0)
            } else {
                0
            };
            for p in 0..run.len() {
                let ba = &boxes[p];
                let (i, starts) = (run[p].1, run[p].2);
                let others = if b.is_some() {
                    if p >= split {
                        break;
                    }
                    split..run.len()
                } else {
                    p + 1..run.len()
                };
                for q in others {
                    let bb = &boxes[q];
                    if starts | run[q].2 == 0b111 && ba.overlaps(bb) {
                        let j = run[q].1 & !SECOND;
                        if keep(i, j) {
                            out.push([i, j]);
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
    candidates_with(mesh, x, dx, dhat, BroadParams::default())
}

/// [`candidates`] with explicit grid tuning (for benches); errors also on a cell factor that is
/// not finite and positive.
pub fn candidates_with(
    mesh: &CollisionMesh,
    x: &[[f64; 3]],
    dx: Option<&[[f64; 3]]>,
    dhat: f64,
    params: BroadParams,
) -> Result<Candidates> {
    check(mesh, x, dx, dhat)?;
    let factor = params.cell_factor;
    if !(factor.is_finite() && factor > 0.0) {
        return Err(JelloError::Invalid(format!(
            "broad phase: cell factor must be finite and > 0, got {factor}"
        )));
    }
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
        || grid_pairs(&vb, Some(&fb), cell_size(&fb, factor), &pt_keep),
        || grid_pairs(&eb, None, cell_size(&eb, factor), &ee_keep),
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
    Ok(grid_pairs(&fb, None, cell_size(&fb, CELL_FACTOR), &keep))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_flags_pick_the_cell_of_the_overlaps_lower_corner() {
        // The de-duplication rule: the cell holding max(lo_a, lo_b) lies in both boxes' cell
        // ranges, and is, per axis, the later of the two start cells — also when a corner sits
        // exactly on a cell boundary.
        let g = Grid::new(
            &[&[Aabb {
                lo: [0.0; 3],
                hi: [1.0; 3],
            }]],
            0.1,
        );
        let boxes = [
            Aabb {
                lo: [0.3, 0.0, 0.2],
                hi: [0.5, 0.7, 0.2],
            },
            Aabb {
                lo: [0.5, 0.1, 0.0],
                hi: [0.9, 0.2, 0.3],
            },
            Aabb {
                lo: [0.45, 0.15, 0.1],
                hi: [0.5, 0.15, 0.25],
            },
        ];
        for a in &boxes {
            for b in &boxes {
                assert!(a.overlaps(b));
                let c = [0, 1, 2].map(|k| g.coord(a.lo[k].max(b.lo[k]), k));
                let (la, ha) = g.range(a);
                let (lb, hb) = g.range(b);
                for k in 0..3 {
                    assert!(la[k] <= c[k] && c[k] <= ha[k] && lb[k] <= c[k] && c[k] <= hb[k]);
                    assert_eq!(c[k], la[k].max(lb[k]));
                }
            }
        }
    }
}
