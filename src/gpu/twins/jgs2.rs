//! Twins of the JGS2/VBD kernels (`shaders/jgs2_*.wgsl`, `vbd_system`, `vertex_solve`,
//! `hess_vec`, `elastic_list`) and of the shared snippets `obstacle.wgsl` and `jgs2.wgsl`, f32,
//! operation for operation. The f64 reference they implement is `crate::solver::jgs2`
//! (`local.rs`, `solver.rs`) and `crate::problem` (potential, obstacles).
//!
//! Kernels that write at listed vertex/element ids compute their results in parallel and store
//! them sequentially (the GPU writes each id from one thread; lists never repeat an id within a
//! dispatch — checked here).

use super::element::elastic;
use super::linalg;
use super::{need, CHUNK};
use crate::gpu::layout::{
    ElemParams, GpuContact, GpuLocalSystem, GpuMat3, GpuTet, GpuTreeNode, GpuVec4, GpuVertexInfo,
    Params,
};
use crate::{JelloError, Result};
use glam::{Mat3, Vec3};
use rayon::prelude::*;

pub use crate::gpu::abi::{
    DOTS_STRIDE, FAR_HMATRIX, FAR_LINEAR, JGS2_DOTS_GD_ONLY, NODE_STRIDE, NO_CHILD, ROTATION_KEEP,
    SOLVE_FALLBACK, SOLVE_PRIMARY, SOLVE_WITH_FALLBACK, ZERO_BLOCK,
};
/// The far-sample count bits of a `jgs2_system` blob's fourth header word.
const FAR_COUNT: u32 = FAR_HMATRIX - 1;

fn v3(p: &GpuVec4) -> Vec3 {
    Vec3::new(p[0], p[1], p[2])
}

fn v4(v: Vec3) -> GpuVec4 {
    [v.x, v.y, v.z, 0.0]
}

fn invalid(msg: String) -> JelloError {
    JelloError::Invalid(msg)
}

fn is_finite(x: f32) -> bool {
    x.to_bits() & 0x7f80_0000 != 0x7f80_0000
}

fn outer(a: Vec3, b: Vec3) -> Mat3 {
    Mat3::from_cols(a * b.x, a * b.y, a * b.z)
}

// ---------------------------------------------------------------- obstacles (obstacle.wgsl)

/// Signed distance with derivatives (mirror of WGSL `DistanceEval`).
#[derive(Clone, Copy, Debug)]
pub struct DistanceEval {
    /// Signed distance, m.
    pub d: f32,
    /// ∂d/∂x.
    pub grad: Vec3,
    /// ∂²d/∂x², 1/m.
    pub hess: Mat3,
}

fn xyz(a: &[f32; 4]) -> Vec3 {
    Vec3::new(a[0], a[1], a[2])
}

/// Mirror of WGSL `contact_distance`.
pub fn contact_distance(c: &GpuContact) -> DistanceEval {
    let mut r = DistanceEval {
        d: 0.0,
        grad: Vec3::ZERO,
        hess: Mat3::ZERO,
    };
    match c.kind() {
        GpuContact::HALF_SPACE => {
            r.d = c.a[3];
            r.grad = xyz(&c.a);
        }
        GpuContact::SPHERE => {
            let len = xyz(&c.a).length().max(1e-30);
            let n = xyz(&c.a) / len;
            r.d = c.a[3];
            r.grad = n;
            r.hess = (Mat3::IDENTITY - outer(n, n)) * (1.0 / len);
        }
        GpuContact::BOX => {
            let (ql, qh) = (xyz(&c.a), xyz(&c.b));
            let mut q = Vec3::ZERO;
            let mut clamped = 0;
            for k in 0..3 {
                if ql[k] < 0.0 {
                    q[k] = ql[k];
                    clamped += 1;
                } else if qh[k] < 0.0 {
                    q[k] = -qh[k];
                    clamped += 1;
                }
            }
            let len = q.length();
            if len > 0.0 {
                let n = q / len;
                if clamped > 1 {
                    let mut p = Mat3::IDENTITY - outer(n, n);
                    for k in 0..3 {
                        if ql[k] >= 0.0 && qh[k] >= 0.0 {
                            for j in 0..3 {
                                p.col_mut(j)[k] = 0.0;
                                p.col_mut(k)[j] = 0.0;
                            }
                        }
                    }
                    r.hess = p * (1.0 / len);
                }
                r.d = len;
                r.grad = n;
            } else {
                let mut best = f32::INFINITY;
                let mut g = Vec3::ZERO;
                for k in 0..3 {
                    if ql[k] < best {
                        best = ql[k];
                        g = Vec3::ZERO;
                        g[k] = -1.0;
                    }
                    if qh[k] < best {
                        best = qh[k];
                        g = Vec3::ZERO;
                        g[k] = 1.0;
                    }
                }
                r.d = -best;
                r.grad = g;
            }
        }
        _ => {}
    }
    r
}

/// Mirror of WGSL `contact_toi`.
pub fn contact_toi(c: &GpuContact, dx: Vec3) -> f32 {
    match c.kind() {
        GpuContact::HALF_SPACE => {
            let v = xyz(&c.a).dot(dx);
            if v < 0.0 {
                (c.a[3] / -v).clamp(0.0, 1.0)
            } else {
                1.0
            }
        }
        GpuContact::SPHERE => {
            let a = dx.dot(dx);
            let b = xyz(&c.a).dot(dx);
            let c0 = c.a[3] * (c.a[3] + 2.0 * c.b[0]);
            if a == 0.0 || b >= 0.0 {
                return 1.0;
            }
            let disc = b * b - a * c0;
            if disc < 0.0 {
                return 1.0;
            }
            ((-b - disc.sqrt()) / a).clamp(0.0, 1.0)
        }
        GpuContact::BOX => {
            let (mut t_enter, mut t_exit) = (0.0f32, 1.0f32);
            for k in 0..3 {
                if dx[k] == 0.0 {
                    if c.a[k] < 0.0 || c.b[k] < 0.0 {
                        return 1.0;
                    }
                } else {
                    let t0 = -c.a[k] / dx[k];
                    let t1 = c.b[k] / dx[k];
                    t_enter = t_enter.max(t0.min(t1));
                    t_exit = t_exit.min(t0.max(t1));
                }
            }
            if t_enter <= t_exit {
                t_enter.clamp(0.0, 1.0)
            } else {
                1.0
            }
        }
        _ => 1.0,
    }
}

/// Mirror of WGSL `contact_advance`: the record after the vertex moves by `dx`.
pub fn contact_advance(c: &GpuContact, dx: Vec3) -> GpuContact {
    let mut r = *c;
    match c.kind() {
        GpuContact::HALF_SPACE => r.a[3] = c.a[3] + xyz(&c.a).dot(dx),
        GpuContact::SPHERE => {
            let p = xyz(&c.a);
            let pn = p + dx;
            let den = pn.length() + p.length();
            if den > 0.0 {
                r.a[3] = c.a[3] + (2.0 * p.dot(dx) + dx.dot(dx)) / den;
            }
            r.a = [pn.x, pn.y, pn.z, r.a[3]];
        }
        GpuContact::BOX => {
            let (a, b) = (xyz(&c.a) + dx, xyz(&c.b) - dx);
            r.a = [a.x, a.y, a.z, c.a[3]];
            r.b = [b.x, b.y, b.z, c.b[3]];
        }
        _ => {}
    }
    r
}

/// Mirror of WGSL `contact_step_bound` for one vertex's records: min(1, 0.9 × first time of
/// impact).
pub fn contact_step_bound(records: &[GpuContact], dx: Vec3) -> f32 {
    let mut alpha = 1.0f32;
    for c in records.iter().filter(|c| c.kind() != GpuContact::NONE) {
        let toi = contact_toi(c, dx);
        if toi < 1.0 {
            alpha = alpha.min(0.9 * toi);
        }
    }
    alpha
}

/// Mirror of WGSL `barrier`: (b, b', b'') of −(d − d̂)² ln(d/d̂).
pub fn barrier(d: f32, dhat: f32) -> Vec3 {
    if d >= dhat {
        return Vec3::ZERO;
    }
    if d <= 0.0 {
        return Vec3::new(f32::INFINITY, f32::NEG_INFINITY, f32::INFINITY);
    }
    let r = d - dhat;
    let l = (d / dhat).ln();
    Vec3::new(
        -r * r * l,
        -(2.0 * r * l + r * r / d),
        -(2.0 * l + 4.0 * r / d - r * r / (d * d)),
    )
}

/// Records per vertex: `contacts.len() / nv`, which must divide evenly and be ≥ 1.
pub(crate) fn per_vertex(contacts: &[GpuContact], nv: usize, what: &str) -> Result<usize> {
    if nv == 0 {
        return Ok(0);
    }
    let nc = contacts.len() / nv;
    if nc == 0 || nc * nv != contacts.len() {
        return Err(invalid(format!(
            "{what}: {} contact records for {nv} vertices",
            contacts.len()
        )));
    }
    if let Some(k) = contacts.iter().position(|c| {
        !matches!(
            c.kind(),
            GpuContact::HALF_SPACE | GpuContact::BOX | GpuContact::SPHERE | GpuContact::NONE
        )
    }) {
        return Err(invalid(format!(
            "{what}: contact record {k} has an unknown kind"
        )));
    }
    Ok(nc)
}

// ---------------------------------------------------------------- 3×3 solve (jgs2.wgsl)

fn pivot_ok(d: f32) -> bool {
    is_finite(d) && d > 0.0
}

/// Mirror of WGSL `chol_solve3`: `δ = −A⁻¹r` by Cholesky on A's lower triangle; `None` when a
/// pivot is not > 0 and finite or δ is not finite.
pub fn chol_solve3(a: Mat3, r: Vec3) -> Option<Vec3> {
    let at = |c: usize, row: usize| a.col(c)[row];
    let d0 = at(0, 0);
    if !pivot_ok(d0) {
        return None;
    }
    let l00 = d0.sqrt();
    let l10 = at(0, 1) / l00;
    let l20 = at(0, 2) / l00;
    let d1 = at(1, 1) - l10 * l10;
    if !pivot_ok(d1) {
        return None;
    }
    let l11 = d1.sqrt();
    let l21 = (at(1, 2) - l20 * l10) / l11;
    let d2 = at(2, 2) - l20 * l20 - l21 * l21;
    if !pivot_ok(d2) {
        return None;
    }
    let l22 = d2.sqrt();
    let y0 = r.x / l00;
    let y1 = (r.y - l10 * y0) / l11;
    let y2 = (r.z - l20 * y0 - l21 * y1) / l22;
    let z2 = y2 / l22;
    let z1 = (y1 - l21 * z2) / l11;
    let z0 = (y0 - l10 * z1 - l20 * z2) / l00;
    let d = -Vec3::new(z0, z1, z2);
    (is_finite(d.x) && is_finite(d.y) && is_finite(d.z)).then_some(d)
}

/// Mirror of WGSL `hess_block`: block (a, b) of element e's row-major 12×12 Hessian.
fn hess_block(hess: &[f32], e: usize, a: usize, b: usize) -> Mat3 {
    let base = 144 * e + 36 * a + 3 * b;
    Mat3::from_cols(
        Vec3::new(hess[base], hess[base + 12], hess[base + 24]),
        Vec3::new(hess[base + 1], hess[base + 13], hess[base + 25]),
        Vec3::new(hess[base + 2], hess[base + 14], hess[base + 26]),
    )
}

// ---------------------------------------------------------------- helpers

/// `lists[u1 .. u1 + n]`, checked against `bound` (ids must be < bound) and for repeats.
fn listed<'a>(p: &Params, lists: &'a [u32], bound: usize, what: &str) -> Result<&'a [u32]> {
    let (o, n) = (p.u1 as usize, p.n as usize);
    need(lists.len(), o + n, what)?;
    let l = &lists[o..o + n];
    let mut seen = vec![false; bound];
    for &i in l {
        let i = i as usize;
        if i >= bound {
            return Err(invalid(format!("{what}: listed id {i} ≥ {bound}")));
        }
        if seen[i] {
            return Err(invalid(format!("{what}: id {i} listed twice")));
        }
        seen[i] = true;
    }
    Ok(l)
}

fn check_csr(offsets: &[u32], entries: usize, n: usize, what: &str) -> Result<()> {
    need(offsets.len(), n + 1, what)?;
    for v in 0..n {
        if offsets[v] > offsets[v + 1] || offsets[v + 1] as usize > entries {
            return Err(invalid(format!("{what}: CSR row {v} out of range")));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- kernels

/// Twin of `jgs2_vertex_terms.wgsl` (f0 = the inertia weight 1/ĥ², f1 = κ, f2 = d̂, f3 = the
/// barrier's 1/h² — equal to f0 under implicit Euler, not under BDF2): adds inertia and the
/// half-space and box barrier gradients (point–plane, point–box) to the gathered elastic gradient
/// `g` (zero on pinned vertices), writes the vertex energies (inertia relative to `x_start`, plus
/// that barrier) and the barrier Hessians. Sphere records are skipped (`jgs2_face_terms` adds the
/// spheres' and boxes' surface barrier, `jgs2_edge_terms` the boxes' edges').
#[allow(clippy::too_many_arguments)]
pub fn jgs2_vertex_terms(
    p: &Params,
    x: &[GpuVec4],
    x_tilde: &[GpuVec4],
    x_start: &[GpuVec4],
    vinfo: &[GpuVertexInfo],
    contacts: &[GpuContact],
    g: &mut [GpuVec4],
    venergy: &mut [f32],
    hbar: &mut [GpuMat3],
) -> Result<()> {
    let n = p.n as usize;
    for (len, what) in [
        (x.len(), "x"),
        (x_tilde.len(), "x_tilde"),
        (x_start.len(), "x_start"),
        (vinfo.len(), "vinfo"),
        (g.len(), "g"),
        (venergy.len(), "venergy"),
        (hbar.len(), "hbar"),
    ] {
        need(len, n, &format!("jgs2_vertex_terms {what}"))?;
    }
    let nc = per_vertex(contacts, n, "jgs2_vertex_terms contacts")?;
    let (ih2, kappa, dhat, bh2) = (p.f0, p.f1, p.f2, p.f3);
    g[..n]
        .par_iter_mut()
        .zip(venergy[..n].par_iter_mut())
        .zip(hbar[..n].par_iter_mut())
        .enumerate()
        .with_min_len(CHUNK)
        .for_each(|(v, ((gv, ev), hv))| {
            let pos = v3(&x[v]);
            let info = vinfo[v];
            let k = info.mass * ih2;
            let xt = v3(&x_tilde[v]);
            let d = pos - xt;
            let p0 = v3(&x_start[v]);
            let mut e = 0.5 * k * (pos - p0).dot(d + (p0 - xt));
            let wv = kappa * info.mass * bh2;
            let mut gb = Vec3::ZERO;
            let mut hb = Mat3::ZERO;
            for c in contacts[v * nc..v * nc + nc]
                .iter()
                .filter(|c| c.kind() == GpuContact::HALF_SPACE || c.kind() == GpuContact::BOX)
            {
                let de = contact_distance(c);
                if de.d < dhat {
                    let b = barrier(de.d, dhat);
                    e += wv * b.x;
                    gb += de.grad * (wv * b.y);
                    hb += outer(de.grad, de.grad) * (wv * b.z);
                    if b.y > 0.0 {
                        hb += de.hess * (wv * b.y);
                    }
                }
            }
            *ev = e;
            *hv = GpuMat3::from_glam(hb);
            *gv = if info.free != 0 {
                v4(v3(gv) + k * d + gb)
            } else {
                [0.0; 4]
            };
        });
    Ok(())
}

/// Twin of `jgs2_rotation.wgsl`: per-vertex rotations R_v = polar(volume-weighted mean F) and
/// rest-frame gradients `frame[v] = R_vᵀ g_v` (u0 & [`ROTATION_KEEP`]: rotations kept).
#[allow(clippy::too_many_arguments)]
pub fn jgs2_rotation(
    p: &Params,
    f: &[GpuMat3],
    elem: &[ElemParams],
    offsets: &[u32],
    csr_tets: &[u32],
    g: &[GpuVec4],
    rot: &mut [GpuMat3],
    frame: &mut [GpuVec4],
) -> Result<()> {
    let n = p.n as usize;
    check_csr(offsets, csr_tets.len(), n, "jgs2_rotation offsets")?;
    need(g.len(), n, "jgs2_rotation g")?;
    need(rot.len(), n, "jgs2_rotation rot")?;
    need(frame.len(), n, "jgs2_rotation frame")?;
    let end = offsets[n] as usize;
    let ne = f.len().min(elem.len());
    if let Some(&e) = csr_tets[offsets[0] as usize..end]
        .iter()
        .find(|&&e| e as usize >= ne)
    {
        return Err(invalid(format!("jgs2_rotation: element {e} ≥ {ne}")));
    }
    rot[..n]
        .par_iter_mut()
        .zip(frame[..n].par_iter_mut())
        .enumerate()
        .with_min_len(CHUNK)
        .for_each(|(v, (rv, fv))| {
            if p.u0 & ROTATION_KEEP != 0 {
                *fv = v4(rv.to_glam().transpose() * v3(&g[v]));
                return;
            }
            let mut fs = Mat3::ZERO;
            let mut w = 0.0f32;
            for &e in &csr_tets[offsets[v] as usize..offsets[v + 1] as usize] {
                let vol = elem[e as usize].volume;
                fs += f[e as usize].to_glam() * vol;
                w += vol;
            }
            let mut r = Mat3::IDENTITY;
            if w != 0.0 {
                let sv = linalg::svd3(fs * (1.0 / w));
                r = sv.u * sv.v.transpose();
            }
            *rv = GpuMat3::from_glam(r);
            *fv = v4(r.transpose() * v3(&g[v]));
        });
    Ok(())
}

/// Twin of `jgs2_tree_sum.wgsl`: node sums and first moments `frame[u0 + 4c .. u0 + 4c + 4]`
/// of the listed nodes (one tree level).
pub fn jgs2_tree_sum(
    p: &Params,
    lists: &[u32],
    nodes: &[GpuTreeNode],
    perm: &[u32],
    rest: &[GpuVec4],
    frame: &mut [GpuVec4],
) -> Result<()> {
    let base = p.u0 as usize;
    let list = listed(p, lists, nodes.len(), "jgs2_tree_sum lists")?;
    need(
        frame.len(),
        base + NODE_STRIDE * nodes.len(),
        "jgs2_tree_sum frame",
    )?;
    need(rest.len(), base, "jgs2_tree_sum rest")?;
    let fr: &[GpuVec4] = frame;
    let sums: Vec<Result<[Vec3; NODE_STRIDE]>> = list
        .par_iter()
        .map(|&c| {
            let [start, end, left, right] = nodes[c as usize];
            let mut s = [Vec3::ZERO; NODE_STRIDE];
            if left == NO_CHILD {
                if start > end || end as usize > perm.len() {
                    return Err(invalid(format!("jgs2_tree_sum: node {c} range")));
                }
                for &j in &perm[start as usize..end as usize] {
                    if j as usize >= base {
                        return Err(invalid(format!("jgs2_tree_sum: member {j} ≥ {base}")));
                    }
                    let gj = v3(&fr[j as usize]);
                    let pj = v3(&rest[j as usize]);
                    s[0] += gj;
                    s[1] += gj * pj.x;
                    s[2] += gj * pj.y;
                    s[3] += gj * pj.z;
                }
            } else {
                let (l, r) = (left as usize, right as usize);
                if l >= nodes.len() || r >= nodes.len() {
                    return Err(invalid(format!("jgs2_tree_sum: node {c} children")));
                }
                for (k, sk) in s.iter_mut().enumerate() {
                    *sk = v3(&fr[base + NODE_STRIDE * l + k]) + v3(&fr[base + NODE_STRIDE * r + k]);
                }
            }
            Ok(s)
        })
        .collect();
    for (&c, s) in list.iter().zip(sums) {
        for (k, sk) in s?.into_iter().enumerate() {
            frame[base + NODE_STRIDE * c as usize + k] = v4(sk);
        }
    }
    Ok(())
}

fn bf(blob: &[u32], i: usize) -> f32 {
    f32::from_bits(blob[i])
}

fn blob_block(blob: &[u32], s: usize) -> Mat3 {
    Mat3::from_cols(
        Vec3::new(bf(blob, s), bf(blob, s + 3), bf(blob, s + 6)),
        Vec3::new(bf(blob, s + 1), bf(blob, s + 4), bf(blob, s + 7)),
        Vec3::new(bf(blob, s + 2), bf(blob, s + 5), bf(blob, s + 8)),
    )
}

/// Words per far sample of a blob record with far-count word `w` (node + block, + slopes).
fn far_stride(w: u32) -> usize {
    if w & FAR_LINEAR != 0 {
        37
    } else {
        10
    }
}

/// Checks vertex `i`'s blob record against the buffers it indexes.
fn check_blob_vertex(
    blob: &[u32],
    i: usize,
    nv: usize,
    frame_len: usize,
    n_elems: usize,
) -> Result<()> {
    let bad = |m: &str| Err(invalid(format!("jgs2_system blob, vertex {i}: {m}")));
    let (off, n_inc, n_near, n_far, far_words) = (
        blob[4 * i] as usize,
        blob[4 * i + 1] as usize,
        blob[4 * i + 2] as usize,
        (blob[4 * i + 3] & FAR_COUNT) as usize,
        far_stride(blob[4 * i + 3]),
    );
    let hm = (blob[4 * i + 3] & FAR_HMATRIX != 0) as usize;
    let end = off + 10 + 5 * n_inc + 10 * n_near + far_words * n_far + hm;
    if end > blob.len() {
        return bad("record runs past the blob");
    }
    let near0 = off + 10 + 5 * n_inc;
    for k in 0..n_near {
        if blob[near0 + 10 * k] as usize >= nv {
            return bad("near vertex out of range");
        }
    }
    let far0 = near0 + 10 * n_near;
    for k in 0..n_far {
        if nv + NODE_STRIDE * blob[far0 + far_words * k] as usize + NODE_STRIDE > frame_len {
            return bad("far node out of range");
        }
    }
    if hm == 1 && blob[far0 + far_words * n_far] as usize >= frame_len {
        return bad("H-matrix far sum out of range");
    }
    for t in 0..n_inc {
        let q = off + 10 + 5 * t;
        if (blob[q] >> 2) as usize >= n_elems {
            return bad("incident element out of range");
        }
        for c in 0..4 {
            let s = blob[q + 1 + c];
            if s != ZERO_BLOCK
                && (s == 0 || s as usize + 9 > blob.len() || blob[s as usize - 1] as usize >= nv)
            {
                return bad("incident block out of range");
            }
        }
    }
    Ok(())
}

/// Twin of `jgs2_system.wgsl` (see the shader header for the blob layout).
#[allow(clippy::too_many_arguments)]
pub fn jgs2_system(
    p: &Params,
    lists: &[u32],
    blob: &[u32],
    g: &[GpuVec4],
    rot: &[GpuMat3],
    frame: &[GpuVec4],
    hess: &[f32],
    sys: &mut [GpuLocalSystem],
) -> Result<()> {
    let nv = p.u0 as usize;
    let ih2 = p.f0;
    need(g.len(), nv, "jgs2_system g")?;
    need(rot.len(), nv, "jgs2_system rot")?;
    need(sys.len(), nv, "jgs2_system sys")?;
    need(blob.len(), 4 * nv, "jgs2_system blob header")?;
    let list = listed(p, lists, nv, "jgs2_system lists")?;
    let n_elems = hess.len() / 144;
    for &i in list {
        check_blob_vertex(blob, i as usize, nv, frame.len(), n_elems)?;
    }
    let out: Vec<GpuLocalSystem> = list
        .par_iter()
        .with_min_len(CHUNK / 4)
        .map(|&i| {
            let i = i as usize;
            let off = blob[4 * i] as usize;
            let n_inc = blob[4 * i + 1] as usize;
            let n_near = blob[4 * i + 2] as usize;
            let n_far = (blob[4 * i + 3] & FAR_COUNT) as usize;
            let linear = blob[4 * i + 3] & FAR_LINEAR != 0;
            let hmatrix = blob[4 * i + 3] & FAR_HMATRIX != 0;
            let far_words = far_stride(blob[4 * i + 3]);
            let ri = rot[i].to_glam();
            let rit = ri.transpose();
            let mut acc = Vec3::ZERO;
            let mut q = off + 10 + 5 * n_inc;
            for _ in 0..n_near {
                acc += blob_block(blob, q + 1).transpose() * v3(&frame[blob[q] as usize]);
                q += 10;
            }
            for _ in 0..n_far {
                let node = nv + NODE_STRIDE * blob[q] as usize;
                acc += blob_block(blob, q + 1).transpose() * v3(&frame[node]);
                if linear {
                    for k in 0..3 {
                        acc +=
                            blob_block(blob, q + 10 + 9 * k).transpose() * v3(&frame[node + 1 + k]);
                    }
                }
                q += far_words;
            }
            if hmatrix {
                acc += v3(&frame[blob[q] as usize]);
            }
            let gi = v3(&g[i]);
            let r = gi + ri * acc;
            let mut a = ri * blob_block(blob, off) * rit;
            let mut af = Mat3::IDENTITY * (bf(blob, off + 9) * ih2);
            for t in 0..n_inc {
                let q = off + 10 + 5 * t;
                let ec = blob[q];
                let e = (ec >> 2) as usize;
                let ci = (ec & 3) as usize;
                af += hess_block(hess, e, ci, ci);
                let mut u = [Mat3::ZERO; 4];
                let mut live = [false; 4];
                for c in 0..4 {
                    let s = blob[q + 1 + c];
                    live[c] = s != ZERO_BLOCK;
                    if live[c] {
                        let s = s as usize;
                        u[c] = rot[blob[s - 1] as usize].to_glam() * blob_block(blob, s) * rit;
                    }
                }
                for ca in 0..4 {
                    if !live[ca] {
                        continue;
                    }
                    let mut w = Mat3::ZERO;
                    for cb in 0..4 {
                        if live[cb] {
                            w += hess_block(hess, e, ca, cb) * u[cb];
                        }
                    }
                    a += u[ca].transpose() * w;
                }
            }
            GpuLocalSystem {
                a: GpuMat3::from_glam(a),
                r: v4(r),
                a_fallback: GpuMat3::from_glam(af),
                r_fallback: v4(gi),
            }
        })
        .collect();
    for (&i, s) in list.iter().zip(out) {
        sys[i as usize] = s;
    }
    Ok(())
}

/// Twin of `vbd_system.wgsl` (f0 = the inertia weight 1/ĥ²).
#[allow(clippy::too_many_arguments)]
pub fn vbd_system(
    p: &Params,
    lists: &[u32],
    vinfo: &[GpuVertexInfo],
    g: &[GpuVec4],
    hess: &[f32],
    offsets: &[u32],
    packed: &[u32],
    sys: &mut [GpuLocalSystem],
) -> Result<()> {
    let nv = vinfo.len();
    need(g.len(), nv, "vbd_system g")?;
    need(sys.len(), nv, "vbd_system sys")?;
    check_csr(offsets, packed.len(), nv, "vbd_system offsets")?;
    let list = listed(p, lists, nv, "vbd_system lists")?;
    let n_elems = hess.len() / 144;
    for &i in list {
        let i = i as usize;
        for &ec in &packed[offsets[i] as usize..offsets[i + 1] as usize] {
            if (ec >> 2) as usize >= n_elems {
                return Err(invalid(format!(
                    "vbd_system: element {} out of range",
                    ec >> 2
                )));
            }
        }
    }
    let out: Vec<GpuLocalSystem> = list
        .par_iter()
        .with_min_len(CHUNK)
        .map(|&i| {
            let i = i as usize;
            let mut a = Mat3::IDENTITY * (vinfo[i].mass * p.f0);
            for &ec in &packed[offsets[i] as usize..offsets[i + 1] as usize] {
                let c = (ec & 3) as usize;
                a += hess_block(hess, (ec >> 2) as usize, c, c);
            }
            let r = v4(v3(&g[i]));
            GpuLocalSystem {
                a: GpuMat3::from_glam(a),
                r,
                a_fallback: GpuMat3::from_glam(a),
                r_fallback: r,
            }
        })
        .collect();
    for (&i, s) in list.iter().zip(out) {
        sys[i as usize] = s;
    }
    Ok(())
}

/// Twin of `vertex_solve.wgsl`: per listed vertex the Cholesky solve (with fallback per mode),
/// the obstacle filter (the vertex's time of impact, then its surface triangles' with it moving
/// alone, keeping the separation `Params::f3`: [`super::surface::vertex_face_step`]), written
/// to `dirs[(u0 >> 4)·nv + i]`, nv = `hbar.len()`.
#[allow(clippy::too_many_arguments)]
pub fn vertex_solve(
    p: &Params,
    lists: &[u32],
    sys: &[GpuLocalSystem],
    hbar: &[GpuMat3],
    contacts: &[GpuContact],
    vfaces: &[u32],
    tris: &[GpuTet],
    dirs: &mut [GpuVec4],
) -> Result<()> {
    let nv = hbar.len();
    need(sys.len(), nv, "vertex_solve sys")?;
    let nc = per_vertex(contacts, nv, "vertex_solve contacts")?;
    super::surface::check_faces(vfaces, tris, nv, "vertex_solve")?;
    let slot = (p.u0 >> 4) as usize;
    need(dirs.len(), (slot + 1) * nv, "vertex_solve dirs")?;
    let list = listed(p, lists, nv, "vertex_solve lists")?;
    let mode = p.u0 & 3;
    let out: Vec<GpuVec4> = list
        .par_iter()
        .with_min_len(CHUNK)
        .map(|&i| {
            let i = i as usize;
            let s = &sys[i];
            let hb = hbar[i].to_glam();
            let mut res = None;
            if mode != SOLVE_FALLBACK {
                res = chol_solve3(s.a.to_glam() + hb, v3(&s.r));
            }
            if res.is_none() && mode != SOLVE_PRIMARY {
                res = chol_solve3(s.a_fallback.to_glam() + hb, v3(&s.r_fallback));
            }
            let mut d = res.unwrap_or(Vec3::ZERO);
            d *= contact_step_bound(&contacts[i * nc..i * nc + nc], d);
            d *= super::surface::vertex_face_step(contacts, nc, vfaces, tris, i, d, p.f3);
            v4(d)
        })
        .collect();
    for (&i, d) in list.iter().zip(out) {
        dirs[slot * nv + i as usize] = d;
    }
    Ok(())
}

/// Twin of `hess_vec.wgsl`: `out[q·n + v] = H dirs_q` at vertex v for q < u0 (≤ 3).
#[allow(clippy::too_many_arguments)]
pub fn hess_vec(
    p: &Params,
    hess: &[f32],
    tets: &[GpuTet],
    offsets: &[u32],
    packed: &[u32],
    vinfo: &[GpuVertexInfo],
    hbar: &[GpuMat3],
    dirs: &[GpuVec4],
    out: &mut [GpuVec4],
) -> Result<()> {
    let n = p.n as usize;
    let nd = (p.u0 as usize).min(3);
    check_csr(offsets, packed.len(), n, "hess_vec offsets")?;
    need(vinfo.len(), n, "hess_vec vinfo")?;
    need(hbar.len(), n, "hess_vec hbar")?;
    need(dirs.len(), nd * n, "hess_vec dirs")?;
    need(out.len(), nd * n, "hess_vec out")?;
    let ne = tets.len().min(hess.len() / 144);
    for &ec in &packed[offsets[0] as usize..offsets[n] as usize] {
        let e = (ec >> 2) as usize;
        if e >= ne || tets[e].iter().any(|&w| w as usize >= n) {
            return Err(invalid(format!("hess_vec: element {e} out of range")));
        }
    }
    let res: Vec<[Vec3; 3]> = (0..n)
        .into_par_iter()
        .with_min_len(CHUNK)
        .map(|v| {
            let mut y = [Vec3::ZERO; 3];
            let info = vinfo[v];
            if info.free == 0 {
                return y;
            }
            let ms = info.mass * p.f0;
            let hb = hbar[v].to_glam();
            for (q, yq) in y.iter_mut().enumerate().take(nd) {
                let dv = v3(&dirs[q * n + v]);
                *yq = dv * ms + hb * dv;
            }
            for &ec in &packed[offsets[v] as usize..offsets[v + 1] as usize] {
                let e = (ec >> 2) as usize;
                let c = (ec & 3) as usize;
                let t = tets[e];
                for (b, &w) in t.iter().enumerate() {
                    let kb = hess_block(hess, e, c, b);
                    for (q, yq) in y.iter_mut().enumerate().take(nd) {
                        *yq += kb * v3(&dirs[q * n + w as usize]);
                    }
                }
            }
            y
        })
        .collect();
    for (v, y) in res.into_iter().enumerate() {
        for (q, yq) in y.iter().enumerate().take(nd) {
            out[q * n + v] = v4(*yq);
        }
    }
    Ok(())
}

/// Twin of `jgs2_dots.wgsl`: block partials of Σ|g|²w², g·d_p and d_p·hd_q (see the shader).
pub fn jgs2_dots(
    p: &Params,
    g: &[GpuVec4],
    dirs: &[GpuVec4],
    hd: &[GpuVec4],
    weight: &[f32],
    out: &mut [f32],
) -> Result<()> {
    const WG: usize = 256;
    const ITEMS: usize = 4;
    const NDOT: usize = 13;
    let n = p.n as usize;
    let nd = ((p.u0 & 0xff) as usize).min(3);
    // u0 & JGS2_DOTS_GD_ONLY: the g·d_p only, hd unread.
    let nh = if p.u0 & JGS2_DOTS_GD_ONLY != 0 { 0 } else { nd };
    need(g.len(), n, "jgs2_dots g")?;
    need(dirs.len(), nd * n, "jgs2_dots dirs")?;
    need(hd.len(), nh * n, "jgs2_dots hd")?;
    need(weight.len(), n, "jgs2_dots weight")?;
    let groups = n.div_ceil(WG * ITEMS).max(1);
    let off = p.u1 as usize;
    need(out.len(), off + DOTS_STRIDE * groups, "jgs2_dots out")?;
    out[off..off + DOTS_STRIDE * groups]
        .par_chunks_mut(DOTS_STRIDE)
        .enumerate()
        .for_each(|(blk, o)| {
            let base = blk * WG * ITEMS;
            let mut sh = vec![[0.0f32; NDOT]; WG];
            for (t, acc) in sh.iter_mut().enumerate() {
                for it in 0..ITEMS {
                    let i = base + it * WG + t;
                    if i < n {
                        let gi = v3(&g[i]);
                        let w = weight[i];
                        acc[0] += gi.dot(gi) * w * w;
                        for pp in 0..nd {
                            let dp = v3(&dirs[pp * n + i]);
                            acc[1 + pp] += gi.dot(dp);
                            if pp < nh {
                                for q in 0..nh {
                                    acc[4 + 3 * pp + q] += dp.dot(v3(&hd[q * n + i]));
                                }
                            }
                        }
                    }
                }
            }
            let mut s = WG / 2;
            while s > 0 {
                for t in 0..s {
                    let src = sh[t + s];
                    for (a, b) in sh[t].iter_mut().zip(src) {
                        *a += b;
                    }
                }
                s >>= 1;
            }
            for (j, oj) in o.iter_mut().enumerate() {
                *oj = if j < NDOT { sh[0][j] } else { 0.0 };
            }
        });
    Ok(())
}

/// Twin of `jgs2_combine.wgsl`: `step = f0·d0 + f1·d1 + f2·d2`, `bound = 1/α_v`.
pub fn jgs2_combine(
    p: &Params,
    dirs: &[GpuVec4],
    contacts: &[GpuContact],
    step: &mut [GpuVec4],
    bound: &mut [f32],
) -> Result<()> {
    let n = p.n as usize;
    need(dirs.len(), 3 * n, "jgs2_combine dirs")?;
    need(step.len(), n, "jgs2_combine step")?;
    need(bound.len(), n, "jgs2_combine bound")?;
    let nc = per_vertex(contacts, n, "jgs2_combine contacts")?;
    step[..n]
        .par_iter_mut()
        .zip(bound[..n].par_iter_mut())
        .enumerate()
        .with_min_len(CHUNK)
        .for_each(|(v, (sv, bv))| {
            let s = p.f0 * v3(&dirs[v]) + p.f1 * v3(&dirs[n + v]) + p.f2 * v3(&dirs[2 * n + v]);
            *sv = v4(s);
            let mut alpha = 1.0f32;
            if s != Vec3::ZERO {
                alpha = contact_step_bound(&contacts[v * nc..v * nc + nc], s);
            }
            *bv = 1.0 / alpha.max(1e-30);
        });
    Ok(())
}

/// Twin of `jgs2_trial.wgsl`: `x_new = x + a·step`, contacts advanced by a·step,
/// `dirs[2n + v] = a·step`, `dxn = |a·step|`, `a = f0 / scal[u1]`.
#[allow(clippy::too_many_arguments)]
pub fn jgs2_trial(
    p: &Params,
    x: &[GpuVec4],
    step: &[GpuVec4],
    scal: &[f32],
    contacts: &[GpuContact],
    x_new: &mut [GpuVec4],
    contacts_new: &mut [GpuContact],
    dirs: &mut [GpuVec4],
    dxn: &mut [f32],
) -> Result<()> {
    let n = p.n as usize;
    need(x.len(), n, "jgs2_trial x")?;
    need(step.len(), n, "jgs2_trial step")?;
    need(scal.len(), p.u1 as usize + 1, "jgs2_trial scal")?;
    need(x_new.len(), n, "jgs2_trial x_new")?;
    need(dirs.len(), 3 * n, "jgs2_trial dirs")?;
    need(dxn.len(), n, "jgs2_trial dxn")?;
    let nc = per_vertex(contacts, n, "jgs2_trial contacts")?;
    need(contacts_new.len(), nc * n, "jgs2_trial contacts_new")?;
    let a = p.f0 / scal[p.u1 as usize];
    x_new[..n]
        .par_iter_mut()
        .zip(dirs[2 * n..3 * n].par_iter_mut())
        .zip(dxn[..n].par_iter_mut())
        .zip(contacts_new[..nc * n].par_chunks_mut(nc.max(1)))
        .enumerate()
        .with_min_len(CHUNK)
        .for_each(|(v, (((xn, dv), dx), cn))| {
            let s = v3(&step[v]) * a;
            *xn = v4(v3(&x[v]) + s);
            for (o, c) in cn.iter_mut().enumerate() {
                *c = contact_advance(&contacts[v * nc + o], s);
            }
            *dv = v4(s);
            *dx = s.length();
        });
    Ok(())
}

/// Twin of `jgs2_trial_fine.wgsl`: per vertex v < n, `fine_new[v] = fine[v] + dirs[2n + v]`
/// (w = 0) — the fine parts of [`jgs2_trial`]'s positions, recorded after it when the positions
/// keep them (IPC contact; [`super::ipc::pair_relative`]).
pub fn jgs2_trial_fine(
    p: &Params,
    fine: &[GpuVec4],
    dirs: &[GpuVec4],
    fine_new: &mut [GpuVec4],
) -> Result<()> {
    let n = p.n as usize;
    need(fine.len(), n, "jgs2_trial_fine fine")?;
    need(dirs.len(), 3 * n, "jgs2_trial_fine dirs")?;
    need(fine_new.len(), n, "jgs2_trial_fine fine_new")?;
    fine_new[..n]
        .par_iter_mut()
        .enumerate()
        .with_min_len(CHUNK)
        .for_each(|(v, f)| *f = v4(v3(&fine[v]) + v3(&dirs[2 * n + v])));
    Ok(())
}

/// Twin of `jgs2_apply.wgsl`: `x[i] += f0·dirs[i]` (contacts advanced alike),
/// `dxn[i] = f1·|dirs[i]|` for listed i; with u0 = 1 the move is added to the fine parts
/// `fine[i]` too ([`jgs2_trial_fine`]), else `fine` is not read.
pub fn jgs2_apply(
    p: &Params,
    lists: &[u32],
    dirs: &[GpuVec4],
    x: &mut [GpuVec4],
    contacts: &mut [GpuContact],
    dxn: &mut [f32],
    fine: &mut [GpuVec4],
) -> Result<()> {
    let nv = x.len();
    need(dxn.len(), nv, "jgs2_apply dxn")?;
    need(dirs.len(), nv, "jgs2_apply dirs")?;
    let with_fine = p.u0 == 1;
    if with_fine {
        need(fine.len(), nv, "jgs2_apply fine")?;
    }
    let nc = per_vertex(contacts, nv, "jgs2_apply contacts")?;
    let list = listed(p, lists, nv, "jgs2_apply lists")?;
    for &i in list {
        let i = i as usize;
        let d = v3(&dirs[i]);
        let pos = x[i];
        let s = p.f0 * d;
        x[i] = [pos[0] + s.x, pos[1] + s.y, pos[2] + s.z, pos[3]];
        if with_fine {
            fine[i] = v4(v3(&fine[i]) + s);
        }
        for c in &mut contacts[i * nc..i * nc + nc] {
            *c = contact_advance(c, s);
        }
        dxn[i] = p.f1 * d.length();
    }
    Ok(())
}

/// Twin of `elastic_list.wgsl`: the `elastic` twin on the listed elements (u0 = flags), results
/// stored at the elements' own indices.
#[allow(clippy::too_many_arguments)]
pub fn elastic_list(
    p: &Params,
    x: &[GpuVec4],
    tets: &[GpuTet],
    dm_inv: &[GpuMat3],
    elem: &[ElemParams],
    lists: &[u32],
    energy: &mut [f32],
    grad: &mut [GpuVec4],
    hess: &mut [f32],
) -> Result<()> {
    use super::element::{ELASTIC_DIAGONAL, ELASTIC_GRADIENT, ELASTIC_HESSIAN};
    let ne = tets
        .len()
        .min(dm_inv.len())
        .min(elem.len())
        .min(energy.len());
    let list = listed(p, lists, ne, "elastic_list lists")?;
    let flags = p.u0;
    let (want_g, want_h) = (flags & ELASTIC_GRADIENT != 0, flags & ELASTIC_HESSIAN != 0);
    if want_g {
        need(grad.len(), 4 * ne, "elastic_list grad")?;
    }
    if want_h {
        need(hess.len(), 144 * ne, "elastic_list hess")?;
    }
    let m = list.len();
    let sub_t: Vec<GpuTet> = list.iter().map(|&e| tets[e as usize]).collect();
    let sub_d: Vec<GpuMat3> = list.iter().map(|&e| dm_inv[e as usize]).collect();
    let sub_e: Vec<ElemParams> = list.iter().map(|&e| elem[e as usize]).collect();
    let mut en = vec![0.0f32; m];
    let mut gr = vec![[0.0f32; 4]; if want_g { 4 * m } else { 1 }];
    let mut he = vec![0.0f32; if want_h { 144 * m } else { 1 }];
    let q = Params { n: m as u32, ..*p };
    elastic(&q, x, &sub_t, &sub_d, &sub_e, &mut en, &mut gr, &mut he)?;
    for (k, &e) in list.iter().enumerate() {
        let e = e as usize;
        energy[e] = en[k];
        if want_g {
            grad[4 * e..4 * e + 4].copy_from_slice(&gr[4 * k..4 * k + 4]);
        }
        if want_h && flags & ELASTIC_DIAGONAL != 0 {
            // Only the diagonal blocks; the rest keeps what it held.
            for a in 0..4 {
                for r in 0..3 {
                    let i = (3 * a + r) * 12 + 3 * a;
                    hess[144 * e + i..144 * e + i + 3]
                        .copy_from_slice(&he[144 * k + i..144 * k + i + 3]);
                }
            }
        } else if want_h {
            hess[144 * e..144 * e + 144].copy_from_slice(&he[144 * k..144 * k + 144]);
        }
    }
    Ok(())
}
