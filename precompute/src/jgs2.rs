//! JGS2 offline precompute (Lan et al., "JGS2", §4–§6): per-vertex perturbation subspaces
//! `Ū_i` (Eq. 23) compressed into an exact near field, a cubature-sampled far field and a
//! rest-state reduced Hessian.
//!
//! What the run-time local system needs from `Ū_i` (see `jello::solver::jgs2` for the system
//! itself) is the reduced gradient `Ū_iᵀg = Σ_j Ū_i[j]ᵀ g_j` and the reduced Hessian
//! `Ū_iᵀHŪ_i`. Definitions (decisions where the paper is silent are marked *choice*):
//! - `H̄ = Σ_e H̄_e` on free DOFs, `H̄_e = K̄_e + M_e/h²` (`K̄_e`: rest Hessian of the element's
//!   elastic energy, `M_e`: its corners' mass shares). Pinned rows/columns are identity.
//!   *Choice*: with the inertia in `H̄`, the subspace exists for free bodies and decays over
//!   about one wave length `h·√(E/ρ)`, so soft or short-step bodies get local subspaces and
//!   stiff ones global subspaces (the paper's §4.4 observation).
//! - Eq. 23, batched: `Y = H̄⁻¹S_iᵀ` for `batch_vertices` vertices per multi-RHS solve,
//!   `Ū_i = Y(S_iY)⁻¹`; the Schur complement `S_i = (S_iY)⁻¹ = Ū_iᵀH̄Ū_i` comes for free.
//! - Cluster tree ([`crate::tree`]): recursive median splits of the free vertices, leaves of
//!   at most `leaf_size` vertices; every node is a compact vertex cluster.
//! - **Near/far split**, per vertex, by walking the tree from the root: a node that holds
//!   neither `i` nor a vertex of its 1-ring, and over which `Ū_i` deviates from its mean by at
//!   most `far_tolerance·‖Ū_i[i]‖_F` (Frobenius norm of the deviation over the whole node), is a
//!   **far sample**: the run time adds `ū_{i,c}ᵀ G_c` with `ū_{i,c}` the node mean and
//!   `G_c = Σ_{j∈c} g_j`. Other nodes are split; leaves that still fail go to the **near
//!   field**, whose rows `Ū_i[j]` are stored and summed exactly. *Choice*: the paper samples a
//!   few single elements with NNLS weights fitted on low-frequency training poses; samples that
//!   see one element (or one vertex) of a residual multiply its high-frequency part, which the
//!   poses never show, by weights of 10–30, and Jacobi diverged on a clamped ARAP beam
//!   (E = 1 MPa, h = 10 ms). A node fit sums the gradient over a compact patch, so high
//!   frequencies average out, and the tolerance bounds the far-field error directly.
//! - **First-order far field** (`far_order = 1`, the default; *choice*, beyond the paper): the
//!   fit over a node is linear in the rest position, `Ū_i[j] ≈ ū_{i,c} + Σ_k (p_j − p̄_c)_k
//!   B_{i,c,k}` (least squares over the node's vertices; the deviation is measured from it;
//!   nodes of ≤ 4 vertices keep the mean), and the run time adds `Σ_k B_kᵀ M_c[k]` with the
//!   first moments `M_c[k] = Σ_{j∈c} (p_j − p̄_c)_k g_j`. `Ū_i` decays smoothly away from `i`,
//!   so a slope follows it over far larger nodes than a mean: on the clamped ARAP beam at
//!   equal memory the iterations per step fell from 7.4 to 2.8 (the issue note has the table).
//! - **H-matrix field** (`far_hmatrix`, optional; *choice*, beyond the paper, issue 17):
//!   `Ū_i[j]ᵀ = S_i G_ij` with `G = H̄⁻¹` symmetric, so every vertex's whole sum
//!   `Σ_{j≠i} Ū_i[j]ᵀ ĝ_j = S_i (G ĝ)_i − ĝ_i` is a row of one product with `G`, stored as
//!   an H-matrix over the cluster tree ([`crate::hmatrix`]): dense `G` blocks on the
//!   inadmissible leaf pairs (once per pair, built from the near rows this pass computes
//!   anyway: `G_ab = Ū_b[a] S_b⁻¹`) and uniform low-rank blocks `Q_I S_IJ Q_Jᵀ` on the
//!   admissible ones (randomised cluster bases, one multi-RHS solve per cluster for the
//!   sketch and one for the couplings). Records then keep only their 1-ring's rows (the
//!   incident elements' blocks of `A_i`); `far_residual` is the H-matrix's error on the
//!   training poses, `S_i u_t[i]` against `S_i (G_H q_t)_i`.
//! - **Cubature** (Eqs. 17–18), optional (`max_samples > 0`): the far samples are compressed to
//!   at most `max_samples` nodes with weights `w_c ≥ 0` by greedy NNLS (An et al. 2008) on the
//!   training poses: each round draws up to `candidates` far nodes with probability ∝
//!   `‖Σ_{j∈c}Ū_i[j]‖_F`, keeps the one whose addition gives the smallest residual, and stops
//!   at `target_residual`, at `max_samples`, or when nothing helps.
//! - Training poses: the `n_modes` lowest eigenvectors `u_t` of `(H̄, M)`; their "gradients"
//!   are `q_t = H̄u_t`. The far field's exact value for pose `t` is
//!   `Σ_{j far} Ū_i[j]ᵀq_t[j] = S_i u_t[i] − Σ_{j near ∪ {i}} Ū_i[j]ᵀq_t[j]` (no sum over the
//!   whole mesh, since `Ū_iᵀH̄ = S_iS_i`); `far_residual` is the relative error of the far
//!   samples on the poses, rows normalised by `‖S_i u_t[i]‖` — the whole reduced gradient — so
//!   it measures the error of what the local solve uses.
//! - Rest reduced Hessian without the incident elements' elasticity:
//!   `Â_i = S_i − Σ_{e∋i} Ū_eᵀK̄_eŪ_e` (the run time adds the incident elements' current,
//!   co-rotated `U_eᵀK_e(x)U_e`, so `A_i` is exact at rest and follows the deformation near `i`).

use crate::clock::Instant;
use std::sync::Arc;

use rayon::prelude::*;

use crate::cholesky::{Ordering, SolveScratch, SparseCholesky};
use crate::eigen::{lowest_generalized, EigenOptions, EigenPairs};
use crate::hmatrix::{partition, HMatrix, HMatrixOptions, Sketch, StreamBuild};
use crate::nnls::{dot, nnls, nnls_gram};
use crate::rng::SplitMix64;
use crate::sparse::{tet_dofs, ScatterMap, SymSparse, SymmetricPattern};
use crate::tree::ClusterTree;
use crate::{PrecomputeError, Result};

/// Per-vertex result of one batch: (vertex, record, solve seconds, cubature seconds).
/// Per-worker buffers of the basis phase, reused from batch to batch (rayon `map_init`): the
/// batch's `n × 3b` solution block, the solver's workspace and the tree-sized tables of
/// [`VertexScratch`]. Allocating them per batch and per vertex made the kernel hand out and
/// take back gigabytes of zeroed pages (armadillo_114k: 42 million minor page faults, 225 of
/// 550 CPU-seconds in the kernel).
#[derive(Default)]
struct BatchScratch {
    y: Vec<f64>,
    solve: SolveScratch,
    vertex: VertexScratch,
}

/// Tree-sized per-vertex tables of `vertex_data`: per node Σ Ū_i[j], Σ ‖Ū_i[j]‖², the first
/// moments Σ p_j ⊗ Ū_i[j] and the near-field mask.
#[derive(Default)]
struct VertexScratch {
    s1: Vec<[f64; 9]>,
    s2: Vec<f64>,
    t1: Vec<[f64; 27]>,
    blocked: Vec<bool>,
}

type BatchOutput = Vec<(usize, VertexSubspaceData, f64, f64)>;

/// Plain-data input of the JGS2 precompute.
#[derive(Clone, Copy, Debug)]
pub struct Jgs2Input<'a> {
    /// Number of vertices.
    pub n_vertices: usize,
    /// Rest positions, m (for the cluster tree).
    pub positions: &'a [[f64; 3]],
    /// Tetrahedra (vertex indices).
    pub tets: &'a [[u32; 4]],
    /// Per-element rest Hessian of the elastic energy, 12×12 row-major, DOFs vertex-major
    /// `[x0 y0 z0 x1 …]`, in N/m.
    pub elem_hessians: &'a [[f64; 144]],
    /// Per-element mass share of each of its 4 vertices, kg (Σ over elements = vertex mass).
    pub elem_mass: &'a [[f64; 4]],
    /// Time step, s.
    pub h: f64,
    /// One flag per vertex: pinned vertices get identity rows in `H̄` and an empty record.
    pub pinned: &'a [bool],
}

/// Tuning of [`Jgs2Precompute::run`].
#[derive(Clone, Debug)]
pub struct Jgs2Options {
    /// Number of training poses (lowest eigenmodes); default 24.
    pub n_modes: usize,
    /// Vertices per leaf of the cluster tree; default 8.
    pub leaf_size: usize,
    /// Far-sample tolerance: a node is a far sample when `Ū_i`'s deviation from its fit over
    /// the node (see `far_order`) is at most this × `‖Ū_i[i]‖_F`; default 0.02.
    pub far_tolerance: f64,
    /// Fit of `Ū_i` over a far node: 0 = its mean (9 numbers per sample), 1 (default) = the
    /// least-squares linear fit in the rest position (mean + 3 slopes, 36 numbers per sample;
    /// the run time adds the node's first moments of the gradient).
    pub far_order: usize,
    /// Cubature compression of the far samples: 0 (default) keeps every far node with weight
    /// 1; `k > 0` keeps at most `k` nodes with NNLS weights.
    pub max_samples: usize,
    /// Candidates drawn per greedy cubature round; default 64.
    pub candidates: usize,
    /// Target relative residual of the cubature fit; default 0.01.
    pub target_residual: f64,
    /// Vertices per multi-RHS solve (3 columns each); default 32.
    pub batch_vertices: usize,
    /// Seed of the candidate sampling (each vertex derives its own stream).
    pub seed: u64,
    /// Eigen solver settings for the training poses (default tol 1e-6).
    pub eigen: EigenOptions,
    /// `Some`: the far field is a uniform H-matrix of `G = H̄⁻¹` over the cluster tree
    /// ([`crate::hmatrix`]) instead of per-vertex node fits; the near field is then every
    /// vertex of the inadmissible leaf pairs of the vertex's leaf, and `far_tolerance`,
    /// `far_order` and the cubature settings are not used. Per-vertex subspaces only.
    /// Default `None` here; `jello`'s `SubspaceOptions::default()` sets it (issue 17).
    pub far_hmatrix: Option<HMatrixOptions>,
}

impl Default for Jgs2Options {
    fn default() -> Self {
        Self {
            n_modes: 24,
            leaf_size: 8,
            far_tolerance: 0.02,
            far_order: 1,
            max_samples: 0,
            candidates: 64,
            target_residual: 0.01,
            batch_vertices: 32,
            seed: 0x6a67_7332,
            eigen: EigenOptions {
                tol: 1e-6,
                ..EigenOptions::default()
            },
            far_hmatrix: None,
        }
    }
}

/// Subspace data of one vertex (empty for pinned vertices).
///
/// 3×3 blocks are row-major with row = axis of the vertex (or cluster) they belong to and
/// column = the perturbed DOF of `i`, i.e. `Ū_i[j]` as a 3×3 block of the `3n × 3` matrix.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VertexSubspaceData {
    /// Near-field vertices (free, `≠ i`), ascending; always includes the free 1-ring.
    pub near_vertices: Vec<u32>,
    /// `Ū_i[j]` for each near vertex.
    pub near_blocks: Vec<[f64; 9]>,
    /// Far samples: cluster-tree node ids.
    pub far_nodes: Vec<u32>,
    /// Their non-negative weights (1 without cubature compression).
    pub far_weights: Vec<f64>,
    /// `w_c · ū_{i,c}` per sample (weight folded in), the fit's value at the node's centroid
    /// `p̄_c` (rest positions): the run time adds `blockᵀ G_c`.
    pub far_blocks: Vec<[f64; 9]>,
    /// First-order fits only (else empty): `w_c · B_{i,c,k}` for k = x, y, z, three 3×3
    /// row-major blocks per sample (1/m): the fit is `Ū_i[j] ≈ ū_{i,c} + Σ_k (p_j − p̄_c)_k
    /// B_{i,c,k}`, and the run time adds `Σ_k blockₖᵀ Σ_{j∈c} (p_j − p̄_c)_k g_j`.
    pub far_slopes: Vec<[f64; 27]>,
    /// Relative error of the far samples on the training poses (0 without a far field).
    pub far_residual: f64,
    /// `Â_i = S_i − Σ_{e∋i} Ū_eᵀK̄_eŪ_e` (N/m, symmetric, row-major).
    pub a_hat: [f64; 9],
    /// `S_i = Ū_iᵀH̄Ū_i`, the rest Schur complement (N/m, row-major); kept for tests and stats.
    pub schur: [f64; 9],
}

impl VertexSubspaceData {
    /// Releases the lists' spare capacity.
    fn shrink_to_fit(&mut self) {
        self.near_vertices.shrink_to_fit();
        self.near_blocks.shrink_to_fit();
        self.far_nodes.shrink_to_fit();
        self.far_weights.shrink_to_fit();
        self.far_blocks.shrink_to_fit();
        self.far_slopes.shrink_to_fit();
    }
}

/// Summary statistics of a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Jgs2Stats {
    /// Free vertices processed.
    pub n_free: usize,
    /// Training poses used.
    pub n_modes: usize,
    /// Nodes of the cluster tree.
    pub n_nodes: usize,
    /// Far-field residual distribution over free vertices: smallest.
    pub residual_min: f64,
    /// Median.
    pub residual_median: f64,
    /// 90th percentile.
    pub residual_p90: f64,
    /// Largest.
    pub residual_max: f64,
    /// Fraction of free vertices at or below the target residual.
    pub fraction_on_target: f64,
    /// Mean far samples (tree nodes) per free vertex.
    pub mean_samples: f64,
    /// Mean near-field size (vertices) per free vertex.
    pub mean_near: f64,
    /// Assembly + symbolic + numeric factorisation of `H̄` and the cluster tree, s.
    pub factor_s: f64,
    /// Multi-RHS solves and `Ū_i` formation (share of the fused phase's wall time), s.
    pub basis_s: f64,
    /// Training-pose eigen solve, s.
    pub eigen_s: f64,
    /// Near/far split and cubature (share of the fused phase's wall time), s.
    pub cubature_s: f64,
    /// Whole precompute, s.
    pub total_s: f64,
    /// Mean bytes per vertex of the run-time data as f32/u32: near rows (id + 9), far samples
    /// (id + 9, + 27 slopes at first order) and `Â` (9), plus the tree (one permutation entry
    /// per vertex, 2 per node); with the H-matrix far field, its bases, couplings and block
    /// lists ([`HMatrix::bytes_f32`]) and `S_i` (9) instead of far samples.
    pub bytes_per_vertex: f64,
    /// H-matrix far field only: its build (sketch solves, bases, couplings), s; for the global
    /// sketch, built from the basis pass's columns ([`StreamBuild`]), its products' CPU
    /// seconds over the threads (inside the basis pass, taken out of `basis_s`) plus the
    /// finishing steps.
    pub hmatrix_s: f64,
    /// H-matrix far field only: mean rank over the clusters with a basis.
    pub hmatrix_mean_rank: f64,
    /// H-matrix far field only: largest cluster rank.
    pub hmatrix_max_rank: u32,
    /// H-matrix far field only: admissible blocks (I < J).
    pub hmatrix_blocks: usize,
}

/// Output of the JGS2 precompute.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Jgs2Basis {
    /// One record per vertex (empty for pinned vertices).
    pub vertices: Vec<VertexSubspaceData>,
    /// The cluster tree over the free vertices (far samples are its nodes).
    pub tree: ClusterTree,
    /// The H-matrix far field (`Jgs2Options::far_hmatrix`), else `None`: vertex `i`'s far sum
    /// is then `S_i (G_far ĝ)_i` with `S_i` = the record's `schur`.
    pub far_hmatrix: Option<HMatrix>,
    /// Statistics.
    pub stats: Jgs2Stats,
}

/// Assembled and factored `H̄`, ready to compute subspaces and cubature.
pub struct Jgs2Precompute {
    n_vertices: usize,
    tets: Vec<[u32; 4]>,
    hbar_e: Vec<[f64; 144]>,
    fixed_vertex: Vec<bool>,
    /// DOF mass for the eigenproblem (0 on fixed DOFs), kg.
    mass: Vec<f64>,
    hbar: SymSparse,
    factor: SparseCholesky,
    vert_elem_ptr: Vec<usize>,
    vert_elem: Vec<u32>,
    /// Rest positions (for the cluster tree), m.
    positions: Vec<[f64; 3]>,
    /// Per element, the mass share of each corner (kg) and 1/h² (1/s²): `K̄_e = H̄_e − M_e/h²`.
    elem_mass: Vec<[f64; 4]>,
    inv_h2: f64,
    factor_s: f64,
}

impl std::fmt::Debug for Jgs2Precompute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jgs2Precompute")
            .field("n_vertices", &self.n_vertices)
            .field("n_tets", &self.tets.len())
            .finish()
    }
}

impl Jgs2Precompute {
    /// Validates the input, assembles `H̄` and factors it. Vertices that belong to no element
    /// are treated as pinned.
    pub fn new(input: &Jgs2Input<'_>, ordering: Ordering) -> Result<Self> {
        let t0 = Instant::now();
        let nv = input.n_vertices;
        let ne = input.tets.len();
        if input.elem_hessians.len() != ne
            || input.elem_mass.len() != ne
            || input.pinned.len() != nv
            || input.positions.len() != nv
        {
            return Err(PrecomputeError::Invalid(format!(
                "jgs2: {ne} tets but {} Hessians, {} mass rows; {} pin flags and {} positions for \
                 {nv} vertices",
                input.elem_hessians.len(),
                input.elem_mass.len(),
                input.pinned.len(),
                input.positions.len()
            )));
        }
        if !(input.h.is_finite() && input.h > 0.0) {
            return Err(PrecomputeError::Invalid(format!(
                "jgs2: time step h = {} must be positive",
                input.h
            )));
        }
        let mut vmass = vec![0.0; nv];
        let mut count = vec![0usize; nv + 1];
        for (e, t) in input.tets.iter().enumerate() {
            for (a, &v) in t.iter().enumerate() {
                if v as usize >= nv {
                    return Err(PrecomputeError::Invalid(format!(
                        "jgs2: tet {e} references vertex {v} of {nv}"
                    )));
                }
                let m = input.elem_mass[e][a];
                if !(m.is_finite() && m >= 0.0) {
                    return Err(PrecomputeError::Invalid(format!(
                        "jgs2: tet {e} has mass share {m}"
                    )));
                }
                vmass[v as usize] += m;
                count[v as usize + 1] += 1;
            }
            if input.elem_hessians[e].iter().any(|x| !x.is_finite()) {
                return Err(PrecomputeError::Invalid(format!(
                    "jgs2: tet {e} Hessian is not finite"
                )));
            }
        }
        for v in 0..nv {
            count[v + 1] += count[v];
        }
        let vert_elem_ptr = count.clone();
        let mut fill = count;
        let mut vert_elem = vec![0u32; vert_elem_ptr[nv]];
        for (e, t) in input.tets.iter().enumerate() {
            for &v in t {
                vert_elem[fill[v as usize]] = e as u32;
                fill[v as usize] += 1;
            }
        }
        let mut fixed_vertex = input.pinned.to_vec();
        for v in 0..nv {
            if vert_elem_ptr[v + 1] == vert_elem_ptr[v] {
                fixed_vertex[v] = true;
            } else if !fixed_vertex[v] && vmass[v] <= 0.0 {
                return Err(PrecomputeError::Invalid(format!(
                    "jgs2: free vertex {v} has no mass"
                )));
            }
        }
        let inv_h2 = 1.0 / (input.h * input.h);
        let hbar_e: Vec<[f64; 144]> = input
            .elem_hessians
            .iter()
            .zip(input.elem_mass)
            .map(|(k, m)| {
                let mut h = *k;
                for a in 0..4 {
                    for d in 0..3 {
                        let r = 3 * a + d;
                        h[r * 12 + r] += m[a] * inv_h2;
                    }
                }
                h
            })
            .collect();
        let fixed_dof: Vec<bool> = fixed_vertex.iter().flat_map(|&f| [f; 3]).collect();
        let pattern = Arc::new(SymmetricPattern::from_elements(nv, 3, input.tets)?);
        let map = ScatterMap::new(&pattern, 12, &tet_dofs(input.tets), Some(&fixed_dof))?;
        let mut hbar = SymSparse::zeros(pattern.clone());
        for (e, he) in hbar_e.iter().enumerate() {
            hbar.scatter_add(&map, e, he);
        }
        hbar.set_identity_rows(&fixed_dof);
        let factor = SparseCholesky::new(&hbar, ordering)?;
        let mass: Vec<f64> = (0..3 * nv)
            .map(|i| if fixed_dof[i] { 0.0 } else { vmass[i / 3] })
            .collect();
        Ok(Self {
            n_vertices: nv,
            tets: input.tets.to_vec(),
            hbar_e,
            fixed_vertex,
            mass,
            hbar,
            factor,
            vert_elem_ptr,
            vert_elem,
            positions: input.positions.to_vec(),
            elem_mass: input.elem_mass.to_vec(),
            inv_h2,
            factor_s: t0.elapsed().as_secs_f64(),
        })
    }

    /// The assembled `H̄` (pinned rows/columns = identity).
    pub fn hbar(&self) -> &SymSparse {
        &self.hbar
    }

    /// The Cholesky factor of `H̄`.
    pub fn factor(&self) -> &SparseCholesky {
        &self.factor
    }

    /// `H̄_e = K_e + M_e/h²` (12×12 row-major).
    pub fn element_hessian(&self, e: usize) -> &[f64; 144] {
        &self.hbar_e[e]
    }

    /// Vertices treated as fixed (pinned or in no element).
    pub fn fixed_vertices(&self) -> &[bool] {
        &self.fixed_vertex
    }

    /// Elements incident to vertex `v`.
    pub fn incident_elements(&self, v: usize) -> &[u32] {
        &self.vert_elem[self.vert_elem_ptr[v]..self.vert_elem_ptr[v + 1]]
    }

    /// Full `Ū_i` (Eq. 23) as a column-major `3n × 3` block; an error for fixed vertices.
    pub fn ubar_dense_for_vertex(&self, i: usize) -> Result<Vec<f64>> {
        if i >= self.n_vertices || self.fixed_vertex[i] {
            return Err(PrecomputeError::Invalid(format!(
                "vertex {i} is fixed or out of range"
            )));
        }
        let n = 3 * self.n_vertices;
        let mut y = vec![0.0; 3 * n];
        for d in 0..3 {
            y[d * n + 3 * i + d] = 1.0;
        }
        self.factor.solve_many_in_place(&mut y, 3)?;
        ubar_from_y(&mut y, n, i, i)?;
        Ok(y)
    }

    /// Training poses: lowest `k` eigenpairs of `(H̄, M)` (values are `λ + 1/h²`).
    pub fn training_poses(&self, k: usize, opts: &EigenOptions) -> Result<EigenPairs> {
        let n_free_dofs = self.mass.iter().filter(|m| **m > 0.0).count();
        lowest_generalized(
            &self.hbar,
            &self.factor,
            &self.mass,
            k.min(n_free_dofs),
            opts,
        )
    }

    /// The 12 affine displacement fields (3 translations, 9 linear in the rest position about
    /// the centroid) on the free DOFs, zero at fixed ones, each of unit norm: the H-matrix
    /// field's residual probes (`G H̄ u = u`, so the exact reduced gradient of `q = H̄ u` is
    /// known without a solve).
    fn affine_probes(&self) -> EigenPairs {
        let nv = self.n_vertices;
        let n = 3 * nv;
        let free: Vec<usize> = (0..nv).filter(|&v| !self.fixed_vertex[v]).collect();
        let mut centre = [0.0; 3];
        for &v in &free {
            for d in 0..3 {
                centre[d] += self.positions[v][d] / free.len().max(1) as f64;
            }
        }
        let mut vectors = Vec::with_capacity(12 * n);
        for field in 0..12 {
            let mut u = vec![0.0; n];
            for &v in &free {
                let (d, c) = (field % 3, field / 3);
                u[3 * v + d] = if c == 0 {
                    1.0
                } else {
                    self.positions[v][c - 1] - centre[c - 1]
                };
            }
            let norm = u.iter().map(|x| x * x).sum::<f64>().sqrt();
            if norm > 0.0 {
                u.iter_mut().for_each(|x| *x /= norm);
            }
            vectors.extend_from_slice(&u);
        }
        EigenPairs {
            n,
            values: vec![0.0; 12],
            vectors,
            residuals: vec![0.0; 12],
            restarts: 0,
            converged: true,
        }
    }

    /// Runs the subspace precompute for every free vertex: one subspace per vertex (Eq. 23),
    /// for the Jacobi iteration.
    pub fn run(&self, opts: &Jgs2Options) -> Result<Jgs2Basis> {
        self.run_with(opts, None)
    }

    /// Group-wise subspaces for the Gauss–Seidel iteration (paper §8.1): vertices of one group
    /// (a colour: no two share an element) are updated together, so vertex `i`'s subspace
    /// perturbs `i` with the *other* vertices of its group held fixed and the rest following
    /// harmonically: `Ū_i[C] = −H̄_CC⁻¹H̄_{C,i}` with `C` = the vertices outside the group,
    /// `Ū_i[i] = I`, zero on the rest of the group. One factorisation of `H̄_CC` per group
    /// (same symbolic pattern, group rows set to identity), then 3 solves per vertex.
    /// `groups` must cover every free vertex once and hold no two vertices of one element.
    pub fn run_grouped(&self, opts: &Jgs2Options, groups: &[Vec<u32>]) -> Result<Jgs2Basis> {
        let mut seen = vec![false; self.n_vertices];
        for g in groups {
            for &v in g {
                let v = v as usize;
                if v >= self.n_vertices || seen[v] {
                    return Err(PrecomputeError::Invalid(format!(
                        "jgs2: vertex {v} is out of range or in two groups"
                    )));
                }
                seen[v] = true;
            }
        }
        if let Some(v) = (0..self.n_vertices).find(|&v| !self.fixed_vertex[v] && !seen[v]) {
            return Err(PrecomputeError::Invalid(format!(
                "jgs2: free vertex {v} is in no group"
            )));
        }
        for (e, t) in self.tets.iter().enumerate() {
            let mut group_of = [usize::MAX; 4];
            for (a, &v) in t.iter().enumerate() {
                group_of[a] = groups
                    .iter()
                    .position(|g| g.binary_search(&v).is_ok())
                    .unwrap_or(usize::MAX - a);
            }
            for a in 0..4 {
                for b in a + 1..4 {
                    if group_of[a] == group_of[b] && group_of[a] < groups.len() {
                        return Err(PrecomputeError::Invalid(format!(
                            "jgs2: element {e} holds two vertices of group {}",
                            group_of[a]
                        )));
                    }
                }
            }
        }
        self.run_with(opts, Some(groups))
    }

    fn run_with(&self, opts: &Jgs2Options, groups: Option<&[Vec<u32>]>) -> Result<Jgs2Basis> {
        if opts.far_hmatrix.is_some() && (groups.is_some() || opts.max_samples > 0) {
            return Err(PrecomputeError::Invalid(
                "jgs2: the H-matrix far field needs per-vertex subspaces (Eq. 23) and no \
                 cubature (max_samples = 0)"
                    .into(),
            ));
        }
        if opts.batch_vertices == 0
            || opts.leaf_size == 0
            || opts.far_order > 1
            || !(opts.target_residual.is_finite() && opts.target_residual >= 0.0)
            || !(opts.far_tolerance.is_finite() && opts.far_tolerance >= 0.0)
        {
            return Err(PrecomputeError::Invalid(
                "jgs2: batch_vertices and leaf_size must be > 0, far_order 0 or 1, \
                 target_residual and far_tolerance finite and ≥ 0"
                    .into(),
            ));
        }
        let t_total = Instant::now();
        let t_c = Instant::now();
        let free: Vec<usize> = (0..self.n_vertices)
            .filter(|&v| !self.fixed_vertex[v])
            .collect();
        let free_u32: Vec<u32> = free.iter().map(|&v| v as u32).collect();
        let tree = ClusterTree::build(&self.positions, &free_u32, opts.leaf_size);
        let leaf_of = tree.leaf_of(self.n_vertices);
        // The H-matrix's block partition fixes the near field before any solve.
        let blocks = opts
            .far_hmatrix
            .map(|h| partition(&tree, &self.positions, h.eta, &self.longest_edges()));
        let tree_s = t_c.elapsed().as_secs_f64();

        let t0 = Instant::now();
        // The H-matrix field needs no training poses (they only fit node far fields); its
        // residual is measured on the affine probes, whose G q is known without a solve.
        let poses = if opts.far_hmatrix.is_some() {
            self.affine_probes()
        } else {
            self.training_poses(opts.n_modes, &opts.eigen)?
        };
        let eigen_s = t0.elapsed().as_secs_f64();
        let k = poses.values.len();
        let n = 3 * self.n_vertices;
        // q_t = H̄ u_t, n × k column-major: the training "gradients".
        let hq: Vec<f64> = {
            let mut out = vec![0.0; n * k];
            out.par_chunks_mut(n.max(1))
                .enumerate()
                .for_each(|(t, dst)| {
                    self.hbar.mul_vec(&poses.vectors[t * n..(t + 1) * n], dst);
                });
            out
        };
        // Σ_{j∈c} q_t[j] per node: 3k values (pose-major), children before parents.
        let mut pose_sums = vec![vec![0.0; 3 * k]; tree.len()];
        for c in (0..tree.len()).rev() {
            match tree.children[c] {
                None => {
                    for &j in tree.members(c) {
                        for t in 0..k {
                            for d in 0..3 {
                                pose_sums[c][3 * t + d] += hq[t * n + 3 * j as usize + d];
                            }
                        }
                    }
                }
                Some((l, r)) => {
                    let sum: Vec<f64> = pose_sums[l as usize]
                        .iter()
                        .zip(&pose_sums[r as usize])
                        .map(|(a, b)| a + b)
                        .collect();
                    pose_sums[c] = sum;
                }
            }
        }
        let geo = if opts.far_order >= 1 {
            node_geometry(&self.positions, &tree, &hq, k)
        } else {
            NodeGeometry::default()
        };
        let (slot, dof_of_row) = row_layout(&tree, &self.fixed_vertex);
        // The global-sketch H-matrix is built from the basis pass's columns of G.
        let streamed = groups.is_none()
            && blocks.is_some()
            && opts.far_hmatrix.is_some_and(|h| h.sketch == Sketch::Global);
        let tt = TreeTables {
            tree: &tree,
            slot: &slot,
            dof_of_row: &dof_of_row,
            leaf_of: &leaf_of,
            pose_sums: &pose_sums,
            rel_pos: &geo.rel_pos,
            centre: &geo.centre,
            cov_pinv: &geo.cov_pinv,
            pose_moments: &geo.pose_moments,
            near_leaves: blocks.as_ref().map(|b| b.near.as_slice()),
            ring_only: streamed,
        };
        let t1 = Instant::now();
        let mut results: Vec<Result<BatchOutput>> = Vec::new();
        let stream = match (opts.far_hmatrix, &blocks) {
            (Some(h), Some(b)) if streamed => Some(StreamBuild::new(&tree, &b.far, &b.near, &h)?),
            _ => None,
        };
        match groups {
            None if stream.is_some() => {
                let stream = stream.as_ref().expect("checked");
                results = self.stream_batches(&tree, stream, &poses, &hq, &tt, opts);
            }
            None => {
                let order = elimination_sorted(&self.factor, free.clone());
                results = order
                    .par_chunks(opts.batch_vertices)
                    .map_init(BatchScratch::default, |sc, batch| {
                        self.process_batch(batch, Mode::PerVertex, &poses, &hq, &tt, opts, sc, None)
                    })
                    .collect();
            }
            Some(groups) => {
                for g in groups {
                    let members: Vec<usize> = elimination_sorted(
                        &self.factor,
                        g.iter()
                            .map(|&v| v as usize)
                            .filter(|&v| !self.fixed_vertex[v])
                            .collect(),
                    );
                    if members.is_empty() {
                        continue;
                    }
                    let mut mask = self.fixed_vertex.clone();
                    for &v in &members {
                        mask[v] = true;
                    }
                    let dof_mask: Vec<bool> = mask.iter().flat_map(|&f| [f; 3]).collect();
                    let mut hg = self.hbar.clone();
                    hg.set_identity_rows(&dof_mask);
                    let mut factor = SparseCholesky::analyze(
                        self.hbar.pattern().clone(),
                        self.factor.ordering(),
                    )?;
                    factor.refactor(&hg)?;
                    let mode = Mode::Group {
                        factor: &factor,
                        mask: &mask,
                    };
                    results.extend(
                        members
                            .par_chunks(opts.batch_vertices)
                            .map_init(BatchScratch::default, |sc, batch| {
                                self.process_batch(batch, mode, &poses, &hq, &tt, opts, sc, None)
                            })
                            .collect::<Vec<_>>(),
                    );
                }
            }
        }
        let fused_s = t1.elapsed().as_secs_f64();
        let mut vertices = vec![VertexSubspaceData::default(); self.n_vertices];
        let (mut solve_cpu, mut cub_cpu) = (0.0, 0.0);
        for r in results {
            for (v, rec, ts, tc) in r? {
                vertices[v] = rec;
                solve_cpu += ts;
                cub_cpu += tc;
            }
        }
        let mut hstats = (0.0, 0.0, 0, 0, 0usize);
        let stream_s = stream.as_ref().map_or(0.0, |s| {
            s.cpu_seconds() / rayon::current_num_threads().max(1) as f64
        });
        let far_hmatrix = match (opts.far_hmatrix, &blocks) {
            (Some(hopts), Some(blocks)) => {
                let t = Instant::now();
                // Streamed: the near blocks come from the columns and the records hold their
                // 1-ring's rows already.
                let hm = match stream {
                    Some(stream) => stream.finish()?,
                    None => {
                        let (mut hm, _) = HMatrix::build_with(
                            &self.factor,
                            &tree,
                            &dof_of_row,
                            &blocks.far,
                            &hopts,
                            Some((&self.hbar, &self.positions)),
                        )?;
                        self.set_near_field(&mut hm, &tree, &blocks.near, &leaf_of, &mut vertices)?;
                        hm
                    }
                };
                let (mean_rank, max_rank) = hm.rank_stats();
                hstats = (
                    stream_s + t.elapsed().as_secs_f64(),
                    mean_rank,
                    max_rank,
                    hm.blocks.len(),
                    hm.bytes_f32(),
                );
                self.hmatrix_residuals(&hm, &tree, &poses, &hq, &mut vertices);
                Some(hm)
            }
            _ => None,
        };
        let share = if solve_cpu + cub_cpu > 0.0 {
            solve_cpu / (solve_cpu + cub_cpu)
        } else {
            0.5
        };
        let mut res: Vec<f64> = free.iter().map(|&v| vertices[v].far_residual).collect();
        res.sort_by(f64::total_cmp);
        let pct = |q: f64| -> f64 {
            if res.is_empty() {
                0.0
            } else {
                res[((res.len() - 1) as f64 * q).round() as usize]
            }
        };
        let per_free = |total: usize| {
            if free.is_empty() {
                0.0
            } else {
                total as f64 / free.len() as f64
            }
        };
        let total_far: usize = vertices.iter().map(|v| v.far_nodes.len()).sum();
        let total_near: usize = vertices.iter().map(|v| v.near_vertices.len()).sum();
        let stats = Jgs2Stats {
            n_free: free.len(),
            n_modes: k,
            n_nodes: tree.len(),
            residual_min: pct(0.0),
            residual_median: pct(0.5),
            residual_p90: pct(0.9),
            residual_max: pct(1.0),
            fraction_on_target: if res.is_empty() {
                1.0
            } else {
                res.iter().filter(|r| **r <= opts.target_residual).count() as f64 / res.len() as f64
            },
            mean_samples: per_free(total_far),
            mean_near: per_free(total_near),
            factor_s: self.factor_s + tree_s,
            basis_s: (fused_s * share - stream_s).max(0.0),
            eigen_s,
            cubature_s: fused_s * (1.0 - share),
            total_s: self.factor_s + t_total.elapsed().as_secs_f64(),
            bytes_per_vertex: ((total_near * 10
                + total_far * if opts.far_order >= 1 { 37 } else { 10 }
                + free.len() * if far_hmatrix.is_some() { 18 } else { 9 })
                * 4
                + hstats.4
                + 4 * tree.perm.len()
                + 8 * tree.len()) as f64
                / self.n_vertices.max(1) as f64,
            hmatrix_s: hstats.0,
            hmatrix_mean_rank: hstats.1,
            hmatrix_max_rank: hstats.2,
            hmatrix_blocks: hstats.3,
        };
        Ok(Jgs2Basis {
            vertices,
            tree,
            far_hmatrix,
            stats,
        })
    }

    /// The basis pass with the H-matrix streamed from its columns ([`StreamBuild`]): batches
    /// are subtrees of at most `batch_vertices` vertices, handed out in tree order to one
    /// worker per thread (a batch may wait for a cluster before it, see `StreamBuild`; rayon's
    /// splitting would hand a thread the second half of the tree first).
    fn stream_batches(
        &self,
        tree: &ClusterTree,
        stream: &StreamBuild<'_>,
        poses: &EigenPairs,
        hq: &[f64],
        tt: &TreeTables<'_>,
        opts: &Jgs2Options,
    ) -> Vec<Result<BatchOutput>> {
        let mut batches = Vec::new();
        let mut stack = if tree.is_empty() {
            vec![]
        } else {
            vec![0usize]
        };
        while let Some(c) = stack.pop() {
            let (lo, hi) = (tree.start[c] as usize, tree.end[c] as usize);
            match tree.children[c] {
                Some((l, r)) if hi - lo > opts.batch_vertices => {
                    stack.push(r as usize);
                    stack.push(l as usize);
                }
                _ => batches.push((lo, hi)),
            }
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        let slots: Vec<std::sync::Mutex<Option<Result<BatchOutput>>>> = batches
            .iter()
            .map(|_| std::sync::Mutex::new(None))
            .collect();
        let worker = || {
            let mut sc = BatchScratch::default();
            loop {
                let b = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if b >= batches.len() || stream.failed() {
                    break;
                }
                let (lo, hi) = batches[b];
                let batch: Vec<usize> = tree.perm[lo..hi].iter().map(|&v| v as usize).collect();
                let out = self.process_batch(
                    &batch,
                    Mode::PerVertex,
                    poses,
                    hq,
                    tt,
                    opts,
                    &mut sc,
                    Some((stream, lo)),
                );
                if out.is_err() {
                    stream.abort();
                }
                *slots[b].lock().unwrap_or_else(|e| e.into_inner()) = Some(out);
            }
        };
        // wasm32 cannot spawn threads (`std::thread::scope` panics there): the one worker runs
        // on the calling thread, taking the batches in tree order as a single-thread pool does.
        #[cfg(target_arch = "wasm32")]
        worker();
        #[cfg(not(target_arch = "wasm32"))]
        std::thread::scope(|scope| {
            for _ in 0..rayon::current_num_threads().max(1) {
                scope.spawn(worker);
            }
        });
        slots
            .into_iter()
            .filter_map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
            .collect()
    }

    /// One multi-RHS solve for a batch of vertices, then each vertex's near/far split.
    #[allow(clippy::too_many_arguments)]
    fn process_batch(
        &self,
        batch: &[usize],
        mode: Mode<'_>,
        poses: &EigenPairs,
        hq: &[f64],
        tt: &TreeTables<'_>,
        opts: &Jgs2Options,
        scratch: &mut BatchScratch,
        stream: Option<(&StreamBuild<'_>, usize)>,
    ) -> Result<BatchOutput> {
        let t0 = Instant::now();
        let n = 3 * self.n_vertices;
        let cols = 3 * batch.len();
        let BatchScratch {
            y,
            solve,
            vertex: vertex_scratch,
        } = scratch;
        let slot = tt.slot;
        let mut schur = Vec::with_capacity(batch.len());
        match mode {
            Mode::PerVertex => {
                // The solve overwrites every entry: no zero-fill.
                y.resize(n * cols, 0.0);
                let units: Vec<usize> = batch
                    .iter()
                    .flat_map(|&v| (0..3).map(move |d| 3 * slot[v] + d))
                    .collect();
                self.factor.solve_unit_columns_rows(
                    y,
                    &units,
                    faer::Par::Seq,
                    solve,
                    tt.dof_of_row,
                )?;
                // `y` is G's columns here (before they become Ū): the H-matrix's products.
                if let Some((stream, lo)) = stream {
                    stream.add_columns(lo, lo + batch.len(), y, n)?;
                }
                for (j, &v) in batch.iter().enumerate() {
                    let u = &mut y[3 * j * n..3 * (j + 1) * n];
                    schur.push(ubar_from_y(u, n, slot[v], v)?);
                }
            }
            Mode::Group { factor, mask } => {
                y.clear();
                y.resize(n * cols, 0.0);
                // Right-hand sides −H̄[C, i] assembled from i's elements, zero on masked rows.
                for (j, &v) in batch.iter().enumerate() {
                    for &e in self.incident_elements(v) {
                        let t = &self.tets[e as usize];
                        let he = &self.hbar_e[e as usize];
                        let ai = t.iter().position(|&w| w as usize == v).expect("incident");
                        for (a, &w) in t.iter().enumerate() {
                            if mask[w as usize] {
                                continue;
                            }
                            for r in 0..3 {
                                for d in 0..3 {
                                    y[(3 * j + d) * n + 3 * slot[w as usize] + r] -=
                                        he[(3 * a + r) * 12 + 3 * ai + d];
                                }
                            }
                        }
                    }
                }
                factor.solve_many_in_place_rows(y, cols, faer::Par::Seq, solve, tt.dof_of_row)?;
                for (j, &v) in batch.iter().enumerate() {
                    let u = &mut y[3 * j * n..3 * (j + 1) * n];
                    for d in 0..3 {
                        for r in 0..3 {
                            u[d * n + 3 * slot[v] + r] = if r == d { 1.0 } else { 0.0 };
                        }
                    }
                    // S_i = (H̄Ū_i)[i] = Σ_{e∋i} (H̄_e Ū_e)[i's corner].
                    let mut s = [0.0; 9];
                    for &e in self.incident_elements(v) {
                        let t = &self.tets[e as usize];
                        let he = &self.hbar_e[e as usize];
                        let ai = t.iter().position(|&w| w as usize == v).expect("incident");
                        let blk = self.element_block_at(u, e as usize, Some(slot));
                        for r in 0..3 {
                            for c in 0..3 {
                                s[3 * r + c] += (0..12)
                                    .map(|q| he[(3 * ai + r) * 12 + q] * blk[q * 3 + c])
                                    .sum::<f64>();
                            }
                        }
                    }
                    for r in 0..3 {
                        for c in 0..r {
                            let m = 0.5 * (s[3 * r + c] + s[3 * c + r]);
                            s[3 * r + c] = m;
                            s[3 * c + r] = m;
                        }
                    }
                    schur.push(s);
                }
            }
        }
        let solve_s = t0.elapsed().as_secs_f64() / batch.len() as f64;
        let mut out = Vec::with_capacity(batch.len());
        for (j, &v) in batch.iter().enumerate() {
            let t1 = Instant::now();
            let ubar = &y[3 * j * n..3 * (j + 1) * n];
            let exact_total = matches!(mode, Mode::PerVertex);
            let mut rec = self.vertex_data(
                v,
                ubar,
                &schur[j],
                exact_total,
                poses,
                hq,
                tt,
                opts,
                vertex_scratch,
            );
            // The lists grew by pushes (up to 2× their length); every vertex's record lives
            // until the artifact is written, so drop the slack now.
            rec.shrink_to_fit();
            out.push((v, rec, solve_s, t1.elapsed().as_secs_f64()));
        }
        Ok(out)
    }

    /// `[Ū]_e` as 12×3 row-major from a column-major `n × 3` `Ū`.
    pub fn element_block(&self, ubar: &[f64], e: usize) -> [f64; 36] {
        self.element_block_at(ubar, e, None)
    }

    /// [`Self::element_block`] with vertex `v`'s rows stored at rows `3·slot[v] + d` of `ubar`
    /// (at `3v + d` without a `slot`).
    fn element_block_at(&self, ubar: &[f64], e: usize, slot: Option<&[usize]>) -> [f64; 36] {
        let n = 3 * self.n_vertices;
        let mut b = [0.0; 36];
        for (a, &v) in self.tets[e].iter().enumerate() {
            let at = 3 * slot.map_or(v as usize, |s| s[v as usize]);
            for d in 0..3 {
                for c in 0..3 {
                    b[(3 * a + d) * 3 + c] = ubar[c * n + at + d];
                }
            }
        }
        b
    }

    /// `Â_i = S_i − Σ_{e∋i} Ū_eᵀK̄_eŪ_e` from `Ū_i` (rows at `3·slot[v] + d`).
    fn a_hat(&self, i: usize, ubar: &[f64], schur: &[f64; 9], slot: &[usize]) -> [f64; 9] {
        let mut a_hat = *schur;
        for &e in self.incident_elements(i) {
            let block = self.element_block_at(ubar, e as usize, Some(slot));
            let r = self.reduced_stiffness(&block, e as usize);
            for (a, x) in a_hat.iter_mut().zip(&r) {
                *a -= x;
            }
        }
        a_hat
    }

    /// Per vertex, its longest incident element edge at rest (m): no element joins a vertex
    /// to anything farther away.
    fn longest_edges(&self) -> Vec<f64> {
        let mut l = vec![0.0f64; self.n_vertices];
        for t in &self.tets {
            for a in 0..4 {
                for b in a + 1..4 {
                    let (va, vb) = (t[a] as usize, t[b] as usize);
                    let (p, q) = (self.positions[va], self.positions[vb]);
                    let e = (0..3).map(|d| (p[d] - q[d]).powi(2)).sum::<f64>().sqrt();
                    l[va] = l[va].max(e);
                    l[vb] = l[vb].max(e);
                }
            }
        }
        l
    }

    /// The H-matrix's dense near field from the records' near rows (`G_ab = Ū_b[a] G_bb`,
    /// `G_bb = S_b⁻¹`), stored once per leaf pair `I ≤ J` instead of as rows of both
    /// vertices (half the numbers, no ids); the records then keep only their free 1-ring's
    /// rows, which the incident elements' blocks of `A_i` need.
    fn set_near_field(
        &self,
        hm: &mut HMatrix,
        tree: &ClusterTree,
        near_leaves: &[Vec<u32>],
        leaf_of: &[u32],
        vertices: &mut [VertexSubspaceData],
    ) -> Result<()> {
        let mut g_diag = vec![[0.0; 9]; self.n_vertices];
        for &v in &tree.perm {
            let s = nalgebra::Matrix3::from_row_slice(&vertices[v as usize].schur);
            let g = s.try_inverse().ok_or_else(|| {
                PrecomputeError::Numeric(format!("S_i is singular at vertex {v}"))
            })?;
            for r in 0..3 {
                for c in 0..3 {
                    g_diag[v as usize][3 * r + c] = g[(r, c)];
                }
            }
        }
        let pairs = crate::hmatrix::near_pairs(near_leaves);
        let recs: &[VertexSubspaceData] = vertices;
        let missing = std::sync::atomic::AtomicBool::new(false);
        hm.set_near(tree, &pairs, |i, j| {
            let (rows, cols) = (tree.members(i), tree.members(j));
            let mj = 3 * cols.len();
            let mut out = vec![0.0; 3 * rows.len() * mj];
            for (bi, &b) in cols.iter().enumerate() {
                let rec = &recs[b as usize];
                let gbb = &g_diag[b as usize];
                for (ai, &a) in rows.iter().enumerate() {
                    let u = if a == b {
                        [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
                    } else if let Ok(k) = rec.near_vertices.binary_search(&a) {
                        rec.near_blocks[k]
                    } else {
                        missing.store(true, std::sync::atomic::Ordering::Relaxed);
                        [0.0; 9]
                    };
                    for r in 0..3 {
                        for c in 0..3 {
                            out[(3 * ai + r) * mj + 3 * bi + c] =
                                (0..3).map(|q| u[3 * r + q] * gbb[3 * q + c]).sum();
                        }
                    }
                }
            }
            out
        });
        if missing.into_inner() {
            return Err(PrecomputeError::Numeric(
                "jgs2: a near leaf pair's row is missing from a vertex's near field".into(),
            ));
        }
        // Only the free 1-ring's rows stay per vertex.
        vertices.par_iter_mut().enumerate().for_each(|(i, rec)| {
            if leaf_of[i] == u32::MAX {
                return;
            }
            let mut ring: Vec<u32> = self
                .incident_elements(i)
                .iter()
                .flat_map(|&e| self.tets[e as usize])
                .filter(|&v| v as usize != i && leaf_of[v as usize] != u32::MAX)
                .collect();
            ring.sort_unstable();
            ring.dedup();
            let blocks = ring
                .iter()
                .map(|j| {
                    let k = rec.near_vertices.binary_search(j).ok();
                    k.map(|k| rec.near_blocks[k])
                })
                .collect::<Option<Vec<_>>>();
            if let Some(blocks) = blocks {
                rec.near_vertices = ring;
                rec.near_blocks = blocks;
            }
        });
        Ok(())
    }

    /// The H-matrix's error on the probe poses (the 12 affine fields, [`Self::affine_probes`]),
    /// per free vertex (`far_residual`, RMS over the probes relative to the vertex's largest
    /// probe value): since `G q_t = u_t`, the exact reduced gradient of pose `t` is
    /// `S_i u_t[i]`, the H-matrix's `S_i (G_H q_t)_i`; the near blocks are exact, so the
    /// difference is the far field's error.
    fn hmatrix_residuals(
        &self,
        hm: &HMatrix,
        tree: &ClusterTree,
        poses: &EigenPairs,
        hq: &[f64],
        vertices: &mut [VertexSubspaceData],
    ) {
        let n = 3 * self.n_vertices;
        let k = poses.values.len();
        // Per pose, G_H q_t in vertex order.
        let applied: Vec<Vec<f64>> = (0..k)
            .map(|t| {
                let x: Vec<f64> = tree
                    .perm
                    .iter()
                    .flat_map(|&v| (0..3).map(move |d| hq[t * n + 3 * v as usize + d]))
                    .collect();
                let yt = hm.apply_tree_order(tree, &x);
                let mut y = vec![0.0; n];
                for (p, &v) in tree.perm.iter().enumerate() {
                    y[3 * v as usize..3 * v as usize + 3].copy_from_slice(&yt[3 * p..3 * p + 3]);
                }
                y
            })
            .collect();
        vertices.par_iter_mut().enumerate().for_each(|(i, rec)| {
            if self.fixed_vertex[i] || k == 0 {
                return;
            }
            let s = &rec.schur;
            let mul_s = |v: &[f64]| -> [f64; 3] {
                std::array::from_fn(|r| (0..3).map(|c| s[3 * r + c] * v[c]).sum())
            };
            let full: Vec<[f64; 3]> = (0..k)
                .map(|t| mul_s(&poses.vectors[t * n + 3 * i..t * n + 3 * i + 3]))
                .collect();
            let norms: Vec<f64> = full.iter().map(|f| dot(f, f).sqrt()).collect();
            let max_norm = norms.iter().fold(0.0f64, |m, x| m.max(*x));
            let (mut err2, mut used) = (0.0, 0usize);
            for t in 0..k {
                if norms[t] <= 1e-12 * max_norm {
                    continue;
                }
                // Relative to the vertex's largest probe value: a linear probe vanishes on a
                // plane through the centroid, where an error relative to its own value says
                // nothing.
                let approx = mul_s(&applied[t][3 * i..3 * i + 3]);
                err2 += (0..3)
                    .map(|d| ((approx[d] - full[t][d]) / max_norm).powi(2))
                    .sum::<f64>();
                used += 1;
            }
            rec.far_residual = (err2 / used.max(1) as f64).sqrt();
        });
    }

    /// `[Ū]_eᵀ K̄_e [Ū]_e` (3×3 row-major): the element's rest *elastic* reduced Hessian.
    fn reduced_stiffness(&self, block: &[f64; 36], e: usize) -> [f64; 9] {
        let h = &self.hbar_e[e];
        let m = &self.elem_mass[e];
        let mut hu = [0.0; 36]; // K̄_e Ū_e, 12×3
        for r in 0..12 {
            let mass = m[r / 3] * self.inv_h2;
            for c in 0..3 {
                let kv: f64 = (0..12).map(|q| h[r * 12 + q] * block[q * 3 + c]).sum();
                hu[r * 3 + c] = kv - mass * block[r * 3 + c];
            }
        }
        let mut out = [0.0; 9];
        for a in 0..3 {
            for c in 0..3 {
                out[a * 3 + c] = (0..12).map(|r| block[r * 3 + a] * hu[r * 3 + c]).sum();
            }
        }
        out
    }

    /// Near field, far samples (optionally cubature-compressed) and `Â` of free vertex `i`
    /// from its column-major `n × 3` `Ū_i` and Schur complement `S_i` (row-major).
    /// `per_vertex`: `Ū_i` is Eq. 23's, so `Ū_iᵀH̄u = S_i u[i]` gives the pose totals for free;
    /// otherwise (group-wise subspaces) they are summed over the mesh.
    #[allow(clippy::too_many_arguments)]
    fn vertex_data(
        &self,
        i: usize,
        ubar: &[f64],
        schur: &[f64; 9],
        per_vertex: bool,
        poses: &EigenPairs,
        hq: &[f64],
        tt: &TreeTables<'_>,
        opts: &Jgs2Options,
        scratch: &mut VertexScratch,
    ) -> VertexSubspaceData {
        let n = 3 * self.n_vertices;
        let k = poses.values.len();
        let tree = tt.tree;
        let nn = tree.len();
        let row = |j: usize| -> [f64; 9] {
            let at = 3 * tt.slot[j];
            let mut b = [0.0; 9];
            for d in 0..3 {
                for c in 0..3 {
                    b[3 * d + c] = ubar[c * n + at + d];
                }
            }
            b
        };
        let sq = |b: &[f64; 9]| b.iter().map(|x| x * x).sum::<f64>();
        if let Some(near_leaves) = tt.near_leaves {
            // H-matrix far field: the near field is fixed by the block partition, the far
            // field is shared (`HMatrix`), and its residual is measured after the build.
            let mut near_vertices: Vec<u32> = if tt.ring_only {
                self.incident_elements(i)
                    .iter()
                    .flat_map(|&e| self.tets[e as usize])
                    .filter(|&v| v as usize != i && tt.leaf_of[v as usize] != u32::MAX)
                    .collect()
            } else {
                near_leaves[tt.leaf_of[i] as usize]
                    .iter()
                    .flat_map(|&c| tree.members(c as usize).iter().copied())
                    .filter(|&j| j as usize != i)
                    .collect()
            };
            near_vertices.sort_unstable();
            near_vertices.dedup();
            let near_blocks: Vec<[f64; 9]> =
                near_vertices.iter().map(|&j| row(j as usize)).collect();
            return VertexSubspaceData {
                near_vertices,
                near_blocks,
                a_hat: self.a_hat(i, ubar, schur, tt.slot),
                schur: *schur,
                ..Default::default()
            };
        }
        let linear = opts.far_order >= 1;
        // Per node: Σ Ū_i[j], Σ ‖Ū_i[j]‖² and (first order) Σ p_j ⊗ Ū_i[j] (3 × 9, positions
        // relative to the tree's centroid), children before parents.
        // Tree-sized tables reused across vertices (see `VertexScratch`): every entry is
        // written below before it is read (leaves from rows, parents from children), so they
        // need no clearing.
        let VertexScratch {
            s1,
            s2,
            t1,
            blocked,
        } = scratch;
        s1.resize(nn, [0.0; 9]);
        s2.resize(nn, 0.0);
        t1.resize(if linear { nn } else { 0 }, [0.0; 27]);
        for c in (0..nn).rev() {
            match tree.children[c] {
                None => {
                    s1[c] = [0.0; 9];
                    s2[c] = 0.0;
                    if linear {
                        t1[c] = [0.0; 27];
                    }
                    for &j in tree.members(c) {
                        let r = row(j as usize);
                        s2[c] += sq(&r);
                        for (a, x) in s1[c].iter_mut().zip(&r) {
                            *a += x;
                        }
                        if linear {
                            let p = tt.rel_pos[j as usize];
                            for k in 0..3 {
                                for q in 0..9 {
                                    t1[c][9 * k + q] += p[k] * r[q];
                                }
                            }
                        }
                    }
                }
                Some((l, r)) => {
                    let (l, r) = (l as usize, r as usize);
                    s2[c] = s2[l] + s2[r];
                    for q in 0..9 {
                        s1[c][q] = s1[l][q] + s1[r][q];
                    }
                    if linear {
                        for q in 0..27 {
                            t1[c][q] = t1[l][q] + t1[r][q];
                        }
                    }
                }
            }
        }
        // The least-squares slopes B (3 × 9: row k = ∂Ū/∂p_k) of node c and the squared
        // deviation they remove: with X the centred positions and U the rows,
        // B = (XᵀX)⁺XᵀU and the gain is tr(UᵀX B).
        let fit = |c: usize| -> ([f64; 27], f64) {
            let mut b = [0.0; 27];
            // Slopes need more points than the fit has parameters to compress anything (a
            // node of ≤ 4 vertices would be fitted exactly): those keep the mean.
            if !linear || tree.members(c).len() <= 4 {
                return (b, 0.0);
            }
            let pc = tt.centre[c];
            let mut xu = [0.0; 27];
            for k in 0..3 {
                for q in 0..9 {
                    xu[9 * k + q] = t1[c][9 * k + q] - pc[k] * s1[c][q];
                }
            }
            let ci = &tt.cov_pinv[c];
            let mut gain = 0.0;
            for k in 0..3 {
                for q in 0..9 {
                    b[9 * k + q] = (0..3).map(|l| ci[3 * k + l] * xu[9 * l + q]).sum();
                    gain += xu[9 * k + q] * b[9 * k + q];
                }
            }
            (b, gain)
        };
        // Nodes holding i or its 1-ring are never far samples.
        blocked.clear();
        blocked.resize(nn, false);
        let mut block_up = |v: usize| {
            let mut c = tt.leaf_of[v];
            while c != u32::MAX && !blocked[c as usize] {
                blocked[c as usize] = true;
                c = tree.parent[c as usize];
            }
        };
        block_up(i);
        for &e in self.incident_elements(i) {
            for &v in &self.tets[e as usize] {
                block_up(v as usize);
            }
        }
        let own = sq(&row(i)).sqrt();
        let tol2 = (opts.far_tolerance * own).powi(2);
        let mut near_vertices = Vec::new();
        let mut far: Vec<(usize, [f64; 9], [f64; 27])> = Vec::new();
        let mut stack = if nn > 0 { vec![0usize] } else { Vec::new() };
        while let Some(c) = stack.pop() {
            let m = tree.members(c).len() as f64;
            let (slopes, gain) = if blocked[c] { ([0.0; 27], 0.0) } else { fit(c) };
            let dev2 = s2[c] - sq(&s1[c]) / m - gain;
            if !blocked[c] && dev2 <= tol2 {
                // A node whose rows are all negligible contributes nothing.
                if s2[c] > 1e-24 * own * own {
                    far.push((c, s1[c].map(|x| x / m), slopes));
                }
            } else if let Some((l, r)) = tree.children[c] {
                stack.push(r as usize);
                stack.push(l as usize);
            } else {
                near_vertices.extend(tree.members(c).iter().copied().filter(|&j| j as usize != i));
            }
        }
        near_vertices.sort_unstable();
        let near_blocks: Vec<[f64; 9]> = near_vertices.iter().map(|&j| row(j as usize)).collect();

        let mut rec = VertexSubspaceData {
            near_vertices,
            near_blocks,
            a_hat: self.a_hat(i, ubar, schur, tt.slot),
            schur: *schur,
            ..Default::default()
        };
        let keep_all = |rec: &mut VertexSubspaceData, far: &[(usize, [f64; 9], [f64; 27])]| {
            for (c, b, sl) in far {
                rec.far_nodes.push(*c as u32);
                rec.far_weights.push(1.0);
                rec.far_blocks.push(*b);
                if linear {
                    rec.far_slopes.push(*sl);
                }
            }
        };
        if far.is_empty() || k == 0 {
            keep_all(&mut rec, &far);
            return rec;
        }
        // Training poses: exact far field b_t = S_i u_t[i] − Σ_{j ∈ near ∪ {i}} Ū_i[j]ᵀ q_t[j].
        let mut full = vec![0.0; 3 * k];
        if per_vertex {
            for t in 0..k {
                let u = &poses.vectors[t * n + 3 * i..t * n + 3 * i + 3];
                for r in 0..3 {
                    full[3 * t + r] = (0..3).map(|c| schur[r * 3 + c] * u[c]).sum();
                }
            }
        } else {
            for j in 0..self.n_vertices {
                if self.fixed_vertex[j] {
                    continue;
                }
                let blk = row(j);
                for t in 0..k {
                    let q = &hq[t * n + 3 * j..t * n + 3 * j + 3];
                    for c in 0..3 {
                        full[3 * t + c] += (0..3).map(|d| blk[3 * d + c] * q[d]).sum::<f64>();
                    }
                }
            }
        }
        let mut b = full.clone();
        let mut sub = |j: usize, blk: &[f64; 9]| {
            for t in 0..k {
                let q = &hq[t * n + 3 * j..t * n + 3 * j + 3];
                for c in 0..3 {
                    b[3 * t + c] -= (0..3).map(|d| blk[3 * d + c] * q[d]).sum::<f64>();
                }
            }
        };
        sub(i, &row(i));
        for (&j, blk) in rec.near_vertices.iter().zip(&rec.near_blocks) {
            sub(j as usize, blk);
        }
        let norms: Vec<f64> = (0..k)
            .map(|t| dot(&full[3 * t..3 * t + 3], &full[3 * t..3 * t + 3]).sqrt())
            .collect();
        let max_norm = norms.iter().fold(0.0f64, |m, x| m.max(*x));
        if max_norm == 0.0 || !max_norm.is_finite() {
            keep_all(&mut rec, &far);
            return rec;
        }
        let used: Vec<usize> = (0..k).filter(|&t| norms[t] > 1e-12 * max_norm).collect();
        let rows = 3 * used.len();
        let scale = |v: &[f64]| -> Vec<f64> {
            let mut o = Vec::with_capacity(rows);
            for &t in &used {
                for c in 0..3 {
                    o.push(v[3 * t + c] / norms[t]);
                }
            }
            o
        };
        let bn = scale(&b);
        // Every used pose's full reduced gradient has norm 1 after scaling.
        let whole = (used.len() as f64).sqrt();
        let column = |q: usize| -> Vec<f64> {
            let (c, u, sl) = &far[q];
            let s = &tt.pose_sums[*c];
            let mut col = vec![0.0; 3 * k];
            for t in 0..k {
                for cc in 0..3 {
                    col[3 * t + cc] = (0..3).map(|d| u[3 * d + cc] * s[3 * t + d]).sum();
                }
            }
            if linear {
                // + Σ_k B_kᵀ Σ_{j∈c} (p_j − p̄_c)_k q_t[j].
                let mo = &tt.pose_moments[*c];
                for kk in 0..3 {
                    for t in 0..k {
                        for cc in 0..3 {
                            col[3 * t + cc] += (0..3)
                                .map(|d| sl[9 * kk + 3 * d + cc] * mo[3 * k * kk + 3 * t + d])
                                .sum::<f64>();
                        }
                    }
                }
            }
            scale(&col)
        };
        let residual_of = |picked: &[(usize, f64)]| -> f64 {
            let mut r = bn.clone();
            for &(q, w) in picked {
                for (ri, ci) in r.iter_mut().zip(column(q)) {
                    *ri -= w * ci;
                }
            }
            dot(&r, &r).sqrt() / whole
        };
        if opts.max_samples == 0 || far.len() <= opts.max_samples {
            let all: Vec<(usize, f64)> = (0..far.len()).map(|q| (q, 1.0)).collect();
            rec.far_residual = residual_of(&all);
            keep_all(&mut rec, &far);
            return rec;
        }
        let mut cum = Vec::with_capacity(far.len());
        let mut acc = 0.0;
        for (c, _, _) in &far {
            acc += sq(&s1[*c]).sqrt();
            cum.push(acc);
        }
        let mut rng = SplitMix64::new(opts.seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let chosen = greedy_selection(
            &bn,
            &cum,
            column,
            &mut rng,
            opts.max_samples,
            opts.candidates,
            opts.target_residual * whole,
        );
        let a: Vec<f64> = chosen.iter().flat_map(|&q| column(q)).collect();
        let sol = nnls(&a, rows, chosen.len(), &bn);
        let picked: Vec<(usize, f64)> = chosen
            .iter()
            .zip(&sol.w)
            .filter(|(_, w)| **w > 0.0)
            .map(|(&q, &w)| (q, w))
            .collect();
        rec.far_residual = residual_of(&picked);
        for (q, w) in picked {
            let (c, u, sl) = &far[q];
            rec.far_nodes.push(*c as u32);
            rec.far_weights.push(w);
            rec.far_blocks.push(u.map(|x| x * w));
            if linear {
                rec.far_slopes.push(sl.map(|x| x * w));
            }
        }
        rec
    }
}

/// How a batch's subspaces are formed.
#[derive(Clone, Copy)]
enum Mode<'a> {
    /// Eq. 23 with the factor of `H̄`.
    PerVertex,
    /// Group-wise: the factor of `H̄` with `mask`ed vertices (the group and the fixed ones) as
    /// identity rows.
    Group {
        factor: &'a SparseCholesky,
        mask: &'a [bool],
    },
}

/// Cluster-tree data shared by every vertex of a run.
struct TreeTables<'a> {
    tree: &'a ClusterTree,
    /// Where each vertex's rows sit in a batch's `Ū` columns (rows `3·slot[v] + d`): the
    /// tree's vertices in its order, then the fixed ones. The per-node sums walk the leaves in
    /// tree order, so they read `Ū` front to back instead of jumping over the whole column
    /// (a cache miss per vertex, 14% of the run on armadillo_114k).
    slot: &'a [usize],
    /// The inverse: the DOF of `H̄` each row of a batch's columns stands for.
    dof_of_row: &'a [usize],
    /// Leaf of each vertex (`u32::MAX` for fixed vertices).
    leaf_of: &'a [u32],
    /// `Σ_{j∈c} q_t[j]` per node, 3 values per pose.
    pose_sums: &'a [Vec<f64>],
    /// First order only (else empty): rest positions relative to the tree's centroid (per
    /// vertex, m), node centroids in the same frame, the pseudo-inverse of each node's position
    /// scatter `Σ (p_j − p̄_c)(p_j − p̄_c)ᵀ` (3×3 row-major), and the centred pose moments
    /// `Σ_{j∈c} (p_j − p̄_c)_k q_t[j]` (index `3K·k + 3t + d`, K poses).
    rel_pos: &'a [[f64; 3]],
    centre: &'a [[f64; 3]],
    cov_pinv: &'a [[f64; 9]],
    pose_moments: &'a [Vec<f64>],
    /// H-matrix far field only: per leaf, the leaves of its inadmissible (near) pairs; the
    /// near field of a vertex is then every vertex of those leaves.
    near_leaves: Option<&'a [Vec<u32>]>,
    /// H-matrix streamed from the columns ([`StreamBuild`]): the near blocks are taken from
    /// the columns, so a record keeps only its free 1-ring's rows (what `A_i` needs).
    ring_only: bool,
}

/// The first-order tables of [`TreeTables`].
#[derive(Default)]
struct NodeGeometry {
    rel_pos: Vec<[f64; 3]>,
    centre: Vec<[f64; 3]>,
    cov_pinv: Vec<[f64; 9]>,
    pose_moments: Vec<Vec<f64>>,
}

/// Node centroids, scatter pseudo-inverses and centred pose moments (`hq`: `k` training
/// gradients, column-major `3n × k`). Positions are taken relative to the tree's centroid so
/// the raw sums stay well conditioned; the scatter is summed about each node's own centroid.
fn node_geometry(positions: &[[f64; 3]], tree: &ClusterTree, hq: &[f64], k: usize) -> NodeGeometry {
    let n = 3 * positions.len();
    let mut origin = [0.0; 3];
    for &v in &tree.perm {
        for d in 0..3 {
            origin[d] += positions[v as usize][d] / tree.perm.len() as f64;
        }
    }
    let rel_pos: Vec<[f64; 3]> = positions
        .iter()
        .map(|p| [p[0] - origin[0], p[1] - origin[1], p[2] - origin[2]])
        .collect();
    let per_node: Vec<([f64; 3], [f64; 9], Vec<f64>)> = (0..tree.len())
        .into_par_iter()
        .map(|c| {
            let members = tree.members(c);
            let m = members.len().max(1) as f64;
            let mut pc = [0.0; 3];
            for &j in members {
                for d in 0..3 {
                    pc[d] += rel_pos[j as usize][d] / m;
                }
            }
            let mut cov = nalgebra::Matrix3::<f64>::zeros();
            let mut mo = vec![0.0; 9 * k];
            for &j in members {
                let x = nalgebra::Vector3::from(rel_pos[j as usize]) - nalgebra::Vector3::from(pc);
                cov += x * x.transpose();
                for kk in 0..3 {
                    for t in 0..k {
                        for d in 0..3 {
                            mo[3 * k * kk + 3 * t + d] += x[kk] * hq[t * n + 3 * j as usize + d];
                        }
                    }
                }
            }
            (pc, pinv_sym3(&cov), mo)
        })
        .collect();
    let mut g = NodeGeometry {
        rel_pos,
        ..Default::default()
    };
    for (pc, ci, mo) in per_node {
        g.centre.push(pc);
        g.cov_pinv.push(ci);
        g.pose_moments.push(mo);
    }
    g
}

/// Pseudo-inverse of a symmetric positive semi-definite 3×3 matrix (row-major result):
/// eigenvalues below 1e-8 of the largest count as zero (a node whose vertices are collinear or
/// coplanar has no slope across them).
fn pinv_sym3(a: &nalgebra::Matrix3<f64>) -> [f64; 9] {
    let e = nalgebra::SymmetricEigen::new(*a);
    let top = e.eigenvalues.iter().fold(0.0f64, |m, x| m.max(*x));
    let mut out = nalgebra::Matrix3::zeros();
    if top > 0.0 {
        for q in 0..3 {
            let l = e.eigenvalues[q];
            if l > 1e-8 * top {
                let v = e.eigenvectors.column(q);
                out += v * v.transpose() / l;
            }
        }
    }
    let mut r = [0.0; 9];
    for i in 0..3 {
        for j in 0..3 {
            r[3 * i + j] = out[(i, j)];
        }
    }
    r
}

/// Greedy NNLS column selection (An et al. 2008 style) against the normalised target `bn`:
/// each round draws up to `candidates` distinct items with probability ∝ the increments
/// of the cumulative weights `cum` (weight 0 = never), scores each by the NNLS residual of the
/// chosen set plus it, and keeps the best, until the residual norm is at most `stop_at`,
/// `max_items` are chosen, or no candidate helps.
fn greedy_selection(
    bn: &[f64],
    cum: &[f64],
    column: impl Fn(usize) -> Vec<f64>,
    rng: &mut SplitMix64,
    max_items: usize,
    candidates: usize,
    stop_at: f64,
) -> Vec<usize> {
    let bb = dot(bn, bn);
    let total = *cum.last().unwrap_or(&0.0);
    let mut chosen: Vec<usize> = Vec::new();
    let mut cols: Vec<Vec<f64>> = Vec::new();
    let mut current = bb;
    if total <= 0.0 || cum.is_empty() {
        return chosen;
    }
    while chosen.len() < max_items && current.sqrt() > stop_at {
        let mut cands: Vec<usize> = Vec::new();
        let mut draws = 0;
        while cands.len() < candidates && draws < 4 * candidates {
            draws += 1;
            let x = rng.next_f64() * total;
            let e = cum.partition_point(|&c| c <= x).min(cum.len() - 1);
            let w = cum[e] - if e > 0 { cum[e - 1] } else { 0.0 };
            if w > 0.0 && !chosen.contains(&e) && !cands.contains(&e) {
                cands.push(e);
            }
        }
        let p = chosen.len() + 1;
        let mut g = vec![0.0; p * p];
        let mut c = vec![0.0; p];
        for i in 0..p - 1 {
            c[i] = dot(&cols[i], bn);
            for j in 0..p - 1 {
                g[i * p + j] = dot(&cols[i], &cols[j]);
            }
        }
        let mut best: Option<(f64, usize, Vec<f64>)> = None;
        for &e in &cands {
            let col = column(e);
            for i in 0..p - 1 {
                let d = dot(&cols[i], &col);
                g[i * p + p - 1] = d;
                g[(p - 1) * p + i] = d;
            }
            g[p * p - 1] = dot(&col, &col);
            c[p - 1] = dot(&col, bn);
            let w = nnls_gram(&g, &c, p);
            let mut r2 = bb;
            for i in 0..p {
                r2 -= 2.0 * c[i] * w[i];
                for j in 0..p {
                    r2 += w[i] * g[i * p + j] * w[j];
                }
            }
            if best.as_ref().is_none_or(|b| r2 < b.0) {
                best = Some((r2, e, col));
            }
        }
        let Some((r2, e, col)) = best else { break };
        if r2 >= current * (1.0 - 1e-9) {
            break;
        }
        current = r2.max(0.0);
        chosen.push(e);
        cols.push(col);
    }
    chosen
}

/// The row layout of [`TreeTables`]: `slot[v]` (the tree's vertices in its order, then the
/// fixed ones) and its inverse on DOFs, `dof_of_row[3·slot[v] + d] = 3v + d`.
fn row_layout(tree: &ClusterTree, fixed: &[bool]) -> (Vec<usize>, Vec<usize>) {
    let nv = fixed.len();
    let mut slot = vec![usize::MAX; nv];
    let mut next = 0;
    for v in tree
        .perm
        .iter()
        .copied()
        .chain((0..nv as u32).filter(|&v| fixed[v as usize]))
    {
        slot[v as usize] = next;
        next += 1;
    }
    // Free vertices the tree left out (none when it is built over all of them) go last.
    for s in slot.iter_mut().filter(|s| **s == usize::MAX) {
        *s = next;
        next += 1;
    }
    let mut dof_of_row = vec![0; 3 * nv];
    for (v, &p) in slot.iter().enumerate() {
        for d in 0..3 {
            dof_of_row[3 * p + d] = 3 * v + d;
        }
    }
    (slot, dof_of_row)
}

/// `vertices` sorted by the position of their first DOF in `factor`'s elimination order, so
/// that a batch holds vertices of one nested-dissection subdomain: their forward solves then
/// share the elimination-tree path and skip the rest of `L` (see
/// [`SparseCholesky::solve_many_in_place_scratch`]). Which batch a vertex lands in can move
/// its column in the last bits only (the kernels may block a batch's columns differently).
fn elimination_sorted(factor: &SparseCholesky, mut vertices: Vec<usize>) -> Vec<usize> {
    if let Some(pos) = factor.elimination_positions() {
        vertices.sort_by_key(|&v| pos[3 * v]);
    }
    vertices
}

/// Turns `Y = H̄⁻¹S_iᵀ` (column-major `n × 3`, vertex `i`'s rows at `3·at + d`) into
/// `Ū_i = −YḠ_i = Y (S_iY)⁻¹` in place and returns `(S_iY)⁻¹ = −Ḡ_i` (row-major 3×3).
fn ubar_from_y(y: &mut [f64], n: usize, at: usize, i: usize) -> Result<[f64; 9]> {
    let mut s = nalgebra::Matrix3::zeros();
    for r in 0..3 {
        for c in 0..3 {
            s[(r, c)] = y[c * n + 3 * at + r];
        }
    }
    let s = (s + s.transpose()) * 0.5;
    let inv = s.try_inverse().ok_or_else(|| {
        PrecomputeError::Numeric(format!("S_i H̄⁻¹ S_iᵀ is singular at vertex {i}"))
    })?;
    for row in 0..n {
        let yr = [y[row], y[n + row], y[2 * n + row]];
        for c in 0..3 {
            y[c * n + row] = (0..3).map(|q| yr[q] * inv[(q, c)]).sum();
        }
    }
    let mut out = [0.0; 9];
    for r in 0..3 {
        for c in 0..3 {
            out[r * 3 + c] = inv[(r, c)];
        }
    }
    Ok(out)
}

/// Direct Schur form (Eq. 8) on a dense `H̄` (column-major `n × n`): `Ū_C = −H̄_CC⁻¹H̄_iCᵀ`,
/// `Ū_i = I`; returns the column-major `n × 3` `Ū_i`. For tests on small meshes.
pub fn ubar_schur_dense(hbar: &[f64], n: usize, i: usize) -> Result<Vec<f64>> {
    if hbar.len() != n * n || 3 * i + 3 > n {
        return Err(PrecomputeError::Invalid(
            "ubar_schur_dense: size mismatch".into(),
        ));
    }
    let comp: Vec<usize> = (0..n).filter(|r| r / 3 != i).collect();
    let m = comp.len();
    let hcc = nalgebra::DMatrix::from_fn(m, m, |r, c| hbar[comp[c] * n + comp[r]]);
    let hci = nalgebra::DMatrix::from_fn(m, 3, |r, c| hbar[(3 * i + c) * n + comp[r]]);
    let chol = hcc
        .cholesky()
        .ok_or(PrecomputeError::NotPositiveDefinite { column: 0 })?;
    let uc = -chol.solve(&hci);
    let mut out = vec![0.0; 3 * n];
    for c in 0..3 {
        out[c * n + 3 * i + c] = 1.0;
        for (r, &row) in comp.iter().enumerate() {
            out[c * n + row] = uc[(r, c)];
        }
    }
    Ok(out)
}
