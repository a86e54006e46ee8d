//! Twins of the surface-triangle snippet `shaders/shared/surface.wgsl` (the closest pair of a
//! triangle and a sphere or box from its corners' contact records, the overlap test, the additive
//! CCD time of impact) and of the kernels built on it, `jgs2_face_terms` and `jgs2_face_bound`,
//! f32, operation for operation. The f64 reference is `crate::problem` (geometry.rs:
//! `Obstacle::triangle_contact`, `triangle_time_of_impact`; potential.rs:
//! `face_barrier_at_vertex`, `max_obstacle_step`, `vertex_surface_step`).

use super::jgs2::{barrier, contact_advance, per_vertex};
use super::{need, CHUNK};
use crate::gpu::layout::{GpuContact, GpuMat3, GpuTet, GpuVec4, GpuVertexInfo, Params};
use crate::{JelloError, Result};
use glam::{BVec3, Mat3, Vec3};
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

/// A triangle in its obstacle's frame (mirror of WGSL `TriFrame`).
#[derive(Clone, Copy, Debug)]
struct TriFrame {
    p: [Vec3; 3],
    dist: Vec3,
    lo: Vec3,
    hi: Vec3,
    kind: u32,
}

fn tri_frame(c: [&GpuContact; 3]) -> TriFrame {
    let kind = c[0].kind();
    let dist = Vec3::new(c[0].a[3], c[1].a[3], c[2].a[3]);
    let xyz = |a: &[f32; 4]| Vec3::new(a[0], a[1], a[2]);
    if kind == GpuContact::SPHERE {
        let r = c[0].b[0];
        return TriFrame {
            p: c.map(|ck| xyz(&ck.a)),
            dist,
            lo: Vec3::splat(-r),
            hi: Vec3::splat(r),
            kind,
        };
    }
    let mut f = TriFrame {
        p: [Vec3::ZERO; 3],
        dist,
        lo: Vec3::ZERO,
        hi: Vec3::ZERO,
        kind,
    };
    for k in 0..3 {
        let size = c[0].a[k] + c[0].b[k];
        if c[0].a[k] <= c[0].b[k] {
            for (pj, cj) in f.p.iter_mut().zip(c) {
                pj[k] = cj.a[k];
            }
            f.lo[k] = 0.0;
            f.hi[k] = size;
        } else {
            for (pj, cj) in f.p.iter_mut().zip(c) {
                pj[k] = -cj.b[k];
            }
            f.lo[k] = -size;
            f.hi[k] = 0.0;
        }
    }
    f
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

/// Mirror of WGSL `segment_closest`: (s, t, distance) of segments p0p1 and q0q1.
pub fn segment_closest(p0: Vec3, p1: Vec3, q0: Vec3, q1: Vec3) -> Vec3 {
    let d1 = p1 - p0;
    let d2 = q1 - q0;
    let r = p0 - q0;
    let a = d1.dot(d1);
    let e = d2.dot(d2);
    let f = d2.dot(r);
    let eps = 1e-30;
    let (mut s, mut t) = (0.0f32, 0.0f32);
    if a <= eps && e <= eps {
    } else if a <= eps {
        t = (f / e).clamp(0.0, 1.0);
    } else {
        let c = d1.dot(r);
        if e <= eps {
            s = (-c / a).clamp(0.0, 1.0);
        } else {
            let b = d1.dot(d2);
            let denom = a * e - b * b;
            if denom > 0.0 {
                s = ((b * f - c * e) / denom).clamp(0.0, 1.0);
            }
            t = (b * s + f) / e;
            if t < 0.0 {
                t = 0.0;
                s = (-c / a).clamp(0.0, 1.0);
            } else if t > 1.0 {
                t = 1.0;
                s = ((b - c) / a).clamp(0.0, 1.0);
            }
        }
    }
    Vec3::new(s, t, ((p0 + d1 * s) - (q0 + d2 * t)).length())
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
    let num = w.x * dk.x * (dk.x + 2.0 * r) + w.y * dk.y * (dk.y + 2.0 * r)
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

/// Mirror of WGSL `tri_box_overlap` (separating axes, Akenine-Möller 2001).
fn tri_box_overlap(f: &TriFrame) -> bool {
    let c = (f.lo + f.hi) * 0.5;
    let h = (f.hi - f.lo) * 0.5;
    let v = f.p.map(|p| p - c);
    let e = [v[1] - v[0], v[2] - v[1], v[0] - v[2]];
    let mut axes = [Vec3::ZERO; 13];
    axes[0] = Vec3::X;
    axes[1] = Vec3::Y;
    axes[2] = Vec3::Z;
    axes[3] = e[0].cross(e[1]);
    let mut n = 4;
    for k in 0..3 {
        axes[n] = axes[k].cross(e[0]);
        axes[n + 1] = axes[k].cross(e[1]);
        axes[n + 2] = axes[k].cross(e[2]);
        n += 3;
    }
    for axis in axes {
        if axis.dot(axis) <= 1e-30 {
            continue;
        }
        let a = v[0].dot(axis);
        let b = v[1].dot(axis);
        let cc = v[2].dot(axis);
        let r = h.x * axis.x.abs() + h.y * axis.y.abs() + h.z * axis.z.abs();
        if a.min(b.min(cc)) > r || a.max(b.max(cc)) < -r {
            return false;
        }
    }
    true
}

fn box_corner(f: &TriFrame, i: usize) -> Vec3 {
    Vec3::select(
        BVec3::new(i & 1 != 0, i & 2 != 0, i & 4 != 0),
        f.hi,
        f.lo,
    )
}

fn unit3(k: usize) -> Vec3 {
    let mut u = Vec3::ZERO;
    u[k] = 1.0;
    u
}

fn box_tri_contact(f: &TriFrame) -> TriContact {
    let mut out = TriContact {
        d: 0.0,
        bary: Vec3::X,
        normal: Vec3::ZERO,
    };
    if tri_box_overlap(f) {
        return out;
    }
    let mut best = f32::INFINITY;
    let (mut bp, mut bq) = (Vec3::ZERO, Vec3::ZERO);
    for k in 0..3 {
        let p = f.p[k];
        let q = p.clamp(f.lo, f.hi);
        let d = (p - q).length();
        if d < best {
            best = d;
            out.bary = unit3(k);
            bp = p;
            bq = q;
        }
    }
    let [p0, p1, p2] = f.p;
    let e01 = p1 - p0;
    let e02 = p2 - p0;
    for i in 0..8 {
        let q = box_corner(f, i);
        let w = tri_closest_bary(q, p0, p1, p2);
        let p = p0 + e01 * w.y + e02 * w.z;
        let d = (p - q).length();
        if d < best {
            best = d;
            out.bary = w;
            bp = p;
            bq = q;
        }
    }
    for i in 0..8 {
        for k in 0..3 {
            if i & (1 << k) != 0 {
                continue;
            }
            let q0 = box_corner(f, i);
            let q1 = box_corner(f, i | (1 << k));
            for a in 0..3 {
                let b = (a + 1) % 3;
                let (pa, pb) = (f.p[a], f.p[b]);
                let st = segment_closest(pa, pb, q0, q1);
                if st.z < best {
                    best = st.z;
                    out.bary = unit3(a) * (1.0 - st.x) + unit3(b) * st.x;
                    bp = pa + (pb - pa) * st.x;
                    bq = q0 + (q1 - q0) * st.y;
                }
            }
        }
    }
    out.d = best;
    if best > 0.0 {
        out.normal = (bp - bq) / best;
    }
    out
}

/// Mirror of WGSL `face_contact`: the closest pair of the triangle with corner records `c`
/// (all three of one sphere or box).
pub fn face_contact(c: [&GpuContact; 3]) -> TriContact {
    let f = tri_frame(c);
    if f.kind == GpuContact::SPHERE {
        sphere_tri_contact(&f)
    } else {
        box_tri_contact(&f)
    }
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

fn is_bounded(kind: u32) -> bool {
    kind == GpuContact::SPHERE || kind == GpuContact::BOX
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
            if !is_bounded(c[0].kind()) {
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

/// Twin of `jgs2_face_terms.wgsl` (f0 = 1/h², f1 = κ, f2 = d̂): adds the surface barrier of
/// every vertex's triangles against spheres and boxes to `g` (free vertices), `venergy` (a third
/// of each triangle's energy per corner) and `hbar` (Gauss–Newton diagonal block).
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
    let (ih2, kappa, dhat) = (p.f0, p.f1, p.f2);
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
                let w = kappa * f32::from_bits(tri[3]) * ih2;
                for o in 0..nc {
                    let c = [0, 1, 2].map(|k| &contacts[tri[k] as usize * nc + o]);
                    if !is_bounded(c[0].kind()) {
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

/// Twin of `jgs2_face_bound.wgsl`: `bound[v] = max(bound[v], 1 − t_v)` with t_v the least
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
                    if !is_bounded(c[0].kind()) {
                        continue;
                    }
                    if face_bounds_gap(c, d) > p.f3 {
                        continue;
                    }
                    t = t.min(face_toi(c, d, p.f3));
                }
            }
            *bv = bv.max(1.0 - t);
        });
    Ok(())
}
