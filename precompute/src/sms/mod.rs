//! Sparse, geometry- and material-aware (SMS) skinning bases — the precompute of the
//! multilevel solver (Trusty, Levin, Kaufman; issue 13, step 1).
//!
//! Pipeline ([`build_sms`]):
//! 1. [`geodesic`]: stiffness-weighted heat-method distance, both matrices factored once;
//! 2. [`kmeans`]: kmeans++ seeding and Lloyd relaxation on that distance, over-sampled by
//!    [`PartitionOptions::oversample`] and pruned down to `k`, then made connected;
//! 3. [`weights`]: per partition a local stiffness-weighted biharmonic solve on the partition
//!    and its neighbours, clipped at 0; a pinned-vertex pseudo-basis; normalisation (Eq. 11);
//! 4. sparse storage: per-vertex (handle, weight) lists and their per-handle transpose, with
//!    [`SmsBasis::apply`] (`U q`) and [`SmsBasis::restrict`] (`Uᵀ y`), and the one-handle-per-
//!    object [`AffineBasis`].
//!
//! Choices the paper leaves open (each with the reason):
//! - **Partitions are vertex partitions.** Distances live on vertices, the weights are vertex
//!   values, and "covered only by its own and neighbouring handles" is a vertex statement.
//!   Two partitions are neighbours when a tet edge joins them (the vertex-partition analogue
//!   of the paper's shared face).
//! - **Metric stiffness** `k_e = E_e / E_softest` (so soft material diffuses at the plain rate
//!   and distances there are metres), reset to the jump factor `c` in every tet that has a
//!   vertex on a material interface (option c: `c·E_softest`). Only the heat step is
//!   weighted; the Poisson step fits `∇φ = −∇u/(|∇u|√k)` with the plain Laplacian, so that
//!   the distance is that of the metric `I/k` (stiff regions are "short", soft ones "long").
//!   Diffusion time `t = h²`, `h` the mean edge length (Crane et al.'s default).
//! - **Centre update**: volume centroid (lumped vertex volumes) of the cluster snapped to the
//!   nearest vertex of the cluster (Euclidean), free vertices preferred over pinned ones.
//! - **Pruning**: all candidates (median/volume > ratio) are deleted at each pruning step,
//!   smallest first, never below `k`. When Lloyd has converged (centres unchanged) with
//!   more than `k` clusters left, the smallest is removed and relaxation goes on; clusters
//!   still in excess at the end of the iteration budget are removed the same way. Default
//!   over-sampling 1.5×, at most 60 Lloyd iterations.
//! - **Connectivity**: a disconnected partition keeps its largest piece; the other pieces go
//!   to the neighbouring partition with which they share most edges (count in
//!   [`Partitioning::repaired_vertices`]).
//! - **Biharmonic operator** `L_k M⁻¹ L_k` over the tets wholly inside the subdomain,
//!   `k_e = E_e/E_softest` (no jump reset: the weights should follow the material itself).
//! - **Pinned pseudo-basis (Eq. 11)**: its subdomain is the union of the partitions holding
//!   pinned vertices; `u = 1` at the pinned vertices, `u = 0` at those partitions' centroids
//!   and on the union's inner boundary. Handles get `u = 0` at pins. The final weights are
//!   `φ_i = u_i / (Σ_j u_j + u_D)` and the pseudo-weight `φ_D = u_D / (Σ_j u_j + u_D)` is
//!   stored too, so `Σ_i φ_i + φ_D = 1` everywhere and `Σ_i φ_i = 1` wherever `u_D = 0`.
//! - **Fallback** where no clipped weight covers a free vertex (`Σ_j u_j + u_D = 0`, which
//!   the paper cannot rule out, §5): the vertex gets weight 1 on its own partition's handle
//!   (partition of unity and compact support are kept; smoothness is not). Counted in
//!   [`SmsStats::fallback_vertices`].
//! - **Handle frame**: `u_v = Σ_h φ_vh A_h [x_v − o_h; 1]` with `o_h` the rest position of
//!   the handle's centroid vertex (paper Eq. 7); the span equals that of `[x_v; 1]` and the
//!   numbers stay well scaled far from the origin.
//!
//! Step 2 (same module): [`cubature`] (modal moment-fitting cubature per partition and the
//! N_cg rule, with their own list of open choices) and [`cache`] (the `JELLOSMS` artifact of
//! basis + cubature, keyed by a hash of every input).

pub mod cache;
pub mod cubature;
pub mod geodesic;
pub mod kmeans;
mod mesh;
pub mod weights;

use crate::clock::Instant;

use rayon::prelude::*;

pub use cache::sms_cache_key;
pub use cubature::{
    element_partition, fit_cubature, ncg_rule, partition_radii, snap_n_cg, CubatureOptions,
    CubatureTargets, NcgRule, PartitionFit, SmsCubature,
};
pub use geodesic::{metric_stiffness, HeatGeodesic};
pub use kmeans::{PartitionOptions, Partitioning};

use crate::{PrecomputeError, Result};

/// Degrees of freedom per handle: a 3×4 affine map `[A | t]`, row-major.
pub const HANDLE_DOFS: usize = 12;

/// Wall time per phase (seconds) and storage (bytes) of one SMS build.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SmsStats {
    /// Geometry, adjacency and the heat/Poisson factorisations (s).
    pub geodesic_factor_s: f64,
    /// kmeans++ seeding, Lloyd iterations, pruning and connectivity repair (s).
    pub partition_s: f64,
    /// Local biharmonic solves, handles and pinned pseudo-basis (s).
    pub weights_s: f64,
    /// Normalisation and the two sparse layouts (s).
    pub storage_s: f64,
    /// Cubature fit of every partition and the N_cg rule's BFS (s).
    pub cubature_s: f64,
    /// Everything (s).
    pub total_s: f64,
    /// Heap bytes of the basis (weights both ways, partition, pseudo-weights, rest positions).
    pub bytes: usize,
    /// Heap bytes of the cubature rule ([`SmsCubature::bytes`]) and the N_cg radii.
    pub cubature_bytes: usize,
    /// Stored (vertex, handle) weights.
    pub nnz: usize,
    /// Free vertices no clipped weight covered (given weight 1 on their own handle).
    pub fallback_vertices: usize,
}

/// Options of [`build_sms`].
#[derive(Clone, Debug)]
pub struct SmsOptions {
    /// Partitioning (the handle count is `partition.k`).
    pub partition: PartitionOptions,
    /// Cubature fit.
    pub cubature: CubatureOptions,
    /// Full-space PCG iterations; `None` applies the paper's rule ([`ncg_rule`]).
    pub n_cg: Option<usize>,
}

impl SmsOptions {
    /// Paper defaults with `k` handles.
    pub fn new(k: usize) -> Self {
        Self {
            partition: PartitionOptions::new(k),
            cubature: CubatureOptions::default(),
            n_cg: None,
        }
    }
}

/// The SMS subspace: `m` handles with 12 DOFs each, sparse weights both ways, with its
/// cubature rule and N_cg.
#[derive(Clone, Debug, PartialEq)]
pub struct SmsBasis {
    /// The vertex partition (one handle per partition).
    pub partition: Partitioning,
    /// Rest positions (m) the subspace is built on.
    pub rest: Vec<[f64; 3]>,
    /// Handle origins `o_h` (m): rest position of each partition's centroid vertex.
    pub origin: Vec<[f64; 3]>,
    /// CSR offsets of the per-vertex lists (length `n + 1`).
    pub vertex_ptr: Vec<usize>,
    /// Handles covering each vertex (sorted within a vertex).
    pub vertex_handle: Vec<u32>,
    /// The weights `φ_vh` (dimensionless) matching `vertex_handle`.
    pub vertex_weight: Vec<f64>,
    /// CSR offsets of the per-handle lists (length `m + 1`).
    pub handle_ptr: Vec<usize>,
    /// Vertices each handle covers (sorted within a handle).
    pub handle_vertex: Vec<u32>,
    /// The weights matching `handle_vertex`.
    pub handle_weight: Vec<f64>,
    /// Pinned pseudo-basis weight `φ_D` per vertex (1 at pins, 0 away from them; all zero
    /// without pins). Not a DOF: it is the part of unity that pinned vertices keep.
    pub pinned_weight: Vec<f64>,
    /// Per-partition cubature of the elastic Hessian.
    pub cubature: SmsCubature,
    /// The full-space PCG iteration count and the radii it came from.
    pub n_cg: NcgRule,
    /// Timings and sizes.
    pub stats: SmsStats,
}

/// The connected components of the tet mesh `tets` over `n` vertices (a vertex no tet
/// touches counts as one): the smallest partition count [`build_sms`] accepts, one handle per
/// component at least.
pub fn mesh_components(n: usize, tets: &[[u32; 4]]) -> usize {
    let adj = mesh::vertex_adjacency(n, tets);
    mesh::components(&adj, |_| true).1
}

/// Builds the SMS basis for a tet mesh.
///
/// - `positions`: rest vertex positions (m);
/// - `tets`: vertex indices;
/// - `youngs`: Young's modulus of each tet (Pa, > 0);
/// - `pinned`: Dirichlet flag per vertex.
///
/// Errors ([`PrecomputeError::Invalid`]) on an empty mesh, size mismatches, bad indices or
/// moduli, degenerate tets, vertices in no tet, `k = 0`, `k > n` or `k` below the number
/// of mesh components, and bad cubature options.
pub fn build_sms(
    positions: &[[f64; 3]],
    tets: &[[u32; 4]],
    youngs: &[f64],
    pinned: &[bool],
    opts: &SmsOptions,
) -> Result<SmsBasis> {
    let t_all = Instant::now();
    let popt = &opts.partition;
    if !(popt.jump_factor.is_finite() && popt.jump_factor > 0.0) {
        return Err(PrecomputeError::Invalid(format!(
            "sms: `jump_factor` = {} must be positive",
            popt.jump_factor
        )));
    }
    mesh::validate(positions, tets, youngs, pinned)?;
    let n = positions.len();
    let t0 = Instant::now();
    let geom = mesh::geometry(positions, tets)?;
    let adj = mesh::vertex_adjacency(n, tets);
    let (component, n_comp) = mesh::components(&adj, |_| true);
    kmeans::check_k(popt.k, n, n_comp)?;
    let k_metric = metric_stiffness(tets, youngs, n, popt.jump_factor);
    let geo = HeatGeodesic::with_geometry(positions, tets, &geom, &k_metric)?;
    let geodesic_factor_s = t0.elapsed().as_secs_f64();

    let t0 = Instant::now();
    let ctx = kmeans::Ctx {
        x: positions,
        adj: &adj,
        vvol: &geom.vertex_vol,
        pinned,
        component: &component,
    };
    let partition = kmeans::kmeans(&geo, &ctx, popt)?;
    let partition_s = t0.elapsed().as_secs_f64();

    let t0 = Instant::now();
    let e_min = youngs.iter().copied().fold(f64::INFINITY, f64::min);
    let k_bih: Vec<f64> = youngs.iter().map(|e| e / e_min).collect();
    let vertex_tets = mesh::vertex_tets(n, tets);
    let lm = weights::LocalMesh {
        tets,
        geom: &geom,
        k: &k_bih,
        adj: &adj,
        vertex_tets: &vertex_tets,
    };
    let m = partition.centroid.len();
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); m];
    for (v, &p) in partition.part.iter().enumerate() {
        members[p as usize].push(v as u32);
    }
    let pinned_list: Vec<u32> = (0..n as u32).filter(|&v| pinned[v as usize]).collect();
    let raw: Vec<Vec<(u32, f64)>> = (0..m)
        .into_par_iter()
        .map_init(
            || vec![u32::MAX; n],
            |local_of, h| {
                let mut sub = members[h].clone();
                let mut zeros: Vec<u32> = pinned_list.clone();
                for &nb in &partition.neighbours[h] {
                    sub.extend_from_slice(&members[nb as usize]);
                    zeros.push(partition.centroid[nb as usize]);
                }
                sub.sort_unstable();
                weights::local_biharmonic(&lm, &sub, &[partition.centroid[h]], &zeros, local_of)
            },
        )
        .collect::<Result<_>>()?;
    let u_pinned: Vec<(u32, f64)> = if pinned_list.is_empty() {
        Vec::new()
    } else {
        let mut with_pin = vec![false; m];
        for &v in &pinned_list {
            with_pin[partition.part[v as usize] as usize] = true;
        }
        let mut sub = Vec::new();
        let mut zeros = Vec::new();
        for h in (0..m).filter(|&h| with_pin[h]) {
            sub.extend_from_slice(&members[h]);
            zeros.push(partition.centroid[h]);
        }
        sub.sort_unstable();
        // A centroid that is itself pinned (a partition made only of pins) stays 1: pins win.
        let zeros: Vec<u32> = zeros.into_iter().filter(|&v| !pinned[v as usize]).collect();
        let mut local_of = vec![u32::MAX; n];
        weights::local_biharmonic(&lm, &sub, &pinned_list, &zeros, &mut local_of)?
    };
    let weights_s = t0.elapsed().as_secs_f64();

    let t0 = Instant::now();
    let mut denom = vec![0.0; n];
    for list in &raw {
        for &(v, u) in list {
            denom[v as usize] += u;
        }
    }
    let mut pinned_weight = vec![0.0; n];
    for &(v, u) in &u_pinned {
        denom[v as usize] += u;
        pinned_weight[v as usize] = u;
    }
    for v in 0..n {
        if pinned[v] {
            // u_D = 1 and every handle is 0 here by construction; state it exactly.
            pinned_weight[v] = 1.0;
        } else if denom[v] > 0.0 {
            pinned_weight[v] /= denom[v];
        }
    }
    // Per-vertex counts, then CSR fill in handle order (so each vertex list is sorted).
    let mut fallback = vec![false; n];
    let mut count = vec![0usize; n];
    for list in &raw {
        for &(v, _) in list {
            count[v as usize] += 1;
        }
    }
    for v in 0..n {
        if !pinned[v] && (denom[v].is_nan() || denom[v] <= 0.0) {
            fallback[v] = true;
            count[v] = 1;
        }
    }
    let mut vertex_ptr = Vec::with_capacity(n + 1);
    vertex_ptr.push(0);
    for v in 0..n {
        vertex_ptr.push(vertex_ptr[v] + count[v]);
    }
    let nnz = vertex_ptr[n];
    let mut vertex_handle = vec![0u32; nnz];
    let mut vertex_weight = vec![0.0; nnz];
    let mut fill = vertex_ptr.clone();
    for v in 0..n {
        if fallback[v] {
            vertex_handle[fill[v]] = partition.part[v];
            vertex_weight[fill[v]] = 1.0;
            fill[v] += 1;
        }
    }
    for (h, list) in raw.iter().enumerate() {
        for &(v, u) in list {
            let v = v as usize;
            vertex_handle[fill[v]] = h as u32;
            vertex_weight[fill[v]] = u / denom[v];
            fill[v] += 1;
        }
    }
    let (handle_ptr, handle_vertex, handle_weight) =
        transpose(n, m, &vertex_ptr, &vertex_handle, &vertex_weight);
    let origin: Vec<[f64; 3]> = partition
        .centroid
        .iter()
        .map(|&c| positions[c as usize])
        .collect();
    let storage_s = t0.elapsed().as_secs_f64();

    let bytes = std::mem::size_of::<usize>() * (vertex_ptr.len() + handle_ptr.len())
        + 4 * (vertex_handle.len() + handle_vertex.len())
        + 8 * (vertex_weight.len() + handle_weight.len() + pinned_weight.len())
        + 24 * (positions.len() + origin.len())
        + 4 * (partition.part.len() + partition.centroid.len())
        + 4 * partition.neighbours.iter().map(Vec::len).sum::<usize>();
    let stats = SmsStats {
        geodesic_factor_s,
        partition_s,
        weights_s,
        storage_s,
        bytes,
        nnz,
        fallback_vertices: fallback.iter().filter(|&&f| f).count(),
        ..Default::default()
    };
    let mut basis = SmsBasis {
        partition,
        rest: positions.to_vec(),
        origin,
        vertex_ptr,
        vertex_handle,
        vertex_weight,
        handle_ptr,
        handle_vertex,
        handle_weight,
        pinned_weight,
        cubature: SmsCubature::default(),
        n_cg: NcgRule::default(),
        stats,
    };
    let t0 = Instant::now();
    basis.cubature = fit_cubature(&basis, tets, &opts.cubature)?;
    basis.n_cg = ncg_rule(
        n,
        tets,
        &basis.partition.part,
        &basis.partition.centroid,
        opts.n_cg,
    )?;
    basis.stats.cubature_s = t0.elapsed().as_secs_f64();
    basis.stats.cubature_bytes = basis.cubature.bytes() + 4 * basis.n_cg.radius.len();
    basis.stats.total_s = t_all.elapsed().as_secs_f64();
    Ok(basis)
}

fn transpose(
    n: usize,
    m: usize,
    ptr: &[usize],
    idx: &[u32],
    val: &[f64],
) -> (Vec<usize>, Vec<u32>, Vec<f64>) {
    let mut tptr = vec![0usize; m + 1];
    for &h in idx {
        tptr[h as usize + 1] += 1;
    }
    for h in 0..m {
        tptr[h + 1] += tptr[h];
    }
    let mut fill = tptr.clone();
    let mut tidx = vec![0u32; idx.len()];
    let mut tval = vec![0.0; idx.len()];
    for v in 0..n {
        for k in ptr[v]..ptr[v + 1] {
            let h = idx[k] as usize;
            tidx[fill[h]] = v as u32;
            tval[fill[h]] = val[k];
            fill[h] += 1;
        }
    }
    (tptr, tidx, tval)
}

/// `[x − o; 1]`, the per-vertex factor of a handle's 3×12 block.
fn frame(x: [f64; 3], o: [f64; 3]) -> [f64; 4] {
    [x[0] - o[0], x[1] - o[1], x[2] - o[2], 1.0]
}

fn check_len(what: &str, got: usize, want: usize) -> Result<()> {
    if got != want {
        return Err(PrecomputeError::Invalid(format!(
            "sms: `{what}` has length {got}, expected {want}"
        )));
    }
    Ok(())
}

impl SmsBasis {
    /// Vertex count `n`.
    pub fn n_vertices(&self) -> usize {
        self.rest.len()
    }

    /// Handle count `m`.
    pub fn n_handles(&self) -> usize {
        self.origin.len()
    }

    /// Weights of vertex `v`: (handle, φ) pairs.
    pub fn vertex_weights(&self, v: usize) -> impl Iterator<Item = (u32, f64)> + '_ {
        let r = self.vertex_ptr[v]..self.vertex_ptr[v + 1];
        self.vertex_handle[r.clone()]
            .iter()
            .copied()
            .zip(self.vertex_weight[r].iter().copied())
    }

    /// Lift `u = U q`: `q` holds `12 m` handle DOFs (handle `h`: row-major 3×4 `[A | t]`,
    /// `A` dimensionless, `t` in m), `u` receives `3 n` displacements (m, xyz per vertex):
    /// `u_v = Σ_h φ_vh [A | t]_h [x_v − o_h; 1]`. Gather per vertex (no write conflicts).
    pub fn apply(&self, q: &[f64], u: &mut [f64]) -> Result<()> {
        check_len("q", q.len(), HANDLE_DOFS * self.n_handles())?;
        check_len("u", u.len(), 3 * self.n_vertices())?;
        for v in 0..self.n_vertices() {
            let mut acc = [0.0; 3];
            for (h, w) in self.vertex_weights(v) {
                let y = frame(self.rest[v], self.origin[h as usize]);
                let qh = &q[HANDLE_DOFS * h as usize..][..HANDLE_DOFS];
                for r in 0..3 {
                    acc[r] += w * (0..4).map(|c| qh[4 * r + c] * y[c]).sum::<f64>();
                }
            }
            u[3 * v..3 * v + 3].copy_from_slice(&acc);
        }
        Ok(())
    }

    /// Restrict `q = Uᵀ y` (the exact adjoint of [`Self::apply`]): `y` has `3 n` entries,
    /// `q` receives `12 m`. Gather per handle over its vertex list.
    pub fn restrict(&self, y: &[f64], q: &mut [f64]) -> Result<()> {
        check_len("y", y.len(), 3 * self.n_vertices())?;
        check_len("q", q.len(), HANDLE_DOFS * self.n_handles())?;
        for h in 0..self.n_handles() {
            let mut acc = [0.0; HANDLE_DOFS];
            for k in self.handle_ptr[h]..self.handle_ptr[h + 1] {
                let v = self.handle_vertex[k] as usize;
                let w = self.handle_weight[k];
                let f = frame(self.rest[v], self.origin[h]);
                for r in 0..3 {
                    for c in 0..4 {
                        acc[4 * r + c] += w * f[c] * y[3 * v + r];
                    }
                }
            }
            q[HANDLE_DOFS * h..][..HANDLE_DOFS].copy_from_slice(&acc);
        }
        Ok(())
    }
}

/// The affine level: one 12-DOF handle per object (mesh connected component), φ ≡ 1, origin
/// at the object's centre of volume (m).
#[derive(Clone, Debug)]
pub struct AffineBasis {
    /// Object of each vertex.
    pub object: Vec<u32>,
    /// Centre of volume of each object (m).
    pub origin: Vec<[f64; 3]>,
    /// Rest positions (m).
    pub rest: Vec<[f64; 3]>,
}

impl AffineBasis {
    /// One handle per connected component of the tet mesh.
    pub fn new(positions: &[[f64; 3]], tets: &[[u32; 4]]) -> Result<Self> {
        let youngs = vec![1.0; tets.len()];
        mesh::validate(positions, tets, &youngs, &vec![false; positions.len()])?;
        let geom = mesh::geometry(positions, tets)?;
        let adj = mesh::vertex_adjacency(positions.len(), tets);
        let (object, n_obj) = mesh::components(&adj, |_| true);
        let mut acc = vec![[0.0; 4]; n_obj];
        for (v, &o) in object.iter().enumerate() {
            let w = geom.vertex_vol[v];
            for i in 0..3 {
                acc[o as usize][i] += w * positions[v][i];
            }
            acc[o as usize][3] += w;
        }
        let origin = acc
            .iter()
            .map(|a| [a[0] / a[3], a[1] / a[3], a[2] / a[3]])
            .collect();
        Ok(Self {
            object,
            origin,
            rest: positions.to_vec(),
        })
    }

    /// Object count (handles).
    pub fn n_objects(&self) -> usize {
        self.origin.len()
    }

    /// `u = U_a q` (`q`: 12 per object, same layout as [`SmsBasis::apply`]; `u`: 3 per vertex, m).
    pub fn apply(&self, q: &[f64], u: &mut [f64]) -> Result<()> {
        check_len("q", q.len(), HANDLE_DOFS * self.n_objects())?;
        check_len("u", u.len(), 3 * self.rest.len())?;
        for (v, &o) in self.object.iter().enumerate() {
            let y = frame(self.rest[v], self.origin[o as usize]);
            let qo = &q[HANDLE_DOFS * o as usize..][..HANDLE_DOFS];
            for r in 0..3 {
                u[3 * v + r] = (0..4).map(|c| qo[4 * r + c] * y[c]).sum();
            }
        }
        Ok(())
    }

    /// `q = U_aᵀ y`, the adjoint of [`Self::apply`].
    pub fn restrict(&self, y: &[f64], q: &mut [f64]) -> Result<()> {
        check_len("y", y.len(), 3 * self.rest.len())?;
        check_len("q", q.len(), HANDLE_DOFS * self.n_objects())?;
        q.fill(0.0);
        for (v, &o) in self.object.iter().enumerate() {
            let f = frame(self.rest[v], self.origin[o as usize]);
            for r in 0..3 {
                for c in 0..4 {
                    q[HANDLE_DOFS * o as usize + 4 * r + c] += f[c] * y[3 * v + r];
                }
            }
        }
        Ok(())
    }
}
