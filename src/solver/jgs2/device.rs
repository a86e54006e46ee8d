//! JGS2 / VBD over the device API ([`crate::gpu::Device`]): the same iteration as
//! [`Jgs2Solver`](super::Jgs2Solver) — the safeguarded step (minimising the quadratic model
//! over {primary direction, VBD step, previous step}, limited by the obstacles, Armijo
//! backtracking) whose primary direction is the JGS2 Jacobi step or a Gauss–Seidel sweep's
//! displacement; the plain Jacobi iteration; plain coloured Gauss–Seidel sweeps (VBD) — in f32
//! WGSL kernels on a GPU, or in their CPU twins with [`Device::cpu`].
//!
//! # Data on the device
//! Positions relative to the rest centroid ([`DeviceJgs2::origin`]) as `vec4<f32>`; per vertex
//! and obstacle a contact record of obstacle-relative quantities (signed distance, offsets to the
//! faces; [`GpuContact`]) computed in f64 at the step's start and advanced with every move, so a
//! vertex 1e-7 m above the ground keeps its distance to f32 relative precision (positions
//! relative to the centroid resolve only ~1e-8 m); the element cache (energies, gradients,
//! PSD-projected 12×12 Hessians) of the `elastic` kernel; the assembled gradient g (inertia +
//! elastic + barrier, zero on pinned vertices), vertex energies and barrier Hessians
//! (`jgs2_vertex_terms`); per-vertex rotations and the cluster-tree sums and first moments of
//! the rest-frame gradients (`jgs2_rotation`, `jgs2_tree_sum`; the moments use the rest offsets
//! from the subspace's own origin, [`Jgs2Subspace::origin`]; the origin-shifted block's term
//! and the raw moments' terms cancel by up to a node's distance from the origin over its
//! radius, a few tens for small nodes of a 1 m body: ~1e-5 relative in f32, far below the far
//! field's tolerance); the subspace packed into one u32 blob
//! ([`DeviceJgs2::pack_subspace`]).
//!
//! # One iteration
//! * Safeguarded (default for JGS2): one plan — combine the step from the model's coefficients,
//!   bound it by the obstacles (`jgs2_combine` + a max reduction), trial positions
//!   (`jgs2_trial`), and, speculatively at the trial, the element pass, gradient, the primary
//!   direction (JGS2 local steps; or a Gauss–Seidel sweep run on a scratch copy of the trial,
//!   whose per-vertex local steps are its displacement), the VBD direction, three
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
//! Energies are summed in f64 on the host from per-block f32 partials. The f32 energy of a state
//! carries ~1e-7 relative noise, so the line search accepts a change within
//! [`DeviceJgs2::ENERGY_SLACK`]·|E| (the f64 reference uses 1e-13), and the 3×3 model discards
//! directions whose eigenvalue is below [`DeviceJgs2::EIGEN_CUTOFF`] of the largest (f32 dots
//! resolve no better; the reference uses 1e-10). The reported step energy is the f64 energy of
//! the returned positions; trace energies are the device's, as changes from the step's start
//! (the reference's convention; the absolute f32 sums carry ~1e-7 of |E(x_start)|, which at
//! very large h is the inertia constant ½‖h²g‖²_M — the device's acceptance still compares
//! absolute energies, the reference's relative ones: `StepProblem::energy_change`).
//!
//! # Scope
//! Obstacles: half-spaces (the ground included), which act on vertices. A sphere or a box also
//! acts on the surface triangles and edges in the reference (IPC pairs, `problem::surface_contact`),
//! which the device does not have yet: [`DeviceJgs2::new`] refuses such a model (the runner's
//! `--backend auto` then runs the CPU reference, `--backend gpu` reports the obstacle). The
//! strict retry of `inversion = "forbid"` ([`StepProblem::strict_inversion`]) has no device
//! filter either (f32 resolves det F to ~1e-6, the reference's floor is 1e-8): the runner gives
//! the simulation the f64 reference for those retries (`Simulation::set_strict_solver`).

use super::solver::{Jgs2Params, Variant};
use super::subspace::Jgs2Subspace;
use crate::error::{JelloError, Result};
use crate::gpu::layout::{GpuContact, GpuLocalSystem, GpuTreeNode, GpuVertexInfo};
use crate::gpu::twins::jgs2::{
    DOTS_STRIDE, FAR_LINEAR, NODE_STRIDE, NO_CHILD, ROTATION_KEEP, SOLVE_PRIMARY,
    SOLVE_WITH_FALLBACK, ZERO_BLOCK,
};
use crate::gpu::twins::{ELASTIC_GRADIENT, ELASTIC_HESSIAN, ELASTIC_PROJECT, REDUCE_BLOCK};
use crate::gpu::{
    element_records, Buf, BufferId, Device, DeviceInfo, ElasticRest, ElemParams, GpuMat3, GpuTet,
    GpuVec4, Kernel, Params, Plan, VertexCsr,
};
use crate::mesh::{colour_vertices, VertexTets};
use crate::problem::{ElasticTerms, Model, Obstacle, StepProblem};
use crate::solver::report::ms;
use crate::solver::{IterationRecord, StepReport, StepSolver, StepTimings, StopRule};
use std::sync::Arc;
use std::time::Instant;

/// See [`DeviceJgs2::ENERGY_SLACK`].
const ENERGY_SLACK: f64 = 1e-6;

/// See [`DeviceJgs2::EIGEN_CUTOFF`].
const EIGEN_CUTOFF: f64 = 1e-6;

const ALL_FLAGS: u32 = ELASTIC_GRADIENT | ELASTIC_HESSIAN | ELASTIC_PROJECT;
/// Index of the Gauss–Seidel scratch copy in `x` / `contacts`.
const SCRATCH: usize = 2;

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
    energy: f64,
    max_dx: f64,
    /// 1 − the obstacle step bound of the combined step.
    bound: f64,
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
        if n_far >= FAR_LINEAR as usize {
            return Err(JelloError::Solver(format!(
                "JGS2 subspace: vertex {v} has {n_far} far samples"
            )));
        }
        blob[4 * v] = off as u32;
        blob[4 * v + 1] = n_inc as u32;
        blob[4 * v + 2] = n_near as u32;
        blob[4 * v + 3] = n_far as u32 | if linear { FAR_LINEAR } else { 0 };
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

/// JGS2 (with a subspace) or VBD (without) on a [`Device`]; see the module docs.
pub struct DeviceJgs2 {
    params: Jgs2Params,
    has_subspace: bool,
    dev: Device,
    nv: usize,
    ne: usize,
    origin: [f64; 3],
    extent: f64,
    char_scale: f64,
    num_colours: usize,
    // Static data.
    tets: Buf<GpuTet>,
    dm_inv: Buf<GpuMat3>,
    elem: Buf<ElemParams>,
    offsets: Buf<u32>,
    csr_tets: Buf<u32>,
    csr_local: Buf<u32>,
    packed: Buf<u32>,
    vinfo: Buf<GpuVertexInfo>,
    /// Per-vertex weights 1/c_v of the characteristic norm.
    res_weight: Buf<f32>,
    lists: Buf<u32>,
    blob: Option<Buf<u32>>,
    nodes: Option<Buf<GpuTreeNode>>,
    perm: Option<Buf<u32>>,
    /// Rest offsets from the subspace origin (first moments of the far field).
    rest: Option<Buf<GpuVec4>>,
    // State and scratch.
    /// Current and trial positions (ping-pong) and the Gauss–Seidel scratch copy.
    x: [Buf<GpuVec4>; 3],
    contacts: [Buf<GpuContact>; 3],
    sweep_dxn: Buf<f32>,
    obstacles: Vec<Obstacle>,
    x_tilde: Buf<GpuVec4>,
    energy: Buf<f32>,
    egrad: Buf<GpuVec4>,
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
    ih2: f32,
    kappa: f32,
    dhat: f32,
}

fn vec4(x: [f64; 3], o: [f64; 3]) -> GpuVec4 {
    [
        (x[0] - o[0]) as f32,
        (x[1] - o[1]) as f32,
        (x[2] - o[2]) as f32,
        0.0,
    ]
}

fn span(lists: &mut Vec<u32>, items: impl IntoIterator<Item = u32>) -> Span {
    let off = lists.len() as u32;
    lists.extend(items);
    Span {
        off,
        len: lists.len() as u32 - off,
    }
}

impl DeviceJgs2 {
    /// Relative energy allowance of the line search: a trial is accepted when
    /// E₁ ≤ E₀ + 1e-4·α·slope + `ENERGY_SLACK`·|E₀|. The device energy is a sum of f32 element
    /// and vertex energies (each ~6e-8 relative, partial sums of 1024 in f32), so two states
    /// whose true energies differ by less than ~1e-7·|E| cannot be ordered; 1e-6 keeps a
    /// converging iteration from stalling on that noise while still rejecting any real increase
    /// above it.
    pub const ENERGY_SLACK: f64 = ENERGY_SLACK;
    /// Relative eigenvalue cut-off of the 3×3 subspace model (the f64 reference uses 1e-10).
    /// The model's matrix dᵢᵀHdⱼ, scaled to unit diagonal, is assembled from f32 products summed
    /// in f32 blocks, so its entries carry ~1e-7..1e-6 absolute error: an eigenvalue below 1e-6
    /// of the largest says the directions are dependent to within that noise, and its direction
    /// gets coefficient 0. (A larger cut-off drops real directions: before the unit scaling,
    /// cutting at 1e-5 changed a VBD coefficient on a ball dropped on the ground from 2.5 to 0.07
    /// and stalled the iteration.)
    pub const EIGEN_CUTOFF: f64 = EIGEN_CUTOFF;

    /// The subspace packed as the `jgs2_system` kernel's u32 blob (layout in
    /// `shaders/jgs2_system.wgsl`): incident 12×3 blocks are stored as references to the
    /// near-field (or extra) 3×3 blocks they consist of, 5 words each. Errors when the subspace
    /// does not match the model.
    pub fn pack_subspace(model: &Model, sub: &Jgs2Subspace) -> Result<Vec<u32>> {
        pack_subspace(model, sub)
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
        if let Some((i, o)) = model
            .obstacles
            .iter()
            .enumerate()
            .find(|(_, o)| o.is_bounded())
        {
            let kind = if matches!(o, Obstacle::Box { .. }) {
                "box"
            } else {
                "sphere"
            };
            return Err(JelloError::Invalid(format!(
                "obstacle {i} is a {kind}: its contact with the body's surface triangles and \
                 edges runs on the CPU backend only"
            )));
        }
        let mut dev = device;
        let nv = model.num_vertices();
        let ne = model.mesh.num_tets();
        if ne > (u32::MAX / 4) as usize {
            return Err(JelloError::Invalid("mesh too large for u32 indices".into()));
        }
        // Positions are stored relative to the rest centroid, as the evaluator does.
        let origin = ElasticRest::from_model(model).origin;
        let csr = VertexCsr::new(&model.mesh.tets, nv)?;
        let vt = VertexTets::new(&model.mesh);
        let packed = vt.packed();
        let (dm, ep) = element_records(&model.rest, &model.materials)?;
        let vinfo: Vec<GpuVertexInfo> = (0..nv)
            .map(|v| GpuVertexInfo {
                mass: model.mass[v] as f32,
                free: (!model.pinned[v]) as u32,
            })
            .collect();
        let nc = model.obstacles.len().max(1);
        // The characteristic norm weighs each vertex's force by 1/c_v (its material's ‖C‖).
        let res_weight: Vec<f32> = if model.char_norm.inv_c.len() == nv {
            model.char_norm.inv_c.iter().map(|&w| w as f32).collect()
        } else {
            vec![1.0; nv]
        };
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
        let mut levels = Vec::new();
        let (mut blob_buf, mut nodes_buf, mut perm_buf, mut rest_buf) = (None, None, None, None);
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
                .map(|r| vec4([r.x, r.y, r.z], [0.0; 3]))
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
            len: DOTS_STRIDE * gv + pe + 2 * pv + 1,
        };
        let jgs2 = subspace.is_some();
        let n_nodes = subspace.as_ref().map_or(0, |s| s.tree.len());
        let d = &mut dev;
        let s = DeviceJgs2 {
            params,
            has_subspace: jgs2,
            nv,
            ne,
            origin,
            extent: model.largest_extent(),
            char_scale: model.char_norm.scale,
            num_colours: colouring.num_colours(),
            tets: d.upload("tets", &model.mesh.tets)?,
            dm_inv: d.upload("Dm^-1", &dm)?,
            elem: d.upload("element params", &ep)?,
            offsets: d.upload("csr offsets", &csr.offsets)?,
            csr_tets: d.upload("csr tets", &nonempty(csr.tets))?,
            csr_local: d.upload("csr local", &nonempty(csr.local))?,
            packed: d.upload("csr packed", &nonempty(packed))?,
            vinfo: d.upload("vertex info", &vinfo)?,
            res_weight: d.upload("residual weights", &res_weight)?,
            lists: d.upload("vertex and element lists", &lists)?,
            blob: blob_buf,
            nodes: nodes_buf,
            perm: perm_buf,
            rest: rest_buf,
            x: [
                d.alloc("positions", nv.max(1))?,
                d.alloc("trial positions", nv.max(1))?,
                d.alloc("sweep positions", nv.max(1))?,
            ],
            contacts: [
                d.alloc("contact records", nc * nv.max(1))?,
                d.alloc("trial contact records", nc * nv.max(1))?,
                d.alloc("sweep contact records", nc * nv.max(1))?,
            ],
            sweep_dxn: d.alloc("sweep vertex moves", nv.max(1))?,
            obstacles: model.obstacles.clone(),
            x_tilde: d.alloc("x_tilde", nv.max(1))?,
            energy: d.alloc("element energies", ne.max(1))?,
            egrad: d.alloc("element gradients", 4 * ne.max(1))?,
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
                Some(d.alloc(
                    "rest-frame gradients and node moments",
                    nv + NODE_STRIDE * n_nodes.max(1),
                )?)
            } else {
                None
            },
            sys: d.alloc("local systems", nv.max(1))?,
            dirs: d.alloc("directions", 3 * nv.max(1))?,
            hd: d.alloc("Hessian-direction products", 3 * nv.max(1))?,
            step: d.alloc("step", nv.max(1))?,
            bound: d.alloc("obstacle bounds", nv.max(1))?,
            dxn: d.alloc("vertex moves", nv.max(1))?,
            readback: d.alloc("readback", rb.len)?,
            rb,
            free,
            colours,
            levels,
            ih2: 1.0,
            kappa: model.barrier.kappa as f32,
            dhat: model.barrier.dhat as f32,
            dev,
        };
        Ok(s)
    }

    /// The device (GPU or CPU twins).
    pub fn device(&self) -> &Device {
        &self.dev
    }
    /// Which adapter (or the CPU) runs the iterations.
    pub fn info(&self) -> &DeviceInfo {
        self.dev.info()
    }
    /// The point positions on the device are relative to (the rest centroid), m.
    pub fn origin(&self) -> [f64; 3] {
        self.origin
    }
    /// Number of vertex colours (Gauss–Seidel sweeps per iteration, pinned-only colours
    /// included as in [`Jgs2Solver::num_colours`](super::Jgs2Solver::num_colours)).
    pub fn num_colours(&self) -> usize {
        self.num_colours
    }
    /// The GPU position buffer (`None` on the CPU twins): `array<vec4<f32>>`, 16-byte stride,
    /// xyz = position − [`origin`](Self::origin) in metres, w = 0, usage STORAGE | VERTEX |
    /// COPY_SRC | COPY_DST. After [`StepSolver::step`] it holds the step's result.
    pub fn positions_buffer(&self) -> Option<&wgpu::Buffer> {
        self.dev.as_gpu()?.buffer(self.x[0].id())
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

    /// Element pass at x[xb]: energies, gradients, projected Hessians of every element.
    fn rec_elements(&self, p: &mut Plan, xb: usize) {
        p.dispatch(
            Kernel::Elastic,
            &[
                self.x[xb].id(),
                self.tets.id(),
                self.dm_inv.id(),
                self.elem.id(),
                self.energy.id(),
                self.egrad.id(),
                self.hess.id(),
            ],
            Params::new().u0(ALL_FLAGS),
            self.ne as u32,
        );
    }

    /// Gathered gradient + vertex terms (inertia, barrier, mask) at x[xb].
    fn rec_vertex(&self, p: &mut Plan, xb: usize) {
        let nv = self.nv as u32;
        p.dispatch(
            Kernel::GatherGradient,
            &[
                self.egrad.id(),
                self.offsets.id(),
                self.csr_tets.id(),
                self.csr_local.id(),
                self.g.id(),
            ],
            Params::new(),
            nv,
        );
        p.dispatch(
            Kernel::Jgs2VertexTerms,
            &[
                self.x[xb].id(),
                self.x_tilde.id(),
                self.vinfo.id(),
                self.contacts[xb].id(),
                self.g.id(),
                self.venergy.id(),
                self.hbar.id(),
            ],
            Params {
                f0: self.ih2,
                f1: self.kappa,
                f2: self.dhat,
                ..Params::default()
            },
            nv,
        );
    }

    /// The full state at x[xb]: element cache, gradient, vertex terms.
    fn rec_state(&self, p: &mut Plan, xb: usize) {
        self.rec_elements(p, xb);
        self.rec_vertex(p, xb);
    }

    /// Rest-frame gradients and tree sums with the current g; with `rotate`, the rotations at
    /// x[xb] first (else the ones in `rot` are kept).
    fn rec_frame(&self, p: &mut Plan, xb: usize, rotate: bool) {
        let (Some(fm), Some(rot), Some(frame), Some(nodes), Some(perm), Some(rest)) = (
            self.fmat, self.rot, self.frame, self.nodes, self.perm, self.rest,
        ) else {
            return;
        };
        if rotate {
            p.dispatch(
                Kernel::DeformationGradient,
                &[self.x[xb].id(), self.tets.id(), self.dm_inv.id(), fm.id()],
                Params::new(),
                self.ne as u32,
            );
        }
        p.dispatch(
            Kernel::Jgs2Rotation,
            &[
                fm.id(),
                self.elem.id(),
                self.offsets.id(),
                self.csr_tets.id(),
                self.g.id(),
                rot.id(),
                frame.id(),
            ],
            Params::new().u0(if rotate { 0 } else { ROTATION_KEEP }),
            self.nv as u32,
        );
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
                    u0: self.nv as u32,
                    u1: l.off,
                    ..Params::default()
                },
                l.len,
            );
        }
    }

    /// JGS2 systems (with their VBD fallbacks) of `list`, from the current frame.
    fn rec_jgs2_system(&self, p: &mut Plan, list: Span) {
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
                u0: self.nv as u32,
                u1: list.off,
                f0: self.ih2,
                ..Params::default()
            },
            list.len,
        );
    }

    /// VBD systems of `list`.
    fn rec_vbd_system(&self, p: &mut Plan, list: Span) {
        p.dispatch(
            Kernel::VbdSystem,
            &[
                self.lists.id(),
                self.vinfo.id(),
                self.g.id(),
                self.hess.id(),
                self.offsets.id(),
                self.packed.id(),
                self.sys.id(),
            ],
            Params {
                u1: list.off,
                f0: self.ih2,
                ..Params::default()
            },
            list.len,
        );
    }

    /// Solves the systems of `list` (mode: `SOLVE_*`), filtered by the contacts of x[xb], into
    /// dirs slot `slot`.
    fn rec_solve(&self, p: &mut Plan, xb: usize, list: Span, mode: u32, slot: u32) {
        p.dispatch(
            Kernel::VertexSolve,
            &[
                self.lists.id(),
                self.sys.id(),
                self.hbar.id(),
                self.contacts[xb].id(),
                self.dirs.id(),
            ],
            Params {
                u0: mode | (slot << 4),
                u1: list.off,
                ..Params::default()
            },
            list.len,
        );
    }

    /// The local steps of `list` at x[xb] into dirs slot 0: JGS2 (VBD fallback) with the frame
    /// (`rotate`: rotations at x[xb]; else kept), or VBD without a subspace.
    fn rec_local(&self, p: &mut Plan, xb: usize, list: Span, rotate: bool) {
        if list.len == 0 {
            return;
        }
        if self.has_subspace {
            self.rec_frame(p, xb, rotate);
            self.rec_jgs2_system(p, list);
            self.rec_solve(p, xb, list, SOLVE_WITH_FALLBACK, 0);
        } else {
            self.rec_vbd_system(p, list);
            self.rec_solve(p, xb, list, SOLVE_PRIMARY, 0);
        }
    }

    /// The VBD (block-Jacobi) direction of every free vertex at x[xb] into dirs slot 1.
    fn rec_vbd_direction(&self, p: &mut Plan, xb: usize) {
        if self.free.len > 0 && self.has_subspace {
            self.rec_vbd_system(p, self.free);
            self.rec_solve(p, xb, self.free, SOLVE_PRIMARY, 1);
        }
    }

    /// One Gauss–Seidel sweep on x[xb] (in place): colour by colour the local steps at the
    /// current iterate (rotations once, at the sweep's start), applied at once, then the touched
    /// elements and the gradient refreshed. Per-vertex moves go to `dxn`.
    fn rec_sweep(&self, p: &mut Plan, xb: usize, dxn: Buf<f32>) {
        for (k, c) in self.colours.iter().enumerate() {
            self.rec_local(p, xb, c.verts, k == 0);
            self.rec_apply(p, xb, c.verts, 1.0, 1.0, dxn);
            p.dispatch(
                Kernel::ElasticList,
                &[
                    self.x[xb].id(),
                    self.tets.id(),
                    self.dm_inv.id(),
                    self.elem.id(),
                    self.lists.id(),
                    self.energy.id(),
                    self.egrad.id(),
                    self.hess.id(),
                ],
                Params {
                    u0: ALL_FLAGS,
                    u1: c.elems.off,
                    ..Params::default()
                },
                c.elems.len,
            );
            self.rec_vertex(p, xb);
        }
    }

    /// Dot products into the readback: with `hvp`, the three Hessian-vector products first and
    /// all 13 dots; else only g·g.
    fn rec_dots(&self, p: &mut Plan, hvp: bool) {
        let nv = self.nv as u32;
        let nd = if hvp {
            p.dispatch(
                Kernel::HessVec,
                &[
                    self.hess.id(),
                    self.tets.id(),
                    self.offsets.id(),
                    self.packed.id(),
                    self.vinfo.id(),
                    self.hbar.id(),
                    self.dirs.id(),
                    self.hd.id(),
                ],
                Params {
                    u0: 3,
                    f0: self.ih2,
                    ..Params::default()
                },
                nv,
            );
            3
        } else {
            0
        };
        p.dispatch(
            Kernel::Jgs2Dots,
            &[
                self.g.id(),
                self.dirs.id(),
                self.hd.id(),
                self.res_weight.id(),
                self.readback.id(),
            ],
            Params::new().u0(nd),
            nv,
        );
    }

    /// Energy partials (elements, vertices) and the per-vertex move maximum into the readback.
    fn rec_energy(&self, p: &mut Plan) {
        self.rec_energy_partials(p);
        self.rec_into_readback(p, Kernel::ReduceMaxAbs, self.dxn.id(), self.nv, self.rb.dx);
    }

    /// The element and vertex energy partials into the readback.
    fn rec_energy_partials(&self, p: &mut Plan) {
        self.rec_into_readback(
            p,
            Kernel::ReduceSum,
            self.energy.id(),
            self.ne,
            self.rb.e_elem,
        );
        self.rec_into_readback(
            p,
            Kernel::ReduceSum,
            self.venergy.id(),
            self.nv,
            self.rb.e_vert,
        );
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

    /// Everything at x[xb] a safeguarded iteration needs: the state, the primary direction
    /// (Jacobi: the JGS2/VBD local steps; Gauss–Seidel: a sweep from x[xb] on the scratch
    /// copy), the VBD direction, Hessian-vector products, dots, energy.
    fn rec_eval_safeguarded(&self, p: &mut Plan, xb: usize) {
        // The per-vertex moves of this iteration (the trial's) are reduced before a sweep
        // overwrites anything.
        self.rec_into_readback(p, Kernel::ReduceMaxAbs, self.dxn.id(), self.nv, self.rb.dx);
        self.rec_state(p, xb);
        match self.params.variant {
            Variant::Jacobi => {
                self.rec_local(p, xb, self.free, true);
            }
            Variant::GaussSeidel => {
                p.copy(&self.x[xb], 0, &self.x[SCRATCH], 0, self.nv);
                p.copy(
                    &self.contacts[xb],
                    0,
                    &self.contacts[SCRATCH],
                    0,
                    self.contacts[xb].len(),
                );
                self.rec_sweep(p, SCRATCH, self.sweep_dxn);
                // Back to the state at x[xb] (the sweep refreshed the cache at the scratch).
                self.rec_state(p, xb);
            }
        }
        self.rec_vbd_direction(p, xb);
        self.rec_dots(p, true);
        self.rec_energy_partials(p);
    }

    fn rec_trial(&self, p: &mut Plan, from: usize, scale: f64) {
        p.dispatch(
            Kernel::Jgs2Trial,
            &[
                self.x[from].id(),
                self.step.id(),
                self.readback.id(),
                self.contacts[from].id(),
                self.x[1 - from].id(),
                self.contacts[1 - from].id(),
                self.dirs.id(),
                self.dxn.id(),
            ],
            Params {
                u1: self.rb.alpha as u32,
                f0: scale as f32,
                ..Params::default()
            },
            self.nv as u32,
        );
    }

    fn rec_apply(
        &self,
        p: &mut Plan,
        xb: usize,
        list: Span,
        delta: f64,
        total: f64,
        dxn: Buf<f32>,
    ) {
        p.dispatch(
            Kernel::Jgs2Apply,
            &[
                self.lists.id(),
                self.dirs.id(),
                self.x[xb].id(),
                self.contacts[xb].id(),
                dxn.id(),
            ],
            Params {
                u1: list.off,
                f0: delta as f32,
                f1: total as f32,
                ..Params::default()
            },
            list.len,
        );
    }

    fn run(&mut self, p: &Plan) -> Result<Sample> {
        self.dev.submit(p)?;
        let r = self.dev.read(&self.readback)?;
        let rb = self.rb;
        let sum = |a: usize, n: usize| r[a..a + n].iter().map(|&v| v as f64).sum::<f64>();
        let mut dots = [0.0f64; 13];
        for blk in 0..rb.dot_groups {
            for (j, d) in dots.iter_mut().enumerate() {
                *d += r[DOTS_STRIDE * blk + j] as f64;
            }
        }
        let norm = dots[0].max(0.0).sqrt();
        Ok(Sample {
            residual: if self.char_scale > 0.0 {
                norm / self.char_scale
            } else {
                norm
            },
            energy: sum(rb.e_elem, rb.n_elem) + sum(rb.e_vert, rb.n_vert),
            max_dx: r[rb.dx..rb.dx + rb.n_vert]
                .iter()
                .fold(0.0f64, |m, &v| m.max(v as f64)),
            bound: r[rb.alpha] as f64,
            dots,
        })
    }

    /// Coefficients minimising the quadratic model over the directions of
    /// [`Self::model_slots`], from the dots — the f64 reference's `model_minimiser`: directions
    /// scaled to unit H-norm, pseudo-inverse with a relative eigenvalue cut-off ([`DeviceJgs2::EIGEN_CUTOFF`]).
    fn model_minimiser(&self, dots: &[f64; 13]) -> [f64; 3] {
        let slots = self.model_slots();
        let k = slots.len();
        let raw = |p: usize, q: usize| {
            let (sp, sq) = (slots[p], slots[q]);
            0.5 * (dots[4 + 3 * sp + sq] + dots[4 + 3 * sq + sp])
        };
        let scale: Vec<f64> = (0..k)
            .map(|p| {
                let d = raw(p, p);
                if d > 0.0 && d.is_finite() {
                    1.0 / d.sqrt()
                } else {
                    0.0
                }
            })
            .collect();
        let a = nalgebra::DMatrix::from_fn(k, k, |p, q| raw(p, q) * scale[p] * scale[q]);
        let b = nalgebra::DVector::from_fn(k, |p, _| -dots[1 + slots[p]] * scale[p]);
        let eig = a.symmetric_eigen();
        let top = eig.eigenvalues.iter().fold(0.0f64, |m, v| m.max(*v));
        let mut c = nalgebra::DVector::zeros(k);
        for (j, &lam) in eig.eigenvalues.iter().enumerate() {
            if lam > EIGEN_CUTOFF * top {
                let v = eig.eigenvectors.column(j);
                c += v * (v.dot(&b) / lam);
            }
        }
        let mut out = [0.0; 3];
        for (p, &sl) in slots.iter().enumerate() {
            let v = c[p] * scale[p];
            if v.is_finite() {
                out[sl] = v;
            }
        }
        out
    }

    fn upload_step(&mut self, problem: &StepProblem) -> Result<()> {
        let model = problem.model;
        if model.num_vertices() != self.nv || model.mesh.num_tets() != self.ne {
            return Err(JelloError::Solver(
                "DeviceJgs2: the problem's model is not the one it was built for".into(),
            ));
        }
        if let Some(k) = problem
            .x_start
            .iter()
            .chain(&problem.x_tilde)
            .position(|v| !v.is_finite())
        {
            return Err(JelloError::Invalid(format!(
                "DeviceJgs2: non-finite start or inertial target at DOF {k}"
            )));
        }
        let o = self.origin;
        let at = |a: &[f64], v: usize| [a[3 * v], a[3 * v + 1], a[3 * v + 2]];
        let xs: Vec<GpuVec4> = (0..self.nv)
            .map(|v| vec4(at(&problem.x_start, v), o))
            .collect();
        let xt: Vec<GpuVec4> = (0..self.nv)
            .map(|v| vec4(at(&problem.x_tilde, v), o))
            .collect();
        self.dev.write(&self.x[0], 0, &xs)?;
        // Contact records in f64 at the start (obstacle-relative: precise near contact).
        let mut cs = Vec::with_capacity(self.nv * self.obstacles.len().max(1));
        for v in 0..self.nv {
            if self.obstacles.is_empty() {
                cs.push(GpuContact::none());
            }
            for o in &self.obstacles {
                cs.push(GpuContact::at(o, at(&problem.x_start, v)));
            }
        }
        self.dev.write(&self.contacts[0], 0, &cs)?;
        self.dev.write(&self.x_tilde, 0, &xt)?;
        self.dev
            .write(&self.dirs, 0, &vec![[0.0f32; 4]; 3 * self.nv])?;
        self.dev.write(&self.dxn, 0, &vec![0.0f32; self.nv])?;
        self.ih2 = (1.0 / (problem.h * problem.h)) as f32;
        self.kappa = model.barrier.kappa as f32;
        self.dhat = model.barrier.dhat as f32;
        Ok(())
    }
}

fn nonempty(mut v: Vec<u32>) -> Vec<u32> {
    if v.is_empty() {
        v.push(0);
    }
    v
}

impl StepSolver for DeviceJgs2 {
    fn name(&self) -> String {
        super::solver::solver_name(self.has_subspace, self.params.variant)
    }

    fn step(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        x: &mut Vec<f64>,
        trace: bool,
    ) -> Result<StepReport> {
        let start = Instant::now();
        let mut timings = StepTimings::default();
        self.upload_step(problem)?;
        let t0 = Instant::now();
        let safeguard = self.params.safeguard;
        let variant = self.params.variant;
        // The state at the start, and what the first iteration needs.
        let mut p = Plan::new();
        if safeguard {
            self.rec_eval_safeguarded(&mut p, 0);
        } else {
            self.rec_state(&mut p, 0);
            if variant == Variant::Jacobi {
                self.rec_local(&mut p, 0, self.free, true);
            }
            self.rec_dots(&mut p, false);
            self.rec_energy(&mut p);
        }
        let mut s = self.run(&p)?;
        timings.assembly_ms += ms(t0);
        let mut records = trace.then(Vec::new);
        // Trace energies are changes from the step's start, as the reference's: the device sums
        // absolute energies in f32 partials, so each carries ~1e-7 of |E(x_start)|.
        let e_start = s.energy;
        if let Some(r) = records.as_mut() {
            r.push(IterationRecord {
                residual: s.residual,
                energy: 0.0,
                alpha: 1.0,
                ..IterationRecord::default()
            });
        }
        let mut cur = 0usize;
        let mut iterations = 0;
        let mut converged;
        let mut max_dx = f64::INFINITY;
        let accept = |e1: f64, e0: f64, alpha: f64, slope: f64| {
            e1.is_finite() && e1 <= e0 + 1e-4 * alpha * slope + ENERGY_SLACK * e0.abs()
        };
        loop {
            converged = match self.params.stop {
                StopRule::Cn { eps } => s.residual < eps,
                StopRule::Dx { tol } => max_dx / self.extent < tol,
            };
            // At least one iteration per step (as the reference, see `StopRule`).
            if (converged && iterations > 0) || iterations >= self.params.max_iterations {
                break;
            }
            iterations += 1;
            let t0 = Instant::now();
            let mut alpha_it = 1.0;
            if safeguard {
                // The step minimising the quadratic model over span{primary, VBD, previous},
                // limited by the obstacles and backtracked; the trial's evaluation is the next
                // iteration's input.
                let mut coef = self.model_minimiser(&s.dots);
                let slope: f64 = (0..3).map(|k| coef[k] * s.dots[1 + k]).sum();
                let descent = slope < 0.0 && slope.is_finite();
                if !descent {
                    coef = [0.0; 3];
                }
                let e0 = s.energy;
                let mut scale = if descent { 1.0 } else { 0.0 };
                let mut p = Plan::new();
                p.dispatch(
                    Kernel::Jgs2Combine,
                    &[
                        self.dirs.id(),
                        self.contacts[cur].id(),
                        self.step.id(),
                        self.bound.id(),
                    ],
                    Params {
                        f0: coef[0] as f32,
                        f1: coef[1] as f32,
                        f2: coef[2] as f32,
                        ..Params::default()
                    },
                    self.nv as u32,
                );
                p.max_abs(
                    &self.bound,
                    self.nv as u32,
                    &self.readback,
                    self.rb.alpha as u32,
                );
                self.rec_trial(&mut p, cur, scale);
                self.rec_eval_safeguarded(&mut p, 1 - cur);
                let mut trial = self.run(&p)?;
                let alpha0 = 1.0 - trial.bound;
                if descent {
                    let tl = Instant::now();
                    let mut tries = 1;
                    while !accept(trial.energy, e0, scale * alpha0, slope) {
                        scale *= 0.5;
                        let mut p = Plan::new();
                        self.rec_trial(&mut p, cur, scale);
                        self.rec_eval_safeguarded(&mut p, 1 - cur);
                        trial = self.run(&p)?;
                        // The reference takes the 30th halving without evaluating it; the
                        // device evaluates it anyway (the next iteration's data).
                        if tries == 30 {
                            break;
                        }
                        tries += 1;
                    }
                    timings.line_search_ms += ms(tl);
                }
                alpha_it = scale * alpha0;
                cur = 1 - cur;
                s = trial;
            } else {
                let mut p = Plan::new();
                match variant {
                    Variant::Jacobi => {
                        self.rec_apply(&mut p, 0, self.free, 1.0, 1.0, self.dxn);
                        self.rec_state(&mut p, 0);
                        self.rec_local(&mut p, 0, self.free, true);
                    }
                    Variant::GaussSeidel => self.rec_sweep(&mut p, 0, self.dxn),
                }
                self.rec_dots(&mut p, false);
                self.rec_energy(&mut p);
                s = self.run(&p)?;
            }
            max_dx = s.max_dx;
            timings.solve_ms += ms(t0);
            if !s.residual.is_finite() {
                return Err(JelloError::Solver(format!(
                    "{} diverged (non-finite gradient)",
                    self.name()
                )));
            }
            if let Some(r) = records.as_mut() {
                r.push(IterationRecord {
                    residual: s.residual,
                    energy: s.energy - e_start,
                    alpha: alpha_it,
                    ..IterationRecord::default()
                });
            }
        }
        if cur == 1 {
            // Keep the result in the position buffer hosts draw from.
            let mut p = Plan::new();
            p.copy(&self.x[1], 0, &self.x[0], 0, self.nv);
            self.dev.submit(&p)?;
        }
        let xv = self.dev.read(&self.x[0])?;
        x.clear();
        x.extend(
            xv.iter()
                .take(self.nv)
                .flat_map(|p| (0..3).map(move |k| p[k] as f64)),
        );
        for (k, xi) in x.iter_mut().enumerate() {
            *xi += self.origin[k % 3];
        }
        if x.iter().any(|v| !v.is_finite()) {
            return Err(JelloError::Solver(format!(
                "{} diverged (non-finite positions)",
                self.name()
            )));
        }
        Ok(StepReport {
            iterations,
            converged,
            residual: s.residual,
            energy: problem.energy(elastic, x),
            energy_change: problem.energy_change(elastic, x),
            wall_ms: ms(start),
            timings,
            trace: records,
            ..StepReport::default()
        })
    }
}
