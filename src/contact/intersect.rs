//! Exact triangle–triangle intersection over a collision mesh: the check that a state is
//! intersection-free (every accepted step of every contact scene must be).
//!
//! **Exactness.** Every decision is a sign of Shewchuk's adaptive orient2d/orient3d (the
//! `robust` crate), exact for finite f64 coordinates barring overflow or underflow of the
//! intermediate products (coordinates and their differences between about 1e-40 and 1e40 m in
//! magnitude: products of three of them must stay normal numbers), plus exact comparisons of
//! coordinates. There are no tolerances: touching counts as
//! intersecting, and a vertex one ulp off the plane does not.
//!
//! **Triangles are closed sets.** Two triangles intersect when they share a point. For
//! triangles with no common vertex id the test is: some edge of one meets the other
//! ([`segment_triangle`]); this is complete because the intersection of two triangles is
//! convex and its extreme points lie on edges of one or the other (also when coplanar). A
//! zero-area (exactly collinear) triangle is the union of its edges, tested edge by edge
//! ([`segments_intersect`]).
//!
//! **Adjacent triangles** (sharing mesh vertices) always meet at the shared feature; they are
//! reported only when they overlap *beyond* it:
//! - one shared vertex v, triangles (v,b,c) and (v,d,e): they overlap beyond v iff the edge
//!   opposite v of one meets the other triangle (bc ∩ vde or de ∩ vbc). Why that suffices: the
//!   overlap K is a convex polygon (or segment) with corner v; any other corner of K is a corner
//!   of one triangle lying in the other (b, c, d or e: on an opposite edge) or a crossing of two
//!   edges; a crossing involving bc or de is caught, and two edges from v (vb, vd) can only meet
//!   again by being collinear, when the corner is the nearer of b and d. (Cone-at-v tests were
//!   tried and are redundant: removing them changed nothing against the exact reference.) This
//!   is how a face folded through its neighbour shows up;
//! - one shared edge ab, triangles (a,b,c) and (a,b,d): beyond ab only when d lies in the plane
//!   of abc on the same side of ab as c (folded flat onto each other). A pair that has folded
//!   *past* flat meets again only along ab; the surface around it intersects elsewhere;
//! - three shared vertices (a duplicated face), or a zero-area triangle in an adjacent pair:
//!   reported (a collapsed surface face is itself a failure of the state).
//!
//! **Pairs checked.** Every face pair of bodies that may touch
//! ([`super::mesh::CollisionMesh::bodies_may_touch`]: not two obstacles, not within a body whose
//! self-contact is off), found by the broad phase with zero inflation (closed boxes: touching
//! faces are candidates).

use super::broad::face_pairs;
use super::mesh::CollisionMesh;
use crate::error::Result;
use rayon::prelude::*;
use robust::{Coord, Coord3D};
use std::cmp::Ordering;

type P = [f64; 3];

fn c3(p: P) -> Coord3D<f64> {
    Coord3D {
        x: p[0],
        y: p[1],
        z: p[2],
    }
}

fn sign(v: f64) -> i8 {
    if v > 0.0 {
        1
    } else if v < 0.0 {
        -1
    } else {
        0
    }
}

/// Exact sign of orient3d(a, b, c, d): 0 when coplanar.
fn o3(a: P, b: P, c: P, d: P) -> i8 {
    sign(robust::orient3d(c3(a), c3(b), c3(c), c3(d)))
}

/// Exact sign of orient2d of the points projected along axis `k` (that coordinate dropped).
fn o2(k: usize, a: P, b: P, c: P) -> i8 {
    let (i, j) = ((k + 1) % 3, (k + 2) % 3);
    let q = |p: P| Coord { x: p[i], y: p[j] };
    sign(robust::orient2d(q(a), q(b), q(c)))
}

/// An axis along which projecting `abc` keeps it non-degenerate (so the projection is
/// injective on its plane); `None` when `abc` is collinear (or a point).
fn plane_axis(a: P, b: P, c: P) -> Option<usize> {
    (0..3).find(|&k| o2(k, a, b, c) != 0)
}

fn lex(a: &P, b: &P) -> Ordering {
    // Inputs are finite: a total order.
    a.partial_cmp(b).unwrap_or(Ordering::Equal)
}

/// Whether `p`, known collinear with `a` and `b`, lies on the closed segment `ab`: the
/// lexicographic order of collinear points is their order along the line.
fn between(p: P, a: P, b: P) -> bool {
    let (lo, hi) = if lex(&a, &b) == Ordering::Greater {
        (b, a)
    } else {
        (a, b)
    };
    lex(&lo, &p) != Ordering::Greater && lex(&p, &hi) != Ordering::Greater
}

/// Closed segments `pq`, `rs`, all four points coplanar, projection `k` injective on their
/// plane (segments may be points).
fn segments_2d(k: usize, p: P, q: P, r: P, s: P) -> bool {
    let d1 = o2(k, r, s, p);
    let d2 = o2(k, r, s, q);
    let d3 = o2(k, p, q, r);
    let d4 = o2(k, p, q, s);
    if d1 * d2 < 0 && d3 * d4 < 0 {
        return true;
    }
    (d1 == 0 && between(p, r, s))
        || (d2 == 0 && between(q, r, s))
        || (d3 == 0 && between(r, p, q))
        || (d4 == 0 && between(s, p, q))
}

/// Closed point-in-triangle in projection `k` (triangle non-degenerate there).
fn in_triangle_2d(k: usize, p: P, a: P, b: P, c: P) -> bool {
    let o = o2(k, a, b, c);
    o2(k, a, b, p) * o >= 0 && o2(k, b, c, p) * o >= 0 && o2(k, c, a, p) * o >= 0
}

/// Whether closed segments `pq` and `rs` in 3-D share a point (either may be a single point).
pub fn segments_intersect(p: P, q: P, r: P, s: P) -> bool {
    if o3(p, q, r, s) != 0 {
        return false;
    }
    // Coplanar: a projection injective on the plane of any non-collinear triple.
    for [u, v, w] in [[p, q, r], [p, q, s], [p, r, s], [q, r, s]] {
        if let Some(k) = plane_axis(u, v, w) {
            return segments_2d(k, p, q, r, s);
        }
    }
    // All four collinear: overlap of the intervals in the order along the line.
    let (pl, ph) = if lex(&p, &q) == Ordering::Greater {
        (q, p)
    } else {
        (p, q)
    };
    let (rl, rh) = if lex(&r, &s) == Ordering::Greater {
        (s, r)
    } else {
        (r, s)
    };
    let lo = if lex(&pl, &rl) == Ordering::Greater {
        pl
    } else {
        rl
    };
    let hi = if lex(&ph, &rh) == Ordering::Less {
        ph
    } else {
        rh
    };
    lex(&lo, &hi) != Ordering::Greater
}

/// Whether the closed segment `pq` meets the closed triangle `abc` (exact). A collinear `abc`
/// is handled as its three edges.
pub fn segment_triangle(p: P, q: P, a: P, b: P, c: P) -> bool {
    let Some(k) = plane_axis(a, b, c) else {
        return segments_intersect(p, q, a, b)
            || segments_intersect(p, q, b, c)
            || segments_intersect(p, q, c, a);
    };
    let sp = o3(a, b, c, p);
    let sq = o3(a, b, c, q);
    if sp * sq > 0 {
        return false;
    }
    if sp == 0 && sq == 0 {
        return in_triangle_2d(k, p, a, b, c)
            || in_triangle_2d(k, q, a, b, c)
            || segments_2d(k, p, q, a, b)
            || segments_2d(k, p, q, b, c)
            || segments_2d(k, p, q, c, a);
    }
    // pq crosses or touches the plane at one point: the line through pq passes through the
    // closed triangle iff its three edge orientations never take both strict signs.
    let s = [o3(p, q, a, b), o3(p, q, b, c), o3(p, q, c, a)];
    !(s.contains(&1) && s.contains(&-1))
}

/// Whether all of `q` lie strictly on one side of the plane of `t` (non-degenerate `t`).
fn strictly_one_side(t: &[P; 3], q: &[P; 3]) -> bool {
    let s = q.map(|p| o3(t[0], t[1], t[2], p));
    (s[0] > 0 && s[1] > 0 && s[2] > 0) || (s[0] < 0 && s[1] < 0 && s[2] < 0)
}

/// Whether two closed triangles share a point (exact; no vertex ids involved: use
/// [`faces_intersect`] for mesh faces that may share vertices).
pub fn triangles_intersect(t: &[P; 3], u: &[P; 3]) -> bool {
    // Cheap exact rejection: a triangle strictly on one side of the other's plane (only
    // meaningful when that plane exists: all signs are 0 for a collinear triangle).
    if strictly_one_side(t, u) || strictly_one_side(u, t) {
        return false;
    }
    let edges = |x: &[P; 3]| [(x[0], x[1]), (x[1], x[2]), (x[2], x[0])];
    edges(t)
        .iter()
        .any(|&(p, q)| segment_triangle(p, q, u[0], u[1], u[2]))
        || edges(u)
            .iter()
            .any(|&(p, q)| segment_triangle(p, q, t[0], t[1], t[2]))
}

/// Whether mesh faces `f` and `g` (global vertex ids) at positions `x` (m) intersect — beyond
/// their shared vertices when they have some (see the module docs for the rules).
pub fn faces_intersect(f: [u32; 3], g: [u32; 3], x: &[[f64; 3]]) -> bool {
    let shared: Vec<(usize, usize)> = (0..3)
        .flat_map(|i| (0..3).map(move |j| (i, j)))
        .filter(|&(i, j)| f[i] == g[j])
        .collect();
    let t = f.map(|v| x[v as usize]);
    let u = g.map(|v| x[v as usize]);
    if shared.is_empty() {
        return triangles_intersect(&t, &u);
    }
    if shared.len() == 3
        || plane_axis(t[0], t[1], t[2]).is_none()
        || plane_axis(u[0], u[1], u[2]).is_none()
    {
        return true;
    }
    // Rotate each triangle so its shared corners come first (orientation does not matter).
    let rot = |tri: [P; 3], first: usize| [tri[first], tri[(first + 1) % 3], tri[(first + 2) % 3]];
    if shared.len() == 1 {
        let (i, j) = shared[0];
        let [v, b, c] = rot(t, i);
        let [_, d, e] = rot(u, j);
        return segment_triangle(b, c, v, d, e) || segment_triangle(d, e, v, b, c);
    }
    // Two shared: the corner of each triangle not shared.
    let ti = (0..3)
        .find(|&i| !shared.iter().any(|s| s.0 == i))
        .unwrap_or(0);
    let uj = (0..3)
        .find(|&j| !shared.iter().any(|s| s.1 == j))
        .unwrap_or(0);
    let (a, b) = (t[shared[0].0], t[shared[1].0]);
    let (c, d) = (t[ti], u[uj]);
    if o3(a, b, c, d) != 0 {
        return false;
    }
    // `abc` is non-degenerate (checked above), so some projection keeps it so.
    let k = plane_axis(a, b, c).unwrap_or(0);
    o2(k, a, b, c) * o2(k, a, b, d) > 0
}

/// Every intersecting face pair `[f, g]` (`f < g`, indices into `mesh.faces`) at positions `x`
/// (m, length [`CollisionMesh::num_vertices`]), sorted; empty when the state is
/// intersection-free. Candidates come from [`face_pairs`] with zero inflation; the exact tests
/// run in parallel. Errors on mismatched lengths or a non-finite surface position.
pub fn intersecting_pairs(mesh: &CollisionMesh, x: &[[f64; 3]]) -> Result<Vec<[u32; 2]>> {
    let (pairs, _) = face_pairs(mesh, x, 0.0)?;
    Ok(pairs
        .into_par_iter()
        .filter(|&[f, g]| faces_intersect(mesh.faces[f as usize], mesh.faces[g as usize], x))
        .collect())
}

/// `Ok` when [`intersecting_pairs`] finds nothing; else one line naming the bodies of the first
/// intersecting pair ("bodies `a` and `b` intersect" or "body `a` intersects itself"), the
/// faces and how many pairs intersect — what a scene whose objects start interpenetrating is
/// refused with.
pub fn check_intersection_free(mesh: &CollisionMesh, x: &[[f64; 3]]) -> Result<()> {
    let pairs = intersecting_pairs(mesh, x)?;
    let Some(&[f, g]) = pairs.first() else {
        return Ok(());
    };
    let (bf, bg) = (
        mesh.face_body[f as usize] as usize,
        mesh.face_body[g as usize] as usize,
    );
    let what = if bf == bg {
        format!("body `{}` intersects itself", mesh.bodies[bf].name)
    } else {
        format!(
            "bodies `{}` and `{}` intersect",
            mesh.bodies[bf].name, mesh.bodies[bg].name
        )
    };
    Err(crate::error::JelloError::Invalid(format!(
        "{what}: surface triangles {f} and {g} cross ({} intersecting pairs in all)",
        pairs.len()
    )))
}
