//! Twins of the surface snippet `shaders/shared/surface.wgsl` (from the corners' contact records:
//! the closest pair of a triangle and a sphere, of a box corner and a triangle, of a surface edge
//! and a box edge with its mollifier; the triangle–box distance; the additive CCD time of impact)
//! and of the kernels built on it, `jgs2_face_terms`, `jgs2_edge_terms` and `jgs2_face_bound`,
//! f32, operation for operation. The f64 reference is `crate::problem` (surface_contact.rs: the
//! triangle–sphere, corner–triangle and edge–edge pairs; geometry.rs: `triangle_box_distance`,
//! `Obstacle::triangle_time_of_impact`; potential.rs: `face_barrier_at_vertex`,
//! `max_obstacle_step`, `vertex_surface_step`).

use super::jgs2::{barrier, contact_advance, contact_distance, per_vertex};
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

/// A triangle in its obstacle's frame (mirror of WGSL `TriFrame`).
#[derive(Clone, Copy, Debug)]
struct TriFrame {
    p: [Vec3; 3],
    dist: Vec3,
    lo: Vec3,
    hi: Vec3,
}

fn xyz(a: &[f32; 4]) -> Vec3 {
    Vec3::new(a[0], a[1], a[2])
}

fn tri_frame(c: [&GpuContact; 3]) -> TriFrame {
    let r = c[0].b[0];
    let (lo, hi) = if c[0].kind() == GpuContact::BOX {
        (Vec3::ZERO, box_extent(c[0]))
    } else {
        (Vec3::splat(-r), Vec3::splat(r))
    };
    TriFrame {
        p: c.map(|ck| xyz(&ck.a)),
        dist: Vec3::new(c[0].a[3], c[1].a[3], c[2].a[3]),
        lo,
        hi,
    }
}

/// Mirror of WGSL `box_extent`: max − min from a box record, m.
pub fn box_extent(c: &GpuContact) -> Vec3 {
    xyz(&c.a) + xyz(&c.b)
}

/// Mirror of WGSL `box_offset`: the record's vertex minus box corner `corner` (bit k set: the
/// max face along axis k), m.
pub fn box_offset(c: &GpuContact, corner: usize) -> Vec3 {
    let mut p = xyz(&c.a);
    for k in 0..3 {
        if (corner >> k) & 1 != 0 {
            p[k] = -c.b[k];
        }
    }
    p
}

/// Mirror of WGSL `box_edge_axis`.
pub fn box_edge_axis(e: usize) -> usize {
    e / 4
}

/// Mirror of WGSL `box_edge_from`: the first corner of box edge `e` (surface_contact.rs's
/// `BOX_EDGES[e].0`).
pub fn box_edge_from(e: usize) -> usize {
    let k = e / 4;
    let r = e % 4;
    (r & ((1 << k) - 1)) | ((r >> k) << (k + 1))
}

/// Mirror of WGSL `AxisPair`: the closest points of a segment and an axis-aligned box edge.
#[derive(Clone, Copy, Debug)]
pub struct AxisPair {
    /// The segment's parameter (0 at its first end).
    pub s: f32,
    /// The segment's point minus the box edge's, m.
    pub r: Vec3,
}

/// Mirror of WGSL `segment_axis_closest`: segment `p0p1` and the box edge from 0 to `len`·e_k.
pub fn segment_axis_closest(p0: Vec3, p1: Vec3, k: usize, len: f32) -> AxisPair {
    let u = p1 - p0;
    let mut u_off = u;
    u_off[k] = 0.0;
    let mut p_off = p0;
    p_off[k] = 0.0;
    let a = u.dot(u);
    let e = len * len;
    let eps = 1e-30f32;
    let (mut s, mut t, mut clamped) = (0.0f32, 0.0f32, true);
    if a <= eps && e <= eps {
        s = 0.0;
    } else if a <= eps {
        t = (p0[k] / len).clamp(0.0, 1.0);
        clamped = t != p0[k] / len;
    } else {
        let c = u.dot(p0);
        if e <= eps {
            s = (-c / a).clamp(0.0, 1.0);
        } else {
            let den = u_off.dot(u_off);
            if den > 0.0 {
                s = (-u_off.dot(p_off) / den).clamp(0.0, 1.0);
            }
            t = (p0[k] + s * u[k]) / len;
            clamped = false;
            if t < 0.0 {
                t = 0.0;
                s = (-c / a).clamp(0.0, 1.0);
                clamped = true;
            } else if t > 1.0 {
                t = 1.0;
                s = ((u[k] * len - c) / a).clamp(0.0, 1.0);
                clamped = true;
            }
        }
    }
    let mut r = p_off + u_off * s;
    if clamped {
        r[k] = p0[k] + s * u[k] - t * len;
    }
    AxisPair { s, r }
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

/// Mirror of WGSL `corner_tri_contact`: box corner `corner` and the triangle with corner
/// records `c` (all three of one box).
pub fn corner_tri_contact(c: [&GpuContact; 3], corner: usize) -> TriContact {
    let [p0, p1, p2] = c.map(|ck| box_offset(ck, corner));
    let w = tri_closest_bary(Vec3::ZERO, p0, p1, p2);
    let q = p0 + (p1 - p0) * w.y + (p2 - p0) * w.z;
    let len = q.length();
    TriContact {
        d: len,
        bary: w,
        normal: if len > 0.0 { q / len } else { Vec3::ZERO },
    }
}

fn tri_box_separated(v: [Vec3; 3], h: Vec3, axis: Vec3) -> bool {
    if axis.dot(axis) <= 1e-30 {
        return false;
    }
    let p = Vec3::new(v[0].dot(axis), v[1].dot(axis), v[2].dot(axis));
    let r = h.dot(axis.abs());
    p.x.min(p.y.min(p.z)) > r || p.x.max(p.y.max(p.z)) < -r
}

/// Mirror of WGSL `tri_box_overlap`: whether the triangle with corner records `c` meets their
/// box (separating axes).
pub fn tri_box_overlap(c: [&GpuContact; 3]) -> bool {
    let h = box_extent(c[0]) * 0.5;
    let v = c.map(|ck| (xyz(&ck.a) - xyz(&ck.b)) * 0.5);
    let e = [v[1] - v[0], v[2] - v[1], v[0] - v[2]];
    for k in 0..3 {
        let mut a = Vec3::ZERO;
        a[k] = 1.0;
        if tri_box_separated(v, h, a)
            || tri_box_separated(v, h, a.cross(e[0]))
            || tri_box_separated(v, h, a.cross(e[1]))
            || tri_box_separated(v, h, a.cross(e[2]))
        {
            return false;
        }
    }
    !tri_box_separated(v, h, e[0].cross(e[1]))
}

/// Mirror of WGSL `box_tri_contact`: the triangle–box distance (0 when they meet) and its
/// closest pair.
pub fn box_tri_contact(c: [&GpuContact; 3]) -> TriContact {
    let mut out = TriContact {
        d: 0.0,
        bary: Vec3::X,
        normal: Vec3::ZERO,
    };
    if tri_box_overlap(c) {
        return out;
    }
    out.d = f32::INFINITY;
    for (k, ck) in c.iter().enumerate() {
        let pd = contact_distance(ck);
        if pd.d < out.d {
            out.d = pd.d;
            out.bary = Vec3::ZERO;
            out.bary[k] = 1.0;
            out.normal = pd.grad;
        }
    }
    for corner in 0..8 {
        let ct = corner_tri_contact(c, corner);
        if ct.d < out.d {
            out = ct;
        }
    }
    let ext = box_extent(c[0]);
    for e in 0..12 {
        let first = box_edge_from(e);
        let k = box_edge_axis(e);
        let p = c.map(|ck| box_offset(ck, first));
        for a in 0..3 {
            let b = (a + 1) % 3;
            let st = segment_axis_closest(p[a], p[b], k, ext[k]);
            let d = st.r.length();
            if d < out.d {
                out.d = d;
                out.bary = Vec3::ZERO;
                out.bary[a] = 1.0 - st.s;
                out.bary[b] = st.s;
                out.normal = if d > 0.0 { st.r / d } else { Vec3::ZERO };
            }
        }
    }
    out
}

/// Mirror of WGSL `face_contact`: the closest pair of the triangle with corner records `c` (all
/// three of one sphere or box) and the obstacle.
pub fn face_contact(c: [&GpuContact; 3]) -> TriContact {
    if c[0].kind() == GpuContact::BOX {
        return box_tri_contact(c);
    }
    sphere_tri_contact(&tri_frame(c))
}

/// The closest pair of a surface edge and a box edge with IPC's mollifier (mirror of WGSL
/// `EdgeContact`).
#[derive(Clone, Copy, Debug)]
pub struct EdgeContact {
    /// Distance, m.
    pub d: f32,
    /// The closest point's parameter on the surface edge (0 at its first end).
    pub s: f32,
    /// Unit vector from the box edge's closest point to the surface edge's (0 when d = 0).
    pub normal: Vec3,
    /// The mollifier m (1 unless the edges are near parallel).
    pub m: f32,
    /// ∂m/∂x of the edge's second end, 1/m (the first end's is its negative).
    pub dm: Vec3,
}

/// Mirror of WGSL `box_edge_contact`: surface edge (records `ca`, `cb` of its ends, squared rest
/// length `rest_sq`, m²) and box edge `e`.
pub fn box_edge_contact(ca: &GpuContact, cb: &GpuContact, e: usize, rest_sq: f32) -> EdgeContact {
    let first = box_edge_from(e);
    let k = box_edge_axis(e);
    let len = box_extent(ca)[k];
    let a = box_offset(ca, first);
    let b = box_offset(cb, first);
    let st = segment_axis_closest(a, b, k, len);
    let d = st.r.length();
    let normal = if d > 0.0 { st.r / d } else { Vec3::ZERO };
    let mut u = b - a;
    u[k] = 0.0;
    let len2 = len * len;
    let c = len2 * u.dot(u);
    let eps = 1e-3 * rest_sq * len2;
    let (m, dm) = if c < eps {
        let r = c / eps;
        ((2.0 - r) * r, u * (2.0 * len2) * (2.0 * (1.0 - r) / eps))
    } else {
        (1.0, Vec3::ZERO)
    };
    EdgeContact {
        d,
        s: st.s,
        normal,
        m,
        dm,
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

/// Mirror of WGSL `acts_on_faces`: spheres and boxes.
fn acts_on_faces(kind: u32) -> bool {
    kind == GpuContact::SPHERE || kind == GpuContact::BOX
}

/// Names of a per-vertex CSR and its items, for [`check_rows`]' errors.
struct RowNames {
    rows: &'static str,
    item: &'static str,
    relation: &'static str,
}

/// Checks a per-vertex CSR (`rows`: offsets then item ids, offsets absolute) against `nv`
/// vertices and its items, whose first `ends` entries are vertex ids: every listed item must
/// have the vertex among them.
fn check_rows(
    rows: &[u32],
    items: &[GpuTet],
    nv: usize,
    ends: usize,
    names: RowNames,
    what: &str,
) -> Result<()> {
    let RowNames {
        rows: rname,
        item,
        relation,
    } = names;
    need(rows.len(), nv + 1, &format!("{what} {rname}"))?;
    for v in 0..nv {
        let (a, b) = (rows[v] as usize, rows[v + 1] as usize);
        if a > b || b > rows.len() || (a < nv + 1 && a != b) {
            return Err(JelloError::Invalid(format!(
                "{what}: {rname} row {v} ({a}..{b}) out of range"
            )));
        }
        for &f in &rows[a..b] {
            let Some(t) = items.get(f as usize) else {
                return Err(JelloError::Invalid(format!(
                    "{what}: vertex {v} lists {item} {f}, there are {}",
                    items.len()
                )));
            };
            if t[..ends].iter().any(|&u| u as usize >= nv) || !t[..ends].contains(&(v as u32)) {
                return Err(JelloError::Invalid(format!(
                    "{what}: {item} {f} = {t:?} is not {relation} of vertex {v}"
                )));
            }
        }
    }
    Ok(())
}

/// Checks the `vfaces` CSR (offsets then face ids, offsets absolute) and the triangles against
/// `nv` vertices; every listed face must have the vertex as a corner.
pub(crate) fn check_faces(vfaces: &[u32], tris: &[GpuTet], nv: usize, what: &str) -> Result<()> {
    let names = RowNames {
        rows: "vfaces",
        item: "face",
        relation: "a triangle",
    };
    check_rows(vfaces, tris, nv, 3, names, what)
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
                    let boxed = c[0].kind() == GpuContact::BOX;
                    for k in 0..if boxed { 8 } else { 1 } {
                        let ct = if boxed {
                            corner_tri_contact(c, k)
                        } else {
                            face_contact(c)
                        };
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
            }
            *ev += e;
            *hv = GpuMat3::from_glam(hv.to_glam() + hb);
            if vinfo[v].free != 0 {
                *gv = [gv[0] + gb.x, gv[1] + gb.y, gv[2] + gb.z, 0.0];
            }
        });
    Ok(())
}

/// Checks the `vedges` CSR (offsets then edge ids, offsets absolute) and the edges against `nv`
/// vertices; every listed edge must have the vertex as an end.
pub(crate) fn check_edges(vedges: &[u32], edges: &[GpuTet], nv: usize, what: &str) -> Result<()> {
    let names = RowNames {
        rows: "vedges",
        item: "edge",
        relation: "an edge",
    };
    check_rows(vedges, edges, nv, 2, names, what)
}

/// Twin of `jgs2_edge_terms.wgsl` (f1 = κ, f2 = d̂, f3 = the barrier's 1/h²): adds the
/// edge–edge barrier of every vertex's surface edges against the boxes' edges to `g` (free
/// vertices), `venergy` (half of each pair's energy per end) and `hbar` (Gauss–Newton diagonal
/// block).
#[allow(clippy::too_many_arguments)]
pub fn jgs2_edge_terms(
    p: &Params,
    contacts: &[GpuContact],
    vedges: &[u32],
    edges: &[GpuTet],
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
        need(len, n, &format!("jgs2_edge_terms {what}"))?;
    }
    let nc = per_vertex(contacts, n, "jgs2_edge_terms contacts")?;
    check_edges(vedges, edges, n, "jgs2_edge_terms")?;
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
            for &ei in &vedges[vedges[v] as usize..vedges[v + 1] as usize] {
                let edge = edges[ei as usize];
                let at_a = edge[0] as usize == v;
                let w = kappa * f32::from_bits(edge[2]) * bh2;
                let rest_sq = f32::from_bits(edge[3]);
                for o in 0..nc {
                    let ca = &contacts[edge[0] as usize * nc + o];
                    if ca.kind() != GpuContact::BOX {
                        continue;
                    }
                    let cb = &contacts[edge[1] as usize * nc + o];
                    let lo = xyz(&ca.a).min(xyz(&cb.a));
                    let hi = xyz(&ca.a).max(xyz(&cb.a));
                    let gap =
                        (Vec3::splat(-dhat) - hi).max(lo - box_extent(ca) - Vec3::splat(dhat));
                    if gap.x.max(gap.y.max(gap.z)) > 0.0 {
                        continue;
                    }
                    for k in 0..12 {
                        let c = box_edge_contact(ca, cb, k, rest_sq);
                        if c.d <= 0.0 {
                            e = f32::INFINITY;
                            continue;
                        }
                        if c.d >= dhat || c.m <= 0.0 {
                            continue;
                        }
                        let b = barrier(c.d, dhat);
                        e += w * c.m * b.x / 2.0;
                        let lambda = if at_a { 1.0 - c.s } else { c.s };
                        let jv = c.normal * lambda;
                        let dm = if at_a { -c.dm } else { c.dm };
                        gb += (jv * (c.m * b.y) + dm * b.x) * w;
                        hb += outer(jv, jv) * (w * c.m * b.z);
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
