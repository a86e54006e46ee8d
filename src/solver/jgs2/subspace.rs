//! Building (or loading from the cache) the JGS2 perturbation subspaces of a model.

use crate::error::{JelloError, Result};
use crate::material::element_hessian;
use crate::mesh::{colour_vertices, VertexTets};
use crate::problem::Model;
use jello_precompute::cholesky::Ordering;
use jello_precompute::hmatrix::{HMatrix, HMatrixOptions};
use jello_precompute::jgs2::{Jgs2Basis, Jgs2Input, Jgs2Options, Jgs2Precompute};
use jello_precompute::tree::ClusterTree;
use nalgebra::Vector3;

/// One vertex's run-time subspace data (see [`super::jgs2_system`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VertexSubspace {
    /// `Ū_{i,e}` (12×3 row-major) for each incident element, in `VertexTets::of(i)` order
    /// (rows of the near field; zero at pinned corners).
    pub incident: Vec<[f64; 36]>,
    /// Exact near field: vertex `j` and `Ū_i[j]` (3×3 row-major).
    pub near: Vec<(u32, [f64; 9])>,
    /// Far samples (cluster-tree nodes).
    pub far: Vec<FarSample>,
    /// `Â_i` (3×3 row-major, N/m): the rest Schur complement minus the incident elements' rest
    /// elastic part.
    pub a_hat: [f64; 9],
}

/// One far sample of a vertex's subspace: the fit of `Ū_i` over a cluster-tree node,
/// `Ū_i[j] ≈ block + Σ_k r_{j,k} slopes_k` with `r_j` vertex `j`'s rest position relative to
/// [`Jgs2Subspace::origin`] (weight folded in).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FarSample {
    /// Cluster-tree node `c`.
    pub node: u32,
    /// Cubature weight `w_c ≥ 0` (1 without compression).
    pub weight: f64,
    /// `w_c` × the fit's value at the origin (3×3 row-major; the node mean `ū_{i,c}` for a
    /// zeroth-order fit).
    pub block: [f64; 9],
    /// First-order fits: `w_c·B_k` for k = x, y, z (three 3×3 row-major blocks, 1/m).
    pub slopes: Option<[f64; 27]>,
}

/// All vertices' subspaces, the cluster tree, plus the precompute statistics.
#[derive(Clone, Debug)]
pub struct Jgs2Subspace {
    /// Per vertex (empty for pinned ones).
    pub vertices: Vec<VertexSubspace>,
    /// The cluster tree over the free vertices; far samples are its nodes.
    pub tree: ClusterTree,
    /// The rest-position origin of the first-order far field (the centroid of the tree's
    /// vertices), m.
    pub origin: [f64; 3],
    /// Rest positions relative to [`Self::origin`], per vertex (m): the first moments of the
    /// gradient are taken in them.
    pub rest: Vec<Vector3<f64>>,
    /// The H-matrix field (`Jgs2Options::far_hmatrix`); when present the vertices have no
    /// far samples and no near rows for r (their 1-ring rows are in `incident` only): vertex
    /// `i`'s sum is `S_i (G ĝ)_i − ĝ_i`.
    pub far_hmatrix: Option<HFarField>,
    /// Precompute statistics (timings, residual distribution, bytes per vertex).
    pub stats: jello_precompute::jgs2::Jgs2Stats,
}

/// The run-time H-matrix field: `G` over the subspace's cluster tree (dense near leaf pairs,
/// low-rank far blocks) and each vertex's `S_i = G_ii⁻¹` (the rest Schur complement, N/m),
/// since `Ū_i[j]ᵀ = S_i G_ij`: vertex `i`'s whole sum is `Σ_{j≠i} Ū_i[j]ᵀ ĝ_j =
/// S_i (G ĝ)_i − ĝ_i`.
#[derive(Clone, Debug)]
pub struct HFarField {
    /// `G = H̄⁻¹` as an H-matrix ([`HMatrix`], tree order).
    pub matrix: HMatrix,
    /// `S_i` per vertex (row-major; zero for pinned vertices).
    pub schur: Vec<[f64; 9]>,
}

/// Options of the subspace build. The default far field is the H-matrix of `G`
/// (`Jgs2Options::far_hmatrix`, ε 1e-3; issue 17: within 1.08× of exact rows' iterations on
/// the paper's moderate scenes at less memory than first-order node fits, and a cheaper
/// precompute — see the module docs of [`super`]); [`Self::node_fits`] is the former default.
#[derive(Clone, Debug)]
pub struct SubspaceOptions {
    /// Precompute tuning (training poses, cluster tree, far field, cubature). The H-matrix
    /// field is used when `far_hmatrix` is set and the subspaces are per vertex with no
    /// cubature ([`Self::uses_hmatrix`]); otherwise node fits (`far_tolerance`, `far_order`).
    pub precompute: Jgs2Options,
    /// Group-wise subspaces (the paper's §8.1 reading for Gauss–Seidel): each vertex's
    /// subspace holds the other vertices of its colour fixed. Off by default, and the solvers
    /// use per-vertex subspaces (Eq. 23) for both Jacobi and Gauss–Seidel: with its colour
    /// held fixed all over the mesh a vertex's perturbation stays local, and Gauss–Seidel then
    /// converged like VBD (55–99 iterations per step on a clamped ARAP beam, E = 1 MPa, where
    /// per-vertex subspaces need 3; see the issue note).
    pub group_wise: bool,
}

impl Default for SubspaceOptions {
    fn default() -> Self {
        Self {
            precompute: Jgs2Options {
                far_hmatrix: Some(HMatrixOptions::default()),
                ..Jgs2Options::default()
            },
            group_wise: false,
        }
    }
}

impl SubspaceOptions {
    /// First-order node fits at tolerance 0.02 (the default before issue 17's H-matrix): the
    /// paper's compressed far field family, per vertex and per cluster-tree node.
    pub fn node_fits() -> Self {
        Self {
            precompute: Jgs2Options::default(),
            group_wise: false,
        }
    }

    /// True when the build makes the H-matrix field: asked for, per-vertex subspaces (the
    /// group-wise ones fix other vertices, which a single `G` does not describe) and no
    /// cubature compression (`max_samples`, a node-fit option).
    pub fn uses_hmatrix(&self) -> bool {
        self.precompute.far_hmatrix.is_some()
            && !self.group_wise
            && self.precompute.max_samples == 0
    }

    /// The precompute's options as run: without `far_hmatrix` where it is not used.
    fn effective(&self) -> Jgs2Options {
        let mut o = self.precompute.clone();
        if !self.uses_hmatrix() {
            o.far_hmatrix = None;
        }
        o
    }
}

/// The inputs of the precompute for `model` at time step `h`: rest element Hessians of Ψ,
/// per-corner mass shares and the pinned mask.
fn inputs(model: &Model, at: Option<&[f64]>) -> (Vec<[f64; 144]>, Vec<[f64; 4]>) {
    let rest_h: Vec<[f64; 144]> = (0..model.mesh.num_tets())
        .map(|t| {
            let x = model.mesh.tets[t].map(|v| match at {
                Some(y) => Vector3::from_column_slice(&y[3 * v as usize..3 * v as usize + 3]),
                None => Vector3::from(model.mesh.positions[v as usize]),
            });
            let s = element_hessian(&model.materials[t], &model.rest[t], &x, true);
            let h = s.hessian.unwrap_or_default();
            let mut out = [0.0; 144];
            for p in 0..12 {
                for q in 0..12 {
                    out[12 * p + q] = h[(p, q)];
                }
            }
            out
        })
        .collect();
    let mass: Vec<[f64; 4]> = (0..model.mesh.num_tets())
        .map(|t| [model.density[t] * model.rest[t].volume / 4.0; 4])
        .collect();
    (rest_h, mass)
}

/// A 64-bit key identifying everything the subspace depends on (mesh, materials, densities,
/// pins, h, options) — FNV-1a over their bytes, stable across runs and platforms.
pub fn cache_key(model: &Model, h: f64, opts: &SubspaceOptions) -> u64 {
    let mut k = 0xcbf2_9ce4_8422_2325u64;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            k ^= b as u64;
            k = k.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for p in &model.mesh.positions {
        for c in p {
            eat(&c.to_le_bytes());
        }
    }
    for t in &model.mesh.tets {
        for v in t {
            eat(&v.to_le_bytes());
        }
    }
    for (m, d) in model.materials.iter().zip(&model.density) {
        eat(&m.model.gpu_id().to_le_bytes());
        eat(&m.mu.to_le_bytes());
        eat(&m.lambda.to_le_bytes());
        eat(&d.to_le_bytes());
    }
    for (v, p) in model.pinned.iter().enumerate() {
        if *p {
            eat(&(v as u64).to_le_bytes());
        }
    }
    eat(&h.to_le_bytes());
    let eff = opts.effective();
    let o = &eff;
    for v in [o.n_modes, o.leaf_size, o.max_samples, o.candidates] {
        eat(&(v as u64).to_le_bytes());
    }
    eat(&o.target_residual.to_le_bytes());
    eat(&o.far_tolerance.to_le_bytes());
    eat(&(o.far_order as u64).to_le_bytes());
    if let Some(hm) = &o.far_hmatrix {
        eat(&hm.eps.to_le_bytes());
        eat(&hm.eta.to_le_bytes());
        eat(&(hm.samples as u64).to_le_bytes());
        eat(&hm.seed.to_le_bytes());
        // The two sketches give different bases (and ranks) for the same ε.
        eat(&[match hm.sketch {
            jello_precompute::hmatrix::Sketch::Global => 0u8,
            jello_precompute::hmatrix::Sketch::Local => 1u8,
        }]);
        eat(&hm.local_eps.to_le_bytes());
    }
    eat(&[opts.group_wise as u8]);
    eat(&o.seed.to_le_bytes());
    eat(&jello_precompute::artifact::FORMAT_VERSION.to_le_bytes());
    k
}

/// Where the subspace came from.
#[derive(Clone, Debug, PartialEq)]
pub enum SubspaceOrigin {
    /// Read from a valid cached artifact.
    Cache(std::path::PathBuf),
    /// Built now (and written to the path when there was a cache directory).
    Built(Option<std::path::PathBuf>),
}

/// The subspace of `model` at `h`: read from `cache_dir/jgs2-KEY.bin` when it exists and checks
/// out (magic, version, key, checksum, then its content: finite numbers, a consistent tree,
/// and sizes that fit this model), otherwise built and written
/// there atomically. A stale, mismatched, corrupt or poisoned file is rebuilt with a warning
/// (returned), never trusted. A cache that cannot be written gives one warning and the origin
/// `Built(None)`: nothing claims a file that is not there.
pub fn load_or_build(
    model: &Model,
    h: f64,
    opts: &SubspaceOptions,
    cache_dir: Option<&std::path::Path>,
) -> Result<(Jgs2Subspace, SubspaceOrigin, Vec<String>)> {
    use jello_precompute::artifact;
    let key = cache_key(model, h, opts);
    let mut warnings = Vec::new();
    let path = cache_dir.map(|d| d.join(format!("jgs2-{key:016x}.bin")));
    // `symlink_metadata`: a dangling link or a special file at the cache path is read (and
    // refused) by `artifact::read`, not mistaken for a missing file.
    if let Some(p) = path
        .as_ref()
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
    {
        let loaded = artifact::read(p, key)
            .map_err(|e| e.to_string())
            .and_then(|basis| {
                check_against_model(model, &basis, opts.uses_hmatrix())
                    .map_err(|e| format!("{}: {e}", p.display()))?;
                from_basis(model, basis).map_err(|e| format!("{}: {e}", p.display()))
            });
        match loaded {
            Ok(sub) => return Ok((sub, SubspaceOrigin::Cache(p.clone()), warnings)),
            Err(e) => warnings.push(format!("{e}; rebuilding the JGS2 subspace")),
        }
    }
    let sub_basis = precompute(model, h, opts, None)?;
    let mut written = None;
    if let Some(p) = &path {
        let made = p.parent().map(std::fs::create_dir_all).transpose();
        if let Err(e) = made {
            warnings.push(format!(
                "{}: could not create the JGS2 cache directory: {e}; the subspace is not cached",
                p.display()
            ));
        } else if let Err(e) = artifact::write(p, &sub_basis, key) {
            warnings.push(format!(
                "could not write the JGS2 cache ({e}); the subspace is not cached"
            ));
        } else {
            written = Some(p.clone());
        }
    }
    Ok((
        from_basis(model, sub_basis)?,
        SubspaceOrigin::Built(written),
        warnings,
    ))
}

/// What a valid artifact must agree on with the model it is loaded for (the cache key covers
/// the inputs, not a file that was edited and re-checksummed): one record per vertex, the
/// cluster tree over exactly the free vertices, empty records for pinned ones, near vertices
/// free and in range, and an H-matrix far field exactly when the options ask for one.
fn check_against_model(
    model: &Model,
    basis: &Jgs2Basis,
    want_hmatrix: bool,
) -> std::result::Result<(), String> {
    let nv = model.num_vertices();
    if basis.vertices.len() != nv {
        return Err(format!(
            "{} vertex records for a model of {nv} vertices",
            basis.vertices.len()
        ));
    }
    let n_free = model.pinned.iter().filter(|p| !**p).count();
    if basis.tree.perm.len() != n_free || basis.tree.perm.iter().any(|&v| model.pinned[v as usize])
    {
        return Err(format!(
            "the cluster tree holds {} vertices, not the model's {n_free} free ones",
            basis.tree.perm.len()
        ));
    }
    for (v, rec) in basis.vertices.iter().enumerate() {
        if model.pinned[v] {
            if !(rec.near_vertices.is_empty() && rec.far_nodes.is_empty()) {
                return Err(format!("pinned vertex {v} has subspace data"));
            }
            continue;
        }
        if let Some(&j) = rec
            .near_vertices
            .iter()
            .find(|&&j| j as usize >= nv || model.pinned[j as usize])
        {
            return Err(format!(
                "vertex {v}: near vertex {j} is pinned or out of range"
            ));
        }
        if let Some(&c) = rec
            .far_nodes
            .iter()
            .find(|&&c| c as usize >= basis.tree.len())
        {
            return Err(format!("vertex {v}: far node {c} is not in the tree"));
        }
    }
    // The options asked for an H-matrix field exactly when the file holds one (the key covers
    // the options; this catches a re-keyed file of the other kind).
    if basis.far_hmatrix.is_some() != want_hmatrix {
        return Err(format!(
            "the artifact {} an H-matrix far field, the options {}",
            if basis.far_hmatrix.is_some() {
                "holds"
            } else {
                "lacks"
            },
            if want_hmatrix {
                "ask for one"
            } else {
                "do not"
            }
        ));
    }
    Ok(())
}

/// Runs the precompute for `model` at time step `h` (s).
pub fn build_subspace(model: &Model, h: f64, opts: &SubspaceOptions) -> Result<Jgs2Subspace> {
    from_basis(model, precompute(model, h, opts, None)?)
}

/// The subspaces of the Hessian at the deformed positions `x` (3n, m) instead of the rest
/// shape: a diagnostic that measures what the rest-shape approximation costs (a solver using
/// it must co-rotate relative to `x`, [`super::Jgs2Solver::linearised_at`]). Same cluster
/// tree (it is built on the rest positions).
pub fn build_subspace_at(
    model: &Model,
    h: f64,
    opts: &SubspaceOptions,
    x: &[f64],
) -> Result<Jgs2Subspace> {
    if x.len() != 3 * model.num_vertices() {
        return Err(JelloError::Solver(format!(
            "JGS2 subspace at a state: {} coordinates for {} vertices",
            x.len(),
            model.num_vertices()
        )));
    }
    from_basis(model, precompute(model, h, opts, Some(x))?)
}

fn precompute(
    model: &Model,
    h: f64,
    opts: &SubspaceOptions,
    at: Option<&[f64]>,
) -> Result<Jgs2Basis> {
    let err =
        |e: jello_precompute::PrecomputeError| JelloError::Solver(format!("JGS2 precompute: {e}"));
    let (rest_h, mass) = inputs(model, at);
    let input = Jgs2Input {
        n_vertices: model.num_vertices(),
        positions: &model.mesh.positions,
        tets: &model.mesh.tets,
        elem_hessians: &rest_h,
        elem_mass: &mass,
        h,
        pinned: &model.pinned,
    };
    let pre = Jgs2Precompute::new(&input, Ordering::default()).map_err(err)?;
    // `pre` keeps its own H̄_e: the inputs' copy (129 MB on armadillo_114k) would only add to
    // the run's peak.
    drop((rest_h, mass));
    let run = opts.effective();
    if opts.group_wise {
        // The same colouring the Gauss–Seidel sweep uses (deterministic).
        let groups = colour_vertices(&model.mesh).groups;
        pre.run_grouped(&run, &groups).map_err(err)
    } else {
        pre.run(&run).map_err(err)
    }
}

/// Converts the precompute's output to the runtime layout (incident blocks in `VertexTets`
/// order, built from the near-field rows).
fn from_basis(model: &Model, basis: Jgs2Basis) -> Result<Jgs2Subspace> {
    let vt = VertexTets::new(&model.mesh);
    if basis.vertices.len() != model.num_vertices() {
        return Err(JelloError::Solver(format!(
            "JGS2 basis has {} vertices, the model {}",
            basis.vertices.len(),
            model.num_vertices()
        )));
    }
    let tree = basis.tree;
    let far_hmatrix = basis.far_hmatrix.map(|matrix| HFarField {
        matrix,
        schur: basis.vertices.iter().map(|r| r.schur).collect(),
    });
    let mut origin = [0.0; 3];
    for &v in &tree.perm {
        for (o, p) in origin.iter_mut().zip(model.mesh.positions[v as usize]) {
            *o += p / tree.perm.len() as f64;
        }
    }
    let rest: Vec<Vector3<f64>> = model
        .mesh
        .positions
        .iter()
        .map(|p| Vector3::from(*p) - Vector3::from(origin))
        .collect();
    // Node centroids relative to the origin (first-order samples are stored about them).
    let centre: Vec<Vector3<f64>> = (0..tree.len())
        .map(|c| {
            let m = tree.members(c);
            m.iter().map(|&j| rest[j as usize]).sum::<Vector3<f64>>() / m.len().max(1) as f64
        })
        .collect();
    let mut vertices = Vec::with_capacity(basis.vertices.len());
    for (v, rec) in basis.vertices.into_iter().enumerate() {
        if model.pinned[v] {
            vertices.push(VertexSubspace::default());
            continue;
        }
        let row = |j: u32| -> Result<Option<[f64; 9]>> {
            if j as usize == v {
                return Ok(Some([1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]));
            }
            if model.pinned[j as usize] {
                return Ok(None);
            }
            match rec.near_vertices.binary_search(&j) {
                Ok(k) => Ok(Some(rec.near_blocks[k])),
                Err(_) => Err(JelloError::Solver(format!(
                    "JGS2 basis: vertex {v}'s near field lacks its neighbour {j}"
                ))),
            }
        };
        let mut incident = Vec::new();
        for (t, _) in vt.of(v) {
            let mut b = [0.0; 36];
            for (c, &w) in model.mesh.tets[t as usize].iter().enumerate() {
                if let Some(r) = row(w)? {
                    for d in 0..3 {
                        for col in 0..3 {
                            b[(3 * c + d) * 3 + col] = r[3 * d + col];
                        }
                    }
                }
            }
            incident.push(b);
        }
        // With the H-matrix the near rows are the 1-ring's, kept for `incident` only: the
        // whole sum Σ_j Ū_i[j]ᵀ ĝ_j comes from the H-matrix (dense near blocks included).
        let near = if far_hmatrix.is_some() {
            Vec::new()
        } else {
            rec.near_vertices
                .iter()
                .copied()
                .zip(rec.near_blocks.iter().copied())
                .collect()
        };
        vertices.push(VertexSubspace {
            incident,
            near,
            far: far_samples(v, &rec, &centre)?,
            a_hat: rec.a_hat,
        });
    }
    Ok(Jgs2Subspace {
        vertices,
        tree,
        origin,
        rest,
        far_hmatrix,
        stats: basis.stats,
    })
}

/// Vertex `v`'s far samples with first-order fits moved from the node centroid to the origin:
/// `block ← block − Σ_k p̄_{c,k} B_k`, so the run time needs no centroids.
fn far_samples(
    v: usize,
    rec: &jello_precompute::jgs2::VertexSubspaceData,
    centre: &[Vector3<f64>],
) -> Result<Vec<FarSample>> {
    let n = rec.far_nodes.len();
    if rec.far_weights.len() != n
        || rec.far_blocks.len() != n
        || !(rec.far_slopes.is_empty() || rec.far_slopes.len() == n)
    {
        return Err(JelloError::Solver(format!(
            "JGS2 basis: vertex {v}'s far samples have inconsistent lengths"
        )));
    }
    (0..n)
        .map(|q| {
            let node = rec.far_nodes[q];
            let pc = centre.get(node as usize).ok_or_else(|| {
                JelloError::Solver(format!(
                    "JGS2 basis: vertex {v}'s far node {node} is not in the tree"
                ))
            })?;
            let mut block = rec.far_blocks[q];
            let slopes = rec.far_slopes.get(q).copied();
            if let Some(sl) = &slopes {
                for k in 0..3 {
                    for (b, s) in block.iter_mut().zip(&sl[9 * k..9 * k + 9]) {
                        *b -= pc[k] * s;
                    }
                }
            }
            Ok(FarSample {
                node,
                weight: rec.far_weights[q],
                block,
                slopes,
            })
        })
        .collect()
}
