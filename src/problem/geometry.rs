//! Distances between a surface triangle and an analytic obstacle, the overlap test, and a
//! conservative time of impact for a linearly moving triangle (additive CCD, Li et al. 2021,
//! against a static obstacle). Vertices alone cannot keep a body out of a sphere or box that is
//! smaller than its surface's edges; the triangles (their edges and interiors) can.

use super::Obstacle;
use nalgebra::Vector3;

type V3 = Vector3<f64>;

/// The feature of a triangle `t0 t1 t2` that holds the point closest to a query point. Edge k
/// joins corners k and k + 1 (mod 3), as in IPC's point–triangle distance types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TriangleFeature {
    /// Corner k (0..3).
    Vertex(usize),
    /// The relative interior of edge k (0..3).
    Edge(usize),
    /// The interior of the face.
    Face,
}

/// Closest point on triangle `abc` to `p` (Ericson, Real-Time Collision Detection §5.1.5).
pub fn closest_point_on_triangle(p: &V3, a: &V3, b: &V3, c: &V3) -> V3 {
    closest_feature_on_triangle(p, a, b, c).0
}

/// Closest point on triangle `abc` to `p` and the feature that holds it: Ericson's Voronoi-region
/// walk (Real-Time Collision Detection §5.1.5). A degenerate (zero-area) triangle has no face
/// region: the closest point of its three edges (or corners) is taken instead.
pub fn closest_feature_on_triangle(p: &V3, a: &V3, b: &V3, c: &V3) -> (V3, TriangleFeature) {
    use TriangleFeature::{Edge, Face, Vertex};
    let ab = b - a;
    let ac = c - a;
    let ap = p - a;
    let d1 = ab.dot(&ap);
    let d2 = ac.dot(&ap);
    if d1 <= 0.0 && d2 <= 0.0 {
        return (*a, Vertex(0));
    }
    let bp = p - b;
    let d3 = ab.dot(&bp);
    let d4 = ac.dot(&bp);
    if d3 >= 0.0 && d4 <= d3 {
        return (*b, Vertex(1));
    }
    let vc = d1 * d4 - d3 * d2;
    if vc <= 0.0 && d1 >= 0.0 && d3 <= 0.0 {
        return (a + ab * (d1 / (d1 - d3)), Edge(0));
    }
    let cp = p - c;
    let d5 = ab.dot(&cp);
    let d6 = ac.dot(&cp);
    if d6 >= 0.0 && d5 <= d6 {
        return (*c, Vertex(2));
    }
    let vb = d5 * d2 - d1 * d6;
    if vb <= 0.0 && d2 >= 0.0 && d6 <= 0.0 {
        return (a + ac * (d2 / (d2 - d6)), Edge(2));
    }
    let va = d3 * d6 - d5 * d4;
    if va <= 0.0 && (d4 - d3) >= 0.0 && (d5 - d6) >= 0.0 {
        return (b + (c - b) * ((d4 - d3) / ((d4 - d3) + (d5 - d6))), Edge(1));
    }
    let denom = va + vb + vc;
    if denom.abs() <= f64::MIN_POSITIVE {
        // Degenerate (zero-area) triangle: the closest point of its edges.
        let corners = [a, b, c];
        return (0..3)
            .map(|k| {
                let (e0, e1) = (corners[k], corners[(k + 1) % 3]);
                let (_, s, _) = segment_closest(p, p, e0, e1);
                let feature = if s <= 0.0 {
                    Vertex(k)
                } else if s >= 1.0 {
                    Vertex((k + 1) % 3)
                } else {
                    Edge(k)
                };
                (e0 + (e1 - e0) * s, feature)
            })
            .min_by(|u, v| {
                (u.0 - p)
                    .norm_squared()
                    .total_cmp(&(v.0 - p).norm_squared())
            })
            .unwrap_or((*a, Vertex(0)));
    }
    let v = vb / denom;
    let w = vc / denom;
    (a + ab * v + ac * w, Face)
}

/// Closest points of segments `p0p1` and `q0q1` (Ericson §5.1.9, with degenerate segments):
/// (s, t, distance) with the points p0 + s(p1 − p0) and q0 + t(q1 − q0).
pub fn segment_closest(p0: &V3, p1: &V3, q0: &V3, q1: &V3) -> (f64, f64, f64) {
    let d1 = p1 - p0;
    let d2 = q1 - q0;
    let r = p0 - q0;
    let a = d1.norm_squared();
    let e = d2.norm_squared();
    let f = d2.dot(&r);
    let eps = 1e-300;
    let (s, t) = if a <= eps && e <= eps {
        (0.0, 0.0)
    } else if a <= eps {
        (0.0, (f / e).clamp(0.0, 1.0))
    } else {
        let c = d1.dot(&r);
        if e <= eps {
            ((-c / a).clamp(0.0, 1.0), 0.0)
        } else {
            let b = d1.dot(&d2);
            let denom = a * e - b * b;
            let mut s = if denom > 0.0 {
                ((b * f - c * e) / denom).clamp(0.0, 1.0)
            } else {
                0.0
            };
            let mut t = (b * s + f) / e;
            if t < 0.0 {
                t = 0.0;
                s = (-c / a).clamp(0.0, 1.0);
            } else if t > 1.0 {
                t = 1.0;
                s = ((b - c) / a).clamp(0.0, 1.0);
            }
            (s, t)
        }
    };
    (s, t, ((p0 + d1 * s) - (q0 + d2 * t)).norm())
}

/// Distance between segments `p0p1` and `q0q1`.
pub fn segment_distance(p0: &V3, p1: &V3, q0: &V3, q1: &V3) -> f64 {
    segment_closest(p0, p1, q0, q1).2
}

/// Barycentric coordinates of `p` (a point of the plane of `abc`) in triangle `abc`; a
/// degenerate triangle gives the coordinates of its nearest corner.
pub fn barycentric(p: &V3, a: &V3, b: &V3, c: &V3) -> [f64; 3] {
    let v0 = b - a;
    let v1 = c - a;
    let v2 = p - a;
    let d00 = v0.dot(&v0);
    let d01 = v0.dot(&v1);
    let d11 = v1.dot(&v1);
    let d20 = v2.dot(&v0);
    let d21 = v2.dot(&v1);
    let denom = d00 * d11 - d01 * d01;
    if denom.abs() <= 1e-300 {
        let k = [a, b, c]
            .iter()
            .enumerate()
            .min_by(|x, y| {
                (*x.1 - p)
                    .norm_squared()
                    .total_cmp(&(*y.1 - p).norm_squared())
            })
            .map(|(k, _)| k)
            .unwrap_or(0);
        let mut w = [0.0; 3];
        w[k] = 1.0;
        return w;
    }
    let v = (d11 * d20 - d01 * d21) / denom;
    let w = (d00 * d21 - d01 * d20) / denom;
    [1.0 - v - w, v, w]
}

/// Distance from `p` to the closed box `[lo, hi]` (0 inside).
pub fn point_box_distance(p: &V3, lo: &V3, hi: &V3) -> f64 {
    let mut s = 0.0;
    for k in 0..3 {
        let d = (lo[k] - p[k]).max(p[k] - hi[k]).max(0.0);
        s += d * d;
    }
    s.sqrt()
}

/// Whether triangle `tri` and the closed box `[lo, hi]` intersect: the separating-axis test
/// over the box's 3 face normals, the triangle's normal and the 9 edge cross products
/// (Akenine-Möller 2001).
pub fn triangle_box_overlap(tri: &[V3; 3], lo: &V3, hi: &V3) -> bool {
    let c = (lo + hi) * 0.5;
    let h = (hi - lo) * 0.5;
    let v = tri.map(|p| p - c);
    let e = [v[1] - v[0], v[2] - v[1], v[0] - v[2]];
    let separated = |axis: V3| {
        let len2 = axis.norm_squared();
        if len2 <= 1e-300 {
            return false;
        }
        let p = v.map(|q| q.dot(&axis));
        let r = h[0] * axis[0].abs() + h[1] * axis[1].abs() + h[2] * axis[2].abs();
        let (mn, mx) = (p[0].min(p[1]).min(p[2]), p[0].max(p[1]).max(p[2]));
        mn > r || mx < -r
    };
    for k in 0..3 {
        let mut a = V3::zeros();
        a[k] = 1.0;
        if separated(a) {
            return false;
        }
    }
    if separated(e[0].cross(&e[1])) {
        return false;
    }
    for edge in &e {
        for k in 0..3 {
            let mut a = V3::zeros();
            a[k] = 1.0;
            if separated(a.cross(edge)) {
                return false;
            }
        }
    }
    true
}

/// Distance between triangle `tri` and the closed box `[lo, hi]` (0 when they intersect). For
/// disjoint convex polytopes the closest pair is vertex–feature or edge–edge, so the minimum
/// over the triangle's corners against the box, the box's corners against the triangle and the
/// triangle's edges against the box's edges is exact.
pub fn triangle_box_distance(tri: &[V3; 3], lo: &V3, hi: &V3) -> f64 {
    if triangle_box_overlap(tri, lo, hi) {
        return 0.0;
    }
    let mut d = tri
        .iter()
        .map(|p| point_box_distance(p, lo, hi))
        .fold(f64::INFINITY, f64::min);
    let corner = |i: usize| {
        V3::new(
            if i & 1 == 0 { lo[0] } else { hi[0] },
            if i & 2 == 0 { lo[1] } else { hi[1] },
            if i & 4 == 0 { lo[2] } else { hi[2] },
        )
    };
    for i in 0..8 {
        let q = corner(i);
        d = d.min((closest_point_on_triangle(&q, &tri[0], &tri[1], &tri[2]) - q).norm());
    }
    for i in 0..8 {
        for k in 0..3 {
            if i & (1 << k) != 0 {
                continue;
            }
            let (q0, q1) = (corner(i), corner(i | (1 << k)));
            for a in 0..3 {
                d = d.min(segment_distance(&tri[a], &tri[(a + 1) % 3], &q0, &q1));
            }
        }
    }
    d
}

impl Obstacle {
    /// Distance (m) from triangle `tri` to the obstacle: for a half-space the smallest corner
    /// distance (negative inside), for a sphere the distance from its centre to the triangle
    /// minus the radius (negative when they overlap), for a box the triangle–box distance (0
    /// when they intersect).
    pub fn triangle_distance(&self, tri: &[V3; 3]) -> f64 {
        match self {
            Obstacle::HalfSpace { .. } => tri
                .iter()
                .map(|p| self.distance(p).d)
                .fold(f64::INFINITY, f64::min),
            Obstacle::Sphere { center, radius } => {
                let c = V3::from(*center);
                (closest_point_on_triangle(&c, &tri[0], &tri[1], &tri[2]) - c).norm() - radius
            }
            Obstacle::Box { min, max } => {
                triangle_box_distance(tri, &V3::from(*min), &V3::from(*max))
            }
        }
    }

    /// Whether triangle `tri` reaches into the obstacle's interior (or touches it, for a box).
    pub fn overlaps_triangle(&self, tri: &[V3; 3]) -> bool {
        match self {
            Obstacle::Box { min, max } => {
                triangle_box_overlap(tri, &V3::from(*min), &V3::from(*max))
            }
            _ => self.triangle_distance(tri) < 0.0,
        }
    }

    /// Whether the obstacle's barrier acts on vertices (half-spaces and boxes: point–plane and
    /// point–box distances); a sphere acts on whole surface triangles instead
    /// ([`super::surface_contact`]), whose closest point may be a vertex.
    pub fn acts_on_vertices(&self) -> bool {
        !matches!(self, Obstacle::Sphere { .. })
    }

    /// Whether the obstacle is bounded (a sphere or a box: a body can swallow it whole, and its
    /// features can slip between a surface's vertices).
    pub fn is_bounded(&self) -> bool {
        !matches!(self, Obstacle::HalfSpace { .. })
    }

    /// A point inside a bounded obstacle (its centre), to test whether a body encloses it.
    pub fn interior_point(&self) -> Option<V3> {
        match self {
            Obstacle::HalfSpace { .. } => None,
            Obstacle::Sphere { center, .. } => Some(V3::from(*center)),
            Obstacle::Box { min, max } => Some((V3::from(*min) + V3::from(*max)) * 0.5),
        }
    }

    /// Axis-aligned bounds of a bounded obstacle, m.
    pub fn bounds(&self) -> Option<(V3, V3)> {
        match self {
            Obstacle::HalfSpace { .. } => None,
            Obstacle::Sphere { center, radius } => {
                let c = V3::from(*center);
                let r = V3::repeat(*radius);
                Some((c - r, c + r))
            }
            Obstacle::Box { min, max } => Some((V3::from(*min), V3::from(*max))),
        }
    }

    /// A conservative time of impact t ∈ [0, 1] of the triangle moving linearly from `tri` by
    /// `d` (per corner) against this static obstacle: additive CCD — advance by
    /// (1 − s)·distance / (largest corner speed), which no point of the triangle can close, until
    /// the gap falls below s = 10% of the starting gap or t reaches 1. The triangle is never in
    /// contact on [0, t]; t = 0 when it starts in contact. At most `max_iters` advances (then
    /// the t reached so far, still conservative).
    pub fn triangle_time_of_impact(&self, tri: &[V3; 3], d: &[V3; 3], max_iters: usize) -> f64 {
        const S: f64 = 0.1;
        let speed = d.iter().map(|v| v.norm()).fold(0.0f64, f64::max);
        if speed == 0.0 {
            return 1.0;
        }
        let d0 = self.triangle_distance(tri);
        if d0 <= 0.0 {
            return 0.0;
        }
        let target = S * d0;
        let mut t = 0.0f64;
        let mut gap = d0;
        for _ in 0..max_iters {
            let dt = (1.0 - S) * gap / speed;
            if t + dt >= 1.0 {
                return 1.0;
            }
            t += dt;
            let at = [0, 1, 2].map(|k| tri[k] + d[k] * t);
            gap = self.triangle_distance(&at);
            if gap < target {
                return t;
            }
        }
        t
    }
}
