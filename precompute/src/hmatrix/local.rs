//! Local sketches of the cluster bases ([`super::Sketch::Local`]).
//!
//! For a cluster `I` let `d` be the box distance to its nearest far partner and `B` the free
//! vertices strictly closer than `d` to `I`'s box (so `B ⊇ I`, and no far partner's vertex is
//! in `B`). A source `x` supported on the far partners gives `u = G x` with `(H̄ u)_r = 0` on
//! every row `r` of `B`, hence `u_B = −H̄_BB⁻¹ H̄_{B,∂B} u_∂B` (`∂B`: the vertices outside `B`
//! coupled to it) and `G[I, far(I)]`'s range lies in that of the local operator
//! `E_I: u_∂B ↦ (−H̄_BB⁻¹ H̄_{B,∂B} u_∂B)_I`. Sketching `E_I` with Gaussian boundary data
//! needs a factorisation of the small `H̄_BB` instead of a solve with the whole `H̄`.

use std::sync::Arc;

use faer::Par;

use crate::cholesky::{Ordering, SolveScratch, SparseCholesky};
use crate::rng::SplitMix64;
use crate::sparse::{Adjacency, SymSparse, SymmetricPattern};
use crate::tree::ClusterTree;
use crate::Result;

/// Axis-aligned box `(lo, hi)`.
pub(super) type Aabb = ([f64; 3], [f64; 3]);

/// Distance between two boxes (0 when they overlap).
pub(super) fn box_distance(a: &Aabb, b: &Aabb) -> f64 {
    (0..3)
        .map(|d| (b.0[d] - a.1[d]).max(a.0[d] - b.1[d]).max(0.0).powi(2))
        .sum::<f64>()
        .sqrt()
}

/// Distance from a point to a box.
fn point_distance(p: &[f64; 3], b: &Aabb) -> f64 {
    (0..3)
        .map(|d| (b.0[d] - p[d]).max(p[d] - b.1[d]).max(0.0).powi(2))
        .sum::<f64>()
        .sqrt()
}

/// What the local sketches read: the rest Hessian (DOF `3v + d` for vertex `v`), the vertex
/// positions and the vertex graph of `H̄` (`SymmetricPattern::block_graph(3)`).
pub(super) struct LocalProblem<'a> {
    pub hbar: &'a SymSparse,
    pub positions: &'a [[f64; 3]],
    pub graph: Adjacency,
    pub boxes: Vec<Aabb>,
    /// Per vertex: in the tree (pinned vertices are identity rows of `H̄`, coupled to nothing).
    pub free: Vec<bool>,
}

/// Per-thread scratch: vertex → local index in `B` (`u32::MAX` outside) and in `∂B`.
#[derive(Default)]
pub(super) struct LocalScratch {
    in_b: Vec<u32>,
    in_db: Vec<u32>,
    solve: SolveScratch,
}

/// Sizes of one local problem, for the build's statistics.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct LocalSize {
    pub interior: usize,
    pub boundary: usize,
}

impl LocalProblem<'_> {
    /// `Y_I = E_I Ω` with `p` Gaussian columns on `∂B` (column-major `3|I| × p`), for cluster
    /// `c` whose nearest far partner is `reach` away.
    pub(super) fn sketch(
        &self,
        tree: &ClusterTree,
        c: usize,
        reach: f64,
        p: usize,
        seed: u64,
        scratch: &mut LocalScratch,
    ) -> Result<(Vec<f64>, LocalSize)> {
        let nv = self.positions.len();
        if scratch.in_b.len() != nv {
            scratch.in_b = vec![u32::MAX; nv];
            scratch.in_db = vec![u32::MAX; nv];
        }
        let bc = self.boxes[c];
        // B by a pruned descent of the tree (only free vertices are in it; pinned ones are
        // identity rows of H̄, coupled to nothing).
        let mut b: Vec<u32> = Vec::new();
        let mut stack = vec![0usize];
        while let Some(node) = stack.pop() {
            if box_distance(&self.boxes[node], &bc) >= reach {
                continue;
            }
            match tree.children[node] {
                Some((l, r)) => stack.extend([l as usize, r as usize]),
                None => b.extend(
                    tree.members(node)
                        .iter()
                        .filter(|&&v| point_distance(&self.positions[v as usize], &bc) < reach),
                ),
            }
        }
        // Ascending vertex ids keep the local DOF order that of H̄, so the upper triangle
        // stays the upper triangle.
        b.sort_unstable();
        for (l, &v) in b.iter().enumerate() {
            scratch.in_b[v as usize] = l as u32;
        }
        let mut db: Vec<u32> = Vec::new();
        for &v in &b {
            for &w in self.graph.neighbours(v as usize) {
                let wu = w as usize;
                if self.free[wu] && scratch.in_b[wu] == u32::MAX && scratch.in_db[wu] == u32::MAX {
                    scratch.in_db[wu] = db.len() as u32;
                    db.push(w);
                }
            }
        }
        let out = self.sketch_on(tree, c, &b, &db, p, seed, scratch);
        for &v in &b {
            scratch.in_b[v as usize] = u32::MAX;
        }
        for &w in &db {
            scratch.in_db[w as usize] = u32::MAX;
        }
        Ok((
            out?,
            LocalSize {
                interior: b.len(),
                boundary: db.len(),
            },
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn sketch_on(
        &self,
        tree: &ClusterTree,
        c: usize,
        b: &[u32],
        db: &[u32],
        p: usize,
        seed: u64,
        scratch: &mut LocalScratch,
    ) -> Result<Vec<f64>> {
        let pat = self.hbar.pattern();
        let (col_ptr, row_idx, vals) = (pat.col_ptr(), pat.row_idx(), self.hbar.values());
        let nb = 3 * b.len();
        let nd = 3 * db.len();
        let local = |r: usize, map: &[u32]| -> Option<usize> {
            let l = map[r / 3];
            (l != u32::MAX).then(|| 3 * l as usize + r % 3)
        };
        // H̄_BB (upper CSC, filtered from H̄'s).
        let mut entries = Vec::new();
        let mut values = Vec::new();
        for &v in b {
            for d in 0..3 {
                let col = 3 * v as usize + d;
                let lc = local(col, &scratch.in_b).unwrap_or(0);
                for k in col_ptr[col]..col_ptr[col + 1] {
                    if let Some(lr) = local(row_idx[k], &scratch.in_b) {
                        entries.push((lr, lc));
                        values.push(vals[k]);
                    }
                }
            }
        }
        let pattern = Arc::new(SymmetricPattern::from_entries(nb, entries.iter().copied())?);
        let mut a = SymSparse::zeros(pattern.clone());
        {
            let av = a.values_mut();
            for (&(r, col), &x) in entries.iter().zip(&values) {
                if let Some(k) = pattern.find(r, col) {
                    av[k] = x;
                }
            }
        }
        // Gaussian boundary data, then rhs = −H̄_{B,∂B} ω (both triangles of H̄: an entry
        // (r, c) with r ≤ c is stored in column c only).
        let mut rng = SplitMix64::new(seed);
        let omega: Vec<f64> = (0..nd * p).map(|_| rng.normal()).collect();
        let mut rhs = vec![0.0; nb * p];
        let mut push = |lr: usize, ld: usize, h: f64| {
            for q in 0..p {
                rhs[q * nb + lr] -= h * omega[q * nd + ld];
            }
        };
        for &w in db {
            for d in 0..3 {
                let col = 3 * w as usize + d;
                let ld = local(col, &scratch.in_db).unwrap_or(0);
                for k in col_ptr[col]..col_ptr[col + 1] {
                    if let Some(lr) = local(row_idx[k], &scratch.in_b) {
                        push(lr, ld, vals[k]);
                    }
                }
            }
        }
        for &v in b {
            for d in 0..3 {
                let col = 3 * v as usize + d;
                let lr = local(col, &scratch.in_b).unwrap_or(0);
                for k in col_ptr[col]..col_ptr[col + 1] {
                    if let Some(ld) = local(row_idx[k], &scratch.in_db) {
                        push(lr, ld, vals[k]);
                    }
                }
            }
        }
        let mut f = SparseCholesky::analyze(pattern, Ordering::default())?;
        f.refactor_with(&a, Par::Seq)?;
        f.solve_many_in_place_scratch(&mut rhs, p, Par::Seq, &mut scratch.solve)?;
        // I's rows, in tree order.
        let (s, e) = (tree.start[c] as usize, tree.end[c] as usize);
        let m = 3 * (e - s);
        let mut y = vec![0.0; m * p];
        for (i, &v) in tree.perm[s..e].iter().enumerate() {
            let l = 3 * scratch.in_b[v as usize] as usize;
            for q in 0..p {
                for d in 0..3 {
                    y[q * m + 3 * i + d] = rhs[q * nb + l + d];
                }
            }
        }
        Ok(y)
    }
}
