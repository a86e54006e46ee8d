//! Twins of the surface-triangle snippet `shaders/shared/surface.wgsl` (the closest pair of a
//! triangle and a sphere from its corners' contact records, the additive CCD time of impact) and
//! of the kernels built on it, `jgs2_face_terms` and `jgs2_face_bound`, f32, operation for
//! operation. The f64 reference is `crate::problem` (surface_contact.rs: the triangle–sphere
//! pair; geometry.rs: `Obstacle::triangle_time_of_impact`; potential.rs:
//! `face_barrier_at_vertex`, `max_obstacle_step`, `vertex_surface_step`).

use super::jgs2::{barrier, contact_advance, per_vertex};
use super::{need, CHUNK};
use crate::gpu::layout::{GpuContact, GpuMat3, GpuTet, GpuVec4, GpuVertexInfo, Params};
use crate::{JelloError, Result};
use glam::{Mat3, Vec3};
use rayon::prelude::*;

/// Advances of the conservative time of impact (`TRI_CCD_ITERS`; the f64 reference takes 200).
pub const TRI_CCD_ITERS: usize = 200;

/// The closest pair of a triangle and an obstacle (mirror of WGSL `TriContact`).
#[derive(Clone, Copy, Debug)]
pub struct TriContact {
    /// Distance, m (≤ 0: the triangle touches or enters the obstacle).
    pub d: f32,
    /// Barycentric coordinates of the triangle's closest point.
    pub bary: Vec3,
    /// Unit vector from the obstacle's closest point to the triangle's (0 when d ≤ 0).
    pub normal: Vec3,
}

/// A triangle in its sphere's frame (mirror of WGSL `TriFrame`).
#[derive(Clone, Copy, Debug)]
struct TriFrame {
    p: [Vec3; 3],
    dist: Vec3,
    lo: Vec3,
    hi: Vec3,
}

fn tri_frame(c: [&GpuContact; 3]) -> TriFrame {
    let xyz = |a: &[f32; 4]| Vec3::new(a[0], a[1], a[2]);
    let r = c[0].b[0];
    TriFrame {
        p: c.map(|ck| xyz(&ck.a)),
        dist: Vec3::new(c[0].a[3], c[1].a[3], c[2].a[3]),
        lo: Vec3::splat(-r),
        hi: Vec3::splat(r),
    }
}

/// Mirror of WGSL `tri_closest_bary`: barycentric coordinates of the point of triangle abc
/// closest to `p` (Ericson §5.1.5).
pub fn tri_closest_bary(p: Vec3, a: Vec3, b: Vec3, c: Vec3) -> Vec3 {
    let ab = b - a;
    let ac = c - a;
    let ap = p - a;
    let d1 = ab.dot(ap);
    let d2 = ac.dot(ap);
    if d1 <= 0.0 && d2 <= 0.0 {
        return Vec3::X;
    }
    let bp = p - b;
    let d3 = ab.dot(bp);
    let d4 = ac.dot(bp);
    if d3 >= 0.0 && d4 <= d3 {
        return Vec3::Y;
    }
    let vc = d1 * d4 - d3 * d2;
    if vc <= 0.0 && d1 >= 0.0 && d3 <= 0.0 {
        let v = d1 / (d1 - d3);
        return Vec3::new(1.0 - v, v, 0.0);
    }
    let cp = p - c;
    let d5 = ab.dot(cp);
    let d6 = ac.dot(cp);
    if d6 >= 0.0 && d5 <= d6 {
        return Vec3::Z;
    }
    let vb = d5 * d2 - d1 * d6;
    if vb <= 0.0 && d2 >= 0.0 && d6 <= 0.0 {
        let w = d2 / (d2 - d6);
        return Vec3::new(1.0 - w, 0.0, w);
    }
    let va = d3 * d6 - d5 * d4;
    if va <= 0.0 && (d4 - d3) >= 0.0 && (d5 - d6) >= 0.0 {
        let w = (d4 - d3) / ((d4 - d3) + (d5 - d6));
        return Vec3::new(0.0, 1.0 - w, w);
    }
    let denom = va + vb + vc;
    if denom.abs() <= 1e-30 {
        let (la, lb, lc) = (ap.dot(ap), bp.dot(bp), cp.dot(cp));
        if la <= lb && la <= lc {
            return Vec3::X;
        }
        if lb <= lc {
            return Vec3::Y;
        }
        return Vec3::Z;
    }
    let v = vb / denom;
    let w = vc / denom;
    Vec3::new(1.0 - v - w, v, w)
}

fn sphere_tri_contact(f: &TriFrame) -> TriContact {
    let [p0, p1, p2] = f.p;
    let w = tri_closest_bary(Vec3::ZERO, p0, p1, p2);
    let e01 = p1 - p0;
    let e02 = p2 - p0;
    let e12 = p2 - p1;
    let q = p0 + e01 * w.y + e02 * w.z;
    let len = q.length();
    let r = f.hi.x;
    let dk = f.dist;
    let num = w.x * dk.x * (dk.x + 2.0 * r)
        + w.y * dk.y * (dk.y + 2.0 * r)
        + w.z * dk.z * (dk.z + 2.0 * r)
        - (w.x * w.y * e01.dot(e01) + w.x * w.z * e02.dot(e02) + w.y * w.z * e12.dot(e12));
    let d = num / (len + r);
    TriContact {
        d,
        bary: w,
        normal: if len > 0.0 && d > 0.0 {
            q / len
        } else {
            Vec3::ZERO
        },
    }
}

/// Mirror of WGSL `face_contact`: the closest pair of the triangle with corner records `c`
/// (all three of one sphere).
pub fn face_contact(c: [&GpuContact; 3]) -> TriContact {
    sphere_tri_contact(&tri_frame(c))
}

/// Mirror of WGSL `face_bounds_gap`: the largest gap between the triangle's (swept by `d`)
/// bounds and the obstacle's (≤ 0 when they meet).
pub fn face_bounds_gap(c: [&GpuContact; 3], d: [Vec3; 3]) -> f32 {
    let f = tri_frame(c);
    let [p0, p1, p2] = f.p;
    let lo = p0
        .min(p1)
        .min(p2.min(p0 + d[0]))
        .min((p1 + d[1]).min(p2 + d[2]));
    let hi = p0
        .max(p1)
        .max(p2.max(p0 + d[0]))
        .max((p1 + d[1]).max(p2 + d[2]));
    let gap = (f.lo - hi).max(lo - f.hi);
    gap.x.max(gap.y.max(gap.z))
}

/// Mirror of WGSL `face_toi`: a conservative time of impact of the triangle moving by `d`
/// (per corner) against the records' obstacle (additive CCD), keeping the separation
/// min(`thickness`, ½ the starting distance), refusing moves toward the obstacle from within
/// `thickness` (0: the f64 `triangle_time_of_impact`).
pub fn face_toi(c: [&GpuContact; 3], d: [Vec3; 3], thickness: f32) -> f32 {
    let speed = d[0].length().max(d[1].length().max(d[2].length()));
    if speed == 0.0 {
        return 1.0;
    }
    let start = face_contact(c);
    let g0 = start.d;
    if g0 <= 0.0 {
        return 0.0;
    }
    if g0 < thickness {
        let b = start.bary;
        if start.normal.dot(d[0] * b.x + d[1] * b.y + d[2] * b.z) <= 0.0 {
            return 0.0;
        }
    }
    let h = thickness.min(0.5 * g0);
    let goal = 0.1 * (g0 - h);
    let mut t = 0.0f32;
    let mut gap = g0 - h;
    for _ in 0..TRI_CCD_ITERS {
        let dt = 0.9 * gap / speed;
        if t + dt >= 1.0 {
            return 1.0;
        }
        t += dt;
        let moved = [0, 1, 2].map(|k| contact_advance(c[k], d[k] * t));
        gap = face_contact([&moved[0], &moved[1], &moved[2]]).d - h;
        if gap < goal {
            return t;
        }
    }
    t
}

/// Mirror of WGSL `acts_on_faces`: spheres (the device refuses boxes).
fn acts_on_faces(kind: u32) -> bool {
    kind == GpuContact::SPHERE
}

/// Checks the `vfaces` CSR (offsets then face ids, offsets absolute) and the triangles against
/// `nv` vertices; every listed face must have the vertex as a corner.
pub(crate) fn check_faces(vfaces: &[u32], tris: &[GpuTet], nv: usize, what: &str) -> Result<()> {
    need(vfaces.len(), nv + 1, &format!("{what} vfaces"))?;
    for v in 0..nv {
        let (a, b) = (vfaces[v] as usize, vfaces[v + 1] as usize);
        if a > b || b > vfaces.len() || (a < nv + 1 && a != b) {
            return Err(JelloError::Invalid(format!(
                "{what}: vfaces row {v} ({a}..{b}) out of range"
            )));
        }
        for &f in &vfaces[a..b] {
            let Some(t) = tris.get(f as usize) else {
                return Err(JelloError::Invalid(format!(
                    "{what}: vertex {v} lists face {f}, there are {}",
                    tris.len()
                )));
            };
            if t[..3].iter().any(|&u| u as usize >= nv) || !t[..3].contains(&(v as u32)) {
                return Err(JelloError::Invalid(format!(
                    "{what}: face {f} = {t:?} is not a triangle of vertex {v}"
                )));
            }
        }
    }
    Ok(())
}

/// The rows of `vfaces` for vertex `v`.
fn faces_of(vfaces: &[u32], v: usize) -> &[u32] {
    &vfaces[vfaces[v] as usize..vfaces[v + 1] as usize]
}

/// Mirror of WGSL `vertex_face_step` (`vertex_solve.wgsl`): the fraction of vertex `i`'s own
/// move `d` before one of its surface triangles comes within `thickness` of a sphere or box
/// (`vfaces`, `tris` checked by the caller).
pub fn vertex_face_step(
    contacts: &[GpuContact],
    nc: usize,
    vfaces: &[u32],
    tris: &[GpuTet],
    i: usize,
    d: Vec3,
    thickness: f32,
) -> f32 {
    if d == Vec3::ZERO {
        return 1.0;
    }
    let speed = d.length();
    let mut t = 1.0f32;
    for &f in faces_of(vfaces, i) {
        let tri = tris[f as usize];
        let moves = [0, 1, 2].map(|k| if tri[k] as usize == i { d } else { Vec3::ZERO });
        for o in 0..nc {
            let c = [0, 1, 2].map(|k| &contacts[tri[k] as usize * nc + o]);
            if !acts_on_faces(c[0].kind()) {
                continue;
            }
            if 0.9 * (face_bounds_gap(c, [Vec3::ZERO; 3]) - thickness) >= speed {
                continue;
            }
            t = t.min(face_toi(c, moves, thickness));
        }
    }
    t
}

fn outer(a: Vec3, b: Vec3) -> Mat3 {
    Mat3::from_cols(a * b.x, a * b.y, a * b.z)
}

/// Twin of `jgs2_face_terms.wgsl` (f1 = κ, f2 = d̂, f3 = the barrier's 1/h²): adds the surface
/// barrier of every vertex's triangles against spheres and boxes to `g` (free vertices),
/// `venergy` (a third of each triangle's energy per corner) and `hbar` (Gauss–Newton diagonal
/// block).
#[allow(clippy::too_many_arguments)]
pub fn jgs2_face_terms(
    p: &Params,
    contacts: &[GpuContact],
    vfaces: &[u32],
    tris: &[GpuTet],
    vinfo: &[GpuVertexInfo],
    g: &mut [GpuVec4],
    venergy: &mut [f32],
    hbar: &mut [GpuMat3],
) -> Result<()> {
    let n = p.n as usize;
    for (len, what) in [
        (vinfo.len(), "vinfo"),
        (g.len(), "g"),
        (venergy.len(), "venergy"),
        (hbar.len(), "hbar"),
    ] {
        need(len, n, &format!("jgs2_face_terms {what}"))?;
    }
    let nc = per_vertex(contacts, n, "jgs2_face_terms contacts")?;
    check_faces(vfaces, tris, n, "jgs2_face_terms")?;
    let (kappa, dhat, bh2) = (p.f1, p.f2, p.f3);
    g[..n]
        .par_iter_mut()
        .zip(venergy[..n].par_iter_mut())
        .zip(hbar[..n].par_iter_mut())
        .enumerate()
        .with_min_len(CHUNK)
        .for_each(|(v, ((gv, ev), hv))| {
            let mut e = 0.0f32;
            let mut gb = Vec3::ZERO;
            let mut hb = Mat3::ZERO;
            for &f in faces_of(vfaces, v) {
                let tri = tris[f as usize];
                let corner = tri[..3].iter().position(|&u| u as usize == v).unwrap_or(3);
                let w = kappa * f32::from_bits(tri[3]) * bh2;
                for o in 0..nc {
                    let c = [0, 1, 2].map(|k| &contacts[tri[k] as usize * nc + o]);
                    if !acts_on_faces(c[0].kind()) {
                        continue;
                    }
                    if face_bounds_gap(c, [Vec3::ZERO; 3]) > dhat {
                        continue;
                    }
                    let ct = face_contact(c);
                    if ct.d >= dhat {
                        continue;
                    }
                    let b = barrier(ct.d, dhat);
                    e += w * b.x / 3.0;
                    if ct.d > 0.0 {
                        let jv = ct.normal * ct.bary[corner.min(2)];
                        gb += jv * (w * b.y);
                        hb += outer(jv, jv) * (w * b.z);
                    }
                }
            }
            *ev += e;
            *hv = GpuMat3::from_glam(hv.to_glam() + hb);
            if vinfo[v].free != 0 {
                *gv = [gv[0] + gb.x, gv[1] + gb.y, gv[2] + gb.z, 0.0];
            }
        });
    Ok(())
}

/// Twin of `jgs2_face_bound.wgsl`: `bound[v] = max(bound[v], 1/t_v)` with t_v the least
/// conservative time of impact of v's surface triangles moving by `step` against every sphere
/// and box, keeping the separation `Params::f3`.
pub fn jgs2_face_bound(
    p: &Params,
    step: &[GpuVec4],
    contacts: &[GpuContact],
    vfaces: &[u32],
    tris: &[GpuTet],
    bound: &mut [f32],
) -> Result<()> {
    let n = p.n as usize;
    need(step.len(), n, "jgs2_face_bound step")?;
    need(bound.len(), n, "jgs2_face_bound bound")?;
    let nc = per_vertex(contacts, n, "jgs2_face_bound contacts")?;
    check_faces(vfaces, tris, n, "jgs2_face_bound")?;
    let v3 = |a: &GpuVec4| Vec3::new(a[0], a[1], a[2]);
    bound[..n]
        .par_iter_mut()
        .enumerate()
        .with_min_len(CHUNK)
        .for_each(|(v, bv)| {
            let mut t = 1.0f32;
            for &f in faces_of(vfaces, v) {
                let tri = tris[f as usize];
                let d = [0, 1, 2].map(|k| v3(&step[tri[k] as usize]));
                if d.iter().all(|dk| *dk == Vec3::ZERO) {
                    continue;
                }
                for o in 0..nc {
                    let c = [0, 1, 2].map(|k| &contacts[tri[k] as usize * nc + o]);
                    if !acts_on_faces(c[0].kind()) {
                        continue;
                    }
                    if face_bounds_gap(c, d) > p.f3 {
                        continue;
                    }
                    t = t.min(face_toi(c, d, p.f3));
                }
            }
            *bv = bv.max(1.0 / t.max(1e-30));
        });
    Ok(())
}
