//! The barrier between bodies' surfaces and the bounded obstacles (spheres and boxes), as IPC
//! builds it from primitive pairs, each with a smooth distance:
//!
//! - a **surface triangle and a sphere**: the distance from the sphere's centre to the triangle
//!   minus the radius (a sphere is smooth and strictly convex, so the closest point is unique);
//! - a **box corner and a surface triangle** (point–triangle distance);
//! - a **surface edge and a box edge** (edge–edge distance), multiplied by IPC's mollifier so
//!   the term fades out as the edges turn parallel, where the closest pair is not unique;
//! - a **surface vertex and a box** (point–box distance), like vertices against half-spaces —
//!   those stay in the vertex terms of [`super::StepProblem`].
//!
//! A single triangle–box closest pair is not enough: when a face lies parallel to a box face
//! the closest pair is a whole patch, its barrier gradient jumps between corners, and Newton
//! zig-zagged (a ball resting on a 3 mm plate: 100 iterations on 9 of 40 steps). The pairs
//! above overlap near shared features, as IPC's do; each is C¹ where it is active.
//!
//! Each pair's barrier is w·m(x)·b(d(x)), with w = κ·(the primitive's share of its vertices'
//! masses)/h² (so a vertex whose primitives all sit at its own distance feels the vertex
//! barrier's κ·m/h²), b IPC's log barrier and m the mollifier (1 except edge–edge). Gradients
//! are analytic (∂d/∂x of a corner is its barycentric weight times the unit normal, by the
//! envelope theorem); Hessians are central differences of the analytic gradient, then
//! projected to PSD — the curvature term b'∇²d matters here: a triangle rolling over a small
//! sphere sees a concave distance, and dropping that term cut Newton's steps to 2–3% by the CCD
//! filter.

use super::geometry::{barycentric, closest_point_on_triangle, segment_closest};
use super::obstacle::barrier;
use super::{Model, Obstacle};
use crate::contact::mollifier::{mollifier, mollifier_threshold};
use nalgebra::{SMatrix, SVector, Vector3};

type V3 = Vector3<f64>;

/// What a pair couples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PairKind {
    /// Surface triangle `face` and the sphere `obstacle`.
    TriangleSphere {
        /// Index into `Model::surface.triangles`.
        face: usize,
        /// Index into `Model::obstacles`.
        obstacle: usize,
    },
    /// Corner `corner` (bit k set: max along axis k) of box `obstacle` and surface triangle
    /// `face`.
    CornerTriangle {
        /// Index into `Model::surface.triangles`.
        face: usize,
        /// Index into `Model::obstacles`.
        obstacle: usize,
        /// Box corner, 0..8.
        corner: usize,
    },
    /// Surface edge `edge` and edge `box_edge` (0..12) of box `obstacle`.
    EdgeEdge {
        /// Index into `Model::surface_edges`.
        edge: usize,
        /// Index into `Model::obstacles`.
        obstacle: usize,
        /// Box edge, 0..12.
        box_edge: usize,
    },
}

/// One barrier pair between the surface and a bounded obstacle.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SurfacePair {
    /// What it couples.
    pub kind: PairKind,
    /// The body vertices whose positions it depends on (`count` of them: 3 or 2).
    pub vertices: [u32; 3],
    /// Number of vertices used.
    pub count: usize,
}

/// A pair evaluated: the barrier w·m·b(d) (J), its distance (m) and its gradient with respect
/// to the pair's vertices (N, 3 per vertex, `count` of them used).
#[derive(Clone, Copy, Debug)]
pub struct PairEval {
    /// Distance, m.
    pub d: f64,
    /// Barrier energy, J (+∞ when d ≤ 0).
    pub energy: f64,
    /// ∂energy/∂x per vertex, N.
    pub grad: SVector<f64, 9>,
    /// ∂d/∂x per vertex (unit-free).
    pub dd: SVector<f64, 9>,
    /// w·m·b''(d), N/m: the Gauss–Newton Hessian is this times dd·ddᵀ.
    pub gn: f64,
}

/// The 12 edges of a box as corner pairs (corner bits as in [`PairKind::CornerTriangle`]).
pub const BOX_EDGES: [(usize, usize); 12] = [
    (0, 1),
    (2, 3),
    (4, 5),
    (6, 7),
    (0, 2),
    (1, 3),
    (4, 6),
    (5, 7),
    (0, 4),
    (1, 5),
    (2, 6),
    (3, 7),
];

fn box_corner(lo: &V3, hi: &V3, i: usize) -> V3 {
    V3::new(
        if i & 1 == 0 { lo[0] } else { hi[0] },
        if i & 2 == 0 { lo[1] } else { hi[1] },
        if i & 4 == 0 { lo[2] } else { hi[2] },
    )
}

impl SurfacePair {
    /// The pair's distance and barrier gradient at positions `x` (flattened, m), without the
    /// barrier: (d, m, ∂d/∂x, ∂m/∂x); `None` when the distance is degenerate (zero).
    fn geometry(&self, model: &Model, x: &[f64]) -> Option<(f64, f64, [V3; 3], [V3; 3])> {
        let at = |v: u32| V3::from_column_slice(&x[3 * v as usize..3 * v as usize + 3]);
        let zero = [V3::zeros(); 3];
        match self.kind {
            PairKind::TriangleSphere { obstacle, .. }
            | PairKind::CornerTriangle { obstacle, .. } => {
                let tri = self.vertices.map(at);
                let (q, r) = match (self.kind, &model.obstacles[obstacle]) {
                    (PairKind::TriangleSphere { .. }, Obstacle::Sphere { center, radius }) => {
                        (V3::from(*center), *radius)
                    }
                    (PairKind::CornerTriangle { corner, .. }, Obstacle::Box { min, max }) => {
                        (box_corner(&V3::from(*min), &V3::from(*max), corner), 0.0)
                    }
                    _ => return None,
                };
                let p = closest_point_on_triangle(&q, &tri[0], &tri[1], &tri[2]);
                let len = (p - q).norm();
                if len <= 0.0 {
                    return None;
                }
                let n = (p - q) / len;
                let w = barycentric(&p, &tri[0], &tri[1], &tri[2]);
                Some((len - r, 1.0, w.map(|b| n * b), zero))
            }
            PairKind::EdgeEdge {
                edge: _,
                obstacle,
                box_edge,
            } => {
                let Obstacle::Box { min, max } = &model.obstacles[obstacle] else {
                    return None;
                };
                let (lo, hi) = (V3::from(*min), V3::from(*max));
                let (i, j) = BOX_EDGES[box_edge];
                let (q0, q1) = (box_corner(&lo, &hi, i), box_corner(&lo, &hi, j));
                let (a, b) = (at(self.vertices[0]), at(self.vertices[1]));
                let (s, t, d) = segment_closest(&a, &b, &q0, &q1);
                if d <= 0.0 {
                    return None;
                }
                let p = a + (b - a) * s;
                let q = q0 + (q1 - q0) * t;
                let n = (p - q) / d;
                // Mollifier on c = |e₀ × e₁|², ε from rest lengths.
                let (e0, e1) = (b - a, q1 - q0);
                let rest = |v: u32| V3::from(model.mesh.positions[v as usize]);
                let e0_rest_sq = (rest(self.vertices[1]) - rest(self.vertices[0])).norm_squared();
                let eps = mollifier_threshold(e0_rest_sq, e1.norm_squared());
                let c = e0.cross(&e1).norm_squared();
                let (m, dm, _) = mollifier(c, eps);
                // ∂c/∂e₀ = 2((e₁·e₁)e₀ − (e₀·e₁)e₁); e₀ = b − a.
                let dc = (e0 * e1.norm_squared() - e1 * e0.dot(&e1)) * 2.0;
                Some((
                    d,
                    m,
                    [n * (1.0 - s), n * s, V3::zeros()],
                    [-dc * dm, dc * dm, V3::zeros()],
                ))
            }
        }
    }

    /// The barrier weight w (kg/s²) of this pair at time step `h` (s).
    pub fn weight(&self, model: &Model, h: f64) -> f64 {
        let share = match self.kind {
            PairKind::TriangleSphere { face, .. } | PairKind::CornerTriangle { face, .. } => {
                model.surface_mass[face]
            }
            PairKind::EdgeEdge { edge, .. } => model.edge_mass[edge],
        };
        model.barrier.kappa * share / (h * h)
    }

    /// Barrier energy and gradient at `x` for time step `h`; `None` when out of reach (d ≥ d̂,
    /// or a mollified pair with m = 0).
    pub fn eval(&self, model: &Model, x: &[f64], h: f64) -> Option<PairEval> {
        let dhat = model.barrier.dhat;
        let Some((d, m, dd, dm)) = self.geometry(model, x) else {
            // Touching: infinite energy, no direction.
            return Some(PairEval {
                d: 0.0,
                energy: f64::INFINITY,
                grad: SVector::zeros(),
                dd: SVector::zeros(),
                gn: 0.0,
            });
        };
        if d >= dhat || m <= 0.0 {
            return None;
        }
        let (b, db, ddb) = barrier(d, dhat);
        let w = self.weight(model, h);
        let mut grad = SVector::<f64, 9>::zeros();
        let mut ddv = SVector::<f64, 9>::zeros();
        for k in 0..self.count {
            let g = (dd[k] * (m * db) + dm[k] * b) * w;
            grad.fixed_rows_mut::<3>(3 * k).copy_from(&g);
            ddv.fixed_rows_mut::<3>(3 * k).copy_from(&dd[k]);
        }
        Some(PairEval {
            d,
            energy: if d > 0.0 { w * m * b } else { f64::INFINITY },
            grad,
            dd: ddv,
            gn: w * m * ddb,
        })
    }

    /// The barrier's Hessian (9×9, unused rows zero) at `x`: central differences of the
    /// analytic gradient (step 1e-6 of the primitives' size), symmetrised. Not projected.
    pub fn hessian(&self, model: &Model, x: &[f64], h: f64) -> SMatrix<f64, 9, 9> {
        let scale = self.vertices[..self.count]
            .iter()
            .flat_map(|&a| self.vertices[..self.count].iter().map(move |&b| (a, b)))
            .map(|(a, b)| {
                (V3::from_column_slice(&x[3 * a as usize..3 * a as usize + 3])
                    - V3::from_column_slice(&x[3 * b as usize..3 * b as usize + 3]))
                .norm()
            })
            .fold(0.0f64, f64::max);
        let eps = 1e-6 * scale.max(1e-9);
        let mut y = x.to_vec();
        let mut out = SMatrix::<f64, 9, 9>::zeros();
        let grad_at = |y: &[f64]| {
            self.eval(model, y, h)
                .filter(|e| e.energy.is_finite())
                .map(|e| e.grad)
                .unwrap_or_else(SVector::zeros)
        };
        for k in 0..self.count {
            for c in 0..3 {
                let i = 3 * self.vertices[k] as usize + c;
                y[i] = x[i] + eps;
                let gp = grad_at(&y);
                y[i] = x[i] - eps;
                let gm = grad_at(&y);
                y[i] = x[i];
                out.set_column(3 * k + c, &((gp - gm) / (2.0 * eps)));
            }
        }
        (out + out.transpose()) * 0.5
    }
}

/// Every pair of `model`'s surface with its spheres and boxes that may be within reach at `x`:
/// primitives whose bounds, grown by d̂, meet the obstacle's feature. Evaluate with
/// [`SurfacePair::eval`] (`None` = out of reach).
pub fn candidate_pairs(model: &Model, x: &[f64]) -> Vec<SurfacePair> {
    let dhat = model.barrier.dhat;
    let at = |v: u32| V3::from_column_slice(&x[3 * v as usize..3 * v as usize + 3]);
    let bounds = |ps: &[V3]| {
        let mut lo = ps[0];
        let mut hi = ps[0];
        for p in ps {
            lo = lo.inf(p);
            hi = hi.sup(p);
        }
        (lo.add_scalar(-dhat), hi.add_scalar(dhat))
    };
    let meets = |(alo, ahi): &(V3, V3), (blo, bhi): &(V3, V3)| {
        (0..3).all(|k| ahi[k] >= blo[k] && alo[k] <= bhi[k])
    };
    let mut out = Vec::new();
    for (o, obs) in model.obstacles.iter().enumerate() {
        let Some((olo, ohi)) = obs.bounds() else {
            continue;
        };
        let obox = (olo, ohi);
        match obs {
            Obstacle::Sphere { .. } => {
                for (f, tri) in model.surface.triangles.iter().enumerate() {
                    if meets(&bounds(&tri.map(at)), &obox) {
                        out.push(SurfacePair {
                            kind: PairKind::TriangleSphere {
                                face: f,
                                obstacle: o,
                            },
                            vertices: *tri,
                            count: 3,
                        });
                    }
                }
            }
            Obstacle::Box { .. } => {
                for (f, tri) in model.surface.triangles.iter().enumerate() {
                    let b = bounds(&tri.map(at));
                    if !meets(&b, &obox) {
                        continue;
                    }
                    for corner in 0..8 {
                        let q = box_corner(&olo, &ohi, corner);
                        if meets(&b, &(q, q)) {
                            out.push(SurfacePair {
                                kind: PairKind::CornerTriangle {
                                    face: f,
                                    obstacle: o,
                                    corner,
                                },
                                vertices: *tri,
                                count: 3,
                            });
                        }
                    }
                }
                for (e, edge) in model.surface_edges.iter().enumerate() {
                    let b = bounds(&edge.map(at));
                    if !meets(&b, &obox) {
                        continue;
                    }
                    for (k, &(i, j)) in BOX_EDGES.iter().enumerate() {
                        let (q0, q1) = (box_corner(&olo, &ohi, i), box_corner(&olo, &ohi, j));
                        if meets(&b, &(q0.inf(&q1), q0.sup(&q1))) {
                            out.push(SurfacePair {
                                kind: PairKind::EdgeEdge {
                                    edge: e,
                                    obstacle: o,
                                    box_edge: k,
                                },
                                vertices: [edge[0], edge[1], edge[1]],
                                count: 2,
                            });
                        }
                    }
                }
            }
            Obstacle::HalfSpace { .. } => {}
        }
    }
    out
}

/// The pairs that involve vertex `v` (its surface triangles with spheres and box corners, its
/// surface edges with box edges), for the vertex solvers.
pub fn pairs_at_vertex(model: &Model, x: &[f64], v: usize) -> Vec<SurfacePair> {
    let dhat = model.barrier.dhat;
    let at = |u: u32| V3::from_column_slice(&x[3 * u as usize..3 * u as usize + 3]);
    let mut out = Vec::new();
    for (o, obs) in model.obstacles.iter().enumerate() {
        let Some((olo, ohi)) = obs.bounds() else {
            continue;
        };
        let (olo, ohi) = (olo.add_scalar(-dhat), ohi.add_scalar(dhat));
        let near = |ps: &[V3]| {
            (0..3).all(|k| {
                ps.iter().map(|p| p[k]).fold(f64::INFINITY, f64::min) <= ohi[k]
                    && ps.iter().map(|p| p[k]).fold(f64::NEG_INFINITY, f64::max) >= olo[k]
            })
        };
        for &f in model.faces_of(v) {
            let tri = model.surface.triangles[f as usize];
            if !near(&tri.map(at)) {
                continue;
            }
            let face = f as usize;
            match obs {
                Obstacle::Sphere { .. } => out.push(SurfacePair {
                    kind: PairKind::TriangleSphere { face, obstacle: o },
                    vertices: tri,
                    count: 3,
                }),
                Obstacle::Box { .. } => out.extend((0..8).map(|corner| SurfacePair {
                    kind: PairKind::CornerTriangle {
                        face,
                        obstacle: o,
                        corner,
                    },
                    vertices: tri,
                    count: 3,
                })),
                Obstacle::HalfSpace { .. } => {}
            }
        }
        if matches!(obs, Obstacle::Box { .. }) {
            for &e in model.edges_of(v) {
                let edge = model.surface_edges[e as usize];
                if !near(&edge.map(at)) {
                    continue;
                }
                out.extend((0..12).map(|box_edge| SurfacePair {
                    kind: PairKind::EdgeEdge {
                        edge: e as usize,
                        obstacle: o,
                        box_edge,
                    },
                    vertices: [edge[0], edge[1], edge[1]],
                    count: 2,
                }));
            }
        }
    }
    out
}

/// The nearest positive semi-definite matrix (negative eigenvalues clamped to zero).
pub fn project_psd<const N: usize>(m: &SMatrix<f64, N, N>) -> SMatrix<f64, N, N> {
    let eig = nalgebra::DMatrix::from_column_slice(N, N, m.as_slice()).symmetric_eigen();
    let mut out = SMatrix::<f64, N, N>::zeros();
    for (k, &lam) in eig.eigenvalues.iter().enumerate() {
        if lam > 0.0 {
            let v = eig.eigenvectors.column(k);
            for i in 0..N {
                for j in 0..N {
                    out[(i, j)] += lam * v[i] * v[j];
                }
            }
        }
    }
    out
}
