//! Squared distances between surface primitives in IPC's form, the classification that picks
//! the closest features, and exact gradients and Hessians.
//!
//! # The four distance functions (all squared, m²)
//!
//! | function | value |
//! |---|---|
//! | [`point_point`] | ‖p₀ − p₁‖² |
//! | [`point_line`] | ‖(e₀ − p) × (e₁ − p)‖² / ‖e₁ − e₀‖² |
//! | [`point_plane`] | ((p − t₀)·n)² / ‖n‖²,  n = (t₁ − t₀) × (t₂ − t₀) |
//! | [`line_line`] | ((a₀ − b₀)·n)² / ‖n‖²,  n = (a₁ − a₀) × (b₁ − b₀) |
//!
//! A point–triangle or edge–edge distance is one of these, chosen by the closest pair of features
//! ([`point_triangle_type`], [`edge_edge_type`]): 7 point–triangle types (three corners, three
//! edges, the face; [`TriangleFeature`]) and 9 edge–edge types ([`EdgeEdgeType`]). Each function
//! is smooth where its type applies, and the minimum distance is continuous across type
//! boundaries because the features are nested (on the boundary between the face and an edge the
//! point's projection lies on the edge, so both formulas agree).
//!
//! # Derivatives
//!
//! Each distance is d(x) = min_u ‖r(x, u)‖² with r = Σᵢ wᵢ(u) xᵢ linear in the vertices xᵢ and
//! affine in K closest-point parameters u (K = 0, 1, 2: none, the line parameter α, the
//! barycentric (β, γ), the line parameters (s, t)). With f = ‖r‖², Dₖ = ∂r/∂uₖ and u* the
//! minimiser (Dₖ·r = 0), the envelope theorem and the implicit function theorem give
//!
//! ∇d = f_x = [2wᵢ r]ᵢ,   ∇²d = f_xx − f_xu f_uu⁻¹ f_ux,
//!
//! with f_xx = 2 w wᵀ ⊗ I₃, (f_xu)ᵢₖ = 2(∂wᵢ/∂uₖ r + wᵢ Dₖ) and f_uu = 2 DᵀD. This is exact (no
//! finite differences), the same code serves all four functions, and f_uu is invertible exactly
//! where the type is used (a non-degenerate edge, triangle, or a non-parallel edge pair). The
//! value itself comes from the cross-product forms in the table (no cancellation in solving for
//! u), r from the normal direction where there is one.
//!
//! # Choices where IPC is vague
//! - Point–triangle classification is Ericson's Voronoi-region walk
//!   ([`crate::problem::closest_feature_on_triangle`]; ties go to the lower-dimensional feature);
//!   a zero-area triangle has no face type (its closest edge or corner is used).
//! - Edges are treated as parallel when sin²θ = ‖u × v‖² / (‖u‖²‖v‖²) < [`PARALLEL_SIN2`]
//!   (2.5·10⁻¹⁶, θ ≈ 1.6·10⁻⁸ rad; ipc-toolkit's value): line–line then loses all precision, and
//!   the segment distance is the minimum of the four endpoint-to-segment distances, whose closest
//!   type is used (point–edge or point–point). The threshold balances the two errors: line–line's
//!   normal has relative error ≈ ε/sinθ, and the endpoint minimum over-estimates the distance of
//!   crossing, nearly parallel segments by at most L·sinθ (L the edge length); both are ≈10⁻⁸·L
//!   at the threshold.
//! - Zero-length edges: the point–point or point–edge type of their endpoint.

use crate::problem::{closest_feature_on_triangle, segment_closest, TriangleFeature};
use nalgebra::{SMatrix, SVector, Vector3};

type V3 = Vector3<f64>;

/// sin²θ below which two edges count as parallel (see the module docs).
pub const PARALLEL_SIN2: f64 = 2.5e-16;

/// A scalar function of N stacked coordinates (3 per vertex, in the stencil's vertex order) with
/// its exact gradient and Hessian. For a squared distance: value in m², gradient in m, Hessian
/// unit-free.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SecondOrder<const N: usize> {
    /// The value.
    pub value: f64,
    /// ∂value/∂x.
    pub grad: SVector<f64, N>,
    /// ∂²value/∂x², symmetric.
    pub hess: SMatrix<f64, N, N>,
}

impl<const N: usize> SecondOrder<N> {
    /// A constant (zero gradient and Hessian).
    pub fn constant(value: f64) -> Self {
        Self {
            value,
            grad: SVector::zeros(),
            hess: SMatrix::zeros(),
        }
    }

    /// g(f(x)) by the chain rule, from g, g′, g″ at f(x): ∇ = g′∇f, ∇² = g″∇f∇fᵀ + g′∇²f.
    pub fn compose(&self, (g, dg, ddg): (f64, f64, f64)) -> Self {
        Self {
            value: g,
            grad: self.grad * dg,
            hess: self.grad * self.grad.transpose() * ddg + self.hess * dg,
        }
    }

    /// The same function on a larger stencil of M coordinates: vertex k of this stencil is
    /// vertex `slots[k]` of the result (derivatives with respect to the other vertices zero).
    pub fn scatter<const M: usize>(&self, slots: &[usize]) -> SecondOrder<M> {
        debug_assert_eq!(slots.len() * 3, N);
        let mut out = SecondOrder::<M>::constant(self.value);
        for (i, &si) in slots.iter().enumerate() {
            for a in 0..3 {
                out.grad[3 * si + a] = self.grad[3 * i + a];
                for (j, &sj) in slots.iter().enumerate() {
                    for b in 0..3 {
                        out.hess[(3 * si + a, 3 * sj + b)] = self.hess[(3 * i + a, 3 * j + b)];
                    }
                }
            }
        }
        out
    }
}

/// Which feature of an edge `e₀e₁` is closest to a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PointEdgeType {
    /// Endpoint k (0 or 1): point–point.
    Endpoint(usize),
    /// The edge's interior: point–line.
    Interior,
}

/// Which features of edges a = `a₀a₁` and b = `b₀b₁` are closest (IPC's 9 edge–edge types).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EdgeEdgeType {
    /// Endpoint i of a and endpoint j of b, point–point (IPC's EA{i}_EB{j}).
    Endpoints(usize, usize),
    /// Endpoint i of a and the interior of b, point–line (IPC's EA{i}_EB).
    EndpointA(usize),
    /// Endpoint j of b and the interior of a, point–line (IPC's EA_EB{j}).
    EndpointB(usize),
    /// Both interiors, line–line (IPC's EA_EB).
    Interiors,
}

/// ‖p₀ − p₁‖², m².
pub fn point_point_distance(p0: &V3, p1: &V3) -> f64 {
    (p0 - p1).norm_squared()
}

/// Squared distance from `p` to the line through `e0`, `e1`, m² (NaN for a zero-length edge).
pub fn point_line_distance(p: &V3, e0: &V3, e1: &V3) -> f64 {
    (e0 - p).cross(&(e1 - p)).norm_squared() / (e1 - e0).norm_squared()
}

/// Squared distance from `p` to the plane through `t0`, `t1`, `t2`, m² (NaN for a zero-area
/// triangle).
pub fn point_plane_distance(p: &V3, t0: &V3, t1: &V3, t2: &V3) -> f64 {
    let n = (t1 - t0).cross(&(t2 - t0));
    let h = (p - t0).dot(&n);
    h * h / n.norm_squared()
}

/// Squared distance between the lines through `a0a1` and `b0b1`, m² (NaN for parallel lines).
pub fn line_line_distance(a0: &V3, a1: &V3, b0: &V3, b1: &V3) -> f64 {
    let n = (a1 - a0).cross(&(b1 - b0));
    let h = (a0 - b0).dot(&n);
    h * h / n.norm_squared()
}

/// [`point_point_distance`] with derivatives; stencil (p₀, p₁).
pub fn point_point(p0: &V3, p1: &V3) -> SecondOrder<6> {
    let r = p0 - p1;
    minimised_square::<6, 0>(r.norm_squared(), &r, &[1.0, -1.0], &[[]; 2], &[])
}

/// [`point_line_distance`] with derivatives; stencil (p, e₀, e₁).
pub fn point_line(p: &V3, e0: &V3, e1: &V3) -> SecondOrder<9> {
    let e = e1 - e0;
    let alpha = e.dot(&(p - e0)) / e.norm_squared();
    // r = p − (1 − α)e₀ − αe₁.
    let r = (p - e0) - e * alpha;
    minimised_square::<9, 1>(
        point_line_distance(p, e0, e1),
        &r,
        &[1.0, alpha - 1.0, -alpha],
        &[[0.0], [1.0], [-1.0]],
        &[-e],
    )
}

/// [`point_plane_distance`] with derivatives; stencil (p, t₀, t₁, t₂).
pub fn point_plane(p: &V3, t0: &V3, t1: &V3, t2: &V3) -> SecondOrder<12> {
    let (e1, e2) = (t1 - t0, t2 - t0);
    // r = p − (1 − β − γ)t₀ − βt₁ − γt₂ = (p − t₀) + β(−e₁) + γ(−e₂).
    let (value, r, beta, gamma) = planar(&(p - t0), &-e1, &-e2);
    minimised_square::<12, 2>(
        value,
        &r,
        &[1.0, beta + gamma - 1.0, -beta, -gamma],
        &[[0.0, 0.0], [1.0, 1.0], [-1.0, 0.0], [0.0, -1.0]],
        &[-e1, -e2],
    )
}

/// [`line_line_distance`] with derivatives; stencil (a₀, a₁, b₀, b₁).
pub fn line_line(a0: &V3, a1: &V3, b0: &V3, b1: &V3) -> SecondOrder<12> {
    let (u, v) = (a1 - a0, b1 - b0);
    // r = (1 − s)a₀ + s·a₁ − (1 − t)b₀ − t·b₁ = (a₀ − b₀) + s·u + t(−v).
    let (value, r, s, t) = planar(&(a0 - b0), &u, &-v);
    minimised_square::<12, 2>(
        value,
        &r,
        &[1.0 - s, s, t - 1.0, -t],
        &[[-1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, -1.0]],
        &[u, -v],
    )
}

/// min over (u₁, u₂) of ‖w + u₁D₁ + u₂D₂‖² (point–plane and line–line): the value, the
/// minimising r (the component of w along n = D₁ × D₂, no cancellation) and u₁, u₂ (Cramer on the
/// 2×2 normal equations, whose determinant is ‖n‖²).
fn planar(w: &V3, d1: &V3, d2: &V3) -> (f64, V3, f64, f64) {
    let n = d1.cross(d2);
    let nn = n.norm_squared();
    let h = w.dot(&n);
    let (g11, g12, g22) = (d1.dot(d1), d1.dot(d2), d2.dot(d2));
    let (r1, r2) = (-d1.dot(w), -d2.dot(w));
    let u1 = (g22 * r1 - g12 * r2) / nn;
    let u2 = (g11 * r2 - g12 * r1) / nn;
    (h * h / nn, n * (h / nn), u1, u2)
}

/// The derivatives of d = min_u ‖r‖², r = Σᵢ wᵢ(u) xᵢ, at the minimiser (module docs): `value`
/// and `r` at u*, the weights `w` at u*, their derivatives `dw[i][k]` = ∂wᵢ/∂uₖ and the
/// directions `dirs[k]` = ∂r/∂uₖ. A singular f_uu (degenerate primitive) gives a NaN Hessian.
fn minimised_square<const N: usize, const K: usize>(
    value: f64,
    r: &V3,
    w: &[f64],
    dw: &[[f64; K]],
    dirs: &[V3; K],
) -> SecondOrder<N> {
    debug_assert!(w.len() * 3 == N && dw.len() == w.len());
    let mut out = SecondOrder::<N>::constant(value);
    for (i, &wi) in w.iter().enumerate() {
        out.grad
            .fixed_rows_mut::<3>(3 * i)
            .copy_from(&(r * (2.0 * wi)));
        for (j, &wj) in w.iter().enumerate() {
            for a in 0..3 {
                out.hess[(3 * i + a, 3 * j + a)] = 2.0 * wi * wj;
            }
        }
    }
    if K == 0 {
        return out;
    }
    let gram = SMatrix::<f64, K, K>::from_fn(|k, l| dirs[k].dot(&dirs[l]));
    let ginv = gram
        .try_inverse()
        .unwrap_or_else(|| SMatrix::repeat(f64::NAN));
    // M = f_xu / 2, so f_xu f_uu⁻¹ f_ux = 2 M G⁻¹ Mᵀ.
    let m = SMatrix::<f64, N, K>::from_fn(|row, k| {
        let (i, a) = (row / 3, row % 3);
        dw[i][k] * r[a] + w[i] * dirs[k][a]
    });
    let correction = m * ginv * m.transpose();
    // Symmetrised: G⁻¹ is symmetric, so only rounding separates the two halves.
    out.hess -= correction + correction.transpose();
    out
}

/// The closest feature of edge `e0e1` to `p` (a zero-length edge: its endpoint 0).
pub fn point_edge_type(p: &V3, e0: &V3, e1: &V3) -> PointEdgeType {
    match segment_closest(p, p, e0, e1).1 {
        t if t <= 0.0 => PointEdgeType::Endpoint(0),
        t if t >= 1.0 => PointEdgeType::Endpoint(1),
        _ => PointEdgeType::Interior,
    }
}

/// The closest feature of triangle `t0t1t2` to `p` (see the module docs).
pub fn point_triangle_type(p: &V3, t0: &V3, t1: &V3, t2: &V3) -> TriangleFeature {
    closest_feature_on_triangle(p, t0, t1, t2).1
}

/// The closest pair of features of edges `a0a1` and `b0b1` (see the module docs for the
/// parallel case).
pub fn edge_edge_type(a0: &V3, a1: &V3, b0: &V3, b1: &V3) -> EdgeEdgeType {
    let (u, v) = (a1 - a0, b1 - b0);
    let (uu, vv) = (u.norm_squared(), v.norm_squared());
    if uu == 0.0 || vv == 0.0 || u.cross(&v).norm_squared() < PARALLEL_SIN2 * uu * vv {
        return parallel_edge_edge_type(a0, a1, b0, b1);
    }
    let (s, t, _) = segment_closest(a0, a1, b0, b1);
    let end = |x: f64| {
        if x <= 0.0 {
            Some(0)
        } else if x >= 1.0 {
            Some(1)
        } else {
            None
        }
    };
    match (end(s), end(t)) {
        (Some(i), Some(j)) => EdgeEdgeType::Endpoints(i, j),
        (Some(i), None) => EdgeEdgeType::EndpointA(i),
        (None, Some(j)) => EdgeEdgeType::EndpointB(j),
        (None, None) => EdgeEdgeType::Interiors,
    }
}

/// Parallel (or degenerate) edges: the closest of the four endpoint-to-segment pairs.
fn parallel_edge_edge_type(a0: &V3, a1: &V3, b0: &V3, b1: &V3) -> EdgeEdgeType {
    let candidates = [
        (a0, b0, b1, 0, false),
        (a1, b0, b1, 1, false),
        (b0, a0, a1, 0, true),
        (b1, a0, a1, 1, true),
    ];
    let mut best = (f64::INFINITY, EdgeEdgeType::Endpoints(0, 0));
    for (p, e0, e1, k, on_b) in candidates {
        let ty = point_edge_type(p, e0, e1);
        let d = point_edge_distance(p, e0, e1, ty);
        let ee = match (ty, on_b) {
            (PointEdgeType::Interior, false) => EdgeEdgeType::EndpointA(k),
            (PointEdgeType::Interior, true) => EdgeEdgeType::EndpointB(k),
            (PointEdgeType::Endpoint(j), false) => EdgeEdgeType::Endpoints(k, j),
            (PointEdgeType::Endpoint(i), true) => EdgeEdgeType::Endpoints(i, k),
        };
        if d < best.0 {
            best = (d, ee);
        }
    }
    best.1
}

/// Squared distance from `p` to edge `e0e1` of the given type, m².
pub fn point_edge_distance(p: &V3, e0: &V3, e1: &V3, ty: PointEdgeType) -> f64 {
    match ty {
        PointEdgeType::Endpoint(k) => point_point_distance(p, [e0, e1][k]),
        PointEdgeType::Interior => point_line_distance(p, e0, e1),
    }
}

/// [`point_edge_distance`] with derivatives; stencil (p, e₀, e₁).
pub fn point_edge(p: &V3, e0: &V3, e1: &V3, ty: PointEdgeType) -> SecondOrder<9> {
    match ty {
        PointEdgeType::Endpoint(k) => point_point(p, [e0, e1][k]).scatter(&[0, 1 + k]),
        PointEdgeType::Interior => point_line(p, e0, e1),
    }
}

/// Squared distance from `p` to triangle `t0t1t2` for the given closest feature, m². With
/// `point_triangle_type(p, t0, t1, t2)` it is the point–triangle distance.
pub fn point_triangle_distance(p: &V3, t0: &V3, t1: &V3, t2: &V3, ty: TriangleFeature) -> f64 {
    let t = [t0, t1, t2];
    match ty {
        TriangleFeature::Vertex(k) => point_point_distance(p, t[k]),
        TriangleFeature::Edge(k) => point_line_distance(p, t[k], t[(k + 1) % 3]),
        TriangleFeature::Face => point_plane_distance(p, t0, t1, t2),
    }
}

/// [`point_triangle_distance`] with derivatives; stencil (p, t₀, t₁, t₂).
pub fn point_triangle(p: &V3, t0: &V3, t1: &V3, t2: &V3, ty: TriangleFeature) -> SecondOrder<12> {
    let t = [t0, t1, t2];
    match ty {
        TriangleFeature::Vertex(k) => point_point(p, t[k]).scatter(&[0, 1 + k]),
        TriangleFeature::Edge(k) => {
            let k1 = (k + 1) % 3;
            point_line(p, t[k], t[k1]).scatter(&[0, 1 + k, 1 + k1])
        }
        TriangleFeature::Face => point_plane(p, t0, t1, t2),
    }
}

/// Squared distance between edges `a0a1` and `b0b1` for the given closest features, m². With
/// `edge_edge_type(a0, a1, b0, b1)` it is the edge–edge distance.
pub fn edge_edge_distance(a0: &V3, a1: &V3, b0: &V3, b1: &V3, ty: EdgeEdgeType) -> f64 {
    let (a, b) = ([a0, a1], [b0, b1]);
    match ty {
        EdgeEdgeType::Endpoints(i, j) => point_point_distance(a[i], b[j]),
        EdgeEdgeType::EndpointA(i) => point_line_distance(a[i], b0, b1),
        EdgeEdgeType::EndpointB(j) => point_line_distance(b[j], a0, a1),
        EdgeEdgeType::Interiors => line_line_distance(a0, a1, b0, b1),
    }
}

/// [`edge_edge_distance`] with derivatives; stencil (a₀, a₁, b₀, b₁).
pub fn edge_edge(a0: &V3, a1: &V3, b0: &V3, b1: &V3, ty: EdgeEdgeType) -> SecondOrder<12> {
    let (a, b) = ([a0, a1], [b0, b1]);
    match ty {
        EdgeEdgeType::Endpoints(i, j) => point_point(a[i], b[j]).scatter(&[i, 2 + j]),
        EdgeEdgeType::EndpointA(i) => point_line(a[i], b0, b1).scatter(&[i, 2, 3]),
        EdgeEdgeType::EndpointB(j) => point_line(b[j], a0, a1).scatter(&[2 + j, 0, 1]),
        EdgeEdgeType::Interiors => line_line(a0, a1, b0, b1),
    }
}
