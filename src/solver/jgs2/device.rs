//! JGS2 / VBD over the device API ([`crate::gpu::Device`]): the same iteration as
//! [`Jgs2Solver`](super::Jgs2Solver) — the safeguarded step (minimising the quadratic model
//! over {primary direction, VBD step, previous step}, limited by the obstacles, Armijo
//! backtracking) whose primary direction is the JGS2 Jacobi step or a Gauss–Seidel sweep's
//! displacement; the plain Jacobi iteration; plain coloured Gauss–Seidel sweeps (VBD) — in f32
//! WGSL kernels on a GPU, or in their CPU twins with [`Device::cpu`].
//!
//! # On the device backend
//! This is [`Jgs2Backend`] for [`DeviceBackend`], the backend every device solver runs on: the
//! device, the body's [`DeviceModel`] (mesh data, step start, step constants: uploaded in one
//! place), the point pair with its contact records and the element energies and gradients are
//! the backend's; what only JGS2/VBD needs (below) is a `Jgs2State` in the backend's extension
//! slot, with a third point (the Gauss–Seidel scratch copy) and its own readback buffer, whose
//! layout (13 model dots, energy partials, bounds, the IPC sections) differs from the
//! backend's scalar slots. Its plans are its own: one per evaluation of a point, submitted
//! with that evaluation's one readback.
//!
//! # Data on the device
//! Positions relative to the rest centroid ([`DeviceJgs2::origin`]) as `vec4<f32>`, and the
//! step's start x_start alike; per vertex and obstacle a contact record of obstacle-relative
//! quantities (signed distance, offsets to the faces; [`GpuContact`]) computed in f64 at the
//! step's start and advanced with every move, so a vertex 1e-7 m above the ground keeps its
//! distance to f32 relative precision (positions relative to the centroid resolve only ~1e-8 m);
//! per vertex its surface triangles and per triangle its corners and surface mass
//! ([`SurfaceCsr`], only when the model has spheres or boxes) and per vertex its surface edges
//! ([`SurfaceEdgeCsr`], only with boxes); the element cache (energies,
//! gradients, PSD-projected 12×12 Hessians) of the `elastic` kernel; the assembled gradient g
//! (inertia + elastic + barrier, zero on pinned vertices), vertex energies and barrier Hessians
//! (`jgs2_vertex_terms`, then `jgs2_face_terms`); per-vertex rotations and the cluster-tree sums
//! and first moments of the rest-frame gradients (`jgs2_rotation`, `jgs2_tree_sum`; the moments
//! use the rest offsets from the subspace's own origin, [`Jgs2Subspace::origin`]; the
//! origin-shifted block's term and the raw moments' terms cancel by up to a node's distance from
//! the origin over its radius, a few tens for small nodes of a 1 m body: ~1e-5 relative in f32,
//! far below the far field's tolerance); the subspace packed into one u32 blob
//! ([`DeviceJgs2::pack_subspace`]). With the H-matrix far field (`Jgs2Subspace::far_hmatrix`)
//! its arrays and every S_i are packed, f32, into a second blob ([`DeviceJgs2::pack_hmatrix`],
//! layout in [`crate::gpu::twins::hmatrix`]) and each rotation of the frame is followed by one
//! H-matrix product for all vertices instead of the tree sums: `jgs2_hm_forward`
//! (w_c = Q_cᵀ ĝ_c, a thread per basis column), `jgs2_hm_coupling` (v_c = Σ S_IJ w_J, a gather
//! over the node's blocks: no atomics), `jgs2_hm_backward` (per tree position its leaf's dense
//! near rows plus Σ Q_c v_c from the leaf to the root, then S_i y_i − ĝ_i), whose per-vertex
//! sums `jgs2_system` adds as the CPU's `jgs2_system` adds `TreeFrame::far`.
//!
//! # Obstacles
//! As in the f64 reference ([`StepProblem`]): half-spaces and boxes act on vertices (the
//! point–plane and point–box barrier and time of impact per vertex, `jgs2_vertex_terms`,
//! `jgs2_combine`); spheres and boxes — which can slip between a surface's vertices — also act
//! through the surface, the reference's primitive pairs: a barrier per (triangle, sphere) pair on
//! their distance and per (box corner, triangle) pair, weighted κ·m_f/h² and gathered per vertex
//! over its triangles (`jgs2_face_terms`: gradient, a third of the energy, the Gauss–Newton
//! diagonal block), and per (surface edge, box edge) pair with IPC's mollifier, weighted
//! κ·m_e/h² and gathered per vertex over its surface edges (`jgs2_edge_terms`, half the energy
//! per end); each triangle's conservative time of impact against a sphere or a box (the
//! triangle–box distance over all its feature pairs, edges included) in the safeguarded step's
//! bound (`jgs2_face_bound`, folded into the per-vertex bounds before their max reduction; the
//! reference moves the triangles by the vertex-bounded step, the device by the whole step — both
//! bounds are conservative), and a vertex's own triangles' time of impact in its local-step
//! filter (`vertex_solve`, the reference's `vertex_surface_step`). The closest pairs are
//! computed from the corners' contact records (`shaders/shared/surface.wgsl`: offsets from a
//! sphere's centre or from a box's faces), so distances near contact keep their precision; the
//! edge–edge pair's segment distance is written out for the axis-aligned box edge, so that
//! near-parallel edges (where the general formula cancels) keep it too. As in the reference, the
//! plain Jacobi iteration filters each vertex's move alone (the other corners held) while all
//! move at once; the safeguarded iteration and Gauss–Seidel sweeps (whose colours never share a
//! triangle) are exact in that respect.
//!
//! IPC contact (body–body and self-contact over the collision mesh) is `device_ipc.rs`'s: its
//! barrier and lagged-friction terms join g, the local systems' blocks and the energies at
//! every evaluated point, and its step filter (trust boxes around one candidate list per step,
//! CCD of the combined step) joins the safeguarded step's bound; under IPC the safeguard stays
//! on (VBD included), and κ and friction follow Newton-IPC's schedule.
//!
//! # One iteration
//! The loop is [`Jgs2Solver`]'s, the same as the f64 reference's; [`DeviceBackend`]
//! implements its [`Jgs2Backend`] methods as one plan and one readback each:
//! `jgs2_begin`/`jgs2_evaluate` the state (and what `next` asks for) at x[cur], `jgs2_trial`
//! the combine (once per coefficients), the trial and the speculative evaluation below,
//! `jgs2_accept` only flips the ping-pong index (its readback is the trial's), `jgs2_plain` the
//! plain plans below.
//! * Safeguarded (default for JGS2): one plan — combine the step from the model's coefficients,
//!   bound it by the obstacles (`jgs2_combine`, `jgs2_face_bound` + a max reduction), trial
//!   positions (`jgs2_trial`), and, speculatively at the trial, the element pass, gradient, the
//!   primary direction (JGS2 local steps; or a Gauss–Seidel sweep run on a scratch copy of the
//!   trial, whose per-vertex local steps are its displacement), the VBD direction, three
//!   Hessian-vector products and all dot products — then one readback (residual, energy
//!   partials, dots, step bound, largest move). When Armijo accepts (the usual case) that
//!   readback is the next iteration's input; a rejected trial is re-run at half the step.
//! * Plain Jacobi: one plan (apply the local steps, re-evaluate, next local steps), one readback.
//! * Plain Gauss–Seidel (VBD): one plan for the sweep — per colour the local steps of its
//!   vertices, the update, a refresh of the elements it touched (`elastic_list`) and of the
//!   gradient — and one readback.
//!
//! JGS2 sweeps rotate once, at the sweep's start, as the reference does.
//!
//! # Energies
//! Energies are summed in f64 on the host from per-block f32 partials and, as the reference's
//! [`StepProblem::energy_change`], taken relative to the step's start: the inertia term per
//! vertex as ½m/ĥ²(x − x₀)·(x + x₀ − 2x̃) (`jgs2_vertex_terms`, never forming ½m/ĥ²|x − x̃|²,
//! whose constant ½‖h²g‖²_M is ~5e12 J for a 1 m body at h = 1e5 s), elastic and barrier terms
//! minus their device values at x_start. Trace energies are these changes (0 at the start). The
//! f32 sums carry ~1e-7 relative noise of the terms summed, so the line search accepts a change
//! within [`DeviceJgs2::ENERGY_SLACK`] × (|E − E₀| + Σ|block partials|) (the f64 reference uses
//! 1e-13 × its terms' magnitude), and the 3×3 model discards directions whose eigenvalue is
//! below [`DeviceJgs2::EIGEN_CUTOFF`] of the largest (f32 dots resolve no better; the reference
//! uses 1e-10). The report's `energy` and `energy_change` are the f64 values at the returned
//! positions.
//!
//! # Strict inversion
//! With [`StepProblem::strict_inversion`] (the strict retry of `inversion = "forbid"`) every
//! accepted iterate keeps every element's J above a floor: the `elastic` kernel writes a
//! sentinel energy (read as +∞) for an element with det F below min(1e-4,
//! ½·min J(x_start)) — one floor computed at upload, so an element already flatter than
//! 1e-4 can still move; the f64 reference's floor of 1e-8 is below what f32 resolves — and
//! the safeguard is forced on (VBD and plain JGS2 too), so the line search rejects every such
//! trial. The reference instead limits each move to a tenth
//! of the element's J (`strict_volume_floor`); the device's single floor is weaker per move but
//! holds for every iterate. J is evaluated in f32 (resolving ~1e-6): an element flatter than
//! that at x_start is not reliably protected — which is why the runner gives a device
//! simulation the f64 reference for forbid's strict retries (`SimOptions::strict_solver`);
//! this floor serves embedders who call the device solver directly.
//!
//! Static increments ([`StepProblem::new_static`]) are not supported on the device (the runner
//! falls back to the CPU).

use super::backend::{Jgs2Backend, Jgs2Sample, Jgs2StepFlags, Jgs2Trial, Next};
use super::device_ipc::DeviceIpc;
use super::solver::{Jgs2Params, Jgs2Solver, Variant};
use super::subspace::Jgs2Subspace;
use crate::error::{JelloError, Result};
use crate::gpu::abi::{
    DOTS_STRIDE, ELASTIC_DIAGONAL, ELASTIC_EXACT_SNH, ELASTIC_GRADIENT, ELASTIC_HESSIAN,
    ELASTIC_PROJECT, ELASTIC_STRICT, ELASTIC_STRICT_SENTINEL, FAR_HMATRIX, FAR_LINEAR,
    JGS2_DOTS_GD_ONLY, NODE_STRIDE, NO_CHILD, REDUCE_BLOCK, ROTATION_KEEP, SOLVE_PRIMARY,
    SOLVE_WITH_FALLBACK, ZERO_BLOCK,
};
use crate::gpu::layout::{GpuContact, GpuLocalSystem, GpuTreeNode};
use crate::gpu::model::{relative, relative_low, relative_one, upload_nonempty};
use crate::gpu::{
    Buf, BufferId, Device, DeviceInfo, DeviceModel, GpuMat3, GpuTet, GpuVec4, Kernel, Params, Plan,
    SurfaceCsr, SurfaceEdgeCsr,
};
use crate::mesh::{colour_vertices, VertexTets};
use crate::problem::{ElasticTerms, Model, Obstacle, StepProblem};
use crate::solver::backend::DeviceBackend;
use nalgebra::Matrix3;
use std::sync::Arc;

/// See [`DeviceJgs2::ENERGY_SLACK`].
const ENERGY_SLACK: f64 = 1e-6;

/// See [`DeviceJgs2::EIGEN_CUTOFF`].
const EIGEN_CUTOFF: f64 = 1e-6;

/// The device's strict-inversion floor on J (see [`strict_floor`]): far above the f64
/// reference's `STRICT_MIN_J` (1e-8), which f32's det F (~1e-6 resolution for unit-scale
/// deformation gradients) cannot resolve.
const DEVICE_STRICT_MIN_J: f64 = 1e-4;

/// See [`DeviceJgs2::SURFACE_THICKNESS`].
const SURFACE_THICKNESS: f64 = 1e-4;

const ALL_FLAGS: u32 = ELASTIC_GRADIENT | ELASTIC_HESSIAN | ELASTIC_PROJECT;
/// Index of the Gauss–Seidel scratch copy in `x` / `contacts`.
const SCRATCH: usize = 2;
/// 1/α at or above which a combined step is held nearly still: the trial then asks the host to
/// decide in f64 the pairs that hold it ([`DeviceIpc::certify_on_host`]) — f32 cannot certify
/// a pair closer than ~20ε of its size apart (time 0), nor much motion of one just above that.
const HOST_CCD_BOUND: f64 = 1.0 / HOST_CCD_TIME as f64;
/// The pair times the host decides again ([`DeviceIpc::certify_on_host`]).
const HOST_CCD_TIME: f32 = 1e-3;

/// A contiguous range of the device `lists` buffer.
#[derive(Clone, Copy, Debug, Default)]
struct Span {
    off: u32,
    len: u32,
}

/// One Gauss–Seidel colour: its free vertices and the elements they touch.
#[derive(Clone, Copy, Debug)]
struct Colour {
    verts: Span,
    elems: Span,
}

/// What one readback gives.
#[derive(Clone, Debug, Default)]
struct Sample {
    residual: f64,
    /// E(x) − E(x_start), J (+∞ when a term is: a barrier, or an element below the strict
    /// floor).
    energy: f64,
    /// Σ |block partial| of the element and vertex energies, J: the scale of the f32 round-off
    /// in `energy`.
    magnitude: f64,
    max_dx: f64,
    /// 1 / the obstacle step bound of the combined step (≥ 1).
    bound: f64,
    /// 1 / the IPC trust boxes' own bound of the combined step (≥ 1; IPC only).
    trust: f64,
    /// The smallest squared IPC pair distance within d̂ at the evaluated point, m² (+∞: none).
    min_dsq: f64,
    dots: [f64; 13],
}

/// Offsets of the readback buffer's sections.
#[derive(Clone, Copy, Debug)]
struct Readback {
    dot_groups: usize,
    e_elem: usize,
    n_elem: usize,
    e_vert: usize,
    n_vert: usize,
    dx: usize,
    alpha: usize,
    /// IPC: the trust boxes' bound and the smallest pair distance (reciprocals).
    trust: usize,
    min_dsq: usize,
    /// The IPC pair energies' partials (barrier, then friction), sized per step.
    e_ipc: usize,
    n_ipc: usize,
    len: usize,
}

/// The JGS2 subspace of every vertex packed into the u32 blob of the `jgs2_system` kernel (see
/// `shaders/jgs2_system.wgsl` for the layout). Incident 12×3 blocks are stored as references to
/// the near-field (or extra) 3×3 blocks they consist of, so they cost 5 words each. Errors when
/// the subspace does not match the model.
fn pack_subspace(model: &Model, sub: &Jgs2Subspace) -> Result<Vec<u32>> {
    let nv = model.num_vertices();
    if sub.vertices.len() != nv {
        return Err(JelloError::Solver(format!(
            "JGS2 subspace has {} vertices, the model {nv}",
            sub.vertices.len()
        )));
    }
    let vt = VertexTets::new(&model.mesh);
    let mut blob = vec![0u32; 4 * nv];
    let f = |v: f64| (v as f32).to_bits();
    for (v, vs) in sub.vertices.iter().enumerate() {
        let off = blob.len();
        let pinned = model.pinned[v];
        let n_inc = if pinned { 0 } else { vs.incident.len() };
        let (n_near, n_far) = if pinned {
            (0, 0)
        } else {
            (vs.near.len(), vs.far.len())
        };
        if !pinned && n_inc != vt.of(v).count() {
            return Err(JelloError::Solver(format!(
                "JGS2 subspace: vertex {v} has {n_inc} incident blocks but {} incident elements",
                vt.of(v).count()
            )));
        }
        // First-order far samples carry 27 slope words after their block (flagged in the
        // count's top bit; samples without slopes then get zeros).
        let linear = vs.far.iter().take(n_far).any(|f| f.slopes.is_some());
        if n_far >= FAR_HMATRIX as usize {
            return Err(JelloError::Solver(format!(
                "JGS2 subspace: vertex {v} has {n_far} far samples"
            )));
        }
        blob[4 * v] = off as u32;
        blob[4 * v + 1] = n_inc as u32;
        blob[4 * v + 2] = n_near as u32;
        // With the H-matrix field the far samples are replaced by one word: where in `frame`
        // `jgs2_hm_backward` leaves this vertex's sum S_i (G ĝ)_i − ĝ_i.
        let hm = !pinned && sub.far_hmatrix.is_some();
        blob[4 * v + 3] =
            n_far as u32 | if linear { FAR_LINEAR } else { 0 } | if hm { FAR_HMATRIX } else { 0 };
        blob.extend(vs.a_hat.iter().map(|&a| f(a)));
        blob.push(f(model.mass[v]));
        let inc0 = blob.len();
        blob.resize(inc0 + 5 * n_inc, 0);
        let near0 = blob.len();
        let mut near_of = std::collections::HashMap::new();
        for (k, (j, b)) in vs.near.iter().take(n_near).enumerate() {
            if *j as usize >= nv {
                return Err(JelloError::Solver(format!(
                    "JGS2 subspace: vertex {v}'s near vertex {j} is out of range"
                )));
            }
            near_of.entry(*j).or_insert(k);
            blob.push(*j);
            blob.extend(b.iter().map(|&a| f(a)));
        }
        for fs in vs.far.iter().take(n_far) {
            if fs.node as usize >= sub.tree.len() {
                return Err(JelloError::Solver(format!(
                    "JGS2 subspace: vertex {v}'s far node {} is not in the tree",
                    fs.node
                )));
            }
            blob.push(fs.node);
            blob.extend(fs.block.iter().map(|&a| f(a)));
            if linear {
                blob.extend(fs.slopes.unwrap_or([0.0; 27]).iter().map(|&a| f(a)));
            }
        }
        if hm {
            blob.push((hm_far_base(nv, sub.tree.len()) + v) as u32);
        }
        // Incident entries: corner blocks point at an identical near block when there is one,
        // else at an extra block appended after the far field.
        let mut extras: Vec<(u32, [f64; 9], usize)> = Vec::new();
        for (t, ((e, corner), ub)) in vt.of(v).zip(&vs.incident).take(n_inc).enumerate() {
            let q = inc0 + 5 * t;
            blob[q] = 4 * e + corner as u32;
            let tet = model.mesh.tets[e as usize];
            for (c, &w) in tet.iter().enumerate() {
                let mut blk = [0.0; 9];
                for d in 0..3 {
                    for col in 0..3 {
                        blk[3 * d + col] = ub[(3 * c + d) * 3 + col];
                    }
                }
                let word = if blk.iter().all(|&a| a == 0.0) {
                    ZERO_BLOCK
                } else if let Some(&k) = near_of.get(&w).filter(|&&k| vs.near[k].1 == blk) {
                    (near0 + 10 * k + 1) as u32
                } else if let Some(&(_, _, at)) =
                    extras.iter().find(|(ev, eb, _)| *ev == w && *eb == blk)
                {
                    at as u32
                } else {
                    let at = blob.len() + 1;
                    blob.push(w);
                    blob.extend(blk.iter().map(|&a| f(a)));
                    extras.push((w, blk, at));
                    at as u32
                };
                blob[q + 1 + c] = word;
            }
        }
        if blob.len() >= u32::MAX as usize {
            return Err(JelloError::Solver(
                "JGS2 subspace: packed data exceeds 2³² words".into(),
            ));
        }
    }
    Ok(blob)
}

/// The H-matrix far field packed for the `jgs2_hm_*` kernels ([`DeviceJgs2::pack_hmatrix`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PackedHMatrix {
    /// The `hm` blob (layout in [`crate::gpu::twins::hmatrix`]).
    pub blob: Vec<u32>,
    /// Basis columns `Σ_c k_c`: the items of `jgs2_hm_forward` and `jgs2_hm_coupling`, and the
    /// offset of the `v` half of `hw` (which holds `2·n_cols` floats).
    pub n_cols: u32,
    /// Tree positions (free vertices): the items of `jgs2_hm_backward`.
    pub n_perm: u32,
}

/// Packs `far` over `tree` (its S_i for `nv` vertices) into the `hm` blob, checking every array
/// length and offset it copies (a subspace built in memory is not validated like an artifact).
fn pack_hmatrix(
    tree: &jello_precompute::tree::ClusterTree,
    far: &super::subspace::HFarField,
    nv: usize,
) -> Result<PackedHMatrix> {
    use crate::gpu::abi::{HM_HEADER, HM_NODE_WORDS, HM_NONE, HM_PAIR_WORDS};
    let h = &far.matrix;
    let nn = tree.len();
    let bad = |m: String| JelloError::Solver(format!("JGS2 H-matrix: {m}"));
    // The H-matrix's own structure (offsets, ids, ranks, per-node lists) as the artifact reader
    // checks it; then what the kernels assume beyond it: one S_i per vertex, tree positions on
    // vertices, and parents before their children (the backward walk up the tree ends).
    h.check(tree).map_err(bad)?;
    if far.schur.len() != nv || tree.perm.iter().any(|&v| v as usize >= nv) {
        return Err(bad(format!(
            "{} Schur blocks or a tree position for a tree over {nv} vertices",
            far.schur.len()
        )));
    }
    if let Some(c) = (0..nn).find(|&c| tree.parent[c] != u32::MAX && tree.parent[c] as usize >= c) {
        return Err(bad(format!("node {c}'s parent does not precede it")));
    }
    let n_perm = tree.perm.len();
    let n_cols: usize = h.rank.iter().map(|&k| k as usize).sum();
    let blocks_off = HM_HEADER + HM_NODE_WORDS * nn;
    let pairs_off = blocks_off + HM_PAIR_WORDS * h.blocks.len();
    let nblist_off = pairs_off + HM_PAIR_WORDS * h.near_pairs.len();
    let nnlist_off = nblist_off + h.node_blocks.len();
    let leaf_off = nnlist_off + h.node_near.len();
    let schur_off = leaf_off + n_perm;
    let cols_off = schur_off + 9 * nv;
    let basis_off = cols_off + 2 * n_cols;
    let coupling_off = basis_off + h.basis.len();
    let near_off = coupling_off + h.coupling.len();
    let total = near_off + h.near.len();
    if total >= u32::MAX as usize {
        return Err(bad(format!("{total} words exceed 2³²")));
    }
    let f = |v: f64| (v as f32).to_bits();
    let mut blob = Vec::with_capacity(total);
    blob.extend(
        [
            nn, n_perm, n_cols, blocks_off, pairs_off, leaf_off, schur_off, cols_off,
        ]
        .map(|x| x as u32),
    );
    let mut wv = 0usize;
    for c in 0..nn {
        blob.extend(
            [
                tree.start[c] as usize,
                tree.end[c] as usize,
                if tree.parent[c] == u32::MAX {
                    HM_NONE as usize
                } else {
                    tree.parent[c] as usize
                },
                h.rank[c] as usize,
                basis_off + h.basis_ptr[c],
                wv,
                nblist_off + h.node_block_ptr[c],
                nblist_off + h.node_block_ptr[c + 1],
                nnlist_off + h.node_near_ptr[c],
                nnlist_off + h.node_near_ptr[c + 1],
            ]
            .map(|x| x as u32),
        );
        wv += h.rank[c] as usize;
    }
    for (b, &(i, j)) in h.blocks.iter().enumerate() {
        blob.extend([i, j, (coupling_off + h.coupling_ptr[b]) as u32]);
    }
    for (b, &(i, j)) in h.near_pairs.iter().enumerate() {
        blob.extend([i, j, (near_off + h.near_ptr[b]) as u32]);
    }
    blob.extend_from_slice(&h.node_blocks);
    blob.extend_from_slice(&h.node_near);
    let mut leaf_at = vec![HM_NONE; n_perm];
    for c in 0..nn {
        if tree.children[c].is_none() {
            for p in tree.start[c]..tree.end[c] {
                if let Some(l) = leaf_at.get_mut(p as usize) {
                    *l = c as u32;
                }
            }
        }
    }
    if leaf_at.contains(&HM_NONE) {
        return Err(bad("a tree position is in no leaf".into()));
    }
    blob.extend_from_slice(&leaf_at);
    for s in &far.schur {
        blob.extend(s.iter().map(|&x| f(x)));
    }
    for c in 0..nn {
        for a in 0..h.rank[c] {
            blob.extend([c as u32, a]);
        }
    }
    blob.extend(h.basis.iter().map(|&x| f(x)));
    blob.extend(h.coupling.iter().map(|&x| f(x)));
    blob.extend(h.near.iter().map(|&x| f(x)));
    debug_assert_eq!(blob.len(), total);
    Ok(PackedHMatrix {
        blob,
        n_cols: n_cols as u32,
        n_perm: n_perm as u32,
    })
}

/// Index in the `frame` buffer of vertex 0's H-matrix far sum: after the `nv` rest-frame
/// gradients and the `NODE_STRIDE` entries of each of the `n_nodes` tree nodes (at least one,
/// as allocated).
fn hm_far_base(nv: usize, n_nodes: usize) -> usize {
    nv + NODE_STRIDE * n_nodes.max(1)
}

/// The H-matrix far field on the device.
#[derive(Clone, Copy)]
struct HmBufs {
    /// The packed blob ([`PackedHMatrix::blob`]).
    blob: Buf<u32>,
    /// `w_c` then `v_c` (2·n_cols floats).
    hw: Buf<f32>,
    n_cols: u32,
    n_perm: u32,
    /// Where the far sums start in `frame` ([`hm_far_base`]).
    far_base: u32,
}

/// The device's terms at a point ([`DeviceJgs2::terms_at_start`]).
#[doc(hidden)]
#[derive(Clone, Debug)]
pub struct DeviceTerms {
    /// The assembled gradient (N, flat, zero on pinned vertices).
    pub gradient: Vec<f64>,
    /// Per vertex the barrier Hessian block its local system adds (N/m): obstacle barriers
    /// and the diagonal blocks of its IPC pairs' Hessians (the barrier's PSD-projected,
    /// friction's).
    pub barrier_hessians: Vec<Matrix3<f64>>,
    /// The energy (J): elastic, obstacle and IPC barriers, friction; the inertia term is
    /// relative to x_start.
    pub energy: f64,
}

/// JGS2 (with a subspace) or VBD (without) on a [`Device`], the solver.
pub type DeviceJgs2 = Jgs2Solver<DeviceBackend>;

/// JGS2 / VBD's state on a [`DeviceBackend`] (in its extension slot; see the module docs):
/// everything the backend does not hold. Built by [`DeviceJgs2::new`].
struct Jgs2State {
    variant: Variant,
    has_subspace: bool,
    num_colours: usize,
    // Static data.
    /// Vertex → (tet, corner) CSR packed as `tet·4 + corner` ([`VertexTets::packed`]).
    packed: Buf<u32>,
    lists: Buf<u32>,
    blob: Option<Buf<u32>>,
    nodes: Option<Buf<GpuTreeNode>>,
    perm: Option<Buf<u32>>,
    /// Rest offsets from the subspace origin (first moments of the far field).
    rest: Option<Buf<GpuVec4>>,
    /// The H-matrix far field (`Jgs2Subspace::far_hmatrix`).
    hm: Option<HmBufs>,
    /// Per vertex its surface triangles and the triangles (corners, surface mass), empty when
    /// the model has no sphere or box (`bounded` false).
    vfaces: Buf<u32>,
    tris: Buf<GpuTet>,
    /// Per vertex its surface edges and the edges (ends, mass share, squared rest length),
    /// empty when the model has no box (`boxed` false).
    vedges: Buf<u32>,
    edges: Buf<GpuTet>,
    /// Whether the model has spheres or boxes (their barrier and filters act on the surface).
    bounded: bool,
    /// Whether the model has boxes (their edges act on the surface edges, `jgs2_edge_terms`).
    boxed: bool,
    /// The longest surface edge, m (how far from a sphere or box a vertex's triangle reaches).
    surface_reach: f64,
    /// The separation the surface filters keep between triangles and spheres or boxes, m
    /// ([`DeviceJgs2::SURFACE_THICKNESS`] × d̂).
    thickness: f32,
    // State and scratch.
    /// The Gauss–Seidel scratch copy of a point (positions, contact records): the third of
    /// [`Cx::x`] after the backend's current and trial points.
    scratch_x: Buf<GpuVec4>,
    scratch_contacts: Buf<GpuContact>,
    /// Under IPC contact, per point of [`Cx::x`] its fine parts: each position is its step
    /// start's f32 value plus its fine part (the start's low part plus the displacement since),
    /// which `jgs2_apply` and `jgs2_trial_fine` keep and the contact kernels read
    /// (`device_ipc.rs`, "Data"). One-entry placeholders without IPC.
    fine: [Buf<GpuVec4>; 3],
    /// The step start's f32 positions (the coarse parts of the fine ones), kept on the host.
    coarse: Vec<GpuVec4>,
    sweep_dxn: Buf<f32>,
    hess: Buf<f32>,
    g: Buf<GpuVec4>,
    venergy: Buf<f32>,
    hbar: Buf<GpuMat3>,
    fmat: Option<Buf<GpuMat3>>,
    rot: Option<Buf<GpuMat3>>,
    frame: Option<Buf<GpuVec4>>,
    sys: Buf<GpuLocalSystem>,
    dirs: Buf<GpuVec4>,
    hd: Buf<GpuVec4>,
    step: Buf<GpuVec4>,
    bound: Buf<f32>,
    dxn: Buf<f32>,
    readback: Buf<f32>,
    rb: Readback,
    free: Span,
    colours: Vec<Colour>,
    levels: Vec<Span>,
    /// The step's strict-inversion floor on J (`None`: not strict).
    strict_floor: Option<f32>,
    /// The element pass's flags this step: [`ALL_FLAGS`], plus [`ELASTIC_EXACT_SNH`] and
    /// [`ELASTIC_DIAGONAL`] under plain VBD (the exact diagonal blocks, as the CPU's `vbd_sweep`
    /// uses, and only those).
    elem_flags: u32,
    /// The device energy at x_start (elastic + barrier), subtracted from every sample's, J.
    e_ref: f64,
    /// The current point's readback.
    s: Sample,
    /// The last trial's readback, what it evaluated and its step α (of `step`).
    pending: Option<(Sample, Next, f64)>,
    /// The coefficients `step` holds from x[cur], their bound α₀ (1/the readback's) and the
    /// IPC trust boxes' own bound (1 without IPC), if any.
    combined: Option<([f64; 3], f64, f64)>,
    /// IPC contact's pair terms (`device_ipc.rs`), with [`Model::contact`].
    ipc: Option<DeviceIpc>,
}

/// The backend's parts a [`Jgs2State`] method works on ([`DeviceBackend::parts`]), with the
/// scratch point appended to the point pair.
struct Cx<'a> {
    dev: &'a mut Device,
    m: &'a mut DeviceModel,
    /// Current and trial positions (ping-pong by `cur`) and the Gauss–Seidel scratch copy.
    x: [Buf<GpuVec4>; 3],
    contacts: [Buf<GpuContact>; 3],
    /// Which of `x` holds the current point (the other of the first two the trial).
    cur: usize,
    energy: Buf<f32>,
    egrad: Buf<GpuVec4>,
}

fn span(lists: &mut Vec<u32>, items: impl IntoIterator<Item = u32>) -> Span {
    let off = lists.len() as u32;
    lists.extend(items);
    Span {
        off,
        len: lists.len() as u32 - off,
    }
}

impl Jgs2Solver<DeviceBackend> {
    /// Relative energy allowance of the line search: a trial is accepted when
    /// E₁ ≤ E₀ + 1e-4·α·slope + `ENERGY_SLACK`·(|E₀| + M₀), with E the energy change since the
    /// step's start and M₀ = Σ |block partial| of the element and vertex energies at the current
    /// iterate (the magnitude of the terms summed; |E₀| alone is ~0 near the start). Each term is
    /// an f32 value (~6e-8 relative) summed in f32 blocks of 1024, so two states whose true
    /// energies differ by less than ~1e-7·M cannot be ordered; 1e-6 keeps a converging iteration
    /// from stalling on that noise while still rejecting any real increase above it.
    pub const ENERGY_SLACK: f64 = ENERGY_SLACK;
    /// Relative eigenvalue cut-off of the 3×3 subspace model (the f64 reference uses 1e-10).
    /// The model's matrix dᵢᵀHdⱼ, scaled to unit diagonal, is assembled from f32 products summed
    /// in f32 blocks, so its entries carry ~1e-7..1e-6 absolute error: an eigenvalue below 1e-6
    /// of the largest says the directions are dependent to within that noise, and its direction
    /// gets coefficient 0. (A larger cut-off drops real directions: before the unit scaling,
    /// cutting at 1e-5 changed a VBD coefficient on a ball dropped on the ground from 2.5 to 0.07
    /// and stalled the iteration.)
    pub const EIGEN_CUTOFF: f64 = EIGEN_CUTOFF;
    /// The separation (× d̂) the device's surface filters keep between a triangle and a sphere
    /// or box (`face_toi`'s thickness; the f64 reference keeps none). f32 corner offsets of a few
    /// cm resolve a triangle's distance to ~1e-9 m, and an iteration that walks a contact gap
    /// below that (each filtered move may close 90% of it) can leave a triangle inside the
    /// obstacle in f64; 1e-4·d̂ (3.5e-8 m for a 20 cm ball at the default d̂) is far above that
    /// and far below the barrier's resting distances (~1e-6 m there).
    pub const SURFACE_THICKNESS: f64 = SURFACE_THICKNESS;

    /// The subspace packed as the `jgs2_system` kernel's u32 blob (layout in
    /// `shaders/jgs2_system.wgsl`): incident 12×3 blocks are stored as references to the
    /// near-field (or extra) 3×3 blocks they consist of, 5 words each. Errors when the subspace
    /// does not match the model.
    pub fn pack_subspace(model: &Model, sub: &Jgs2Subspace) -> Result<Vec<u32>> {
        pack_subspace(model, sub)
    }

    /// The subspace's H-matrix far field packed for the `jgs2_hm_*` kernels (`None` without
    /// one). Errors when its arrays are inconsistent with the tree or the model.
    pub fn pack_hmatrix(model: &Model, sub: &Jgs2Subspace) -> Result<Option<PackedHMatrix>> {
        sub.far_hmatrix
            .as_ref()
            .map(|far| pack_hmatrix(&sub.tree, far, model.num_vertices()))
            .transpose()
    }

    /// Uploads `model` (and the subspace: JGS2; `None`: VBD) to `device`. Errors when the
    /// subspace does not match the model or a buffer exceeds the device's storage-binding limit
    /// (the error names the buffer).
    pub fn new(
        device: Device,
        model: &Model,
        params: Jgs2Params,
        subspace: Option<Arc<Jgs2Subspace>>,
    ) -> Result<Self> {
        let has_subspace = subspace.is_some();
        let mut backend = DeviceBackend::new(device, model)?;
        let state = Jgs2State::new(&mut backend, model, params.variant, subspace)?;
        *backend.extension_mut() = Some(Box::new(state));
        Ok(Jgs2Solver::from_backend(
            model,
            backend,
            params,
            has_subspace,
        ))
    }

    /// The device (GPU or CPU twins).
    pub fn device(&self) -> &Device {
        self.backend().device()
    }

    /// Begins `problem`'s step and returns the device's terms at x_start, for tests against
    /// the f64 [`StepProblem`].
    #[doc(hidden)]
    pub fn terms_at_start(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
    ) -> Result<DeviceTerms> {
        let flags = Jgs2StepFlags {
            safeguard: false,
            energy: true,
        };
        self.backend_mut()
            .jgs2_begin(problem, elastic, flags, Next::Plain)?;
        with_state(self.backend_mut(), |s, cx| s.terms(cx))
    }

    /// Which adapter (or the CPU) runs the iterations.
    pub fn info(&self) -> &DeviceInfo {
        self.backend().device().info()
    }
    /// How often the last step rebuilt its IPC candidate list (a trust box cut a step short;
    /// each rebuild is a position readback), 0 without IPC contact: for tests and benches.
    #[doc(hidden)]
    pub fn contact_list_rebuilds(&self) -> usize {
        state(self.backend())
            .and_then(|s| s.ipc.as_ref())
            .map_or(0, |i| i.rebuilds())
    }
    /// How many contact pairs the last step decided in f64 on the host because the f32 CCD
    /// could not certify their start apart (closer than ~20ε of their size), 0 without IPC
    /// contact: for tests and benches.
    #[doc(hidden)]
    pub fn host_decided_pairs(&self) -> usize {
        state(self.backend())
            .and_then(|s| s.ipc.as_ref())
            .map_or(0, |i| i.host_decided())
    }
    /// The point positions on the device are relative to (the rest centroid), m.
    pub fn origin(&self) -> [f64; 3] {
        self.backend().origin()
    }
    /// The GPU position buffer (`None` on the CPU twins): `array<vec4<f32>>`, 16-byte stride,
    /// xyz = position − [`origin`](Self::origin) in metres, w = 0, usage STORAGE | VERTEX |
    /// COPY_SRC | COPY_DST. After [`crate::solver::StepSolver::step`] it holds the step's result.
    pub fn positions_buffer(&self) -> Option<&wgpu::Buffer> {
        self.backend().positions_buffer()
    }
}

/// The JGS2 state in `b`'s extension slot (`None` before [`DeviceJgs2::new`] put it there).
fn state(b: &DeviceBackend) -> Option<&Jgs2State> {
    b.extension().as_deref().and_then(|e| e.downcast_ref())
}

/// Runs `f` on `b`'s JGS2 state and the backend's parts (the scratch point appended to its
/// point pair), keeping the backend's current-point index in step.
fn with_state<R>(
    b: &mut DeviceBackend,
    f: impl FnOnce(&mut Jgs2State, &mut Cx<'_>) -> Result<R>,
) -> Result<R> {
    let (parts, ext) = b.parts();
    let s: &mut Jgs2State = ext
        .as_deref_mut()
        .and_then(|e| e.downcast_mut())
        .ok_or_else(|| {
            JelloError::Solver("device backend: the JGS2 state was not set up".into())
        })?;
    let mut cx = Cx {
        dev: parts.dev,
        m: parts.m,
        x: [parts.x[0], parts.x[1], s.scratch_x],
        contacts: [parts.contacts[0], parts.contacts[1], s.scratch_contacts],
        cur: *parts.cur,
        energy: parts.energy,
        egrad: parts.egrad,
    };
    let r = f(s, &mut cx);
    *parts.cur = cx.cur;
    r
}

impl Jgs2Backend for DeviceBackend {
    fn jgs2_num_colours(&self) -> usize {
        state(self).map_or(0, |s| s.num_colours)
    }

    fn jgs2_plain_moves_filtered(&self, problem: &StepProblem) -> bool {
        state(self).is_some_and(|s| s.jgs2_plain_moves_filtered(problem))
    }

    fn jgs2_eigen_cutoff(&self) -> f64 {
        EIGEN_CUTOFF
    }

    fn jgs2_begin(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        flags: Jgs2StepFlags,
        next: Next,
    ) -> Result<Jgs2Sample> {
        with_state(self, |s, cx| {
            s.jgs2_begin(cx, problem, elastic, flags, next)
        })
    }

    fn jgs2_evaluate(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        next: Next,
    ) -> Result<Jgs2Sample> {
        with_state(self, |s, cx| s.jgs2_evaluate(cx, problem, elastic, next))
    }

    fn jgs2_plain(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
    ) -> Result<Jgs2Sample> {
        with_state(self, |s, cx| s.jgs2_plain(cx, problem, elastic))
    }

    fn jgs2_trial(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        coef: [f64; 3],
        scale: f64,
        next: Next,
    ) -> Result<Jgs2Trial> {
        with_state(self, |s, cx| {
            s.jgs2_trial(cx, problem, elastic, coef, scale, next)
        })
    }

    fn jgs2_accept(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
    ) -> Result<Jgs2Sample> {
        with_state(self, |s, cx| s.jgs2_accept(cx, problem, elastic))
    }

    fn jgs2_raise_stiffness(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        prev_min_sq: &mut f64,
        next: Next,
    ) -> Result<Option<Jgs2Sample>> {
        with_state(self, |s, cx| {
            s.jgs2_raise_stiffness(cx, problem, elastic, prev_min_sq, next)
        })
    }

    fn jgs2_lag_friction(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        next: Next,
    ) -> Result<Option<Jgs2Sample>> {
        with_state(self, |s, cx| {
            s.jgs2_lag_friction(cx, problem, elastic, next)
        })
    }

    fn jgs2_slack(&self, problem: &StepProblem, elastic: &dyn ElasticTerms, e: f64) -> f64 {
        state(self).map_or(0.0, |s| s.jgs2_slack(problem, elastic, e))
    }

    fn jgs2_current(&mut self, x: &mut Vec<f64>) -> Result<()> {
        with_state(self, |s, cx| s.jgs2_current(cx, x))
    }

    fn jgs2_finish(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        x: &mut Vec<f64>,
    ) -> Result<()> {
        with_state(self, |s, cx| s.jgs2_finish(cx, problem, elastic, x))
    }
}

impl Jgs2State {
    /// See [`DeviceJgs2::new`]: the state on `b`'s device for `b`'s model.
    fn new(
        b: &mut DeviceBackend,
        model: &Model,
        variant: Variant,
        subspace: Option<Arc<Jgs2Subspace>>,
    ) -> Result<Self> {
        let (parts, _) = b.parts();
        let (dev, m) = (parts.dev, &*parts.m);
        let (nv, ne) = (m.nv, m.ne);
        let vt = VertexTets::new(&model.mesh);
        let packed = vt.packed();
        let nc = m.contacts_per_vertex();
        // Lists: free vertices, per colour its free vertices and touched elements, tree levels.
        let mut lists = Vec::new();
        let free = span(
            &mut lists,
            (0..nv as u32).filter(|&v| !model.pinned[v as usize]),
        );
        let colouring = colour_vertices(&model.mesh);
        let mut colours = Vec::new();
        for grp in &colouring.groups {
            let verts: Vec<u32> = grp
                .iter()
                .copied()
                .filter(|&v| !model.pinned[v as usize])
                .collect();
            if verts.is_empty() {
                continue;
            }
            let mut touched: Vec<u32> = verts
                .iter()
                .flat_map(|&i| vt.of(i as usize).map(|(t, _)| t))
                .collect();
            touched.sort_unstable();
            touched.dedup();
            colours.push(Colour {
                verts: span(&mut lists, verts),
                elems: span(&mut lists, touched),
            });
        }
        let bounded = model.obstacles.iter().any(|o| o.is_bounded());
        let surface = if bounded {
            SurfaceCsr::new(model)?
        } else {
            SurfaceCsr::empty(nv)
        };
        let boxed = model
            .obstacles
            .iter()
            .any(|o| matches!(o, Obstacle::Box { .. }));
        let surface_edges = if boxed {
            SurfaceEdgeCsr::new(model)?
        } else {
            SurfaceEdgeCsr::empty(nv)
        };
        let mut levels = Vec::new();
        let (mut blob_buf, mut nodes_buf, mut perm_buf, mut rest_buf) = (None, None, None, None);
        let mut hm = None;
        if let Some(sub) = &subspace {
            let tree = &sub.tree;
            let mut depth = vec![0usize; tree.len()];
            for c in 0..tree.len() {
                let p = tree.parent[c];
                if p != u32::MAX {
                    depth[c] = depth[p as usize] + 1;
                }
            }
            let max_depth = depth.iter().copied().max().unwrap_or(0);
            for d in (0..=max_depth).rev() {
                let s = span(
                    &mut lists,
                    (0..tree.len() as u32).filter(|&c| depth[c as usize] == d),
                );
                if s.len > 0 {
                    levels.push(s);
                }
            }
            let nodes: Vec<GpuTreeNode> = (0..tree.len())
                .map(|c| {
                    let (l, r) = tree.children[c].unwrap_or((NO_CHILD, NO_CHILD));
                    [tree.start[c], tree.end[c], l, r]
                })
                .collect();
            let blob = pack_subspace(model, sub)?;
            blob_buf = Some(dev.upload("JGS2 subspace", &blob)?);
            nodes_buf = Some(dev.upload("JGS2 cluster tree", &nodes)?);
            let perm = if tree.perm.is_empty() {
                vec![0]
            } else {
                tree.perm.clone()
            };
            perm_buf = Some(dev.upload("JGS2 cluster permutation", &perm)?);
            let rest: Vec<GpuVec4> = sub
                .rest
                .iter()
                .map(|r| relative_one([r.x, r.y, r.z], [0.0; 3]))
                .collect();
            if rest.len() != nv {
                return Err(JelloError::Solver(format!(
                    "JGS2 subspace has {} rest offsets for {nv} vertices",
                    rest.len()
                )));
            }
            let rest = if rest.is_empty() {
                vec![[0.0; 4]]
            } else {
                rest
            };
            rest_buf = Some(dev.upload("JGS2 rest offsets", &rest)?);
            if let Some(far) = &sub.far_hmatrix {
                let packed = pack_hmatrix(tree, far, nv)?;
                hm = Some(HmBufs {
                    blob: dev.upload("JGS2 H-matrix", &packed.blob)?,
                    hw: dev.alloc("JGS2 H-matrix w and v", 2 * packed.n_cols.max(1) as usize)?,
                    n_cols: packed.n_cols,
                    n_perm: packed.n_perm,
                    far_base: hm_far_base(nv, tree.len()) as u32,
                });
            }
        }
        if lists.is_empty() {
            lists.push(0);
        }
        let gv = nv.div_ceil(REDUCE_BLOCK).max(1);
        let pe = ne.div_ceil(REDUCE_BLOCK).max(1);
        let pv = gv;
        let rb = Readback {
            dot_groups: gv,
            e_elem: DOTS_STRIDE * gv,
            n_elem: pe,
            e_vert: DOTS_STRIDE * gv + pe,
            n_vert: pv,
            dx: DOTS_STRIDE * gv + pe + pv,
            alpha: DOTS_STRIDE * gv + pe + 2 * pv,
            trust: DOTS_STRIDE * gv + pe + 2 * pv + 1,
            min_dsq: DOTS_STRIDE * gv + pe + 2 * pv + 2,
            e_ipc: DOTS_STRIDE * gv + pe + 2 * pv + 3,
            n_ipc: 0,
            len: DOTS_STRIDE * gv + pe + 2 * pv + 3,
        };
        let ipc = match &model.contact {
            Some(c) => Some(DeviceIpc::new(dev, c.clone(), m.origin, &model.pinned)?),
            None => None,
        };
        let jgs2 = subspace.is_some();
        let n_nodes = subspace.as_ref().map_or(0, |s| s.tree.len());
        let has_hm = hm.is_some();
        let d = dev;
        let s = Jgs2State {
            variant,
            has_subspace: jgs2,
            num_colours: colouring.num_colours(),
            packed: upload_nonempty(d, "csr packed", &packed)?,
            lists: d.upload("vertex and element lists", &lists)?,
            blob: blob_buf,
            nodes: nodes_buf,
            perm: perm_buf,
            rest: rest_buf,
            hm,
            vfaces: d.upload("surface triangles per vertex", &surface.vfaces)?,
            tris: d.upload("surface triangles", &surface.tris)?,
            vedges: d.upload("surface edges per vertex", &surface_edges.vedges)?,
            edges: d.upload("surface edges", &surface_edges.edges)?,
            bounded,
            boxed,
            surface_reach: longest_surface_edge(model),
            scratch_x: d.alloc("sweep positions", nv.max(1))?,
            scratch_contacts: d.alloc("sweep contact records", nc * nv.max(1))?,
            fine: {
                let n = if ipc.is_some() { nv.max(1) } else { 1 };
                [
                    d.alloc("position fine parts", n)?,
                    d.alloc("trial position fine parts", n)?,
                    d.alloc("sweep position fine parts", n)?,
                ]
            },
            coarse: Vec::new(),
            sweep_dxn: d.alloc("sweep vertex moves", nv.max(1))?,
            hess: d.alloc("element Hessians", 144 * ne.max(1))?,
            g: d.alloc("gradient", nv.max(1))?,
            venergy: d.alloc("vertex energies", nv.max(1))?,
            hbar: d.alloc("barrier Hessians", nv.max(1))?,
            fmat: if jgs2 {
                Some(d.alloc("deformation gradients", ne.max(1))?)
            } else {
                None
            },
            rot: if jgs2 {
                Some(d.alloc("rotations", nv.max(1))?)
            } else {
                None
            },
            frame: if jgs2 {
                // With the H-matrix field, each vertex's far sum after the node entries.
                Some(d.alloc(
                    "rest-frame gradients and node moments",
                    hm_far_base(nv, n_nodes) + if has_hm { nv } else { 0 },
                )?)
            } else {
                None
            },
            sys: d.alloc("local systems", nv.max(1))?,
            dirs: d.alloc("directions", 3 * nv.max(1))?,
            hd: d.alloc("Hessian-direction products", 3 * nv.max(1))?,
            step: d.alloc("step", nv.max(1))?,
            bound: d.alloc("obstacle bounds", DeviceIpc::bound_len(nv).max(1))?,
            dxn: d.alloc("vertex moves", nv.max(1))?,
            readback: d.alloc("readback", rb.len)?,
            rb,
            free,
            colours,
            levels,
            strict_floor: None,
            elem_flags: ALL_FLAGS,
            e_ref: 0.0,
            s: Sample::default(),
            pending: None,
            combined: None,
            thickness: (SURFACE_THICKNESS * model.barrier.dhat) as f32,
            ipc,
        };
        Ok(s)
    }

    /// The direction slots the safeguard's model uses: primary (JGS2 step or Gauss–Seidel
    /// sweep), VBD step (JGS2 only), previous step.
    fn model_slots(&self) -> &'static [usize] {
        if self.has_subspace {
            &[0, 1, 2]
        } else {
            &[0, 2]
        }
    }

    // ------------------------------------------------------------ recording

    /// Element pass at x[xb]: energies, gradients, projected Hessians of every element (under
    /// the strict filter, the sentinel energy for elements below the floor).
    fn rec_elements(&self, cx: &Cx, p: &mut Plan, xb: usize) {
        let params = match self.strict_floor {
            Some(floor) => Params::new().u0(self.elem_flags | ELASTIC_STRICT).f0(floor),
            None => Params::new().u0(self.elem_flags),
        };
        p.dispatch(
            Kernel::Elastic,
            &[
                cx.x[xb].id(),
                cx.m.tets.id(),
                cx.m.dm_inv.id(),
                cx.m.elem.id(),
                cx.energy.id(),
                cx.egrad.id(),
                self.hess.id(),
            ],
            params,
            cx.m.ne as u32,
        );
    }

    /// Gathered gradient + vertex terms (inertia, half-space and box barrier, mask) at x[xb],
    /// then the surface barrier against spheres and boxes (triangles, then the boxes' edges).
    fn rec_vertex(&self, cx: &Cx, p: &mut Plan, xb: usize) {
        let nv = cx.m.nv as u32;
        p.dispatch(
            Kernel::GatherGradient,
            &[
                cx.egrad.id(),
                cx.m.offsets.id(),
                cx.m.csr_tets.id(),
                cx.m.csr_local.id(),
                self.g.id(),
            ],
            Params::new(),
            nv,
        );
        p.dispatch(
            Kernel::Jgs2VertexTerms,
            &[
                cx.x[xb].id(),
                cx.m.x_tilde.id(),
                cx.m.x_start.id(),
                cx.m.vinfo.id(),
                cx.contacts[xb].id(),
                self.g.id(),
                self.venergy.id(),
                self.hbar.id(),
            ],
            Params {
                f0: cx.m.step.inertia,
                f1: cx.m.step.kappa,
                f2: cx.m.step.dhat,
                f3: cx.m.step.barrier_ih2,
                ..Params::default()
            },
            nv,
        );
        // The surface kernels (triangles against spheres and box corners, then surface edges
        // against box edges) share their bindings' shape and their parameters.
        let surface = Params {
            f1: cx.m.step.kappa,
            f2: cx.m.step.dhat,
            f3: cx.m.step.barrier_ih2,
            ..Params::default()
        };
        for (on, kernel, rows, items) in [
            (
                self.bounded,
                Kernel::Jgs2FaceTerms,
                &self.vfaces,
                &self.tris,
            ),
            (self.boxed, Kernel::Jgs2EdgeTerms, &self.vedges, &self.edges),
        ] {
            if on {
                p.dispatch(
                    kernel,
                    &[
                        cx.contacts[xb].id(),
                        rows.id(),
                        items.id(),
                        cx.m.vinfo.id(),
                        self.g.id(),
                        self.venergy.id(),
                        self.hbar.id(),
                    ],
                    surface,
                    nv,
                );
            }
        }
        if let Some(ipc) = &self.ipc {
            ipc.rec_terms(p, &self.fine[xb], &self.g, &self.hbar);
        }
    }

    /// The full state at x[xb]: element cache, gradient, vertex terms.
    fn rec_state(&self, cx: &Cx, p: &mut Plan, xb: usize) {
        self.rec_elements(cx, p, xb);
        self.rec_vertex(cx, p, xb);
    }

    /// Rest-frame gradients and tree sums with the current g; with `rotate`, the rotations at
    /// x[xb] first (else the ones in `rot` are kept).
    fn rec_frame(&self, cx: &Cx, p: &mut Plan, xb: usize, rotate: bool) {
        let (Some(fm), Some(rot), Some(frame), Some(nodes), Some(perm), Some(rest)) = (
            self.fmat, self.rot, self.frame, self.nodes, self.perm, self.rest,
        ) else {
            return;
        };
        if rotate {
            p.dispatch(
                Kernel::DeformationGradient,
                &[cx.x[xb].id(), cx.m.tets.id(), cx.m.dm_inv.id(), fm.id()],
                Params::new(),
                cx.m.ne as u32,
            );
        }
        p.dispatch(
            Kernel::Jgs2Rotation,
            &[
                fm.id(),
                cx.m.elem.id(),
                cx.m.offsets.id(),
                cx.m.csr_tets.id(),
                self.g.id(),
                rot.id(),
                frame.id(),
            ],
            Params::new().u0(if rotate { 0 } else { ROTATION_KEEP }),
            cx.m.nv as u32,
        );
        if let Some(hm) = &self.hm {
            // The H-matrix field replaces the node fits: no far sample reads the tree sums.
            self.rec_hmatrix(p, hm, frame, perm);
            return;
        }
        for l in &self.levels {
            p.dispatch(
                Kernel::Jgs2TreeSum,
                &[
                    self.lists.id(),
                    nodes.id(),
                    perm.id(),
                    rest.id(),
                    frame.id(),
                ],
                Params {
                    u0: cx.m.nv as u32,
                    u1: l.off,
                    ..Params::default()
                },
                l.len,
            );
        }
    }

    /// Every vertex's H-matrix far sum `S_i (G ĝ)_i − ĝ_i` from the frame's rest-frame
    /// gradients, into the frame after the node entries: forward, coupling, backward.
    fn rec_hmatrix(&self, p: &mut Plan, h: &HmBufs, frame: Buf<GpuVec4>, perm: Buf<u32>) {
        let (hm, hw, n_cols, n_perm) = (h.blob, h.hw, h.n_cols, h.n_perm);
        if n_cols > 0 {
            p.dispatch(
                Kernel::Jgs2HmForward,
                &[hm.id(), perm.id(), frame.id(), hw.id()],
                Params::new(),
                n_cols,
            );
            p.dispatch(
                Kernel::Jgs2HmCoupling,
                &[hm.id(), hw.id()],
                Params::new().u0(n_cols),
                n_cols,
            );
        }
        if n_perm > 0 {
            p.dispatch(
                Kernel::Jgs2HmBackward,
                &[hm.id(), perm.id(), hw.id(), frame.id()],
                Params {
                    u0: n_cols,
                    u1: h.far_base,
                    ..Params::default()
                },
                n_perm,
            );
        }
    }

    /// JGS2 systems (with their VBD fallbacks) of `list`, from the current frame.
    fn rec_jgs2_system(&self, cx: &Cx, p: &mut Plan, list: Span) {
        let (Some(blob), Some(rot), Some(frame)) = (self.blob, self.rot, self.frame) else {
            return;
        };
        p.dispatch(
            Kernel::Jgs2System,
            &[
                self.lists.id(),
                blob.id(),
                self.g.id(),
                rot.id(),
                frame.id(),
                self.hess.id(),
                self.sys.id(),
            ],
            Params {
                u0: cx.m.nv as u32,
                u1: list.off,
                f0: cx.m.step.inertia,
                ..Params::default()
            },
            list.len,
        );
    }

    /// VBD systems of `list`.
    fn rec_vbd_system(&self, cx: &Cx, p: &mut Plan, list: Span) {
        p.dispatch(
            Kernel::VbdSystem,
            &[
                self.lists.id(),
                cx.m.vinfo.id(),
                self.g.id(),
                self.hess.id(),
                cx.m.offsets.id(),
                self.packed.id(),
                self.sys.id(),
            ],
            Params {
                u1: list.off,
                f0: cx.m.step.inertia,
                ..Params::default()
            },
            list.len,
        );
    }

    /// Solves the systems of `list` (mode: `SOLVE_*`), filtered by the contacts of x[xb] (each
    /// vertex and, against spheres and boxes, its surface triangles), into dirs slot `slot`.
    fn rec_solve(&self, cx: &Cx, p: &mut Plan, xb: usize, list: Span, mode: u32, slot: u32) {
        p.dispatch(
            Kernel::VertexSolve,
            &[
                self.lists.id(),
                self.sys.id(),
                self.hbar.id(),
                cx.contacts[xb].id(),
                self.vfaces.id(),
                self.tris.id(),
                self.dirs.id(),
            ],
            Params {
                u0: mode | (slot << 4),
                u1: list.off,
                f3: self.thickness,
                ..Params::default()
            },
            list.len,
        );
    }

    /// The local steps of `list` at x[xb] into dirs slot 0: JGS2 (VBD fallback) with the frame
    /// (`rotate`: rotations at x[xb]; else kept), or VBD without a subspace.
    fn rec_local(&self, cx: &Cx, p: &mut Plan, xb: usize, list: Span, rotate: bool) {
        if list.len == 0 {
            return;
        }
        if self.has_subspace {
            self.rec_frame(cx, p, xb, rotate);
            self.rec_jgs2_system(cx, p, list);
            self.rec_solve(cx, p, xb, list, SOLVE_WITH_FALLBACK, 0);
        } else {
            self.rec_vbd_system(cx, p, list);
            self.rec_solve(cx, p, xb, list, SOLVE_PRIMARY, 0);
        }
    }

    /// The VBD (block-Jacobi) direction of every free vertex at x[xb] into dirs slot 1.
    fn rec_vbd_direction(&self, cx: &Cx, p: &mut Plan, xb: usize) {
        if self.free.len > 0 && self.has_subspace {
            self.rec_vbd_system(cx, p, self.free);
            self.rec_solve(cx, p, xb, self.free, SOLVE_PRIMARY, 1);
        }
    }

    /// One Gauss–Seidel sweep on x[xb] (in place): colour by colour the local steps at the
    /// current iterate (rotations once, at the sweep's start), applied at once, then the touched
    /// elements and the gradient refreshed. Per-vertex moves go to `dxn`.
    fn rec_sweep(&self, cx: &Cx, p: &mut Plan, xb: usize, dxn: Buf<f32>) {
        for (k, c) in self.colours.iter().enumerate() {
            self.rec_local(cx, p, xb, c.verts, k == 0);
            self.rec_apply(cx, p, xb, c.verts, dxn);
            p.dispatch(
                Kernel::ElasticList,
                &[
                    cx.x[xb].id(),
                    cx.m.tets.id(),
                    cx.m.dm_inv.id(),
                    cx.m.elem.id(),
                    self.lists.id(),
                    cx.energy.id(),
                    cx.egrad.id(),
                    self.hess.id(),
                ],
                Params {
                    u0: self.elem_flags,
                    u1: c.elems.off,
                    ..Params::default()
                },
                c.elems.len,
            );
            self.rec_vertex(cx, p, xb);
        }
    }

    /// Dot products into the readback: with `hvp`, the three Hessian-vector products first and
    /// all 13 dots; else only g·g.
    fn rec_dots(&self, cx: &Cx, p: &mut Plan, hvp: bool) {
        let nv = cx.m.nv as u32;
        let nd = if hvp {
            p.dispatch(
                Kernel::HessVec,
                &[
                    self.hess.id(),
                    cx.m.tets.id(),
                    cx.m.offsets.id(),
                    self.packed.id(),
                    cx.m.vinfo.id(),
                    self.hbar.id(),
                    self.dirs.id(),
                    self.hd.id(),
                ],
                Params {
                    u0: 3,
                    f0: cx.m.step.inertia,
                    ..Params::default()
                },
                nv,
            );
            if let Some(ipc) = &self.ipc {
                ipc.rec_hess_vec(p, &self.dirs, &self.hd, 3);
            }
            3
        } else {
            0
        };
        self.rec_dots_dispatch(cx, p, nd);
    }

    /// The dots of the cut safeguard's plain trial: ‖g‖² and g·δ of the primary direction only
    /// (`jgs2_dots` with [`JGS2_DOTS_GD_ONLY`]: no Hessian products).
    fn rec_dots_plain(&self, cx: &Cx, p: &mut Plan) {
        self.rec_dots_dispatch(cx, p, 1 | JGS2_DOTS_GD_ONLY);
    }

    /// `jgs2_dots` into the readback with the direction count (and flags) `u0`.
    fn rec_dots_dispatch(&self, cx: &Cx, p: &mut Plan, u0: u32) {
        p.dispatch(
            Kernel::Jgs2Dots,
            &[
                self.g.id(),
                self.dirs.id(),
                self.hd.id(),
                cx.m.res_weight.id(),
                self.readback.id(),
            ],
            Params::new().u0(u0),
            cx.m.nv as u32,
        );
    }

    /// Energy partials (elements, vertices) and the per-vertex move maximum into the readback.
    fn rec_energy(&self, cx: &Cx, p: &mut Plan) {
        self.rec_energy_partials(cx, p);
        self.rec_into_readback(p, Kernel::ReduceMaxAbs, self.dxn.id(), cx.m.nv, self.rb.dx);
    }

    /// The element and vertex energy partials into the readback.
    fn rec_energy_partials(&self, cx: &Cx, p: &mut Plan) {
        self.rec_into_readback(
            p,
            Kernel::ReduceSum,
            cx.energy.id(),
            cx.m.ne,
            self.rb.e_elem,
        );
        self.rec_into_readback(
            p,
            Kernel::ReduceSum,
            self.venergy.id(),
            cx.m.nv,
            self.rb.e_vert,
        );
        if let Some(ipc) = &self.ipc {
            ipc.rec_energy_partials(p, self.readback.id(), self.rb.e_ipc);
            ipc.rec_min_distance(p, &self.readback, self.rb.min_dsq);
        }
    }

    /// The first pass of reduction `k` over `a[0..n]` into the readback at `at` (the host sums
    /// the partials in f64).
    fn rec_into_readback(&self, p: &mut Plan, k: Kernel, a: BufferId, n: usize, at: usize) {
        p.dispatch(
            k,
            &[a, self.readback.id()],
            Params::new().u0(at as u32),
            n as u32,
        );
    }

    /// What a guarded iteration needs at x[xb]: with `model` everything a safeguarded
    /// iteration needs (the state, the primary direction — Jacobi: the JGS2/VBD local steps;
    /// Gauss–Seidel: a sweep from x[xb] on the scratch copy —, the VBD direction,
    /// Hessian-vector products, dots, energy), without it what the cut safeguard's plain trial needs
    /// (state, primary direction, ‖g‖² and g·δ, energy).
    fn rec_eval_guarded(&self, cx: &Cx, p: &mut Plan, xb: usize, model: bool) {
        // The per-vertex moves of this iteration (the trial's) are reduced before a sweep
        // overwrites anything.
        self.rec_into_readback(p, Kernel::ReduceMaxAbs, self.dxn.id(), cx.m.nv, self.rb.dx);
        self.rec_state(cx, p, xb);
        match self.variant {
            Variant::Jacobi => {
                self.rec_local(cx, p, xb, self.free, true);
            }
            Variant::GaussSeidel => {
                p.copy(&cx.x[xb], 0, &cx.x[SCRATCH], 0, cx.m.nv);
                if self.ipc.is_some() {
                    p.copy(&self.fine[xb], 0, &self.fine[SCRATCH], 0, cx.m.nv);
                }
                p.copy(
                    &cx.contacts[xb],
                    0,
                    &cx.contacts[SCRATCH],
                    0,
                    cx.contacts[xb].len(),
                );
                self.rec_sweep(cx, p, SCRATCH, self.sweep_dxn);
                // Back to the state at x[xb] (the sweep refreshed the cache at the scratch).
                self.rec_state(cx, p, xb);
            }
        }
        if model {
            self.rec_vbd_direction(cx, p, xb);
            self.rec_dots(cx, p, true);
        } else {
            self.rec_dots_plain(cx, p);
        }
        self.rec_energy_partials(cx, p);
    }

    /// The step Σ coef_k·dirs_k from x[cur] into `step`, and its obstacle bound's maximum
    /// into the readback (the trial's α0 = 1/bound).
    fn rec_combine(&self, cx: &Cx, p: &mut Plan, cur: usize, coef: [f64; 3]) {
        p.dispatch(
            Kernel::Jgs2Combine,
            &[
                self.dirs.id(),
                cx.contacts[cur].id(),
                self.step.id(),
                self.bound.id(),
            ],
            Params {
                f0: coef[0] as f32,
                f1: coef[1] as f32,
                f2: coef[2] as f32,
                ..Params::default()
            },
            cx.m.nv as u32,
        );
        if self.bounded {
            p.dispatch(
                Kernel::Jgs2FaceBound,
                &[
                    self.step.id(),
                    cx.contacts[cur].id(),
                    self.vfaces.id(),
                    self.tris.id(),
                    self.bound.id(),
                ],
                Params {
                    f3: self.thickness,
                    ..Params::default()
                },
                cx.m.nv as u32,
            );
        }
        let n = match &self.ipc {
            Some(ipc) => {
                ipc.rec_step_bound(
                    p,
                    &cx.x[cur],
                    &self.fine[cur],
                    &self.step,
                    &self.bound,
                    &self.readback,
                    self.rb.trust,
                );
                DeviceIpc::bound_len(cx.m.nv)
            }
            None => cx.m.nv,
        };
        p.max_abs(&self.bound, n as u32, &self.readback, self.rb.alpha as u32);
    }

    fn rec_trial(&self, cx: &Cx, p: &mut Plan, from: usize, scale: f64) {
        p.dispatch(
            Kernel::Jgs2Trial,
            &[
                cx.x[from].id(),
                self.step.id(),
                self.readback.id(),
                cx.contacts[from].id(),
                cx.x[1 - from].id(),
                cx.contacts[1 - from].id(),
                self.dirs.id(),
                self.dxn.id(),
            ],
            Params {
                u1: self.rb.alpha as u32,
                f0: scale as f32,
                ..Params::default()
            },
            cx.m.nv as u32,
        );
        if self.ipc.is_some() {
            // The trial's fine parts, from the move `jgs2_trial` wrote.
            p.dispatch(
                Kernel::Jgs2TrialFine,
                &[
                    self.fine[from].id(),
                    self.dirs.id(),
                    self.fine[1 - from].id(),
                ],
                Params::default(),
                cx.m.nv as u32,
            );
        }
    }

    /// x[xb] += the local steps (dirs slot 0) of `list`, their contact records advanced, the
    /// per-vertex moves into `dxn` (the whole steps: `jgs2_apply` with f0 = f1 = 1).
    fn rec_apply(&self, cx: &Cx, p: &mut Plan, xb: usize, list: Span, dxn: Buf<f32>) {
        p.dispatch(
            Kernel::Jgs2Apply,
            &[
                self.lists.id(),
                self.dirs.id(),
                cx.x[xb].id(),
                cx.contacts[xb].id(),
                dxn.id(),
                self.fine[xb].id(),
            ],
            Params {
                u0: self.ipc.is_some() as u32,
                u1: list.off,
                f0: 1.0,
                f1: 1.0,
                ..Params::default()
            },
            list.len,
        );
    }

    fn run(&mut self, cx: &mut Cx, p: &Plan) -> Result<Sample> {
        cx.dev.submit(p)?;
        let r = cx.dev.read(&self.readback)?;
        let rb = self.rb;
        let sum = |a: usize, n: usize| r[a..a + n].iter().map(|&v| v as f64).sum::<f64>();
        let mut dots = [0.0f64; 13];
        for blk in 0..rb.dot_groups {
            for (j, d) in dots.iter_mut().enumerate() {
                *d += r[DOTS_STRIDE * blk + j] as f64;
            }
        }
        // A NaN gradient (a vertex or triangle on an obstacle) must not read as residual 0.
        let norm = if dots[0].is_nan() {
            f64::NAN
        } else {
            dots[0].max(0.0).sqrt()
        };
        let ipc_parts = &r[rb.e_ipc..rb.e_ipc + rb.n_ipc];
        let parts = || {
            r[rb.e_elem..rb.e_elem + rb.n_elem]
                .iter()
                .chain(&r[rb.e_vert..rb.e_vert + rb.n_vert])
                .chain(ipc_parts)
        };
        // An element below the strict floor wrote the sentinel, or an IPC pair touches: the
        // state is infeasible.
        let sentinel = r[rb.e_elem..rb.e_elem + rb.n_elem]
            .iter()
            .any(|&v| v >= 0.5 * ELASTIC_STRICT_SENTINEL)
            || self.ipc.as_ref().is_some_and(|ipc| ipc.touching(ipc_parts));
        let energy =
            sum(rb.e_elem, rb.n_elem) + sum(rb.e_vert, rb.n_vert) + sum(rb.e_ipc, rb.n_ipc);
        Ok(Sample {
            residual: if cx.m.char_scale > 0.0 {
                norm / cx.m.char_scale
            } else {
                norm
            },
            energy: if sentinel {
                f64::INFINITY
            } else {
                energy - self.e_ref
            },
            magnitude: parts().map(|&v| (v as f64).abs()).sum(),
            max_dx: r[rb.dx..rb.dx + rb.n_vert]
                .iter()
                .fold(0.0f64, |m, &v| m.max(v as f64)),
            bound: r[rb.alpha] as f64,
            trust: r[rb.trust] as f64,
            min_dsq: self
                .ipc
                .as_ref()
                .map_or(f64::INFINITY, |ipc| ipc.min_distance_sq(r[rb.min_dsq])),
            dots,
        })
    }

    fn upload_step(&mut self, cx: &mut Cx, problem: &StepProblem) -> Result<()> {
        let model = problem.model;
        let (x0, c0) = (cx.x[0], cx.contacts[0]);
        cx.m.begin_step(cx.dev, problem, &x0, &c0, "DeviceJgs2")?;
        cx.dev
            .write(&self.dirs, 0, &vec![[0.0f32; 4]; 3 * cx.m.nv])?;
        cx.dev.write(&self.dxn, 0, &vec![0.0f32; cx.m.nv])?;
        self.strict_floor = if problem.strict_inversion {
            strict_floor(model, &problem.x_start)
        } else {
            None
        };
        self.e_ref = 0.0;
        if let Some(ipc) = &mut self.ipc {
            self.coarse = relative(&problem.x_start, cx.m.origin);
            let fine = relative_low(&problem.x_start, cx.m.origin);
            cx.dev.write(&self.fine[0], 0, &fine)?;
            ipc.begin_step(cx.dev, problem)?;
        }
        self.fit_readback(cx)
    }

    /// Sizes the readback's IPC energy section to the current pair lists.
    fn fit_readback(&mut self, cx: &mut Cx) -> Result<()> {
        let Some(ipc) = &self.ipc else {
            return Ok(());
        };
        let n = ipc.partials();
        if self.readback.len() < self.rb.e_ipc + n {
            let len = self.rb.e_ipc + n;
            let old = std::mem::replace(&mut self.readback, cx.dev.alloc("readback", len)?);
            cx.dev.free(old);
            self.rb.len = len;
        }
        self.rb.n_ipc = n;
        Ok(())
    }
}

/// The longest edge of the model's surface triangles, m (0 without a surface).
fn longest_surface_edge(model: &Model) -> f64 {
    let p = |v: u32| model.mesh.positions[v as usize];
    model
        .surface
        .triangles
        .iter()
        .flat_map(|t| [(t[0], t[1]), (t[1], t[2]), (t[2], t[0])])
        .map(|(a, b)| {
            let (a, b) = (p(a), p(b));
            ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
        })
        .fold(0.0, f64::max)
}

/// The device's strict-inversion floor on J for a step from `x_start`: min([`DEVICE_STRICT_MIN_J`],
/// ½·min_e J_e(x_start)), one floor for every element (the f64 filter's per-element
/// `strict_volume_floor` would need a per-element buffer the elastic kernels have no binding
/// for), so an element already flatter than the constant may still move. `None` (not enforced)
/// when an element is inverted at x_start: the f64 filter exempts such elements, a single floor
/// cannot.
fn strict_floor(model: &Model, x_start: &[f64]) -> Option<f32> {
    let min_j = (0..model.mesh.num_tets())
        .map(|t| model.element_j(x_start, t))
        .fold(f64::INFINITY, f64::min);
    (min_j > 0.0).then(|| DEVICE_STRICT_MIN_J.min(0.5 * min_j) as f32)
}

impl Jgs2State {
    /// The current point in f64 (3n, m): the f32 positions plus the origin, each vertex within
    /// reach of an obstacle placed by its contact record ([`Self::rebuild_from_records`]).
    fn current_positions(&mut self, cx: &mut Cx) -> Result<Vec<f64>> {
        let records = if cx.m.obstacles.is_empty() {
            Vec::new()
        } else {
            cx.dev.read(&cx.contacts[cx.cur])?
        };
        let mut x = self.read_current(cx)?;
        self.rebuild_from_records(cx, &mut x, &records);
        Ok(x)
    }

    /// Rebuilds the f64 positions of the vertices near an obstacle from their contact records.
    ///
    /// In contact the barrier's equilibrium distance can be ~1e-8 m (a ball thrown at 30 m/s
    /// onto the ground at the default d̂), the resolution of f32 positions relative to the
    /// centroid: the device keeps such distances positive in its obstacle-relative records, but
    /// the f32 positions may put the vertex on the wrong side, and the f64 energy of the result
    /// would be +∞. Each vertex within reach of an obstacle — d < d̂ for a half-space, d < d̂ +
    /// the longest surface edge for a sphere or box (their triangles reach between far corners)
    /// — takes its nearest record's distance: along the half-space's normal, along its ray from
    /// the sphere's centre (radius R + d), or per axis within that reach of a box face (the
    /// offset from that face). Only the record's precise components replace the position's; the
    /// move is of the order of the f32 position resolution, and the position buffer keeps the
    /// f32 iterate.
    fn rebuild_from_records(&self, cx: &Cx, x: &mut [f64], records: &[GpuContact]) {
        let nc = cx.m.obstacles.len();
        if nc == 0 || records.len() < nc * cx.m.nv {
            return;
        }
        let dhat = cx.m.step.dhat as f64;
        for v in 0..cx.m.nv {
            let mut best: Option<(usize, f64)> = None;
            for (o, c) in records[v * nc..v * nc + nc].iter().enumerate() {
                let d = crate::gpu::twins::jgs2::contact_distance(c).d as f64;
                let reach = if cx.m.obstacles[o].is_bounded() {
                    dhat + self.surface_reach
                } else {
                    dhat
                };
                if d < reach && best.is_none_or(|(_, b)| d < b) {
                    best = Some((o, d));
                }
            }
            let Some((o, d)) = best else { continue };
            let c = &records[v * nc + o];
            let p = &mut x[3 * v..3 * v + 3];
            match &cx.m.obstacles[o] {
                Obstacle::HalfSpace { normal, offset } => {
                    let now = (0..3).map(|k| normal[k] * p[k]).sum::<f64>() - offset;
                    for k in 0..3 {
                        p[k] += normal[k] * (d - now);
                    }
                }
                Obstacle::Sphere { center, radius } => {
                    let r = [0, 1, 2].map(|k| p[k] - center[k]);
                    let len = (r[0] * r[0] + r[1] * r[1] + r[2] * r[2]).sqrt();
                    if len > 0.0 {
                        for k in 0..3 {
                            p[k] = center[k] + r[k] / len * (radius + d);
                        }
                    }
                }
                Obstacle::Box { min, max } => {
                    let reach = dhat + self.surface_reach;
                    for k in 0..3 {
                        let (lo, hi) = (c.a[k] as f64, c.b[k] as f64);
                        if lo <= hi && lo.abs() < reach {
                            p[k] = min[k] + lo;
                        } else if hi < lo && hi.abs() < reach {
                            p[k] = max[k] - hi;
                        }
                    }
                }
            }
        }
    }
}

impl Jgs2State {
    /// The current point's positions (3n, m, f64): under IPC contact the step start's f32
    /// positions plus the fine parts (the f32 iterate rounds with its distance from the
    /// origin), else the iterate; plus the origin.
    fn read_current(&mut self, cx: &mut Cx) -> Result<Vec<f64>> {
        if self.ipc.is_none() {
            return self.read_positions(cx, cx.x[cx.cur], true);
        }
        let fine = cx.dev.read(&self.fine[cx.cur])?;
        let o = cx.m.origin;
        Ok(self
            .coarse
            .iter()
            .zip(fine.iter())
            .take(cx.m.nv)
            .flat_map(|(c, f)| (0..3).map(move |k| o[k] + (c[k] as f64 + f[k] as f64)))
            .collect())
    }

    /// The model positions of `buf` (one of `x`, or `step` for displacements), f64, with the
    /// origin added when `absolute`.
    fn read_positions(
        &mut self,
        cx: &mut Cx,
        buf: Buf<GpuVec4>,
        absolute: bool,
    ) -> Result<Vec<f64>> {
        let v = cx.dev.read(&buf)?;
        let shift = if absolute { cx.m.origin } else { [0.0; 3] };
        Ok(v.iter()
            .take(cx.m.nv)
            .flat_map(|p| (0..3).map(move |k| p[k] as f64 + shift[k]))
            .collect())
    }

    /// Evaluates the current point again (after κ or the friction pairs changed).
    fn reevaluate(&mut self, cx: &mut Cx, next: Next) -> Result<Jgs2Sample> {
        let mut p = Plan::new();
        self.rec_eval_guarded(cx, &mut p, cx.cur, next == Next::Model);
        let s = self.run(cx, &p)?;
        self.combined = None;
        let out = self.public(&s, next, f64::INFINITY);
        self.s = s;
        Ok(out)
    }

    /// The current point's terms ([`DeviceJgs2::terms_at_start`]).
    fn terms(&mut self, cx: &mut Cx) -> Result<DeviceTerms> {
        let g = cx.dev.read(&self.g)?;
        let gradient = g
            .iter()
            .take(cx.m.nv)
            .flat_map(|p| (0..3).map(move |k| p[k] as f64))
            .collect();
        let h = cx.dev.read(&self.hbar)?;
        let barrier_hessians = h
            .iter()
            .take(cx.m.nv)
            .map(|m| Matrix3::from_fn(|r, c| m.get(r, c) as f64))
            .collect();
        Ok(DeviceTerms {
            gradient,
            barrier_hessians,
            energy: self.s.energy + self.e_ref,
        })
    }

    /// The loop's view of a readback taken for `next`.
    fn public(&self, s: &Sample, next: Next, max_move: f64) -> Jgs2Sample {
        let mut out = Jgs2Sample {
            residual: s.residual,
            energy: s.energy,
            max_move,
            // Positions never leave the device inside a step; a non-finite iterate shows as a
            // non-finite gradient, and `jgs2_finish` checks the positions it reads.
            finite: true,
            ..Jgs2Sample::default()
        };
        let slots: &[usize] = match next {
            Next::Plain => &[],
            Next::Primary => &[0],
            Next::Model => self.model_slots(),
        };
        for &p in slots {
            out.present[p] = true;
            out.gd[p] = s.dots[1 + p];
            if next == Next::Model {
                for &q in slots {
                    out.dhd[p][q] = 0.5 * (s.dots[4 + 3 * p + q] + s.dots[4 + 3 * q + p]);
                }
            }
        }
        out
    }
}

/// The loop's steps on the state: [`Jgs2Backend`]'s methods for [`DeviceBackend`] call these.
impl Jgs2State {
    fn jgs2_plain_moves_filtered(&self, problem: &StepProblem) -> bool {
        !problem.strict_inversion && self.ipc.is_none()
    }

    fn jgs2_begin(
        &mut self,
        cx: &mut Cx,
        problem: &StepProblem,
        _elastic: &dyn ElasticTerms,
        flags: Jgs2StepFlags,
        next: Next,
    ) -> Result<Jgs2Sample> {
        self.upload_step(cx, problem)?;
        let safeguard = flags.safeguard;
        // Plain VBD (no subspace, Gauss–Seidel, no safeguard) reads only the diagonal blocks,
        // exact where PSD by construction (the CPU's `vbd_sweep`, `element_local_corner`), so
        // the element passes write only those; every other iteration needs the whole projected
        // Hessian (JGS2's system, the safeguard's curvature).
        self.elem_flags =
            if !self.has_subspace && self.variant == Variant::GaussSeidel && !safeguard {
                ALL_FLAGS | ELASTIC_EXACT_SNH | ELASTIC_DIAGONAL
            } else {
                ALL_FLAGS
            };
        let mut p = Plan::new();
        if safeguard {
            self.rec_eval_guarded(cx, &mut p, 0, next == Next::Model);
        } else {
            self.rec_state(cx, &mut p, 0);
            if self.variant == Variant::Jacobi {
                self.rec_local(cx, &mut p, 0, self.free, true);
            }
            self.rec_dots(cx, &mut p, false);
            self.rec_energy(cx, &mut p);
        }
        let mut s = self.run(cx, &p)?;
        // Energies from here on are relative to the start's (its inertia term is 0 by
        // construction; elastic and barrier are subtracted), as the f64 reference's
        // `energy_change`. An infeasible start (an f32 barrier or the strict floor) has no
        // reference: any finite trial then passes the energy test.
        if s.energy.is_finite() {
            self.e_ref = s.energy;
            s.energy = 0.0;
        }
        cx.cur = 0;
        self.pending = None;
        self.combined = None;
        let out = self.public(&s, next, f64::INFINITY);
        self.s = s;
        Ok(out)
    }

    fn jgs2_evaluate(
        &mut self,
        cx: &mut Cx,
        _problem: &StepProblem,
        _elastic: &dyn ElasticTerms,
        next: Next,
    ) -> Result<Jgs2Sample> {
        self.reevaluate(cx, next)
    }

    fn jgs2_plain(
        &mut self,
        cx: &mut Cx,
        _problem: &StepProblem,
        _elastic: &dyn ElasticTerms,
    ) -> Result<Jgs2Sample> {
        if self.ipc.is_some() {
            // `jgs2_ipc_filters_plain_moves` is false: the loop keeps the safeguard on.
            return Err(JelloError::Solver(
                "DeviceJgs2: a plain step with IPC contact (its moves are filtered only in the \
                 safeguarded step)"
                    .into(),
            ));
        }
        // One plan: apply the local steps, re-evaluate, the next local steps (Jacobi); or the
        // sweep (Gauss–Seidel); then the dots and energies, one readback.
        let mut p = Plan::new();
        match self.variant {
            Variant::Jacobi => {
                self.rec_apply(cx, &mut p, 0, self.free, self.dxn);
                self.rec_state(cx, &mut p, 0);
                self.rec_local(cx, &mut p, 0, self.free, true);
            }
            Variant::GaussSeidel => self.rec_sweep(cx, &mut p, 0, self.dxn),
        }
        self.rec_dots(cx, &mut p, false);
        self.rec_energy(cx, &mut p);
        let s = self.run(cx, &p)?;
        let out = self.public(&s, Next::Plain, s.max_dx);
        self.s = s;
        Ok(out)
    }

    fn jgs2_trial(
        &mut self,
        cx: &mut Cx,
        problem: &StepProblem,
        _elastic: &dyn ElasticTerms,
        coef: [f64; 3],
        scale: f64,
        next: Next,
    ) -> Result<Jgs2Trial> {
        // One plan: the combined step and its bound (once per coefficients), the trial
        // positions, and speculatively at the trial what the next iteration needs there.
        let mut p = Plan::new();
        let fresh = self.combined.is_none_or(|(c, _, _)| c != coef);
        if fresh {
            self.rec_combine(cx, &mut p, cx.cur, coef);
        }
        self.rec_trial(cx, &mut p, cx.cur, scale);
        self.rec_eval_guarded(cx, &mut p, 1 - cx.cur, next == Next::Model);
        let mut t = self.run(cx, &p)?;
        if fresh && self.ipc.is_some() && t.bound >= HOST_CCD_BOUND {
            // Pairs held the step nearly still: decide them in f64 (`certify_on_host`) and,
            // where that certifies more, redo the bound and the trial.
            let held = self
                .ipc
                .as_ref()
                .expect("checked above")
                .held_pairs(cx.dev, HOST_CCD_TIME)?;
            // The positions and the step are read only when a pair holds the step.
            let grown = if held.is_empty() {
                0
            } else {
                let x = self.read_current(cx)?;
                let step = self.read_positions(cx, self.step, false)?;
                let ipc = self.ipc.as_mut().expect("checked above");
                ipc.certify_on_host(cx.dev, problem, &x, &step, &held)?
            };
            if grown > 0 {
                let ipc = self.ipc.as_ref().expect("checked above");
                let mut p = Plan::new();
                ipc.rec_bound_again(&mut p, &self.bound, &self.readback, self.rb.trust);
                let n = DeviceIpc::bound_len(cx.m.nv) as u32;
                p.max_abs(&self.bound, n, &self.readback, self.rb.alpha as u32);
                self.rec_trial(cx, &mut p, cx.cur, scale);
                self.rec_eval_guarded(cx, &mut p, 1 - cx.cur, next == Next::Model);
                t = self.run(cx, &p)?;
            }
        }
        if fresh {
            let trust = if self.ipc.is_some() {
                1.0 / t.trust
            } else {
                1.0
            };
            self.combined = Some((coef, 1.0 / t.bound, trust));
        }
        let bound = self.combined.map_or(0.0, |(_, b, _)| b);
        let energy = t.energy;
        self.pending = Some((t, next, scale * bound));
        Ok(Jgs2Trial { energy, bound })
    }

    fn jgs2_accept(
        &mut self,
        cx: &mut Cx,
        problem: &StepProblem,
        _elastic: &dyn ElasticTerms,
    ) -> Result<Jgs2Sample> {
        let (t, next, alpha) = self
            .pending
            .take()
            .ok_or_else(|| JelloError::Solver("DeviceJgs2: accept without a trial".into()))?;
        cx.cur = 1 - cx.cur;
        let combined = self.combined.take();
        if let (Some(_), Some((_, _, trust))) = (&self.ipc, combined) {
            if trust < 1.0 && alpha >= (1.0 - 1e-3) * trust {
                // A trust box cut the step short: the candidate list around the new point,
                // swept along the rest of the step (one position readback).
                let x = self.read_current(cx)?;
                let rest = 1.0 - alpha;
                let ahead: Vec<f64> = self
                    .read_positions(cx, self.step, false)?
                    .into_iter()
                    .map(|d| rest * d)
                    .collect();
                let ipc = self.ipc.as_mut().expect("matched above");
                ipc.rebuild(cx.dev, problem, &x, &ahead)?;
                self.fit_readback(cx)?;
            }
        }
        let out = self.public(&t, next, t.max_dx);
        self.s = t;
        Ok(out)
    }

    fn jgs2_raise_stiffness(
        &mut self,
        cx: &mut Cx,
        problem: &StepProblem,
        _elastic: &dyn ElasticTerms,
        prev_min_sq: &mut f64,
        next: Next,
    ) -> Result<Option<Jgs2Sample>> {
        // The smallest pair distance came back with the current point's readback.
        let Some(ipc) = &mut self.ipc else {
            return Ok(None);
        };
        if !problem.raise_contact_stiffness_at(self.s.min_dsq, prev_min_sq) {
            return Ok(None);
        }
        ipc.set_kappa(problem.kappa());
        self.reevaluate(cx, next).map(Some)
    }

    fn jgs2_lag_friction(
        &mut self,
        cx: &mut Cx,
        problem: &StepProblem,
        _elastic: &dyn ElasticTerms,
        next: Next,
    ) -> Result<Option<Jgs2Sample>> {
        if self.ipc.is_none() {
            return Ok(None);
        }
        // Once per lagging pass, at a converged point: one position readback.
        let x = self.read_current(cx)?;
        if problem.lag_friction(&x) == 0 {
            return Ok(None);
        }
        if let Some(ipc) = &mut self.ipc {
            ipc.lag_friction(cx.dev, problem)?;
        }
        self.fit_readback(cx)?;
        self.reevaluate(cx, next).map(Some)
    }

    fn jgs2_slack(&self, _problem: &StepProblem, _elastic: &dyn ElasticTerms, e: f64) -> f64 {
        // See [`DeviceJgs2::ENERGY_SLACK`]: f32 terms summed in f32 blocks.
        ENERGY_SLACK * (e.abs() + self.s.magnitude)
    }

    fn jgs2_current(&mut self, cx: &mut Cx, x: &mut Vec<f64>) -> Result<()> {
        *x = self.current_positions(cx)?;
        Ok(())
    }

    fn jgs2_finish(
        &mut self,
        cx: &mut Cx,
        _problem: &StepProblem,
        _elastic: &dyn ElasticTerms,
        x: &mut Vec<f64>,
    ) -> Result<()> {
        *x = self.current_positions(cx)?;
        if cx.cur == 1 {
            // Keep the result in the position buffer hosts draw from.
            let mut p = Plan::new();
            p.copy(&cx.x[1], 0, &cx.x[0], 0, cx.m.nv);
            if self.ipc.is_some() {
                p.copy(&self.fine[1], 0, &self.fine[0], 0, cx.m.nv);
            }
            cx.dev.submit(&p)?;
            cx.cur = 0;
        }
        Ok(())
    }
}
