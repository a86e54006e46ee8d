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
//! - **Cluster bases** (randomised range finder), two constructions ([`Sketch`]):
//!   - *global* ([`Sketch::Global`]): for every column cluster `J`, one
//!     multi-right-hand-side solve `Z = H̄⁻¹ Ω_J` with a Gaussian `Ω_J` (`samples` columns) on
//!     `J`'s DOFs gives `G[I, J] Ω_J` for every row cluster `I` at once; each far partner `I`
//!     accumulates `Y_I = Σ_{J far of I} G[I, J] Ω_J`, a Gaussian sketch of `I`'s whole far
//!     row block. `Q_I` = the left singular vectors of `Y_I` with `σ > ε·σ_1` (the rank is
//!     chosen by the relative tolerance `ε`, capped by `samples` and by `3|I|`).
//!   - *local* ([`Sketch::Local`], `local.rs`): `B` = the free vertices strictly closer to
//!     `I`'s box than its nearest far partner's box, `∂B` the vertices outside `B` that `H̄`
//!     couples to it. A far source gives `u = G x` with `(H̄ u)_B = 0`, so `u_I` is the
//!     local operator `E_I: u_∂B ↦ (−H̄_BB⁻¹ H̄_{B,∂B} u_∂B)_I` applied to `u_∂B`: the range of
//!     `G[I, far(I)]` lies in `E_I`'s. `Y_I = E_I Ω` with Gaussian data on `∂B`, from a
//!     sparse Cholesky factorisation of the small `H̄_BB`, then truncated as above: `Q̃_I`.
//!     `E_I` sees every boundary datum, not only those far sources make, so its rank at `ε`
//!     is higher (mean 20.7 against 17.2 on armadillo_18k at ε 1e-3); once the couplings of
//!     `Q̃` are known, each basis is **recompressed** against them (no extra solve): `I`'s far
//!     row block is `Q̃_I W_I diag(Q̃_Jᵀ)` with `W_I = [S̃_IJ]_J`, so the eigenvectors `U_I`
//!     of `W_I W_Iᵀ` above `(ε σ_1)²` give `Q_I = Q̃_I U_I` and `S_IJ = U_Iᵀ S̃_IJ U_J`
//!     (mean rank 18.1). `E_I`'s sketch is truncated finer, at `ε · local_eps` (0.1): its
//!     largest singular directions need not be the far block's, so a cut at `ε` alone can drop
//!     what the far block needs; and its rank reaches the `samples` cap sooner than the far
//!     block's, hence 60 samples for it (the tests use 120 at ε 1e-6).
//! - **Coupling** `S_IJ = Q_Iᵀ G[I, J] Q_J` for far blocks `I < J` only (`G` is symmetric:
//!   `S_JI = S_IJᵀ`), one solve `H̄⁻¹ Q_J` per cluster.
//! - **Apply** ([`HMatrix::apply_tree_order`]): forward `w_J = Q_Jᵀ x_J`, coupling
//!   `v_I += S_IJ w_J`, `v_J += S_IJᵀ w_I`, backward `y_I += Q_I v_I`; `O(n · depth · k)`.
//!
//! Memory (counted as f32/u32 like the rest of the run-time data): `Σ_I 3|I| k_I` basis
//! entries, `Σ_{I<J far} k_I k_J` coupling entries, two ids per block (plus the same again
//! for the per-node block lists) and two per node (rank, offset).
//!
//! **Why the global sketch stayed the default over the local one** (issue 17's precompute cost; armadillo_18k, ε 1e-3,
//! η 1, 2026 clusters in far blocks, 32 thousand far blocks; the H-matrix build alone,
//! `PRECOMPUTE_BENCH_HMATRIX=global:40,local,global:40,local`, alternating in one process on
//! the 2 cores with nothing else running, load 1.1–1.7):
//!
//! | sketch | sketch pass | global solve columns (sketch + coupling) | coupling pass | total | mean rank | far KB/vertex |
//! |---|---|---|---|---|---|---|
//! | global, 40 samples | 9.07 / 9.53 s | 81 040 + 34 819 | 4.94 / 5.55 s | 14.17 / 15.24 s | 17.2 | 10.9 |
//! | local, 60 samples, local_eps 0.1 | 4.81 / 4.90 s | 0 + 48 933 | 8.14 / 8.39 s | 13.59 / 13.90 s | 18.1 (24.2 before recompression) | 12.4 |
//!
//! The local sketch pass (one sparse Cholesky of `H̄_BB` per cluster, `B` 226 vertices on
//! average, 4218 at most, `∂B` 90) is 1.9× cheaper than the 81 thousand columns of global
//! solves it replaces, but its wider range costs 40% more coupling columns (and larger
//! coupling products), so the coupling pass — still one global solve per cluster — is now
//! most of the build and the whole build is only 4–11% faster: a modest gain, not the
//! "much cheaper" build issue 17 needs. Its pose residuals are better (below), but it takes
//! 6–11% more memory at the same iterations, and memory at equal iterations is the issue's
//! measure: the global sketch (40 samples) stays the default. (Earlier alternating runs on the same machine loaded
//! by other builds, load 4–5, scattered 2–3× and are not used.) Quality, JGS2-Jacobi frontier
//! (`JELLO_CONV_FRONTIER_SET=h2:1e-3:1:40:global,h2:1e-3:1:60:local:0.1,exact`, iterations per
//! step over exact rows' on drag / twist / spin): global 1.00 / 1.00 / 1.08 at 13.3 / 8.2 /
//! 9.0 KB per vertex; local 1.00 / 1.00 / 1.08 at 14.7 / 8.8 / 9.6 KB (+11% / +7% / +6%), pose
//! residual median 1.8e-4 / 5.5e-4 / 4.1e-4 against 5.3e-4 / 1.1e-3 / 7.0e-4. Tried and not kept:
//! local at 40 samples with local_eps 1 or 0.1 — spin 4.40 iterations against exact's 2.60
//! (1.69×; the cap binds: drag and twist stayed at 1.00); batching several column clusters
//! into one coupling solve of ≤ 128 columns — no gain measurable above the noise (coupling
//! 14.4 / 13.4 s batched against 15.7 / 12.6 s per cluster); AMD instead of nested dissection
//! for the local factorisations — the same within noise (6.7 / 8.3 s against 8.6 / 8.3 s).
//! What remained was the coupling pass (a peeling construction was the next idea). On
//! armadillo_114k (one run, local sketch, the machine otherwise idle) the build took 441.5 s
//! of a 543 s precompute, peak RSS 3.89 GB.
//!
//! **The JGS2 precompute no longer solves for the H-matrix at all** ([`StreamBuild`],
//! `stream.rs`): its basis pass already computes every column of `G` (Eq. 23, three unit
//! solves per vertex), so the global sketch, the couplings and the exact near blocks are
//! products with those columns as they are solved, batch by batch in tree order. The bases
//! come from a mixed sketch — Gaussian `G[J, I] Ω_I` for partners after `J` in the tree
//! order, `G[J, I] Q_I Ω'_I` for those before it (whose basis is known by then) — which halves
//! the Gaussian products and loses nothing the block's `Q_I S_IJ Q_Jᵀ` form keeps. Measured
//! (2 threads, quiet machine, `PRECOMPUTE_BENCH_HMATRIX_RUN=global cargo bench -p
//! jello-precompute`, `/usr/bin/time -v`): armadillo_114k's whole JGS2 precompute with the
//! H-matrix (ε 1e-3) takes **101.9 s and 1.55 GB peak** (the products 10.3 s; no eigen
//! solve — the field needs no training poses, its residual is measured on the 12 affine
//! fields, median 1e-3, max 0.011), against 543 s and 3.89 GB before, and against **131.5 s
//! and 1.87 GB for the node-fit default in the same session** (16.6 against 19.1 KB per
//! vertex of run-time data; mean rank 19.8, 160 thousand far blocks); armadillo_18k 1.2 s of
//! products (the solved build 14 s). Two things it took: finishing each cluster within a batch
//! as soon as its last column is in (a batch can hold a far pair of its own clusters; waiting
//! for the earlier one's basis at the batch's end deadlocked), and handing the ~10⁵ freed
//! pieces back to the OS while the flat arrays are filled (glibc kept them resident: 2.22 GB
//! peak without the trim). [`HMatrix::build`] (one solve per cluster for the sketch, one for the
//! couplings; `Ω` shared, so it draws the same sketch) stays for the local sketch and the
//! tests: on a 272-vertex beam the streamed product is within 2.6e-3 / 7.7e-6 of the dense
//! `G`'s at ε 1e-2 / 1e-4, the solved build's 2.3e-3 / 8.0e-6.

use crate::clock::Instant;

use rayon::prelude::*;

use crate::cholesky::{SolveScratch, SparseCholesky};
use crate::rng::SplitMix64;
use crate::sparse::SymSparse;
use crate::tree::ClusterTree;
use crate::{PrecomputeError, Result};

mod local;
mod stream;

pub use stream::StreamBuild;

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
    /// Gaussian samples per cluster sketch (the largest rank a basis can have). 40 by default
    /// (the global sketch's figures in the module docs); [`Sketch::Local`] needs 60: the local
    /// operator's rank at `eps · local_eps` is higher (at 40 the cap bound on armadillo_18k's
    /// spin scene, 1.69× exact rows' iterations).
    pub samples: usize,
    /// Seed of the Gaussian sketches (each cluster derives its own stream).
    pub seed: u64,
    /// How the cluster bases are sketched (see [`Sketch`]).
    pub sketch: Sketch,
    /// [`Sketch::Local`]: the local operator's sketch is truncated at `eps · local_eps`
    /// before the recompression at `eps` (its largest singular directions need not be the
    /// far block's, so a truncation at `eps` alone can drop what the far block needs).
    pub local_eps: f64,
}

/// How each cluster's far-field sketch `Y_I` is computed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sketch {
    /// One global solve `H̄⁻¹ Ω_J` per column cluster, accumulated into every far partner's
    /// sketch: `Y_I = Σ_{J far of I} G[I, J] Ω_J`. The default (see the module docs).
    #[default]
    Global,
    /// Per cluster, the local operator `u_∂B ↦ (−H̄_BB⁻¹ H̄_{B,∂B} u_∂B)_I` sketched with
    /// Gaussian boundary data on a neighbourhood `B` of `I` that excludes its far partners
    /// (its range holds `G[I, far(I)]`'s; see the module docs); needs `H̄` and the positions
    /// ([`HMatrix::build_with`]) and 60 [`HMatrixOptions::samples`]; the module docs have
    /// its measurements.
    Local,
}

/// Where a build's time went (wall seconds) and how much it solved.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HMatrixBuildStats {
    /// Clusters in at least one far block.
    pub active: usize,
    /// The sketch pass (global solves, or local factorisations and solves).
    pub sketch_s: f64,
    /// Right-hand-side columns of global solves in the sketch pass (0 when local).
    pub sketch_columns: usize,
    /// Local sketches: mean and largest number of vertices of `B`, mean of `∂B`.
    pub local_mean: f64,
    /// Largest `B` (vertices).
    pub local_max: usize,
    /// Mean `∂B` (vertices).
    pub local_boundary_mean: f64,
    /// The truncated SVDs of the sketches.
    pub svd_s: f64,
    /// The coupling pass (global solves `H̄⁻¹ Q_J`).
    pub coupling_s: f64,
    /// Right-hand-side columns of the coupling pass (`Σ_J k_J`, the sketch's ranks).
    pub coupling_columns: usize,
    /// Local sketches: mean rank of the sketched bases before the recompression.
    pub sketch_rank_mean: f64,
    /// Local sketches: the recompression of the bases against the couplings.
    pub recompress_s: f64,
}

impl Default for HMatrixOptions {
    fn default() -> Self {
        Self {
            eps: 1e-3,
            eta: 1.0,
            samples: 40,
            seed: 0x686d_6174,
            sketch: Sketch::default(),
            local_eps: 0.1,
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

/// The inadmissible leaf pairs `(I, J)`, `I ≤ J`, of per-leaf near lists
/// ([`BlockPartition::near`]), in the order [`HMatrix::set_near`] stores them.
pub(crate) fn near_pairs(near: &[Vec<u32>]) -> Vec<(u32, u32)> {
    near.iter()
        .enumerate()
        .flat_map(|(i, js)| {
            js.iter()
                .filter(move |&&j| j as usize >= i)
                .map(move |&j| (i as u32, j))
        })
        .collect()
}

/// Per node of `nn`, the indices of the `pairs` it belongs to, in pair order (a pair `(c, c)`
/// once), as CSR offsets and entries (`HMatrix::node_near*`, `node_block*`). The pairs' nodes
/// are `< nn` (checked by the callers).
pub(crate) fn node_lists(nn: usize, pairs: &[(u32, u32)]) -> (Vec<usize>, Vec<u32>) {
    let mut ptr = vec![0usize; nn + 1];
    for &(i, j) in pairs {
        ptr[i as usize + 1] += 1;
        if i != j {
            ptr[j as usize + 1] += 1;
        }
    }
    for c in 0..nn {
        ptr[c + 1] += ptr[c];
    }
    let mut fill = ptr.clone();
    let mut out = vec![0u32; ptr[nn]];
    for (b, &(i, j)) in pairs.iter().enumerate() {
        out[fill[i as usize]] = b as u32;
        fill[i as usize] += 1;
        if i != j {
            out[fill[j as usize]] = b as u32;
            fill[j as usize] += 1;
        }
    }
    (ptr, out)
}

/// The other cluster of far block `b` (`blocks[b]` = (I, J)) than `c`.
fn partner(blocks: &[(u32, u32)], c: usize, b: u32) -> usize {
    let (i, j) = blocks[b as usize];
    if i as usize == c {
        j as usize
    } else {
        i as usize
    }
}

/// Bounding box of each node's vertices.
fn boxes(tree: &ClusterTree, positions: &[[f64; 3]]) -> Vec<local::Aabb> {
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
    let dist = |a: usize, b: usize| -> f64 { local::box_distance(&bx[a], &bx[b]) };
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

/// The options' own checks (shared by every build).
fn check_options(opts: &HMatrixOptions) -> Result<()> {
    if !(opts.eps.is_finite() && opts.eps >= 0.0)
        || opts.samples == 0
        || !(opts.local_eps.is_finite() && opts.local_eps > 0.0)
    {
        return Err(PrecomputeError::Invalid(format!(
            "H-matrix far field: eps {} must be finite and ≥ 0, samples {} > 0, local_eps \
             {} finite and > 0",
            opts.eps, opts.samples, opts.local_eps
        )));
    }
    Ok(())
}

/// The global sketch's Gaussian `Ω`, row-major `rows × samples` (one stream from `seed`):
/// cluster `I`'s `Ω_I` is its rows (see [`StreamBuild`]).
fn gaussian_omega(rows: usize, samples: usize, seed: u64) -> Vec<f64> {
    let mut rng = SplitMix64::new(seed);
    (0..rows * samples).map(|_| rng.normal()).collect()
}

/// The left singular vectors of a sketch `y` with `σ > eps·σ_1`, largest first, column-major
/// (empty when `y` is zero or not finite).
fn truncated_basis(y: nalgebra::DMatrix<f64>, eps: f64) -> Vec<f64> {
    let m = y.nrows();
    let svd = y.svd(true, false);
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
        .filter(|&q| svd.singular_values[q] > eps * top)
        .collect();
    idx.sort_by(|&a, &b| svd.singular_values[b].total_cmp(&svd.singular_values[a]));
    let mut q = Vec::with_capacity(m * idx.len());
    for &k in &idx {
        q.extend(u.column(k).iter());
    }
    q
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
    /// stands for (the tree's vertices in order occupy the first rows). Only the global
    /// sketch ([`Sketch::Global`]) can be built from the factor alone; [`Sketch::Local`] is an
    /// error here (use [`Self::build_with`]).
    pub fn build(
        factor: &SparseCholesky,
        tree: &ClusterTree,
        dof_of_row: &[usize],
        blocks: &[(u32, u32)],
        opts: &HMatrixOptions,
    ) -> Result<Self> {
        Self::build_with(factor, tree, dof_of_row, blocks, opts, None).map(|(h, _)| h)
    }

    /// [`Self::build`] with the rest Hessian `H̄` (DOF `3v + d` of vertex `v`, the matrix
    /// `factor` factors) and the vertex positions that [`Sketch::Local`] needs, and the build's
    /// statistics.
    pub fn build_with(
        factor: &SparseCholesky,
        tree: &ClusterTree,
        dof_of_row: &[usize],
        blocks: &[(u32, u32)],
        opts: &HMatrixOptions,
        geometry: Option<(&SymSparse, &[[f64; 3]])>,
    ) -> Result<(Self, HMatrixBuildStats)> {
        check_options(opts)?;
        // The local sketch's range is recompressed afterwards: truncate it finer.
        let sketch_eps = match opts.sketch {
            Sketch::Global => opts.eps,
            Sketch::Local => opts.eps * opts.local_eps,
        };
        let local_problem = match (opts.sketch, geometry) {
            (Sketch::Global, _) => None,
            (Sketch::Local, None) => {
                return Err(PrecomputeError::Invalid(
                    "H-matrix far field: the local sketch needs H̄ and the positions".into(),
                ))
            }
            (Sketch::Local, Some((hbar, positions))) => {
                if hbar.n() != factor.n() || hbar.n() != 3 * positions.len() {
                    return Err(PrecomputeError::Invalid(format!(
                        "H-matrix far field: H̄ is {0}×{0}, the factor {1}×{1}, for {2} vertices",
                        hbar.n(),
                        factor.n(),
                        positions.len()
                    )));
                }
                if tree.perm.iter().any(|&v| v as usize >= positions.len()) {
                    return Err(PrecomputeError::Invalid(
                        "H-matrix far field: a tree vertex has no position".into(),
                    ));
                }
                let mut free = vec![false; positions.len()];
                for &v in &tree.perm {
                    free[v as usize] = true;
                }
                Some(local::LocalProblem {
                    hbar,
                    positions,
                    graph: hbar.pattern().block_graph(3)?,
                    boxes: boxes(tree, positions),
                    free,
                })
            }
        };
        let mut stats = HMatrixBuildStats::default();
        let nn = tree.len();
        let n = factor.n();
        let p = opts.samples;
        let size = |c: usize| 3 * (tree.end[c] - tree.start[c]) as usize;
        let row0 = |c: usize| 3 * tree.start[c] as usize;
        // Per node, the blocks it belongs to.
        for &(i, j) in blocks {
            if i >= j || j as usize >= nn {
                return Err(PrecomputeError::Invalid(format!(
                    "H-matrix far field: block ({i}, {j}) is not I < J < {nn}"
                )));
            }
        }
        let (node_block_ptr, node_blocks) = node_lists(nn, blocks);
        let partner = |c: usize, b: u32| partner(blocks, c, b);
        let active: Vec<usize> = (0..nn)
            .filter(|&c| node_block_ptr[c + 1] > node_block_ptr[c])
            .collect();

        stats.active = active.len();
        let chunk = 2 * rayon::current_num_threads().max(1);
        let t_sketch = Instant::now();
        let sketch = match &local_problem {
            Some(lp) => {
                // Each cluster's nearest far partner bounds its neighbourhood B.
                let reach: Vec<f64> = (0..nn)
                    .map(|c| {
                        node_blocks[node_block_ptr[c]..node_block_ptr[c + 1]]
                            .iter()
                            .map(|&b| local::box_distance(&lp.boxes[c], &lp.boxes[partner(c, b)]))
                            .fold(f64::INFINITY, f64::min)
                    })
                    .collect();
                let parts: Vec<Result<(usize, Vec<f64>, local::LocalSize)>> = active
                    .par_iter()
                    .map_init(local::LocalScratch::default, |scratch, &c| {
                        let seed = opts.seed ^ (c as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                        let (y, sz) = lp.sketch(tree, c, reach[c], p, seed, scratch)?;
                        Ok((c, y, sz))
                    })
                    .collect();
                let mut sketch: Vec<Vec<f64>> = vec![Vec::new(); nn];
                let (mut sum_b, mut sum_db) = (0usize, 0usize);
                for part in parts {
                    let (c, y, sz) = part?;
                    sketch[c] = y;
                    sum_b += sz.interior;
                    sum_db += sz.boundary;
                    stats.local_max = stats.local_max.max(sz.interior);
                }
                stats.local_mean = sum_b as f64 / active.len().max(1) as f64;
                stats.local_boundary_mean = sum_db as f64 / active.len().max(1) as f64;
                sketch
            }
            None => {
                stats.sketch_columns = active.len() * p;
                Self::global_sketch(
                    factor,
                    tree,
                    dof_of_row,
                    blocks,
                    &node_blocks,
                    &node_block_ptr,
                    &active,
                    opts,
                )?
            }
        };
        stats.sketch_s = t_sketch.elapsed().as_secs_f64();

        // Bases: truncated left singular vectors of each sketch.
        let t_svd = Instant::now();
        let bases: Vec<Vec<f64>> = (0..nn)
            .into_par_iter()
            .map(|c| {
                let y = &sketch[c];
                if y.is_empty() {
                    return Vec::new();
                }
                truncated_basis(
                    nalgebra::DMatrix::from_column_slice(size(c), p, y),
                    sketch_eps,
                )
            })
            .collect();
        drop(sketch);
        stats.svd_s = t_svd.elapsed().as_secs_f64();
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
        let t_coupling = Instant::now();
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
        stats.coupling_s = t_coupling.elapsed().as_secs_f64();
        stats.coupling_columns = col_clusters.iter().map(|&c| rank[c] as usize).sum();
        drop(bases);
        let (mut rank, mut basis_ptr, mut basis) = (rank, basis_ptr, basis);
        if local_problem.is_some() {
            // The local operator's range holds the far row block's but is wider (its rank at
            // ε exceeds the block's): recompress each basis against the far couplings it was
            // measured with, at no extra solve.
            let t = Instant::now();
            stats.sketch_rank_mean = rank.iter().map(|&k| k as f64).sum::<f64>()
                / rank.iter().filter(|&&k| k > 0).count().max(1) as f64;
            Self::recompress(
                tree,
                blocks,
                &node_blocks,
                &node_block_ptr,
                opts.eps,
                &mut rank,
                &mut basis_ptr,
                &mut basis,
                &mut coupling_of,
            );
            stats.recompress_s = t.elapsed().as_secs_f64();
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
        Ok((
            Self {
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
            },
            stats,
        ))
    }

    /// Recompression of the bases `Q̃` against the couplings `S̃_IJ = Q̃_Iᵀ G[I, J] Q̃_J` (in
    /// `coupling_of`, replaced): cluster `c`'s far row block is `≈ Q̃_c W_c diag(Q̃_Jᵀ)` with
    /// `W_c = [S̃_cJ]_J` (transposed where `c` is the column cluster) and orthonormal `Q̃_J`, so
    /// its singular values are `W_c`'s: `U_c` = the eigenvectors of `W_c W_cᵀ` with
    /// `σ > eps·σ_1`, `Q_c = Q̃_c U_c`, `S_IJ = U_Iᵀ S̃_IJ U_J`.
    #[allow(clippy::too_many_arguments)]
    fn recompress(
        tree: &ClusterTree,
        blocks: &[(u32, u32)],
        node_blocks: &[u32],
        node_block_ptr: &[usize],
        eps: f64,
        rank: &mut [u32],
        basis_ptr: &mut Vec<usize>,
        basis: &mut Vec<f64>,
        coupling_of: &mut [Vec<f64>],
    ) {
        let nn = tree.len();
        let size = |c: usize| 3 * (tree.end[c] - tree.start[c]) as usize;
        // Per cluster, U_c (column-major k̃_c × k_c).
        let u: Vec<Vec<f64>> = (0..nn)
            .into_par_iter()
            .map(|c| {
                let kc = rank[c] as usize;
                if kc == 0 {
                    return Vec::new();
                }
                let mut gram = nalgebra::DMatrix::<f64>::zeros(kc, kc);
                for &b in &node_blocks[node_block_ptr[c]..node_block_ptr[c + 1]] {
                    let (i, j) = blocks[b as usize];
                    let (ki, kj) = (rank[i as usize] as usize, rank[j as usize] as usize);
                    let s = &coupling_of[b as usize];
                    if s.len() != ki * kj || ki * kj == 0 {
                        continue;
                    }
                    // W's columns from this block: S̃ (ki × kj, row-major) when c = I, S̃ᵀ else.
                    let sm = nalgebra::DMatrix::from_row_slice(ki, kj, s);
                    if i as usize == c {
                        gram += &sm * sm.transpose();
                    } else {
                        gram += sm.transpose() * &sm;
                    }
                }
                let eig = nalgebra::SymmetricEigen::new(gram);
                let top = eig.eigenvalues.iter().fold(0.0f64, |a, &l| a.max(l));
                if top <= 0.0 || !top.is_finite() {
                    return Vec::new();
                }
                // σ² > (eps σ_1)²; eigenvalues come unsorted.
                let mut idx: Vec<usize> = (0..kc)
                    .filter(|&q| eig.eigenvalues[q] > eps * eps * top)
                    .collect();
                idx.sort_by(|&a, &b| eig.eigenvalues[b].total_cmp(&eig.eigenvalues[a]));
                let mut out = Vec::with_capacity(kc * idx.len());
                for &q in &idx {
                    out.extend(eig.eigenvectors.column(q).iter());
                }
                out
            })
            .collect();
        let new_rank: Vec<usize> = (0..nn)
            .map(|c| u[c].len() / (rank[c] as usize).max(1))
            .collect();
        // Q_c = Q̃_c U_c.
        let bases: Vec<Vec<f64>> = (0..nn)
            .into_par_iter()
            .map(|c| {
                let (m, kt, k) = (size(c), rank[c] as usize, new_rank[c]);
                if k == 0 {
                    return Vec::new();
                }
                let qt = nalgebra::DMatrix::from_column_slice(
                    m,
                    kt,
                    &basis[basis_ptr[c]..basis_ptr[c + 1]],
                );
                let uc = nalgebra::DMatrix::from_column_slice(kt, k, &u[c]);
                (qt * uc).as_slice().to_vec()
            })
            .collect();
        // S_IJ = U_Iᵀ S̃_IJ U_J (row-major).
        coupling_of
            .par_iter_mut()
            .zip(blocks.par_iter())
            .for_each(|(s, &(i, j))| {
                let (i, j) = (i as usize, j as usize);
                let (ki, kj) = (rank[i] as usize, rank[j] as usize);
                if s.len() != ki * kj || new_rank[i] * new_rank[j] == 0 {
                    s.clear();
                    return;
                }
                let sm = nalgebra::DMatrix::from_row_slice(ki, kj, s);
                let ui = nalgebra::DMatrix::from_column_slice(ki, new_rank[i], &u[i]);
                let uj = nalgebra::DMatrix::from_column_slice(kj, new_rank[j], &u[j]);
                let r = ui.transpose() * sm * uj;
                *s = r.transpose().as_slice().to_vec();
            });
        basis.clear();
        basis_ptr.clear();
        for b in &bases {
            basis_ptr.push(basis.len());
            basis.extend_from_slice(b);
        }
        basis_ptr.push(basis.len());
        for c in 0..nn {
            rank[c] = new_rank[c] as u32;
        }
    }

    /// The global sketches `Y_I = Σ_{J far of I} G[I, J] Ω_J`, column cluster by column
    /// cluster: each solve serves every far partner (the JGS2 basis pass builds the same
    /// sketch from the columns of `G` it solves anyway: [`StreamBuild`]). Chunks bound the memory of the partial
    /// sketches.
    #[allow(clippy::too_many_arguments)]
    fn global_sketch(
        factor: &SparseCholesky,
        tree: &ClusterTree,
        dof_of_row: &[usize],
        blocks: &[(u32, u32)],
        node_blocks: &[u32],
        node_block_ptr: &[usize],
        active: &[usize],
        opts: &HMatrixOptions,
    ) -> Result<Vec<Vec<f64>>> {
        let nn = tree.len();
        let n = factor.n();
        let p = opts.samples;
        let size = |c: usize| 3 * (tree.end[c] - tree.start[c]) as usize;
        let row0 = |c: usize| 3 * tree.start[c] as usize;
        let partner = |c: usize, b: u32| partner(blocks, c, b);
        let mut sketch: Vec<Vec<f64>> = vec![Vec::new(); nn];
        for &c in active {
            sketch[c] = vec![0.0; size(c) * p];
        }
        // Ω_J = J's rows of one Gaussian Ω (the streamed build's, `StreamBuild`).
        let omega = gaussian_omega(3 * tree.perm.len(), p, opts.seed);
        let chunk = 2 * rayon::current_num_threads().max(1);
        for cols in active.chunks(chunk) {
            let parts: Vec<Result<Pieces>> = cols
                .par_iter()
                .map_init(
                    || (SolveScratch::default(), Vec::new()),
                    |(scratch, z), &jc| {
                        z.clear();
                        z.resize(n * p, 0.0);
                        for q in 0..p {
                            for r in row0(jc)..row0(jc) + size(jc) {
                                z[q * n + r] = omega[r * p + q];
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
        Ok(sketch)
    }

    /// Sets the dense near field: the leaf pairs `(I, J)`, `I ≤ J`, and `block(I, J)` giving
    /// `G[I, J]` row-major `3|I| × 3|J|`.
    pub fn set_near(
        &mut self,
        tree: &ClusterTree,
        pairs: &[(u32, u32)],
        block: impl Fn(usize, usize) -> Vec<f64> + Sync,
    ) {
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
        (self.node_near_ptr, self.node_near) = node_lists(tree.len(), pairs);
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

    /// Checks the structure of this H-matrix over `tree` — what [`Self::apply_tree_order`] and
    /// the device upload index by: pairs and blocks on nodes of the tree (near pairs on leaves),
    /// offsets starting at 0 and stepping by each block's size, ranks within their node, and
    /// the per-node lists exactly those the pairs and blocks imply. One that passes never
    /// indexes out of bounds (the artifact reader and the device upload both call it); the
    /// message names what is wrong.
    pub fn check(&self, tree: &ClusterTree) -> std::result::Result<(), String> {
        let h = self;
        let nn = tree.len();
        let size = |c: u32| 3 * (tree.end[c as usize] - tree.start[c as usize]) as usize;
        let is_leaf = |c: u32| (c as usize) < nn && tree.children[c as usize].is_none();
        // Offsets start at 0 and step by each entry's size (no overflow: sizes are products of
        // u32-bounded counts, checked).
        let steps = |ptr: &[usize],
                     sizes: &mut dyn Iterator<Item = Option<usize>>,
                     total: usize,
                     what: &str| {
            let mut at = 0usize;
            if ptr.first() != Some(&0) {
                return Err(format!("{what} offsets do not start at 0"));
            }
            for (k, sz) in sizes.enumerate() {
                at = sz
                    .and_then(|sz| at.checked_add(sz))
                    .ok_or_else(|| format!("{what} {k}'s size overflows"))?;
                if ptr.get(k + 1) != Some(&at) {
                    return Err(format!("{what} offset {} is not {at}", k + 1));
                }
            }
            if at != total {
                return Err(format!("{what}: {total} values for offsets ending at {at}"));
            }
            Ok(())
        };
        if let Some(&(i, j)) = h
            .near_pairs
            .iter()
            .find(|&&(i, j)| !(i <= j && is_leaf(i) && is_leaf(j)))
        {
            return Err(format!("near pair ({i}, {j}) is not two leaves I ≤ J"));
        }
        if h.near_ptr.len() != h.near_pairs.len() + 1 {
            return Err("near offsets are not one per pair plus one".into());
        }
        steps(
            &h.near_ptr,
            &mut h
                .near_pairs
                .iter()
                .map(|&(i, j)| size(i).checked_mul(size(j))),
            h.near.len(),
            "near block",
        )?;
        if h.rank.len() != nn || h.basis_ptr.len() != nn + 1 {
            return Err(format!(
                "ranks or basis offsets are not one per node of {nn}"
            ));
        }
        if let Some(c) = (0..nn).find(|&c| h.rank[c] as usize > size(c as u32)) {
            return Err(format!("node {c}'s rank {} exceeds its size", h.rank[c]));
        }
        steps(
            &h.basis_ptr,
            &mut (0..nn).map(|c| size(c as u32).checked_mul(h.rank[c] as usize)),
            h.basis.len(),
            "basis",
        )?;
        if let Some(&(i, j)) = h
            .blocks
            .iter()
            .find(|&&(i, j)| !(i < j && (j as usize) < nn))
        {
            return Err(format!("far block ({i}, {j}) is not I < J < {nn}"));
        }
        if h.coupling_ptr.len() != h.blocks.len() + 1 {
            return Err("coupling offsets are not one per block plus one".into());
        }
        steps(
            &h.coupling_ptr,
            &mut h.blocks.iter().map(|&(i, j)| {
                (h.rank[i as usize] as usize).checked_mul(h.rank[j as usize] as usize)
            }),
            h.coupling.len(),
            "coupling",
        )?;
        // The per-node lists must be exactly the ones the pairs and blocks imply (in pair order,
        // a diagonal pair listed once): the device and the apply trust them as an index.
        let (ptr, list) = node_lists(nn, &h.near_pairs);
        if ptr != h.node_near_ptr || list != h.node_near {
            return Err("per-node near lists do not match the near pairs".into());
        }
        let (ptr, list) = node_lists(nn, &h.blocks);
        if ptr != h.node_block_ptr || list != h.node_blocks {
            return Err("per-node block lists do not match the far blocks".into());
        }
        Ok(())
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
