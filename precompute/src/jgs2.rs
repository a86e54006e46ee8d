//! JGS2 offline precompute (Lan et al., "JGS2", §5–§6): per-vertex perturbation subspaces
//! `Ū_i` and their cubature (elements, non-negative weights, 12×3 blocks of `Ū_i`).
//!
//! Definitions used here (decisions where the paper is silent are marked *choice*):
//! - `H̄ = Σ_e H̄_e` on free DOFs, with `H̄_e = K_e + M_e/h²`: `K_e` is the element's rest
//!   Hessian and `M_e` gives each of the element's 4 vertices its mass share (`elem_mass`,
//!   Σ_e shares = vertex mass). Rows/columns of pinned DOFs are replaced by the identity.
//!   *Choice*: including inertia in `H̄_e` makes `H̄` SPD without pins and lets the cubature
//!   approximate the complete complement (elasticity + inertia of the other vertices).
//! - Eq. 23: `Y_i = H̄⁻¹S_iᵀ`, `Ḡ_i = −(S_iY_i)⁻¹`, `Ū_i = −Y_iḠ_i`, computed for many
//!   vertices per multi-RHS solve (`batch_vertices` vertices = 3× that many columns per
//!   solve), batches in parallel with rayon, each solve sequential; memory is bounded by
//!   (threads × batch) dense columns because each batch is reduced to its cubature at once.
//! - Training poses: the `n_modes` lowest eigenvectors of `(H̄, M)` (equivalently of `(K, M)`,
//!   shifted by `1/h²`), M-normalised. *Choice*: default 24 modes; pinned DOFs carry no mass
//!   in this problem so the modes vanish there.
//! - Eq. 17–18 gradient fit for vertex `i` and pose `u_t`:
//!   `b_t = Σ_{e∉N(i)} [Ū_i]_eᵀ H̄_e [u_t]_e = −Ḡ_iᵀ u_t[i] − Σ_{e∈N(i)} [Ū_i]_eᵀ H̄_e [u_t]_e`
//!   (the full sum equals `(H̄Ū_i)ᵀu_t = −Ḡ_iᵀ S_i u_t`, so no sum over all elements is
//!   needed). `N(i)` = elements incident to `i`, which the runtime treats exactly.
//!   Block rows are normalised per pose by `‖b_t‖`; poses with `‖b_t‖ ≤ 1e-12 max_t ‖b_t‖`
//!   are dropped.
//! - Greedy selection (An et al. 2008 style): each round draws up to `candidates` distinct
//!   elements outside `N(i)` and the chosen set, sampled with probability ∝ `‖[Ū_i]_e‖_F`
//!   (*choice*: elements where `Ū_i` is negligible cannot help), scores each by the NNLS
//!   residual of chosen ∪ {candidate}, adds the best; stops at `target_residual` relative
//!   residual, at `max_elements`, or when no candidate lowers the residual.

use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;

use crate::cholesky::{Ordering, SparseCholesky};
use crate::eigen::{lowest_generalized, EigenOptions, EigenPairs};
use crate::nnls::{dot, nnls, nnls_gram};
use crate::rng::SplitMix64;
use crate::sparse::{tet_dofs, ScatterMap, SymSparse, SymmetricPattern};
use crate::{PrecomputeError, Result};

/// Per-vertex result of one batch: (vertex, record, solve seconds, cubature seconds).
type BatchOutput = Vec<(usize, VertexCubature, f64, f64)>;

/// Plain-data input of the JGS2 precompute.
#[derive(Clone, Copy, Debug)]
pub struct Jgs2Input<'a> {
    /// Number of vertices.
    pub n_vertices: usize,
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
    /// Candidates drawn per greedy round; default 64.
    pub candidates: usize,
    /// Target relative residual of the Eq. 18 fit; default 0.01.
    pub target_residual: f64,
    /// Maximum cubature elements per vertex; default 6.
    pub max_elements: usize,
    /// Vertices per multi-RHS solve (3 columns each); default 32.
    pub batch_vertices: usize,
    /// Seed of the candidate sampling (each vertex derives its own stream).
    pub seed: u64,
    /// Eigen solver settings for the training poses (default tol 1e-6).
    pub eigen: EigenOptions,
    /// Relative magnitude above which a vertex's `Ū_i[j]` enters the right-hand side exactly
    /// (default 0.05).
    pub support_threshold: f64,
    /// Cap on the exact right-hand-side support per vertex (default 96).
    pub max_support: usize,
    /// Also fit the remote reduced Hessian Σ_{e∉N(i)} Ū_eᵀH̄_eŪ_e (six extra rows; default
    /// true). `false` is the paper's gradient-only fit.
    pub fit_hessian: bool,
}

impl Default for Jgs2Options {
    fn default() -> Self {
        Self {
            n_modes: 24,
            candidates: 64,
            target_residual: 0.01,
            max_elements: 6,
            batch_vertices: 32,
            seed: 0x6a67_7332,
            support_threshold: 0.05,
            max_support: 96,
            fit_hessian: true,
            eigen: EigenOptions {
                tol: 1e-6,
                ..EigenOptions::default()
            },
        }
    }
}

/// Cubature record of one vertex.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VertexCubature {
    /// Chosen element ids.
    pub elements: Vec<u32>,
    /// Non-negative weights, one per element.
    pub weights: Vec<f64>,
    /// `[Ū_i]_e` per element: 12×3 row-major (row `3a+d` = local vertex `a`, axis `d`;
    /// column = the perturbed DOF of vertex `i`), dimensionless.
    pub blocks: Vec<[f64; 36]>,
    /// Final relative residual of the Eq. 18 fit (0 for pinned vertices).
    pub residual: f64,
    /// Elements incident to the vertex (summed exactly at run time, never cubature samples).
    pub incident_elements: Vec<u32>,
    /// `[Ū_i]_e` for each incident element, same layout as `blocks`.
    pub incident_blocks: Vec<[f64; 36]>,
    /// Exact right-hand-side support: the 1-ring of `i` plus every vertex j with
    /// ‖Ū_i[j]‖_F ≥ `support_threshold`·‖Ū_i[i]‖_F (largest first, at most `max_support`),
    /// excluding `i` itself.
    pub support_vertices: Vec<u32>,
    /// `Ū_i[j]` for the support vertices (3×3 row-major, like `grad_blocks`).
    pub support_blocks: Vec<[f64; 9]>,
    /// Gradient cubature: vertices outside the support whose assembled gradient stands for the
    /// rest of the mesh in the local right-hand side.
    pub grad_vertices: Vec<u32>,
    /// Their non-negative weights.
    pub grad_weights: Vec<f64>,
    /// `Ū_i[j]` (3×3 row-major: row = axis of vertex j, column = perturbed DOF of i).
    pub grad_blocks: Vec<[f64; 9]>,
    /// Relative residual of the gradient-cubature fit.
    pub grad_residual: f64,
}

/// Summary statistics of a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Jgs2Stats {
    /// Free vertices processed.
    pub n_free: usize,
    /// Training poses used.
    pub n_modes: usize,
    /// Relative residual distribution over free vertices.
    pub residual_min: f64,
    /// Median relative residual.
    pub residual_median: f64,
    /// 90th percentile relative residual.
    pub residual_p90: f64,
    /// Largest relative residual.
    pub residual_max: f64,
    /// Fraction of free vertices at or below the target residual.
    pub fraction_on_target: f64,
    /// Mean cubature elements per free vertex.
    pub mean_elements: f64,
    /// Assembly + symbolic + numeric factorisation of `H̄`, s.
    pub factor_s: f64,
    /// Multi-RHS solves and `Ū_i` formation (share of the fused phase's wall time), s.
    pub basis_s: f64,
    /// Training-pose eigen solve, s.
    pub eigen_s: f64,
    /// Greedy NNLS cubature (share of the fused phase's wall time), s.
    pub cubature_s: f64,
    /// Whole precompute, s.
    pub total_s: f64,
    /// Mean bytes per vertex (over all vertices) when stored as f32/u32:
    /// `(|S_i| · (36 + 1 + 1) + |N(i)| · 36) · 4` (cubature plus incident-element blocks).
    pub bytes_per_vertex: f64,
}

/// Output of the JGS2 precompute.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Jgs2Basis {
    /// One record per vertex (empty for pinned vertices).
    pub vertices: Vec<VertexCubature>,
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
        {
            return Err(PrecomputeError::Invalid(format!(
                "jgs2: {ne} tets but {} Hessians, {} mass rows, {} pin flags for {nv} vertices",
                input.elem_hessians.len(),
                input.elem_mass.len(),
                input.pinned.len()
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
        ubar_from_y(&mut y, n, i)?;
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

    /// Runs the subspace + cubature precompute for every free vertex.
    pub fn run(&self, opts: &Jgs2Options) -> Result<Jgs2Basis> {
        if opts.max_elements == 0
            || opts.batch_vertices == 0
            || opts.target_residual.is_nan()
            || opts.target_residual < 0.0
        {
            return Err(PrecomputeError::Invalid(
                "jgs2: max_elements and batch_vertices must be > 0".into(),
            ));
        }
        let t_total = Instant::now();
        let t0 = Instant::now();
        let poses = self.training_poses(opts.n_modes, &opts.eigen)?;
        let eigen_s = t0.elapsed().as_secs_f64();
        let k = poses.values.len();

        // P_e = H̄_e [u_t]_e for every element and pose: 12 × k per element (row-major by t).
        let pe: Vec<f64> = {
            let n = 3 * self.n_vertices;
            let mut out = vec![0.0; self.tets.len() * 12 * k];
            out.par_chunks_mut(12 * k).enumerate().for_each(|(e, dst)| {
                let t = &self.tets[e];
                let he = &self.hbar_e[e];
                for p in 0..k {
                    let u = &poses.vectors[p * n..(p + 1) * n];
                    let mut ue = [0.0; 12];
                    for a in 0..4 {
                        for d in 0..3 {
                            ue[3 * a + d] = u[3 * t[a] as usize + d];
                        }
                    }
                    for r in 0..12 {
                        dst[p * 12 + r] = (0..12).map(|c| he[r * 12 + c] * ue[c]).sum();
                    }
                }
            });
            out
        };

        // q_t = H̄ u_t (assembled), n × k column-major: the training "gradients" of the
        // vertex-sampled right-hand-side cubature.
        let hq: Vec<f64> = {
            let n = 3 * self.n_vertices;
            let mut out = vec![0.0; n * k];
            out.par_chunks_mut(n).enumerate().for_each(|(t, dst)| {
                self.hbar.mul_vec(&poses.vectors[t * n..(t + 1) * n], dst);
            });
            out
        };
        let free: Vec<usize> = (0..self.n_vertices)
            .filter(|&v| !self.fixed_vertex[v])
            .collect();
        let t1 = Instant::now();
        let results: Vec<Result<BatchOutput>> = free
            .par_chunks(opts.batch_vertices)
            .map(|batch| self.process_batch(batch, &poses, &pe, &hq, opts))
            .collect();
        let fused_s = t1.elapsed().as_secs_f64();
        let mut vertices = vec![VertexCubature::default(); self.n_vertices];
        let (mut solve_cpu, mut cub_cpu) = (0.0, 0.0);
        for r in results {
            for (v, rec, ts, tc) in r? {
                vertices[v] = rec;
                solve_cpu += ts;
                cub_cpu += tc;
            }
        }
        let share = if solve_cpu + cub_cpu > 0.0 {
            solve_cpu / (solve_cpu + cub_cpu)
        } else {
            0.5
        };
        let mut res: Vec<f64> = free.iter().map(|&v| vertices[v].residual).collect();
        res.sort_by(f64::total_cmp);
        let pct = |q: f64| -> f64 {
            if res.is_empty() {
                0.0
            } else {
                res[((res.len() - 1) as f64 * q).round() as usize]
            }
        };
        let total_elems: usize = vertices.iter().map(|v| v.elements.len()).sum();
        let total_incident: usize = vertices.iter().map(|v| v.incident_blocks.len()).sum();
        let stats = Jgs2Stats {
            n_free: free.len(),
            n_modes: k,
            residual_min: pct(0.0),
            residual_median: pct(0.5),
            residual_p90: pct(0.9),
            residual_max: pct(1.0),
            fraction_on_target: if res.is_empty() {
                1.0
            } else {
                res.iter().filter(|r| **r <= opts.target_residual).count() as f64 / res.len() as f64
            },
            mean_elements: if free.is_empty() {
                0.0
            } else {
                total_elems as f64 / free.len() as f64
            },
            factor_s: self.factor_s,
            basis_s: fused_s * share,
            eigen_s,
            cubature_s: fused_s * (1.0 - share),
            total_s: self.factor_s + t_total.elapsed().as_secs_f64(),
            // Cubature: block (36) + weight + id; incident elements: block only (their ids and
            // the implicit weight 1 come from the vertex→tet adjacency).
            bytes_per_vertex: ((total_elems * 38 + total_incident * 36) * 4) as f64
                / self.n_vertices.max(1) as f64,
        };
        Ok(Jgs2Basis { vertices, stats })
    }

    /// One multi-RHS solve for a batch of vertices, then each vertex's cubature.
    fn process_batch(
        &self,
        batch: &[usize],
        poses: &EigenPairs,
        pe: &[f64],
        hq: &[f64],
        opts: &Jgs2Options,
    ) -> Result<BatchOutput> {
        let t0 = Instant::now();
        let n = 3 * self.n_vertices;
        let cols = 3 * batch.len();
        let mut y = vec![0.0; n * cols];
        for (j, &v) in batch.iter().enumerate() {
            for d in 0..3 {
                y[(3 * j + d) * n + 3 * v + d] = 1.0;
            }
        }
        self.factor
            .solve_many_in_place_with(&mut y, cols, faer::Par::Seq)?;
        let mut ginv = Vec::with_capacity(batch.len());
        for (j, &v) in batch.iter().enumerate() {
            ginv.push(ubar_from_y(&mut y[3 * j * n..3 * (j + 1) * n], n, v)?);
        }
        let solve_s = t0.elapsed().as_secs_f64() / batch.len() as f64;
        let mut out = Vec::with_capacity(batch.len());
        for (j, &v) in batch.iter().enumerate() {
            let t1 = Instant::now();
            let ubar = &y[3 * j * n..3 * (j + 1) * n];
            let mut rec = self.cubature_for_vertex(v, ubar, &ginv[j], poses, pe, opts);
            self.gradient_cubature(v, ubar, &ginv[j], poses, hq, opts, &mut rec);
            out.push((v, rec, solve_s, t1.elapsed().as_secs_f64()));
        }
        Ok(out)
    }

    /// `[Ū]_e` as 12×3 row-major from a column-major `n × 3` `Ū`.
    fn block(&self, ubar: &[f64], e: usize) -> [f64; 36] {
        let n = 3 * self.n_vertices;
        let mut b = [0.0; 36];
        for (a, &v) in self.tets[e].iter().enumerate() {
            for d in 0..3 {
                for c in 0..3 {
                    b[(3 * a + d) * 3 + c] = ubar[c * n + 3 * v as usize + d];
                }
            }
        }
        b
    }

    /// `[Ū]_eᵀ H̄_e [Ū]_e` (3×3 row-major) of element `e`.
    fn reduced_hessian(&self, block: &[f64; 36], e: usize) -> [f64; 9] {
        let h = &self.hbar_e[e];
        let mut hu = [0.0; 36]; // H̄_e Ū_e, 12×3
        for r in 0..12 {
            for c in 0..3 {
                hu[r * 3 + c] = (0..12).map(|q| h[r * 12 + q] * block[q * 3 + c]).sum();
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

    /// Contribution `[Ū]_eᵀ H̄_e [u_t]_e` of element `e` for every pose (3k values).
    fn contribution(&self, block: &[f64; 36], pe: &[f64], e: usize, k: usize) -> Vec<f64> {
        let p = &pe[e * 12 * k..(e + 1) * 12 * k];
        let mut out = vec![0.0; 3 * k];
        for t in 0..k {
            for c in 0..3 {
                out[3 * t + c] = (0..12).map(|r| block[r * 3 + c] * p[t * 12 + r]).sum();
            }
        }
        out
    }

    fn cubature_for_vertex(
        &self,
        v: usize,
        ubar: &[f64],
        s_inv: &[f64; 9],
        poses: &EigenPairs,
        pe: &[f64],
        opts: &Jgs2Options,
    ) -> VertexCubature {
        let n = 3 * self.n_vertices;
        let k = poses.values.len();
        let local = self.incident_elements(v);
        let incident_blocks: Vec<[f64; 36]> = local
            .iter()
            .map(|&e| self.block(ubar, e as usize))
            .collect();
        let with_incident = |mut rec: VertexCubature| {
            rec.incident_elements = local.to_vec();
            rec.incident_blocks = incident_blocks.clone();
            rec
        };
        // b_t = S⁻¹ u_t[i] − Σ_{e∈N(i)} [Ū]_eᵀ H̄_e [u_t]_e
        let mut b = vec![0.0; 3 * k];
        for t in 0..k {
            let u = &poses.vectors[t * n + 3 * v..t * n + 3 * v + 3];
            for r in 0..3 {
                b[3 * t + r] = (0..3).map(|c| s_inv[r * 3 + c] * u[c]).sum();
            }
        }
        for (&e, blk) in local.iter().zip(&incident_blocks) {
            let c = self.contribution(blk, pe, e as usize, k);
            for (bi, ci) in b.iter_mut().zip(&c) {
                *bi -= ci;
            }
        }
        let norms: Vec<f64> = (0..k)
            .map(|t| dot(&b[3 * t..3 * t + 3], &b[3 * t..3 * t + 3]).sqrt())
            .collect();
        let max_norm = norms.iter().fold(0.0f64, |m, x| m.max(*x));
        if max_norm == 0.0 || !max_norm.is_finite() {
            return with_incident(VertexCubature::default());
        }
        let poses_used: Vec<usize> = (0..k).filter(|&t| norms[t] > 1e-12 * max_norm).collect();
        let rows = 3 * poses_used.len();
        let scale_rows = |full: &[f64]| -> Vec<f64> {
            let mut o = Vec::with_capacity(rows);
            for &t in &poses_used {
                for c in 0..3 {
                    o.push(full[3 * t + c] / norms[t]);
                }
            }
            o
        };
        // *Choice* (beyond the paper's gradient-only fit): six more rows fit the reduced
        // Hessian of the remote elements, Σ_{e∉N(i)} Ū_eᵀH̄_eŪ_e = −Ḡ_i − Σ_{e∈N(i)} Ū_eᵀH̄_eŪ_e
        // (exact and cheap because ŪᵀH̄Ū = −Ḡ_i). That term is the "damping" stiffness of the
        // local solve; a gradient-only fit left it 30–70% off on small stiff meshes and Jacobi
        // diverged. The block is scaled to carry as much weight as all pose rows together.
        let mut target = *s_inv;
        for (&e, blk) in local.iter().zip(&incident_blocks) {
            let r = self.reduced_hessian(blk, e as usize);
            for (t, x) in target.iter_mut().zip(&r) {
                *t -= x;
            }
        }
        let sym6 = |m: &[f64; 9]| -> [f64; 6] {
            let r2 = std::f64::consts::SQRT_2;
            [
                m[0],
                m[4],
                m[8],
                r2 * 0.5 * (m[1] + m[3]),
                r2 * 0.5 * (m[2] + m[6]),
                r2 * 0.5 * (m[5] + m[7]),
            ]
        };
        let t6 = sym6(&target);
        let tnorm = dot(&t6, &t6).sqrt();
        let hess_scale = if opts.fit_hessian && tnorm > 0.0 && tnorm.is_finite() {
            (poses_used.len() as f64).sqrt() / tnorm
        } else {
            0.0
        };
        let extra = if hess_scale > 0.0 { 6 } else { 0 };
        let rows = rows + extra;
        let column = |blk: &[f64; 36], e: usize| -> Vec<f64> {
            let mut col = scale_rows(&self.contribution(blk, pe, e, k));
            if extra > 0 {
                col.extend(
                    sym6(&self.reduced_hessian(blk, e))
                        .iter()
                        .map(|x| x * hess_scale),
                );
            }
            col
        };
        let mut bn = scale_rows(&b);
        if extra > 0 {
            bn.extend(t6.iter().map(|x| x * hess_scale));
        }
        let bb = dot(&bn, &bn);

        // Sampling weights ‖[Ū]_e‖_F over elements outside N(i).
        let mut vnorm = vec![0.0; self.n_vertices];
        for (w, vn) in vnorm.iter_mut().enumerate() {
            *vn = (0..3)
                .map(|c| (0..3).map(|d| ubar[c * n + 3 * w + d].powi(2)).sum::<f64>())
                .sum();
        }
        let mut cum = Vec::with_capacity(self.tets.len());
        let mut acc = 0.0;
        for t in &self.tets {
            let is_local = t.contains(&(v as u32));
            let w = if is_local {
                0.0
            } else {
                t.iter().map(|&a| vnorm[a as usize]).sum::<f64>().sqrt()
            };
            acc += w;
            cum.push(acc);
        }
        let mut rng = SplitMix64::new(opts.seed ^ (v as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let chosen = greedy_selection(
            &bn,
            &cum,
            |e| column(&self.block(ubar, e), e),
            &mut rng,
            opts,
        );
        let cols: Vec<Vec<f64>> = chosen
            .iter()
            .map(|&e| column(&self.block(ubar, e), e))
            .collect();
        if chosen.is_empty() {
            return with_incident(VertexCubature {
                residual: 1.0,
                ..Default::default()
            });
        }
        let a: Vec<f64> = cols.concat();
        let sol = nnls(&a, rows, chosen.len(), &bn);
        let mut rec = VertexCubature {
            residual: sol.residual / bb.sqrt(),
            ..Default::default()
        };
        for (j, &e) in chosen.iter().enumerate() {
            if sol.w[j] > 0.0 {
                rec.elements.push(e as u32);
                rec.weights.push(sol.w[j]);
                rec.blocks.push(self.block(ubar, e));
            }
        }
        with_incident(rec)
    }
}

impl Jgs2Precompute {
    /// Right-hand-side cubature of vertex `v` (*choice*, see the module docs): fits
    /// `Σ_{j∉ring(i)} Ū[j]ᵀ q_t[j]` (q_t = H̄u_t) with a few remote vertices, so the run-time
    /// right-hand side `r_i = Σ_{j∈ring} Ū[j]ᵀg_j + Σ_s w_s Ū[s]ᵀg_s` uses the assembled
    /// gradient g and vanishes exactly at equilibrium.
    #[allow(clippy::too_many_arguments)]
    fn gradient_cubature(
        &self,
        v: usize,
        ubar: &[f64],
        s_inv: &[f64; 9],
        poses: &EigenPairs,
        hq: &[f64],
        opts: &Jgs2Options,
        rec: &mut VertexCubature,
    ) {
        let n = 3 * self.n_vertices;
        let k = poses.values.len();
        let mut ring: Vec<usize> = self
            .incident_elements(v)
            .iter()
            .flat_map(|&e| self.tets[e as usize].map(|a| a as usize))
            .collect();
        ring.push(v);
        ring.sort_unstable();
        ring.dedup();
        let unorm = |j: usize| -> f64 {
            (0..3)
                .map(|c| (0..3).map(|d| ubar[c * n + 3 * j + d].powi(2)).sum::<f64>())
                .sum::<f64>()
                .sqrt()
        };
        let own = unorm(v);
        let mut far: Vec<(f64, usize)> = (0..self.n_vertices)
            .filter(|j| ring.binary_search(j).is_err())
            .map(|j| (unorm(j), j))
            .filter(|(u, _)| *u >= opts.support_threshold * own)
            .collect();
        far.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(std::cmp::Ordering::Equal));
        far.truncate(opts.max_support.saturating_sub(ring.len()));
        ring.extend(far.iter().map(|&(_, j)| j));
        ring.sort_unstable();
        let urow = |j: usize| -> [f64; 9] {
            let mut b = [0.0; 9];
            for d in 0..3 {
                for c in 0..3 {
                    b[3 * d + c] = ubar[c * n + 3 * j + d];
                }
            }
            b
        };
        // contribution of vertex j for every pose: Ū[j]ᵀ q_t[j] (3k values)
        let contrib = |j: usize| -> Vec<f64> {
            let b = urow(j);
            let mut out = vec![0.0; 3 * k];
            for t in 0..k {
                let q = &hq[t * n + 3 * j..t * n + 3 * j + 3];
                for c in 0..3 {
                    out[3 * t + c] = (0..3).map(|d| b[3 * d + c] * q[d]).sum();
                }
            }
            out
        };
        // target: ŪᵀH̄u_t = S⁻¹u_t[i] minus the ring's exact part
        let mut b = vec![0.0; 3 * k];
        for t in 0..k {
            let u = &poses.vectors[t * n + 3 * v..t * n + 3 * v + 3];
            for r in 0..3 {
                b[3 * t + r] = (0..3).map(|c| s_inv[r * 3 + c] * u[c]).sum();
            }
        }
        for &j in &ring {
            for (bi, ci) in b.iter_mut().zip(contrib(j)) {
                *bi -= ci;
            }
        }
        let norms: Vec<f64> = (0..k)
            .map(|t| dot(&b[3 * t..3 * t + 3], &b[3 * t..3 * t + 3]).sqrt())
            .collect();
        let max_norm = norms.iter().fold(0.0f64, |m, x| m.max(*x));
        if max_norm == 0.0 || !max_norm.is_finite() {
            return;
        }
        let used: Vec<usize> = (0..k).filter(|&t| norms[t] > 1e-12 * max_norm).collect();
        let rows = 3 * used.len();
        let scale = |full: &[f64]| -> Vec<f64> {
            let mut o = Vec::with_capacity(rows);
            for &t in &used {
                for c in 0..3 {
                    o.push(full[3 * t + c] / norms[t]);
                }
            }
            o
        };
        for &j in &ring {
            if j != v {
                rec.support_vertices.push(j as u32);
                rec.support_blocks.push(urow(j));
            }
        }
        let bn = scale(&b);
        let bb = dot(&bn, &bn);
        // sample remote vertices ∝ ‖Ū[j]‖_F
        let mut cum = Vec::with_capacity(self.n_vertices);
        let mut acc = 0.0;
        for j in 0..self.n_vertices {
            if ring.binary_search(&j).is_err() {
                acc += urow(j).iter().map(|x| x * x).sum::<f64>().sqrt();
            }
            cum.push(acc);
        }
        let mut rng =
            SplitMix64::new(opts.seed ^ 0x5eed ^ (v as u64).wrapping_mul(0xD1B5_4A32_D192_ED03));
        let chosen = greedy_selection(&bn, &cum, |j| scale(&contrib(j)), &mut rng, opts);
        if chosen.is_empty() {
            rec.grad_residual = 1.0;
            return;
        }
        let a: Vec<f64> = chosen.iter().flat_map(|&j| scale(&contrib(j))).collect();
        let sol = nnls(&a, rows, chosen.len(), &bn);
        rec.grad_residual = sol.residual / bb.sqrt();
        for (q, &j) in chosen.iter().enumerate() {
            if sol.w[q] > 0.0 {
                rec.grad_vertices.push(j as u32);
                rec.grad_weights.push(sol.w[q]);
                rec.grad_blocks.push(urow(j));
            }
        }
    }
}

/// Greedy NNLS column selection (An et al. 2008 style) against the normalised target `bn`:
/// each round draws up to `opts.candidates` distinct items with probability ∝ the increments
/// of the cumulative weights `cum` (weight 0 = never), scores each by the NNLS residual of the
/// chosen set plus it, and keeps the best, until `opts.target_residual`, `opts.max_elements`,
/// or no candidate helps.
fn greedy_selection(
    bn: &[f64],
    cum: &[f64],
    column: impl Fn(usize) -> Vec<f64>,
    rng: &mut SplitMix64,
    opts: &Jgs2Options,
) -> Vec<usize> {
    let bb = dot(bn, bn);
    let total = *cum.last().unwrap_or(&0.0);
    let mut chosen: Vec<usize> = Vec::new();
    let mut cols: Vec<Vec<f64>> = Vec::new();
    let mut current = bb;
    if total <= 0.0 || cum.is_empty() {
        return chosen;
    }
    while chosen.len() < opts.max_elements && current.sqrt() > opts.target_residual * bb.sqrt() {
        let mut cands: Vec<usize> = Vec::new();
        let mut draws = 0;
        while cands.len() < opts.candidates && draws < 4 * opts.candidates {
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

/// Turns `Y = H̄⁻¹S_iᵀ` (column-major `n × 3`) into `Ū_i = −YḠ_i = Y (S_iY)⁻¹` in place and
/// returns `(S_iY)⁻¹ = −Ḡ_i` (row-major 3×3).
fn ubar_from_y(y: &mut [f64], n: usize, i: usize) -> Result<[f64; 9]> {
    let mut s = nalgebra::Matrix3::zeros();
    for r in 0..3 {
        for c in 0..3 {
            s[(r, c)] = y[c * n + 3 * i + r];
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
