//! Independent reference geometry for the contact tests: squared point–triangle and edge–edge
//! distances as the minimum over every pair of features, each by its own projection formula
//! (clamped parameters, Cramer for the face and for two lines). Nothing here goes through
//! `jello::contact` or `jello::problem`'s closest-point walks.
#![allow(dead_code)]

pub mod ccd_cases;

use nalgebra::Vector3;
use rand::Rng;

pub type V3 = Vector3<f64>;

/// A point uniform in [−s, s]³.
pub fn rand_point(rng: &mut impl Rng, s: f64) -> V3 {
    V3::new(
        rng.random_range(-s..s),
        rng.random_range(-s..s),
        rng.random_range(-s..s),
    )
}

/// A unit vector uniform on the sphere.
pub fn rand_unit(rng: &mut impl Rng) -> V3 {
    loop {
        let v = rand_point(rng, 1.0);
        let n = v.norm();
        if n > 0.1 && n <= 1.0 {
            return v / n;
        }
    }
}

/// A unit vector perpendicular to `n` (unit), random about it.
pub fn rand_perp(rng: &mut impl Rng, n: &V3) -> V3 {
    loop {
        let v = rand_unit(rng);
        let w = v - n * n.dot(&v);
        if w.norm() > 0.1 {
            return w.normalize();
        }
    }
}

/// Squared distance from `p` to segment `ab` (clamped projection; a zero-length segment is its
/// point).
pub fn point_segment_sq(p: &V3, a: &V3, b: &V3) -> f64 {
    let e = b - a;
    let ee = e.norm_squared();
    let s = if ee > 0.0 {
        ((p - a).dot(&e) / ee).clamp(0.0, 1.0)
    } else {
        0.0
    };
    (p - (a + e * s)).norm_squared()
}

/// The solution of [[a, b], [b, c]]·(x, y) = (r₁, r₂), or `None` when singular. Whatever (x, y)
/// it gives names real points of the primitives when accepted, so an imprecise solution can
/// only make a reference distance larger than the truth, never smaller.
fn solve2(a: f64, b: f64, c: f64, r1: f64, r2: f64) -> Option<(f64, f64)> {
    let det = a * c - b * b;
    (det > 0.0).then(|| ((c * r1 - b * r2) / det, (a * r2 - b * r1) / det))
}

/// Squared point–triangle distance: corners, edges, and the face when the projection's
/// barycentric coordinates are all non-negative.
pub fn pt_distance_sq(p: &V3, t0: &V3, t1: &V3, t2: &V3) -> f64 {
    let mut best = [t0, t1, t2]
        .iter()
        .map(|t| (p - *t).norm_squared())
        .fold(f64::INFINITY, f64::min);
    for (a, b) in [(t0, t1), (t1, t2), (t2, t0)] {
        best = best.min(point_segment_sq(p, a, b));
    }
    let (e1, e2, q) = (t1 - t0, t2 - t0, p - t0);
    // Barycentric (u, v) of the projection: ∇‖q − u·e₁ − v·e₂‖² = 0.
    let (g11, g12, g22) = (e1.dot(&e1), e1.dot(&e2), e2.dot(&e2));
    if let Some((u, v)) = solve2(g11, g12, g22, e1.dot(&q), e2.dot(&q)) {
        if u >= 0.0 && v >= 0.0 && u + v <= 1.0 {
            best = best.min((q - e1 * u - e2 * v).norm_squared());
        }
    }
    best
}

/// Squared segment–segment distance: endpoint pairs, endpoint–segment pairs, and the two
/// interiors when the lines' closest parameters both lie in [0, 1].
pub fn ee_distance_sq(a0: &V3, a1: &V3, b0: &V3, b1: &V3) -> f64 {
    let mut best = f64::INFINITY;
    for p in [a0, a1] {
        best = best.min(point_segment_sq(p, b0, b1));
    }
    for p in [b0, b1] {
        best = best.min(point_segment_sq(p, a0, a1));
    }
    let (u, v, w) = (a1 - a0, b1 - b0, a0 - b0);
    // Line parameters: ∇‖w + s·u − t·v‖² = 0.
    let (g11, g12, g22) = (u.dot(&u), -u.dot(&v), v.dot(&v));
    if let Some((s, t)) = solve2(g11, g12, g22, -u.dot(&w), v.dot(&w)) {
        if (0.0..=1.0).contains(&s) && (0.0..=1.0).contains(&t) {
            best = best.min((w + u * s - v * t).norm_squared());
        }
    }
    best
}

/// A pair record over four distinct random vertices below `n`, point–triangle or edge–edge
/// (mollifier threshold 1e-3 m⁴) with equal odds.
pub fn random_gpu_pair(rng: &mut impl Rng, n: usize) -> jello::gpu::GpuPair {
    let mut v = [0u32; 4];
    for k in 0..4 {
        v[k] = loop {
            let c = rng.random_range(0..n as u32);
            if !v[..k].contains(&c) {
                break c;
            }
        };
    }
    if rng.random_bool(0.5) {
        jello::gpu::GpuPair::point_triangle(v[0], [v[1], v[2], v[3]])
    } else {
        jello::gpu::GpuPair::edge_edge([v[0], v[1]], [v[2], v[3]], 1e-3)
    }
}
