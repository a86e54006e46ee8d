//! The per-element and per-vertex passes of JGS2/VBD (the CPU reference of the WGSL kernels).

use super::subspace::{HFarField, VertexSubspace};
use crate::material::{
    element_gradient, element_hessian, element_local_corner, svd3, EigenFilter, ELEMENT_LANES,
};
use crate::mesh::VertexTets;
use crate::problem::potential::corners;
use crate::problem::{barrier_derivatives, Model, StepProblem};
use jello_precompute::tree::ClusterTree;
use nalgebra::{Matrix3, SMatrix, SVector, Vector3};
use rayon::prelude::*;

/// Element gradients and PSD-projected Hessians of Ψ at the current positions.
#[derive(Clone, Debug, Default)]
pub struct ElementCache {
    /// ∇Ψ_e, 12 per element (N).
    pub grad: Vec<SVector<f64, 12>>,
    /// ∇²Ψ_e projected, per element (N/m).
    pub hess: Vec<SMatrix<f64, 12, 12>>,
}

/// Recomputes the cache entries of `elements` (all when `None`) at `x`.
pub fn element_pass(model: &Model, x: &[f64], cache: &mut ElementCache, elements: Option<&[u32]>) {
    let nt = model.mesh.num_tets();
    if cache.grad.len() != nt {
        cache.grad = vec![SVector::zeros(); nt];
        cache.hess = vec![SMatrix::zeros(); nt];
    }
    let eval = |t: usize| {
        let s = element_hessian(
            &model.materials[t],
            &model.rest[t],
            &corners(x, &model.mesh.tets[t]),
            true,
        );
        (s.gradient, s.hessian.unwrap_or_else(SMatrix::zeros))
    };
    match elements {
        None => {
            // In place: collecting 1.2 KB per element and copying it over cost 7% of a VBD
            // iteration (callgrind, armadillo_18k).
            // By groups of ELEMENT_LANES, whose SVDs run in lock-step (the same bits).
            cache
                .grad
                .par_chunks_mut(ELEMENT_LANES)
                .zip(cache.hess.par_chunks_mut(ELEMENT_LANES))
                .enumerate()
                .for_each(|(chunk, (g, h))| {
                    model.element_hessian_states(
                        x,
                        chunk * ELEMENT_LANES,
                        EigenFilter::Clamp,
                        |l, s| {
                            g[l] = s.gradient;
                            h[l] = s.hessian.unwrap_or_else(SMatrix::zeros);
                        },
                    )
                });
        }
        Some(list) => {
            let out: Vec<_> = list.par_iter().map(|&t| eval(t as usize)).collect();
            for (&t, (g, h)) in list.iter().zip(out) {
                cache.grad[t as usize] = g;
                cache.hess[t as usize] = h;
            }
        }
    }
}

/// Below this many items (vertices; ×4 for elements) a plain VBD pass runs on the calling
/// thread: handing a pass to rayon's pool costs a wake-up and a context switch, which `perf`
/// put at ~40% of a VBD iteration on the 189-vertex cantilever (colours of ~20 vertices),
/// more than their corner solves. The results are the same bits either way.
pub(crate) const SEQUENTIAL_BELOW: usize = 128;

/// Recomputes every element's gradient at `x` into `cache.grad`, leaving `cache.hess` as it
/// was: for the plain VBD sweep ([`vbd_local_system`]), which never reads the cached Hessians.
/// The gradients equal [`element_pass`]'s to round-off (P from the invariants here, from the
/// SVD there).
pub fn element_gradient_pass(model: &Model, x: &[f64], cache: &mut ElementCache) {
    let nt = model.mesh.num_tets();
    if cache.grad.len() != nt {
        cache.grad = vec![SVector::zeros(); nt];
    }
    let one = |(t, g): (usize, &mut SVector<f64, 12>)| {
        *g = element_gradient(
            &model.materials[t],
            &model.rest[t],
            &corners(x, &model.mesh.tets[t]),
        )
        .gradient;
    };
    if nt < 4 * SEQUENTIAL_BELOW {
        cache.grad.iter_mut().enumerate().for_each(one);
    } else {
        cache.grad.par_iter_mut().enumerate().for_each(one);
    }
}

/// The assembled gradient of E at vertex `v` from the element cache: inertia + Σ incident ∇Ψ_e +
/// obstacle barrier (zero for pinned vertices) — the same quantity as
/// [`StepProblem::gradient`], without re-evaluating elements.
pub fn vertex_gradient(
    problem: &StepProblem,
    cache: &ElementCache,
    vt: &VertexTets,
    x: &[f64],
    v: usize,
) -> Vector3<f64> {
    let model = problem.model;
    if model.pinned[v] {
        return Vector3::zeros();
    }
    // Inertia weight 1/ĥ² (1/h² under implicit Euler, 0 in a static increment).
    let ih2 = problem.inertia;
    let p = Vector3::from_column_slice(&x[3 * v..3 * v + 3]);
    let mut g = (p - Vector3::from_column_slice(&problem.x_tilde[3 * v..3 * v + 3]))
        * (model.mass[v] * ih2);
    if !problem.load.is_empty() {
        g -= Vector3::from_column_slice(&problem.load[3 * v..3 * v + 3]);
    }
    for (t, c) in vt.of(v) {
        g += cache.grad[t as usize].fixed_rows::<3>(3 * c as usize);
    }
    barrier_gradient(problem, x, v, &p, g)
}

/// `g` (inertia, loads and elastic terms at vertex `v`, at its position `p`) plus the obstacle
/// barriers' gradient at `v`.
fn barrier_gradient(
    problem: &StepProblem,
    x: &[f64],
    v: usize,
    p: &Vector3<f64>,
    mut g: Vector3<f64>,
) -> Vector3<f64> {
    let model = problem.model;
    let dhat = model.barrier.dhat;
    for o in model.obstacles.iter().filter(|o| o.acts_on_vertices()) {
        let de = o.distance(p);
        if de.d < dhat {
            let (_, db, _) = barrier_derivatives(de.d, dhat);
            g += de.grad * (problem.barrier_weight(v) * db);
        }
    }
    g + problem.face_barrier_at_vertex(x, v).0
}

/// Per-vertex rotations R_j = polar(F̄_j), F̄_j = Σ_{e∋j} V_e F_e / Σ V_e (identity for vertices
/// in no element).
pub fn rotations(model: &Model, x: &[f64], vertex_tets: &VertexTets) -> Vec<Matrix3<f64>> {
    let nv = model.num_vertices();
    (0..nv)
        .into_par_iter()
        .map(|v| {
            let mut f = Matrix3::zeros();
            let mut w = 0.0;
            for (t, _) in vertex_tets.of(v) {
                let r = &model.rest[t as usize];
                f += r.deformation_gradient(&corners(x, &model.mesh.tets[t as usize])) * r.volume;
                w += r.volume;
            }
            if w == 0.0 {
                return Matrix3::identity();
            }
            svd3(&(f / w)).rotation()
        })
        .collect()
}

/// A Hessian term of vertex i's local system: element, weight, and the 12×3 row-major Ū_{i,e}
/// (`None`: VBD, U_e = identity at i's corner).
pub type HessTerm<'a> = (u32, f64, Option<&'a [f64; 36]>);
/// A gradient term: vertex j, weight, and the 3×3 row-major block Ū_i\[j\] (rows of vertex j).
pub type GradTerm<'a> = (u32, f64, &'a [f64; 9]);

/// Vertex `i`'s 3×3 system (A, r); the step is δx_i = −A⁻¹ r.
///
/// A = Σ w_e U_eᵀ H_e U_e over `hess_terms` + the barrier Hessian at i, with
/// H_e = ∇²Ψ_e + (ρ_e V_e/4)/h² per corner. r = g_i + Σ w_j U_jᵀ g_j over `grad_terms`, where g is
/// the assembled gradient of E (`g`, flattened): using the global gradient (not element
/// gradients) keeps the iteration's fixed point exactly the minimiser, whatever the cubature
/// error — at ∇E = 0 every r_i vanishes. U blocks are co-rotated by `rot` when given:
/// U_{·,j} = R_j Ū_{·,j} R_iᵀ.
#[allow(clippy::too_many_arguments)] // mirrors the kernel's binding list
pub fn local_system<'a>(
    problem: &StepProblem,
    cache: &ElementCache,
    x: &[f64],
    g: &[f64],
    i: usize,
    hess_terms: impl Iterator<Item = HessTerm<'a>>,
    grad_terms: impl Iterator<Item = GradTerm<'a>>,
    rot: Option<&[Matrix3<f64>]>,
) -> (Matrix3<f64>, Vector3<f64>) {
    let model = problem.model;
    // Inertia weight 1/ĥ² (1/h² under implicit Euler, 0 in a static increment).
    let ih2 = problem.inertia;
    let ri_t = rot.map(|r| r[i].transpose());
    let mut a = Matrix3::zeros();
    for (e, w, block) in hess_terms {
        let e = e as usize;
        let tet = &model.mesh.tets[e];
        let ms = model.density[e] * model.rest[e].volume / 4.0 * ih2;
        let mut hess = cache.hess[e];
        for c in 0..12 {
            hess[(c, c)] += ms;
        }
        match block {
            None => {
                let c = tet
                    .iter()
                    .position(|&v| v as usize == i)
                    .expect("incident element");
                a += hess.fixed_view::<3, 3>(3 * c, 3 * c) * w;
            }
            Some(b) => {
                let mut u = SMatrix::<f64, 12, 3>::from_row_slice(b);
                if let (Some(rot), Some(ri_t)) = (rot, ri_t) {
                    for (c, &v) in tet.iter().enumerate() {
                        let blk = rot[v as usize] * u.fixed_view::<3, 3>(3 * c, 0) * ri_t;
                        u.fixed_view_mut::<3, 3>(3 * c, 0).copy_from(&blk);
                    }
                }
                // Pinned corners have zero Ū rows, so their (fixed) DOFs never enter.
                a += u.transpose() * hess * u * w;
            }
        }
    }
    let mut r = Vector3::from_column_slice(&g[3 * i..3 * i + 3]);
    for (j, w, b) in grad_terms {
        let j = j as usize;
        let mut u = Matrix3::from_row_slice(b);
        if let (Some(rot), Some(ri_t)) = (rot, ri_t) {
            u = rot[j] * u * ri_t;
        }
        r += u.transpose() * Vector3::from_column_slice(&g[3 * j..3 * j + 3]) * w;
    }
    // Obstacle barrier curvature on vertex i itself (its gradient is already in g_i).
    a += barrier_hessian(problem, x, i);
    (a, r)
}

/// The rest-frame gradient field a JGS2 local system reads: per vertex `ĝ_j = R_jᵀ g_j`, and
/// per cluster-tree node its sum `G_c = Σ_{j∈c} ĝ_j` and first moments
/// `N_c[k] = Σ_{j∈c} r_{j,k} ĝ_j` (`r_j`: rest position relative to the subspace origin, m).
#[derive(Clone, Debug, Default)]
pub struct TreeFrame {
    /// `ĝ_j` per vertex (N).
    pub ghat: Vec<Vector3<f64>>,
    /// `G_c` per node (N).
    pub sums: Vec<Vector3<f64>>,
    /// `N_c[k]`, k = x, y, z, per node (N·m).
    pub moments: Vec<[Vector3<f64>; 3]>,
    /// H-matrix field only (else empty): `S_i (G ĝ)_i − ĝ_i` per vertex (N), vertex `i`'s
    /// whole sum `Σ_{j≠i} Ū_i[j]ᵀ ĝ_j` ([`hmatrix_far_field`]).
    pub far: Vec<Vector3<f64>>,
}

/// Fills [`TreeFrame::far`] from its `ĝ` with the subspace's H-matrix field:
/// `S_i (G ĝ)_i − ĝ_i` for every vertex, one H-matrix product for all of them
/// (`Ū_i[j]ᵀ = S_i G_ij`, `S_i G_ii = I`). Pinned vertices get zero.
pub fn hmatrix_far_field(frame: &mut TreeFrame, tree: &ClusterTree, far: &HFarField) {
    let x: Vec<f64> = tree
        .perm
        .iter()
        .flat_map(|&v| {
            let g = frame.ghat[v as usize];
            [g.x, g.y, g.z]
        })
        .collect();
    let y = far.matrix.apply_tree_order(tree, &x);
    let mut out = vec![Vector3::zeros(); frame.ghat.len()];
    for (p, &v) in tree.perm.iter().enumerate() {
        let s = Matrix3::from_row_slice(&far.schur[v as usize]);
        out[v as usize] =
            s * Vector3::from_column_slice(&y[3 * p..3 * p + 3]) - frame.ghat[v as usize];
    }
    frame.far = out;
}

/// The [`TreeFrame`] of gradient `g` (`rot = None`: identity rotations) over `tree`, with
/// first moments in the rest offsets `rest` (per vertex, m; see `Jgs2Subspace::rest`).
pub fn rest_frame_gradients(
    g: &[f64],
    rot: Option<&[Matrix3<f64>]>,
    tree: &ClusterTree,
    rest: &[Vector3<f64>],
) -> TreeFrame {
    let ghat: Vec<Vector3<f64>> = (0..g.len() / 3)
        .map(|j| {
            let gj = Vector3::from_column_slice(&g[3 * j..3 * j + 3]);
            match rot {
                Some(r) => r[j].transpose() * gj,
                None => gj,
            }
        })
        .collect();
    // Children follow their parents in the node order, so a reverse pass sees children first.
    let mut sums = vec![Vector3::zeros(); tree.len()];
    let mut moments = vec![[Vector3::zeros(); 3]; tree.len()];
    for c in (0..tree.len()).rev() {
        match tree.children[c] {
            None => {
                for &j in tree.members(c) {
                    let (gj, r) = (ghat[j as usize], rest[j as usize]);
                    sums[c] += gj;
                    for k in 0..3 {
                        moments[c][k] += gj * r[k];
                    }
                }
            }
            Some((l, r)) => {
                let (l, r) = (l as usize, r as usize);
                sums[c] = sums[l] + sums[r];
                moments[c] = std::array::from_fn(|k| moments[l][k] + moments[r][k]);
            }
        }
    }
    TreeFrame {
        ghat,
        sums,
        moments,
        far: Vec::new(),
    }
}

/// Vertex `i`'s JGS2 system (A, r), δx_i = −A⁻¹r:
///
/// r = g_i + R_i (Σ_{j near} Ū_i\[j\]ᵀ ĝ_j + Σ_{c far} (b_cᵀ G_c + Σ_k B_{c,k}ᵀ N_c\[k\]))
/// (c: cluster-tree nodes, b_c/B_c: the far sample's block and slopes, [`super::FarSample`];
/// with an H-matrix far field the far sum is `frame.far[i]` = S_i (G_far ĝ)_i instead),
/// A = R_i Â_i R_iᵀ + Σ_{e∋i} U_eᵀ K_e(x) U_e + barrier curvature at i,
///
/// with U_e's corner blocks R_v Ū_i\[v\] R_iᵀ (co-rotated, Eq. 14), K_e the element's projected
/// elastic Hessian from `cache`, ĝ/G/N from [`rest_frame_gradients`]. Exact at rest: there
/// A = Ū_iᵀH̄Ū_i (the Schur complement) and r = Ū_iᵀg up to the far-field cubature.
#[allow(clippy::too_many_arguments)] // mirrors the kernel's binding list
pub fn jgs2_system(
    problem: &StepProblem,
    cache: &ElementCache,
    vt: &VertexTets,
    x: &[f64],
    g: &[f64],
    rot: Option<&[Matrix3<f64>]>,
    frame: &TreeFrame,
    i: usize,
    vs: &VertexSubspace,
) -> (Matrix3<f64>, Vector3<f64>) {
    (
        jgs2_matrix(problem, cache, vt, x, rot, i, vs),
        jgs2_rhs(g, rot, frame, i, vs),
    )
}

/// The right-hand side `r` of [`jgs2_system`] alone: linear in `g` (through `g_i` and the
/// [`TreeFrame`] of `g`) for fixed rotations — what [`super::Jgs2Preconditioner`] applies.
pub fn jgs2_rhs(
    g: &[f64],
    rot: Option<&[Matrix3<f64>]>,
    frame: &TreeFrame,
    i: usize,
    vs: &VertexSubspace,
) -> Vector3<f64> {
    let ri = rot.map_or_else(Matrix3::identity, |r| r[i]);
    let mut acc = Vector3::zeros();
    for (j, b) in &vs.near {
        acc += Matrix3::from_row_slice(b).tr_mul(&frame.ghat[*j as usize]);
    }
    for f in &vs.far {
        let c = f.node as usize;
        acc += Matrix3::from_row_slice(&f.block).tr_mul(&frame.sums[c]);
        if let Some(sl) = &f.slopes {
            for k in 0..3 {
                acc += Matrix3::from_row_slice(&sl[9 * k..9 * k + 9]).tr_mul(&frame.moments[c][k]);
            }
        }
    }
    if let Some(f) = frame.far.get(i) {
        acc += f;
    }
    Vector3::from_column_slice(&g[3 * i..3 * i + 3]) + ri * acc
}

/// The matrix `A` of [`jgs2_system`] alone (N/m): the co-rotated rest Schur complement, the
/// incident elements' current Hessians from `cache` and the obstacle barrier curvature at `i`.
pub fn jgs2_matrix(
    problem: &StepProblem,
    cache: &ElementCache,
    vt: &VertexTets,
    x: &[f64],
    rot: Option<&[Matrix3<f64>]>,
    i: usize,
    vs: &VertexSubspace,
) -> Matrix3<f64> {
    let model = problem.model;
    let ri = rot.map_or_else(Matrix3::identity, |r| r[i]);
    let mut a = ri * Matrix3::from_row_slice(&vs.a_hat) * ri.transpose();
    for ((t, _), b) in vt.of(i).zip(&vs.incident) {
        let tet = &model.mesh.tets[t as usize];
        let mut u = SMatrix::<f64, 12, 3>::from_row_slice(b);
        if let Some(rot) = rot {
            for (c, &v) in tet.iter().enumerate() {
                let blk = rot[v as usize] * u.fixed_view::<3, 3>(3 * c, 0) * ri.transpose();
                u.fixed_view_mut::<3, 3>(3 * c, 0).copy_from(&blk);
            }
        }
        a += u.transpose() * cache.hess[t as usize] * u;
    }
    a += barrier_hessian(problem, x, i);
    a
}

/// Vertex `i`'s VBD system (Chen et al. 2024): A = m_i/h² I + Σ_{e∋i} ∇²_{ii}Ψ_e + barrier,
/// r = g_i.
pub fn vbd_system(
    problem: &StepProblem,
    cache: &ElementCache,
    vt: &VertexTets,
    x: &[f64],
    g: &[f64],
    i: usize,
) -> (Matrix3<f64>, Vector3<f64>) {
    // Inertia weight 1/ĥ² (1/h² under implicit Euler, 0 in a static increment).
    let ih2 = problem.inertia;
    let mut a = Matrix3::identity() * (problem.model.mass[i] * ih2);
    for (t, c) in vt.of(i) {
        let c = 3 * c as usize;
        a += cache.hess[t as usize].fixed_view::<3, 3>(c, c);
    }
    a += barrier_hessian(problem, x, i);
    (a, Vector3::from_column_slice(&g[3 * i..3 * i + 3]))
}

/// Vertex `i`'s plain-VBD system evaluated from the positions `x` alone (no element cache):
/// A = m_i/ĥ² I + Σ_{e∋i} (e's diagonal block at i) + barrier, r = g_i, each incident element's
/// gradient rows and block computed for corner i only ([`element_local_corner`]). The block is
/// the exact one where it is PSD by construction (the stable Neo-Hookeans: closed form, no SVD)
/// — the Hessian of the local problem whose Newton step VBD takes (Chen et al. 2024) — and the
/// corner of the projected element Hessian otherwise, as in [`vbd_system`] (r always, A for
/// the other models: equal to [`vbd_system`]'s up to round-off, tested to 1e-12).
pub fn vbd_local_system(
    problem: &StepProblem,
    vt: &VertexTets,
    x: &[f64],
    i: usize,
) -> (Matrix3<f64>, Vector3<f64>) {
    let model = problem.model;
    // Inertia weight 1/ĥ² (1/h² under implicit Euler, 0 in a static increment).
    let ih2 = problem.inertia;
    let p = Vector3::from_column_slice(&x[3 * i..3 * i + 3]);
    let mut g = (p - Vector3::from_column_slice(&problem.x_tilde[3 * i..3 * i + 3]))
        * (model.mass[i] * ih2);
    if !problem.load.is_empty() {
        g -= Vector3::from_column_slice(&problem.load[3 * i..3 * i + 3]);
    }
    let mut a = Matrix3::identity() * (model.mass[i] * ih2);
    for (t, c) in vt.of(i) {
        let t = t as usize;
        let (row, block) = element_local_corner(
            &model.materials[t],
            &model.rest[t],
            &corners(x, &model.mesh.tets[t]),
            c as usize,
            Some(EigenFilter::Clamp),
        );
        g += row;
        a += block;
    }
    a += barrier_hessian(problem, x, i);
    (a, barrier_gradient(problem, x, i, &p, g))
}

/// The obstacle barrier's Hessian at vertex `i`: κ m_i/h² (b''∇d∇dᵀ + b'∇²d) for each
/// half-space within d̂, plus the diagonal block of the surface barrier against spheres and
/// boxes ([`StepProblem::face_barrier_at_vertex`]); its gradient is already in the assembled
/// gradient.
pub fn barrier_hessian(problem: &StepProblem, x: &[f64], i: usize) -> Matrix3<f64> {
    let model = problem.model;
    let mut a = problem.face_barrier_at_vertex(x, i).1;
    let dhat = model.barrier.dhat;
    let p = Vector3::from_column_slice(&x[3 * i..3 * i + 3]);
    for o in model.obstacles.iter().filter(|o| o.acts_on_vertices()) {
        let de = o.distance(&p);
        if de.d < dhat {
            let (_, db, ddb) = barrier_derivatives(de.d, dhat);
            let wv = problem.barrier_weight(i);
            a += de.grad * de.grad.transpose() * (wv * ddb);
            // As in the Newton Hessian: b'∇²d is kept only when it is PSD (b' < 0 inside d̂,
            // so for the convex obstacles here it is dropped).
            if db > 0.0 {
                a += de.hess * (wv * db);
            }
        }
    }
    a
}

/// `H v` for the incremental potential's Hessian at the cached state: Σ_e K_e v_e (projected
/// element Hessians) + M v/h² + barrier curvature, zero on pinned vertices.
pub fn hess_vec(
    problem: &StepProblem,
    cache: &ElementCache,
    vt: &VertexTets,
    x: &[f64],
    v: &[f64],
) -> Vec<f64> {
    let model = problem.model;
    // Inertia weight 1/ĥ² (1/h² under implicit Euler, 0 in a static increment).
    let ih2 = problem.inertia;
    let nv = model.num_vertices();
    let out: Vec<Vector3<f64>> = (0..nv)
        .into_par_iter()
        .map(|i| {
            if model.pinned[i] {
                return Vector3::zeros();
            }
            let vi = Vector3::from_column_slice(&v[3 * i..3 * i + 3]);
            let mut y = vi * (model.mass[i] * ih2) + barrier_hessian(problem, x, i) * vi;
            for (t, c) in vt.of(i) {
                let tet = &model.mesh.tets[t as usize];
                let h = &cache.hess[t as usize];
                for (b, &w) in tet.iter().enumerate() {
                    let vw = Vector3::from_column_slice(&v[3 * w as usize..3 * w as usize + 3]);
                    y += h.fixed_view::<3, 3>(3 * c as usize, 3 * b) * vw;
                }
            }
            y
        })
        .collect();
    out.iter().flat_map(|y| [y.x, y.y, y.z]).collect()
}
