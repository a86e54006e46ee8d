//! A uniform hierarchical (H-) matrix of the far part of the Green's function `G = H̄⁻¹`, the
//! compressed JGS2 far field of [`crate::jgs2`] (`Jgs2Options::far_hmatrix`).
//!
//! Why `G` and not `Ū`: with `G` symmetric and `S_i = G_ii⁻¹`, `Ū_i[j]ᵀ = S_i G_ij`, so every
//! vertex's far sum is one row of a single product, `Σ_{j far} Ū_i[j]ᵀ ĝ_j = S_i (G_far ĝ)_i`:
//! one matrix–vector product with `G` (smooth away from the diagonal, screened by `M/h²`)
//! instead of a separate fit per vertex. That product is what H-matrices compress.
//!
//! - **Block partition** ([`partition`]): dual traversal of the cluster tree from
//!   (root, root); a pair `(I, J)` is *admissible* (far) when the distance between the
//!   bounding boxes of its vertices is at least `η·min(diam I, diam J)` **and** more than the
//!   longest element edge at the vertices of `I` or of `J` (an element joining `a ∈ I` and
//!   `b ∈ J` has an edge at least that long at both; so no element couples a far pair, the
//!   incident elements' rows stay exact and `A_i` is unchanged). *Choice*: a per-node edge
//!   bound, not the mesh's longest edge: on armadillo_18k that edge is 4.8× the median and,
//!   as a global gap, kept 458 near rows per vertex at η = 1. Inadmissible pairs are split (both nodes when both have
//!   children); inadmissible leaf pairs are the near field, stored as exact `Ū` rows.
//! - **Cluster bases** (randomised range finder): for every column cluster `J`, one
//!   multi-right-hand-side solve `Z = H̄⁻¹ Ω_J` with a Gaussian `Ω_J` (`samples` columns) on
//!   `J`'s DOFs gives `G[I, J] Ω_J` for every row cluster `I` at once; each far partner `I`
//!   accumulates `Y_I = Σ_{J far of I} G[I, J] Ω_J`, a Gaussian sketch of `I`'s whole far row
//!   block. `Q_I` = the left singular vectors of `Y_I` with `σ > ε·σ_1` (the rank is chosen by
//!   the relative tolerance `ε`, capped by `samples` and by `3|I|`).
//! - **Coupling** `S_IJ = Q_Iᵀ G[I, J] Q_J` for far blocks `I < J` only (`G` is symmetric:
//!   `S_JI = S_IJᵀ`), one solve `H̄⁻¹ Q_J` per cluster.
//! - **Apply** ([`HMatrix::apply_tree_order`]): forward `w_J = Q_Jᵀ x_J`, coupling
//!   `v_I += S_IJ w_J`, `v_J += S_IJᵀ w_I`, backward `y_I += Q_I v_I`; `O(n · depth · k)`.
//!
//! Memory (counted as f32/u32 like the rest of the run-time data): `Σ_I 3|I| k_I` basis
//! entries, `Σ_{I<J far} k_I k_J` coupling entries, two ids per block (plus the same again
//! for the per-node block lists) and two per node (rank, offset).

use rayon::prelude::*;

use crate::cholesky::{SolveScratch, SparseCholesky};
use crate::rng::SplitMix64;
use crate::tree::ClusterTree;
use crate::{PrecomputeError, Result};

/// One solve's output: (node or block index, its dense piece).
type Pieces = Vec<(usize, Vec<f64>)>;

/// Tuning of the H-matrix far field.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HMatrixOptions {
    /// Relative truncation tolerance of the cluster bases (singular values below `eps·σ_1` of
    /// each cluster's far-field sketch are dropped); the accuracy knob.
    pub eps: f64,
    /// Admissibility: a pair of clusters is far when their boxes are at least
    /// `eta · min(diameters)` apart (and farther than the longest element edge).
    pub eta: f64,
    /// Gaussian samples per cluster sketch (the largest rank a basis can have).
    pub samples: usize,
    /// Seed of the Gaussian sketches (each cluster derives its own stream).
    pub seed: u64,
}

impl Default for HMatrixOptions {
    fn default() -> Self {
        Self {
            eps: 1e-3,
            eta: 1.0,
            samples: 40,
            seed: 0x686d_6174,
        }
    }
}

/// The block partition of a cluster tree.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BlockPartition {
    /// Admissible (far) blocks `(I, J)`, `I < J` (the symmetric `(J, I)` is implied).
    pub far: Vec<(u32, u32)>,
    /// Per node: the leaves it forms an inadmissible leaf pair with, itself included
    /// (empty for internal nodes).
    pub near: Vec<Vec<u32>>,
}

/// Bounding box of each node's vertices.
fn boxes(tree: &ClusterTree, positions: &[[f64; 3]]) -> Vec<([f64; 3], [f64; 3])> {
    (0..tree.len())
        .map(|c| {
            let mut lo = [f64::INFINITY; 3];
            let mut hi = [f64::NEG_INFINITY; 3];
            for &v in tree.members(c) {
                for d in 0..3 {
                    lo[d] = lo[d].min(positions[v as usize][d]);
                    hi[d] = hi[d].max(positions[v as usize][d]);
                }
            }
            (lo, hi)
        })
        .collect()
}

/// The block partition of `tree` (see the module docs): far when the boxes are at least
/// `eta · min(diameters)` apart and strictly farther apart than the longest element edge at
/// the vertices of one of the two nodes (`reach`: per vertex, its longest incident edge, m), so
/// that no element joins a far pair.
pub fn partition(
    tree: &ClusterTree,
    positions: &[[f64; 3]],
    eta: f64,
    reach: &[f64],
) -> BlockPartition {
    let bx = boxes(tree, positions);
    let node_reach: Vec<f64> = (0..tree.len())
        .map(|c| {
            tree.members(c)
                .iter()
                .map(|&v| reach[v as usize])
                .fold(0.0, f64::max)
        })
        .collect();
    let diam = |c: usize| -> f64 {
        let (lo, hi) = bx[c];
        (0..3).map(|d| (hi[d] - lo[d]).powi(2)).sum::<f64>().sqrt()
    };
    let dist = |a: usize, b: usize| -> f64 {
        let ((la, ha), (lb, hb)) = (bx[a], bx[b]);
        (0..3)
            .map(|d| (lb[d] - ha[d]).max(la[d] - hb[d]).max(0.0).powi(2))
            .sum::<f64>()
            .sqrt()
    };
    let mut out = BlockPartition {
        far: Vec::new(),
        near: vec![Vec::new(); tree.len()],
    };
    if tree.is_empty() {
        return out;
    }
    // Pairs are kept with I ≤ J: node ids are depth-first, and the traversal never pairs a
    // node with its own descendant, so the children of an I < J pair keep that order.
    let mut stack = vec![(0usize, 0usize)];
    while let Some((i, j)) = stack.pop() {
        if i != j {
            let d = dist(i, j);
            if d > node_reach[i].min(node_reach[j]) && d >= eta * diam(i).min(diam(j)) {
                out.far.push((i as u32, j as u32));
                continue;
            }
        }
        match (tree.children[i], tree.children[j]) {
            (None, None) => {
                out.near[i].push(j as u32);
                if i != j {
                    out.near[j].push(i as u32);
                }
            }
            (Some((a, b)), None) => {
                stack.push((a as usize, j));
                stack.push((b as usize, j));
            }
            (None, Some((a, b))) => {
                stack.push((i, a as usize));
                stack.push((i, b as usize));
            }
            (Some((a, b)), Some((c, d))) => {
                let (a, b, c, d) = (a as usize, b as usize, c as usize, d as usize);
                if i == j {
                    stack.extend([(a, a), (a, b), (b, b)]);
                } else {
                    stack.extend([(a, c), (a, d), (b, c), (b, d)]);
                }
            }
        }
    }
    out.far.sort_unstable();
    for n in &mut out.near {
        n.sort_unstable();
    }
    out
}

/// The H-matrix of `G` over a cluster tree (see the module docs): dense near leaf pairs and
/// uniform low-rank far blocks. Rows and columns are in the tree's order: node `c` holds rows
/// `3·start[c] .. 3·end[c]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HMatrix {
    /// Inadmissible leaf pairs `(I, J)`, `I ≤ J` (dense; `G[J, I] = G[I, J]ᵀ`).
    pub near_pairs: Vec<(u32, u32)>,
    /// Offset of each near pair's block in [`Self::near`] (one past the last at the end).
    pub near_ptr: Vec<usize>,
    /// `G[I, J]`, row-major `3|I| × 3|J|` (m/N).
    pub near: Vec<f64>,
    /// Per node, the near pairs it belongs to (CSR: `node_near_ptr`).
    pub node_near: Vec<u32>,
    /// Offsets into [`Self::node_near`], one per node plus one.
    pub node_near_ptr: Vec<usize>,
    /// Rank `k_c` of each node's basis (0: the node is in no far block).
    pub rank: Vec<u32>,
    /// Offset of each node's basis in [`Self::basis`] (one past the last node at the end).
    pub basis_ptr: Vec<usize>,
    /// `Q_c`, column-major `3|c| × k_c`, orthonormal columns.
    pub basis: Vec<f64>,
    /// Far blocks `(I, J)`, `I < J`.
    pub blocks: Vec<(u32, u32)>,
    /// Offset of each block's coupling in [`Self::coupling`] (one past the last at the end).
    pub coupling_ptr: Vec<usize>,
    /// `S_IJ = Q_Iᵀ G[I, J] Q_J`, row-major `k_I × k_J` (N⁻¹·m, like `G`).
    pub coupling: Vec<f64>,
    /// Per node, the blocks it is a row or column cluster of (CSR: `node_block_ptr`).
    pub node_blocks: Vec<u32>,
    /// Offsets into [`Self::node_blocks`], one per node plus one.
    pub node_block_ptr: Vec<usize>,
}

impl HMatrix {
    /// Builds the far field of `G = H̄⁻¹` (`factor`) over `tree` for the admissible `blocks`
    /// (`I < J`). `dof_of_row`: the DOF of `H̄` that row `r` of the tree-ordered layout
    /// stands for (the tree's vertices in order occupy the first rows).
    pub fn build(
        factor: &SparseCholesky,
        tree: &ClusterTree,
        dof_of_row: &[usize],
        blocks: &[(u32, u32)],
        opts: &HMatrixOptions,
    ) -> Result<Self> {
        if !(opts.eps.is_finite() && opts.eps >= 0.0) || opts.samples == 0 {
            return Err(PrecomputeError::Invalid(format!(
                "H-matrix far field: eps {} must be finite and ≥ 0, samples {} > 0",
                opts.eps, opts.samples
            )));
        }
        let nn = tree.len();
        let n = factor.n();
        let p = opts.samples;
        let size = |c: usize| 3 * (tree.end[c] - tree.start[c]) as usize;
        let row0 = |c: usize| 3 * tree.start[c] as usize;
        // Per node, the blocks it belongs to.
        let mut count = vec![0usize; nn + 1];
        for &(i, j) in blocks {
            if i >= j || j as usize >= nn {
                return Err(PrecomputeError::Invalid(format!(
                    "H-matrix far field: block ({i}, {j}) is not I < J < {nn}"
                )));
            }
            count[i as usize + 1] += 1;
            count[j as usize + 1] += 1;
        }
        for c in 0..nn {
            count[c + 1] += count[c];
        }
        let node_block_ptr = count.clone();
        let mut fill = count;
        let mut node_blocks = vec![0u32; node_block_ptr[nn]];
        for (b, &(i, j)) in blocks.iter().enumerate() {
            for c in [i as usize, j as usize] {
                node_blocks[fill[c]] = b as u32;
                fill[c] += 1;
            }
        }
        let partner = |c: usize, b: u32| -> usize {
            let (i, j) = blocks[b as usize];
            if i as usize == c {
                j as usize
            } else {
                i as usize
            }
        };
        let active: Vec<usize> = (0..nn)
            .filter(|&c| node_block_ptr[c + 1] > node_block_ptr[c])
            .collect();

        // Sketches Y_I = Σ_{J far of I} G[I, J] Ω_J, column cluster by column cluster: each
        // solve serves every far partner. Chunks bound the memory of the partial sketches.
        let mut sketch: Vec<Vec<f64>> = vec![Vec::new(); nn];
        for &c in &active {
            sketch[c] = vec![0.0; size(c) * p];
        }
        let chunk = 2 * rayon::current_num_threads().max(1);
        for cols in active.chunks(chunk) {
            let parts: Vec<Result<Pieces>> = cols
                .par_iter()
                .map_init(
                    || (SolveScratch::default(), Vec::new()),
                    |(scratch, z), &jc| {
                        let mut rng = SplitMix64::new(
                            opts.seed ^ (jc as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                        );
                        z.clear();
                        z.resize(n * p, 0.0);
                        for q in 0..p {
                            for r in row0(jc)..row0(jc) + size(jc) {
                                z[q * n + r] = rng.normal();
                            }
                        }
                        factor.solve_many_in_place_rows(
                            z,
                            p,
                            faer::Par::Seq,
                            scratch,
                            dof_of_row,
                        )?;
                        let mut out = Vec::new();
                        for &b in &node_blocks[node_block_ptr[jc]..node_block_ptr[jc + 1]] {
                            let ic = partner(jc, b);
                            let (r0, m) = (row0(ic), size(ic));
                            let mut y = vec![0.0; m * p];
                            for q in 0..p {
                                y[q * m..(q + 1) * m]
                                    .copy_from_slice(&z[q * n + r0..q * n + r0 + m]);
                            }
                            out.push((ic, y));
                        }
                        Ok(out)
                    },
                )
                .collect();
            for part in parts {
                for (ic, y) in part? {
                    for (a, b) in sketch[ic].iter_mut().zip(&y) {
                        *a += b;
                    }
                }
            }
        }

        // Bases: truncated left singular vectors of each sketch.
        let bases: Vec<Vec<f64>> = (0..nn)
            .into_par_iter()
            .map(|c| {
                let y = &sketch[c];
                if y.is_empty() {
                    return Vec::new();
                }
                let m = size(c);
                let svd = nalgebra::DMatrix::from_column_slice(m, p, y).svd(true, false);
                let Some(u) = svd.u else {
                    return Vec::new();
                };
                let top = svd.singular_values.iter().fold(0.0f64, |a, s| a.max(*s));
                if top <= 0.0 || !top.is_finite() {
                    return Vec::new();
                }
                // Singular values come sorted (descending) from nalgebra's SVD only after
                // `sort_by_singular_values`; select explicitly.
                let mut idx: Vec<usize> = (0..svd.singular_values.len())
                    .filter(|&q| svd.singular_values[q] > opts.eps * top)
                    .collect();
                idx.sort_by(|&a, &b| svd.singular_values[b].total_cmp(&svd.singular_values[a]));
                let mut q = Vec::with_capacity(m * idx.len());
                for &k in &idx {
                    q.extend(u.column(k).iter());
                }
                q
            })
            .collect();
        drop(sketch);
        let rank: Vec<u32> = (0..nn)
            .map(|c| (bases[c].len() / size(c).max(1)) as u32)
            .collect();
        let mut basis_ptr = Vec::with_capacity(nn + 1);
        let mut basis = Vec::with_capacity(bases.iter().map(Vec::len).sum());
        for b in &bases {
            basis_ptr.push(basis.len());
            basis.extend_from_slice(b);
        }
        basis_ptr.push(basis.len());

        // Couplings S_IJ = Q_Iᵀ (G Q_J)[I], one solve per column cluster J.
        let mut coupling_of: Vec<Vec<f64>> = vec![Vec::new(); blocks.len()];
        let col_clusters: Vec<usize> = active.iter().copied().filter(|&c| rank[c] > 0).collect();
        for cols in col_clusters.chunks(chunk) {
            let parts: Vec<Result<Pieces>> = cols
                .par_iter()
                .map_init(
                    || (SolveScratch::default(), Vec::new()),
                    |(scratch, z), &jc| {
                        let kj = rank[jc] as usize;
                        let (r0, m) = (row0(jc), size(jc));
                        z.clear();
                        z.resize(n * kj, 0.0);
                        for q in 0..kj {
                            z[q * n + r0..q * n + r0 + m]
                                .copy_from_slice(&bases[jc][q * m..(q + 1) * m]);
                        }
                        factor.solve_many_in_place_rows(
                            z,
                            kj,
                            faer::Par::Seq,
                            scratch,
                            dof_of_row,
                        )?;
                        let mut out = Vec::new();
                        for &b in &node_blocks[node_block_ptr[jc]..node_block_ptr[jc + 1]] {
                            let (ic, jj) = blocks[b as usize];
                            if jj as usize != jc {
                                continue;
                            }
                            let ic = ic as usize;
                            let (ri, mi, ki) = (row0(ic), size(ic), rank[ic] as usize);
                            let qi = &bases[ic];
                            let mut s = vec![0.0; ki * kj];
                            for a in 0..ki {
                                let qa = &qi[a * mi..(a + 1) * mi];
                                for q in 0..kj {
                                    let zc = &z[q * n + ri..q * n + ri + mi];
                                    s[a * kj + q] =
                                        qa.iter().zip(zc).map(|(x, y)| x * y).sum::<f64>();
                                }
                            }
                            out.push((b as usize, s));
                        }
                        Ok(out)
                    },
                )
                .collect();
            for part in parts {
                for (b, s) in part? {
                    coupling_of[b] = s;
                }
            }
        }
        let mut coupling_ptr = Vec::with_capacity(blocks.len() + 1);
        let mut coupling = Vec::new();
        for (b, &(i, j)) in blocks.iter().enumerate() {
            coupling_ptr.push(coupling.len());
            let want = rank[i as usize] as usize * rank[j as usize] as usize;
            if coupling_of[b].len() == want {
                coupling.extend_from_slice(&coupling_of[b]);
            } else {
                // A rank-0 cluster: the block is zero to the sketch's tolerance.
                coupling.extend(std::iter::repeat_n(0.0, want));
            }
        }
        coupling_ptr.push(coupling.len());
        Ok(Self {
            rank,
            basis_ptr,
            basis,
            blocks: blocks.to_vec(),
            coupling_ptr,
            coupling,
            node_blocks,
            node_block_ptr,
            node_near_ptr: vec![0; nn + 1],
            ..Default::default()
        })
    }

    /// Sets the dense near field: the leaf pairs `(I, J)`, `I ≤ J`, and `block(I, J)` giving
    /// `G[I, J]` row-major `3|I| × 3|J|`.
    pub fn set_near(
        &mut self,
        tree: &ClusterTree,
        pairs: &[(u32, u32)],
        block: impl Fn(usize, usize) -> Vec<f64> + Sync,
    ) {
        let nn = tree.len();
        let blocks: Vec<Vec<f64>> = pairs
            .par_iter()
            .map(|&(i, j)| block(i as usize, j as usize))
            .collect();
        self.near_pairs = pairs.to_vec();
        self.near_ptr = Vec::with_capacity(pairs.len() + 1);
        self.near = Vec::with_capacity(blocks.iter().map(Vec::len).sum());
        for b in &blocks {
            self.near_ptr.push(self.near.len());
            self.near.extend_from_slice(b);
        }
        self.near_ptr.push(self.near.len());
        let mut count = vec![0usize; nn + 1];
        for &(i, j) in pairs {
            count[i as usize + 1] += 1;
            if i != j {
                count[j as usize + 1] += 1;
            }
        }
        for c in 0..nn {
            count[c + 1] += count[c];
        }
        self.node_near_ptr = count.clone();
        self.node_near = vec![0; count[nn]];
        for (b, &(i, j)) in pairs.iter().enumerate() {
            for c in [i as usize, j as usize] {
                self.node_near[count[c]] = b as u32;
                count[c] += 1;
                if i == j {
                    break;
                }
            }
        }
    }

    /// `y = G x` (near and far blocks) with `x`, `y` in the tree's order (3 values per tree
    /// position). Panics when `tree` is not the tree the H-matrix was built on (node count) or
    /// `x` does not have 3 values per tree position: a programming error, and a silent zero
    /// would drop the whole field.
    pub fn apply_tree_order(&self, tree: &ClusterTree, x: &[f64]) -> Vec<f64> {
        let nn = tree.len();
        let nt = 3 * tree.perm.len();
        assert!(
            self.rank.len() == nn && x.len() == nt,
            "H-matrix of {} nodes applied over a tree of {nn} nodes to {} values (expected {nt})",
            self.rank.len(),
            x.len()
        );
        let size = |c: usize| 3 * (tree.end[c] - tree.start[c]) as usize;
        let row0 = |c: usize| 3 * tree.start[c] as usize;
        let q_of = |c: usize| &self.basis[self.basis_ptr[c]..self.basis_ptr[c + 1]];
        // Forward: w_c = Q_cᵀ x_c.
        let w: Vec<Vec<f64>> = (0..nn)
            .into_par_iter()
            .map(|c| {
                let (k, m) = (self.rank[c] as usize, size(c));
                let xc = &x[row0(c)..row0(c) + m];
                let q = q_of(c);
                (0..k)
                    .map(|a| {
                        q[a * m..(a + 1) * m]
                            .iter()
                            .zip(xc)
                            .map(|(u, v)| u * v)
                            .sum()
                    })
                    .collect()
            })
            .collect();
        // Coupling: v_I = Σ_J S_IJ w_J over I's blocks (transposed where I is the column).
        let v: Vec<Vec<f64>> = (0..nn)
            .into_par_iter()
            .map(|c| {
                let kc = self.rank[c] as usize;
                let mut out = vec![0.0; kc];
                for &b in &self.node_blocks[self.node_block_ptr[c]..self.node_block_ptr[c + 1]] {
                    let (i, j) = self.blocks[b as usize];
                    let (i, j) = (i as usize, j as usize);
                    let s = &self.coupling[self.coupling_ptr[b as usize]..];
                    let (ki, kj) = (self.rank[i] as usize, self.rank[j] as usize);
                    if i == c {
                        for a in 0..ki {
                            out[a] += (0..kj).map(|q| s[a * kj + q] * w[j][q]).sum::<f64>();
                        }
                    } else {
                        for q in 0..kj {
                            out[q] += (0..ki).map(|a| s[a * kj + q] * w[i][a]).sum::<f64>();
                        }
                    }
                }
                out
            })
            .collect();
        // Backward: every tree position sums Q_c v_c over the nodes that hold it.
        let mut leaf_at = vec![u32::MAX; tree.perm.len()];
        for c in 0..nn {
            if tree.children[c].is_none() {
                for p in tree.start[c]..tree.end[c] {
                    leaf_at[p as usize] = c as u32;
                }
            }
        }
        // Near: each leaf's rows from its dense pairs (transposed where it is the column).
        let near: Vec<(usize, Vec<f64>)> = (0..nn)
            .into_par_iter()
            .filter(|&c| self.node_near_ptr.len() == nn + 1 && tree.children[c].is_none())
            .map(|c| {
                let m = size(c);
                let mut out = vec![0.0; m];
                for &b in &self.node_near[self.node_near_ptr[c]..self.node_near_ptr[c + 1]] {
                    let (i, j) = self.near_pairs[b as usize];
                    let (i, j) = (i as usize, j as usize);
                    let g = &self.near[self.near_ptr[b as usize]..self.near_ptr[b as usize + 1]];
                    let (mi, mj) = (size(i), size(j));
                    if i == c {
                        let xj = &x[row0(j)..row0(j) + mj];
                        for (r, o) in out.iter_mut().enumerate() {
                            *o += g[r * mj..(r + 1) * mj]
                                .iter()
                                .zip(xj)
                                .map(|(a, b)| a * b)
                                .sum::<f64>();
                        }
                    }
                    if j == c && i != j {
                        let xi = &x[row0(i)..row0(i) + mi];
                        for (r, &xr) in xi.iter().enumerate() {
                            for (o, a) in out.iter_mut().zip(&g[r * mj..(r + 1) * mj]) {
                                *o += a * xr;
                            }
                        }
                    }
                }
                (c, out)
            })
            .collect();
        let mut y = vec![0.0; nt];
        for (c, out) in near {
            y[row0(c)..row0(c) + out.len()].copy_from_slice(&out);
        }
        y.par_chunks_mut(3).enumerate().for_each(|(p, out)| {
            let mut c = leaf_at[p];
            while c != u32::MAX {
                let cu = c as usize;
                let (k, m) = (self.rank[cu] as usize, size(cu));
                let r = 3 * p - row0(cu);
                let q = q_of(cu);
                for (a, va) in v[cu].iter().enumerate().take(k) {
                    for d in 0..3 {
                        out[d] += q[a * m + r + d] * va;
                    }
                }
                c = tree.parent[cu];
            }
        });
        y
    }

    /// Bytes of the run-time data as f32/u32: dense near blocks, bases, couplings, two ids per
    /// block (near and far) and per node-block entry, rank and offset per node.
    pub fn bytes_f32(&self) -> usize {
        4 * (self.near.len()
            + 2 * self.near_pairs.len()
            + self.node_near.len()
            + self.basis.len()
            + self.coupling.len()
            + 2 * self.blocks.len()
            + self.node_blocks.len()
            + 2 * self.rank.len())
    }

    /// Mean and largest rank over the nodes that have a basis.
    pub fn rank_stats(&self) -> (f64, u32) {
        let used: Vec<u32> = self.rank.iter().copied().filter(|&k| k > 0).collect();
        let mean = used.iter().map(|&k| k as f64).sum::<f64>() / used.len().max(1) as f64;
        (mean, used.iter().copied().max().unwrap_or(0))
    }
}
