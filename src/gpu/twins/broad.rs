//! Twins of the device broad phase's kernels (`shaders/broad_boxes.wgsl`, `broad_clear.wgsl`,
//! `broad_insert.wgsl`, `broad_query.wgsl`, with `shaders/shared/broad_grid.wgsl`): f32,
//! operation for operation, with the kernels' integer atomics emulated in invocation order, so a
//! run on [`crate::gpu::Device::cpu`] is deterministic. The host driver is
//! [`crate::gpu::DeviceBroadPhase`].
//!
//! # What is found
//! The pairs of [`crate::contact::broad::candidates`]: point–triangle pairs (a surface vertex
//! against a face) and edge–edge pairs whose boxes — the primitive's corners at `x` and, swept,
//! at `x + dx`, grown by `r` on every side — overlap (closed boxes), minus the pairs that share
//! a vertex and the body pairs [`crate::contact::CollisionMesh::bodies_may_touch`] rules out.
//! The device boxes are rounded outward (below), so the device list is a superset of the host's
//! on the same positions; the extra pairs are the ones whose gap is within that rounding.
//!
//! # Conservative boxes in f32 (`broad_boxes`)
//! A box is grown by `g = r + 2⁻²⁰·(M + r)` instead of `r`, with M the largest `|x|` (plus
//! `|dx|` when swept) coordinate of its corners, in m relative to the positions' origin. 2⁻²⁰ =
//! 8ε_f32 ≈ 9.5·10⁻⁷. What it covers, per coordinate (u = 2⁻²⁴ the unit roundoff; every f32
//! operation here errs by at most one ulp whatever the device's rounding mode, ≤ 2u relative):
//! the positions' own conversion to f32 (≤ u·|x|, and ≤ u·|dx| for the displacements: the
//! boxes then hold the boxes of the f64 positions the f32 ones were rounded from), the sum
//! `x + dx` (≤ 2u(|x| + |dx|)), the subtraction `lo − g` / addition `hi + g` (≤ 2u(M + g)) and
//! the conversion of r to f32 and the rounding of `g` itself (≤ 7u·g): in all ≲ 8u·(M + r) ≪
//! 16u·(M + r) = 2⁻²⁰(M + r). Positions about 1 m from the origin therefore widen every box by
//! about 1 µm per side (a thousandth of a 1 mm d̂). Positions that the device accumulated over
//! many updates carry more error than one rounding; the margin covers one conversion, and the
//! caller's positions are otherwise taken as they are.
//!
//! # Why a hashed grid with atomics
//! The host sorts (cell, primitive) keys and walks runs of equal keys. On the device a sort is a
//! multi-pass radix sort (several kernels, a scan, O(entries) scratch per pass); a hashed grid
//! needs one pass to insert (one `atomicAdd` per primitive to reserve its entries, one
//! `atomicExchange` per entry to push it on its bucket's list) and one to query, with integer
//! atomics only. Its costs: the pair list comes out in a scheduling-dependent order on the GPU
//! (the set is what is defined; the twin's order is invocation order), and bucket collisions
//! make a query walk foreign entries, which it skips by their exact cell key (so collisions
//! cost time, never pairs). The table has T = the next power of two ≥ 2 × (faces + edges) (at
//! least 1024) buckets per grid; at the default cell size a primitive spans about 8 cells.
//!
//! # Grid and cell size
//! Two grids, one per pass like the host's: faces (queried by the vertices) and edges (queried
//! by the edges). A cell is a cube of side `h_p = 2 ×` the mean largest box side of the pass's
//! inserted primitives ([`crate::contact::broad::CELL_FACTOR`]; the mean from the device sum of
//! `side`, finished by `broad_clear`), in coordinates relative to the positions' origin, so no
//! bounding box is needed: a cell is `floor(v/h)` per axis, clamped to ±2²⁰, which keeps the map
//! monotone (what the de-duplication needs) and the key exact in 63 bits. A box spanning more
//! than [`LARGE_CELLS`] cells (a vertex swept far, a big obstacle triangle) is kept out of the
//! grid and tested directly: a large face goes to a list every vertex tests, a large query
//! (vertex or edge) tests every primitive of the other set.
//!
//! # Each pair once, without sorting
//! A query walks its box's cells; in a cell it tests the entries with that exact key, and
//! reports a pair only from the cell holding the lower corner of the two boxes' intersection
//! (per axis the later of the two boxes' start cells, as on the host): each overlapping pair of
//! grid boxes meets there exactly once. Edge pairs `[a, b]` are reported by the lower edge `a`
//! from the grid; a pair with a large member by that member's scan (the lower one when both are
//! large); a non-large vertex scans the large faces. So no pair appears twice and no
//! de-duplication pass is needed.
//!
//! # Capacity and overflow
//! The entries and the pairs have fixed capacities (the buffers' lengths). The counters count
//! every reservation and every pair, written or not: `counters[0]` pairs found, `counters[1]`
//! grid entries reserved, `counters[2]` large faces. A count above its capacity means overflow
//! (with the entry count exact, the pair count then a lower bound: entries that did not fit
//! were not inserted); the host grows the buffers to the counts and runs again.

use super::need;
use crate::gpu::{GpuPair, GpuVec4, Params};
use crate::{JelloError, Result};
use rayon::prelude::*;

/// A box spanning more cells than this, or more than [`LARGE_SPAN`] along one axis, is kept out
/// of the grid (module docs).
pub const LARGE_CELLS: u32 = 512;
/// See [`LARGE_CELLS`].
pub const LARGE_SPAN: u32 = 512;
/// Cell coordinates are clamped to `[-CELL_BIAS, CELL_BIAS)` (21 bits per axis).
pub const CELL_BIAS: i32 = 1 << 20;
/// An empty bucket, the end of a bucket's list.
pub const EMPTY: u32 = u32::MAX;
/// Body bits of a primitive record (`prims[i][3]`): the body index.
pub const BODY_MASK: u32 = 0x3fff_ffff;
/// Body bit: the body's self-contact is on.
pub const SELF_CONTACT: u32 = 1 << 30;
/// Body bit: the body is an obstacle.
pub const OBSTACLE: u32 = 1 << 31;
/// Relative slack of the boxes, 2⁻²⁰ = 8ε_f32 (module docs).
pub const BOX_SLACK: f32 = 9.536_743e-7;
/// Cell size over the mean largest box side (the host's [`crate::contact::broad::CELL_FACTOR`]).
pub const CELL_FACTOR: f32 = 2.0;
/// `params.u0` flag of `broad_boxes`: sweep the boxes over the displacements.
pub const BROAD_SWEPT: u32 = 1;
/// Workgroup size of the broad-phase kernels.
const GROUP: usize = 256;

/// Counter slots (`counters[k]`).
pub const COUNT_PAIRS: usize = 0;
/// Grid entries reserved.
pub const COUNT_ENTRIES: usize = 1;
/// Large faces listed.
pub const COUNT_LARGE: usize = 2;
/// Words of the counter buffer.
pub const COUNTERS: usize = 4;

fn cell_coord(v: f32, inv: f32) -> i32 {
    let c = (v * inv).floor();
    if c >= -(CELL_BIAS as f32) {
        c.min((CELL_BIAS - 1) as f32) as i32
    } else {
        -CELL_BIAS
    }
}

fn cell_of(p: &GpuVec4, inv: f32) -> [i32; 3] {
    [0, 1, 2].map(|k| cell_coord(p[k], inv))
}

fn cell_span(lo: [i32; 3], hi: [i32; 3]) -> [u32; 3] {
    [0, 1, 2].map(|k| (hi[k] - lo[k]).max(0) as u32 + 1)
}

fn is_large(s: [u32; 3]) -> bool {
    s.iter().any(|&v| v > LARGE_SPAN) || s[0] * s[1] * s[2] > LARGE_CELLS
}

fn biased(c: [i32; 3]) -> [u32; 3] {
    c.map(|v| (v + CELL_BIAS) as u32)
}

fn cell_key(u: [u32; 3]) -> [u32; 2] {
    [u[0] | (u[1] << 21), (u[1] >> 11) | (u[2] << 10)]
}

fn cell_bucket(u: [u32; 3], t: u32) -> u32 {
    (u[0].wrapping_mul(73_856_093) ^ u[1].wrapping_mul(19_349_663) ^ u[2].wrapping_mul(83_492_791))
        & (t - 1)
}

fn overlap(alo: &GpuVec4, ahi: &GpuVec4, blo: &GpuVec4, bhi: &GpuVec4) -> bool {
    (0..3).all(|k| alo[k] <= bhi[k] && blo[k] <= ahi[k])
}

/// [`crate::contact::CollisionMesh::bodies_may_touch`] on two primitives' body bits.
pub fn bodies_may_touch(a: u32, b: u32) -> bool {
    if a & b & OBSTACLE != 0 {
        return false;
    }
    (a & BODY_MASK) != (b & BODY_MASK) || a & SELF_CONTACT != 0
}

/// Buckets per grid of a head buffer of `len` words over `nf` faces (`2T + nf`), checked to be a
/// power of two.
fn table_size(len: usize, nf: usize, what: &str) -> Result<u32> {
    let t = len.checked_sub(nf).map_or(0, |r| r / 2);
    if t == 0 || !t.is_power_of_two() || t > u32::MAX as usize {
        return Err(JelloError::Invalid(format!(
            "{what}: {len} head words over {nf} faces is not 2T + faces with T a power of two"
        )));
    }
    Ok(t as u32)
}

/// Twin of `broad_boxes.wgsl`: for primitive i < n, `boxes[2i]`, `boxes[2i + 1]` = the box of
/// its corners at `x` (and `x + dx` with u0 & [`BROAD_SWEPT`]) grown by f0 (m) plus the rounding
/// slack (module docs), and `side[i]` its largest side (m).
pub fn broad_boxes(
    p: &Params,
    prims: &[[u32; 4]],
    x: &[GpuVec4],
    dx: &[GpuVec4],
    boxes: &mut [GpuVec4],
    side: &mut [f32],
) -> Result<()> {
    let n = p.n as usize;
    need(prims.len(), n, "broad_boxes prims")?;
    need(boxes.len(), 2 * n, "broad_boxes boxes")?;
    need(side.len(), n, "broad_boxes side")?;
    let swept = p.u0 & BROAD_SWEPT != 0;
    let nv = if swept {
        x.len().min(dx.len())
    } else {
        x.len()
    };
    if let Some(i) = (0..n).find(|&i| prims[i][..3].iter().any(|&v| v as usize >= nv)) {
        return Err(JelloError::Invalid(format!(
            "broad_boxes: primitive {i} = {:?} indexes past {nv} positions",
            prims[i]
        )));
    }
    let r = p.f0;
    boxes[..2 * n]
        .par_chunks_mut(2)
        .zip(side[..n].par_iter_mut())
        .enumerate()
        .for_each(|(i, (b, s))| {
            let mut lo = [f32::MAX; 3];
            let mut hi = [-f32::MAX; 3];
            let mut m = 0.0f32;
            for &v in &prims[i][..3] {
                let pv = x[v as usize];
                let mut a = [0.0f32; 3];
                for k in 0..3 {
                    lo[k] = lo[k].min(pv[k]);
                    hi[k] = hi[k].max(pv[k]);
                    a[k] = pv[k].abs();
                }
                if swept {
                    let d = dx[v as usize];
                    for k in 0..3 {
                        let q = pv[k] + d[k];
                        lo[k] = lo[k].min(q);
                        hi[k] = hi[k].max(q);
                        a[k] += d[k].abs();
                    }
                }
                m = m.max(a[0].max(a[1].max(a[2])));
            }
            let g = r + BOX_SLACK * (m + r);
            let lo = lo.map(|v| v - g);
            let hi = hi.map(|v| v + g);
            b[0] = [lo[0], lo[1], lo[2], 0.0];
            b[1] = [hi[0], hi[1], hi[2], 0.0];
            let sd = [0, 1, 2].map(|k| hi[k] - lo[k]);
            *s = sd[0].max(sd[1].max(sd[2]));
        });
    Ok(())
}

/// 1/h (m⁻¹) of a grid from the sum of its primitives' largest sides (m) and their count.
fn inverse_cell(sum: f32, count: u32) -> f32 {
    if count == 0 {
        return 1.0;
    }
    let inv = 1.0 / (CELL_FACTOR * (sum / count as f32));
    if inv > 0.0 && inv < f32::MAX {
        inv
    } else {
        1.0
    }
}

/// Twin of `broad_clear.wgsl`: `heads[..n]` = [`EMPTY`]; `sums[2 + p]` = 1/h of grid p (from the
/// side sums `sums[p]` over u0 faces and u1 edges; module docs) and the counters zeroed.
pub fn broad_clear(
    p: &Params,
    sums: &mut [f32],
    heads: &mut [u32],
    counters: &mut [u32],
) -> Result<()> {
    let n = p.n as usize;
    need(heads.len(), n, "broad_clear heads")?;
    need(sums.len(), 4, "broad_clear sums")?;
    need(counters.len(), COUNTERS, "broad_clear counters")?;
    heads[..n].fill(EMPTY);
    if n > 0 {
        sums[2] = inverse_cell(sums[0], p.u0);
        sums[3] = inverse_cell(sums[1], p.u1);
        counters[..COUNTERS].fill(0);
    }
    Ok(())
}

/// Twin of `broad_insert.wgsl`: primitives `0..n` (faces `0..u0`, then edges) into their grids,
/// in invocation order (module docs).
pub fn broad_insert(
    p: &Params,
    boxes: &[GpuVec4],
    sums: &[f32],
    heads: &mut [u32],
    entries: &mut [[u32; 4]],
    counters: &mut [u32],
) -> Result<()> {
    let n = p.n as usize;
    let nf = p.u0 as usize;
    need(boxes.len(), 2 * n, "broad_insert boxes")?;
    need(sums.len(), 4, "broad_insert sums")?;
    need(counters.len(), COUNTERS, "broad_insert counters")?;
    let t = table_size(heads.len(), nf, "broad_insert")?;
    let cap = entries.len() as u32;
    for i in 0..n {
        let pass = usize::from(i >= nf);
        let inv = sums[2 + pass];
        let lo = cell_of(&boxes[2 * i], inv);
        let hi = cell_of(&boxes[2 * i + 1], inv);
        let span = cell_span(lo, hi);
        if is_large(span) {
            if pass == 0 {
                let k = counters[COUNT_LARGE] as usize;
                counters[COUNT_LARGE] = counters[COUNT_LARGE].wrapping_add(1);
                let slot = 2 * t as usize + k;
                if slot >= heads.len() {
                    return Err(JelloError::Invalid(format!(
                        "broad_insert: large face {k} past the list's {nf} slots"
                    )));
                }
                heads[slot] = i as u32;
            }
            continue;
        }
        let cells = span[0] * span[1] * span[2];
        let base = counters[COUNT_ENTRIES];
        counters[COUNT_ENTRIES] = base.wrapping_add(cells);
        match base.checked_add(cells) {
            Some(end) if end <= cap => {}
            _ => continue,
        }
        let mut e = base;
        for cx in lo[0]..=hi[0] {
            for cy in lo[1]..=hi[1] {
                for cz in lo[2]..=hi[2] {
                    let u = biased([cx, cy, cz]);
                    let key = cell_key(u);
                    let h = &mut heads[pass * t as usize + cell_bucket(u, t) as usize];
                    let old = std::mem::replace(h, e);
                    entries[e as usize] = [i as u32, key[0], key[1], old];
                    e += 1;
                }
            }
        }
    }
    Ok(())
}

/// The broad-phase query's read-only inputs.
struct Query<'a> {
    prims: &'a [[u32; 4]],
    boxes: &'a [GpuVec4],
    len2: &'a [f32],
    nf: u32,
}

impl Query<'_> {
    fn lo(&self, i: u32) -> &GpuVec4 {
        &self.boxes[2 * i as usize]
    }
    fn hi(&self, i: u32) -> &GpuVec4 {
        &self.boxes[2 * i as usize + 1]
    }
    fn overlaps(&self, a: u32, b: u32) -> bool {
        overlap(self.lo(a), self.hi(a), self.lo(b), self.hi(b))
    }
    fn large(&self, i: u32, inv: f32) -> bool {
        is_large(cell_span(
            cell_of(self.lo(i), inv),
            cell_of(self.hi(i), inv),
        ))
    }
    /// The record of query primitive `p` and primitive `i` of the other set, after the
    /// exclusions (`broad_query.wgsl`'s `candidate`).
    fn candidate(&self, p: u32, i: u32, pass: u32, out: &mut Vec<GpuPair>) {
        let a = self.prims[p as usize];
        let b = self.prims[i as usize];
        if !bodies_may_touch(a[3], b[3]) {
            return;
        }
        if pass == 0 {
            if a[0] == b[0] || a[0] == b[1] || a[0] == b[2] {
                return;
            }
            out.push(GpuPair {
                v: [a[0], b[0], b[1], b[2]],
                kind: GpuPair::POINT_TRIANGLE,
                eps_x: 0.0,
                pad: [0; 2],
            });
        } else {
            if a[0] == b[0] || a[0] == b[1] || a[1] == b[0] || a[1] == b[1] {
                return;
            }
            let (lo, hi) = (p.min(i), p.max(i));
            let (el, eh) = (self.prims[lo as usize], self.prims[hi as usize]);
            let eps =
                (1e-3f32 * self.len2[(lo - self.nf) as usize]) * self.len2[(hi - self.nf) as usize];
            out.push(GpuPair {
                v: [el[0], el[1], eh[0], eh[1]],
                kind: GpuPair::EDGE_EDGE,
                eps_x: eps,
                pad: [0; 2],
            });
        }
    }
}

/// Twin of `broad_query.wgsl`: the candidate pairs of query primitives `u0..u0 + n` (edges,
/// then vertices; u0 faces, u1 edges), appended in invocation order (module docs).
#[allow(clippy::too_many_arguments)]
pub fn broad_query(
    p: &Params,
    prims: &[[u32; 4]],
    boxes: &[GpuVec4],
    sums: &[f32],
    heads: &[u32],
    entries: &[[u32; 4]],
    len2: &[f32],
    pairs: &mut [GpuPair],
    counters: &mut [u32],
) -> Result<()> {
    let (nf, ne) = (p.u0, p.u1);
    let total = nf as usize + p.n as usize;
    need(prims.len(), total, "broad_query prims")?;
    need(boxes.len(), 2 * total, "broad_query boxes")?;
    need(sums.len(), 4, "broad_query sums")?;
    need(len2.len(), ne as usize, "broad_query len2")?;
    need(counters.len(), COUNTERS, "broad_query counters")?;
    if ne as usize > p.n as usize {
        return Err(JelloError::Invalid(format!(
            "broad_query: {ne} edges among {} query primitives",
            p.n
        )));
    }
    let t = table_size(heads.len(), nf as usize, "broad_query")?;
    let nl = counters[COUNT_LARGE].min(nf);
    let large_faces = &heads[2 * t as usize..2 * t as usize + nl as usize];
    if let Some(&i) = large_faces.iter().find(|&&i| i >= nf) {
        return Err(JelloError::Invalid(format!(
            "broad_query: large-face list holds {i}, not one of {nf} faces"
        )));
    }
    let q = Query {
        prims,
        boxes,
        len2,
        nf,
    };
    let found: Vec<Result<Vec<GpuPair>>> = (0..p.n)
        .into_par_iter()
        .with_min_len(GROUP)
        .map(|qi| {
            let pi = nf + qi;
            let mut out = Vec::new();
            let pass = u32::from(pi < nf + ne);
            let inv = sums[2 + pass as usize];
            let (alo, ahi) = (q.lo(pi), q.hi(pi));
            let lo = cell_of(alo, inv);
            let hi = cell_of(ahi, inv);
            let (first, end) = if pass == 1 { (nf, nf + ne) } else { (0, nf) };
            if is_large(cell_span(lo, hi)) {
                for i in first..end {
                    if i == pi || !q.overlaps(pi, i) {
                        continue;
                    }
                    if pass == 0 || i > pi || !q.large(i, inv) {
                        q.candidate(pi, i, pass, &mut out);
                    }
                }
                return Ok(out);
            }
            for cx in lo[0]..=hi[0] {
                for cy in lo[1]..=hi[1] {
                    for cz in lo[2]..=hi[2] {
                        let cell = [cx, cy, cz];
                        let u = biased(cell);
                        let key = cell_key(u);
                        let mut e = heads[(pass * t + cell_bucket(u, t)) as usize];
                        let mut steps = 0usize;
                        while (e as usize) < entries.len() {
                            steps += 1;
                            if steps > entries.len() {
                                return Err(JelloError::Invalid(format!(
                                    "broad_query: the list of bucket of cell {cell:?} cycles"
                                )));
                            }
                            let ent = entries[e as usize];
                            let i = ent[0];
                            if ent[1..3] == key && !(first..end).contains(&i) {
                                return Err(JelloError::Invalid(format!(
                                    "broad_query: entry {e} = {ent:?} in cell {cell:?} names no \
                                     primitive of its grid"
                                )));
                            }
                            e = ent[3];
                            if ent[1] != key[0] || ent[2] != key[1] || (pass == 1 && i <= pi) {
                                continue;
                            }
                            let bl = cell_of(q.lo(i), inv);
                            if q.overlaps(pi, i) && (0..3).all(|k| lo[k].max(bl[k]) == cell[k]) {
                                q.candidate(pi, i, pass, &mut out);
                            }
                        }
                    }
                }
            }
            if pass == 0 {
                for &i in large_faces {
                    if q.overlaps(pi, i) {
                        q.candidate(pi, i, pass, &mut out);
                    }
                }
            }
            Ok(out)
        })
        .collect();
    // The appends in invocation order: atomicAdd on counters[0], written below capacity.
    for list in found {
        for pr in list? {
            let k = counters[COUNT_PAIRS] as usize;
            counters[COUNT_PAIRS] = counters[COUNT_PAIRS].wrapping_add(1);
            if k < pairs.len() {
                pairs[k] = pr;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cell_keys_are_exact_and_cells_monotone() {
        // The key packs the three biased 21-bit coordinates without loss (the query skips
        // foreign entries by it, so two cells must never share one).
        let unpack = |k: [u32; 2]| {
            let m = (1u32 << 21) - 1;
            [
                k[0] & m,
                ((k[0] >> 21) | (k[1] << 11)) & m,
                (k[1] >> 10) & m,
            ]
        };
        let edge = [-CELL_BIAS, -CELL_BIAS + 1, -1, 0, 1, 12345, CELL_BIAS - 1];
        for &a in &edge {
            for &b in &edge {
                for &c in &edge {
                    let u = biased([a, b, c]);
                    assert_eq!(unpack(cell_key(u)), u, "cell {:?}", [a, b, c]);
                }
            }
        }
        // floor(v/h), clamped, is monotone in v over the whole f32 range, NaN at the bottom.
        let inv = 37.0f32;
        let mut vs: Vec<f32> = (-200..=200)
            .map(|k| k as f32 * 0.01 / 3.0)
            .chain([f32::MIN, -1e30, -1e5, 1e5, 1e30, f32::MAX, 0.0, -0.0])
            .collect();
        vs.sort_by(f32::total_cmp);
        let cs: Vec<i32> = vs.iter().map(|&v| cell_coord(v, inv)).collect();
        assert!(cs.windows(2).all(|w| w[0] <= w[1]), "{cs:?}");
        assert_eq!(cs[0], -CELL_BIAS);
        assert_eq!(*cs.last().unwrap(), CELL_BIAS - 1);
        assert_eq!(cell_coord(f32::NAN, inv), -CELL_BIAS);
    }

    #[test]
    fn body_bits_follow_the_mesh_rule() {
        // CollisionMesh::bodies_may_touch: never two obstacles; a body with itself only with
        // self-contact.
        let (a, b) = (3, 4);
        assert!(bodies_may_touch(a, b));
        assert!(!bodies_may_touch(a, a));
        assert!(bodies_may_touch(a | SELF_CONTACT, a | SELF_CONTACT));
        assert!(bodies_may_touch(a | OBSTACLE, b));
        assert!(!bodies_may_touch(a | OBSTACLE, b | OBSTACLE));
    }
}
