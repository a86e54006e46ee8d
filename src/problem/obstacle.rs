//! Static obstacles, the IPC log-barrier that keeps vertices away from them, and the step-size
//! filter that guarantees no vertex ever crosses one.

use nalgebra::{Matrix3, Vector3};
use serde::{Deserialize, Serialize};

/// The IPC log barrier, shared with contact pairs ([`crate::contact::barrier`]); obstacles apply
/// it to unsquared distances in metres.
pub use crate::contact::barrier::barrier;

/// A static obstacle. Vertices live on the outside (`distance > 0`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Obstacle {
    /// The half-space below a plane: points with `normal·x < offset` are inside.
    /// `normal` is normalised on construction; a ground at height 0 with +y up is
    /// `normal = [0, 1, 0], offset = 0`.
    HalfSpace {
        /// Unit outward normal.
        normal: [f64; 3],
        /// Plane offset along the normal, m.
        offset: f64,
    },
    /// A solid axis-aligned box.
    Box {
        /// Lower corner, m.
        min: [f64; 3],
        /// Upper corner, m.
        max: [f64; 3],
    },
    /// A solid sphere.
    Sphere {
        /// Centre, m.
        center: [f64; 3],
        /// Radius, m.
        radius: f64,
    },
}

/// Distance to an obstacle and its first two derivatives with respect to the vertex position.
pub struct DistanceEval {
    /// Unsigned distance to the obstacle surface (negative means inside), m.
    pub d: f64,
    /// ∂d/∂x (unit).
    pub grad: Vector3<f64>,
    /// ∂²d/∂x², 1/m (zero for planes).
    pub hess: Matrix3<f64>,
}

impl Obstacle {
    /// A half-space with its normal normalised.
    pub fn half_space(normal: [f64; 3], offset: f64) -> Self {
        let n = Vector3::from(normal);
        let len = n.norm();
        Obstacle::HalfSpace {
            normal: (n / len).into(),
            offset: offset / len,
        }
    }

    /// Signed distance (m) of `x` to the obstacle with derivatives.
    pub fn distance(&self, x: &Vector3<f64>) -> DistanceEval {
        match self {
            Obstacle::HalfSpace { normal, offset } => {
                let n = Vector3::from(*normal);
                DistanceEval {
                    d: n.dot(x) - offset,
                    grad: n,
                    hess: Matrix3::zeros(),
                }
            }
            Obstacle::Sphere { center, radius } => {
                let r = x - Vector3::from(*center);
                let len = r.norm().max(1e-300);
                let n = r / len;
                DistanceEval {
                    d: len - radius,
                    grad: n,
                    hess: (Matrix3::identity() - n * n.transpose()) / len,
                }
            }
            Obstacle::Box { min, max } => {
                let lo = Vector3::from(*min);
                let hi = Vector3::from(*max);
                let closest = x.zip_zip_map(&lo, &hi, |v, l, h| v.clamp(l, h));
                let r = x - closest;
                let len = r.norm();
                if len > 0.0 {
                    let n = r / len;
                    // Curvature only where more than one coordinate is clamped (edges/corners).
                    let clamped = (0..3).filter(|&k| x[k] < lo[k] || x[k] > hi[k]).count();
                    let hess = if clamped > 1 {
                        let mut p = Matrix3::identity() - n * n.transpose();
                        for k in 0..3 {
                            if x[k] >= lo[k] && x[k] <= hi[k] {
                                // Free coordinate: the distance does not change along it.
                                for j in 0..3 {
                                    p[(k, j)] = 0.0;
                                    p[(j, k)] = 0.0;
                                }
                            }
                        }
                        p / len
                    } else {
                        Matrix3::zeros()
                    };
                    DistanceEval {
                        d: len,
                        grad: n,
                        hess,
                    }
                } else {
                    // Inside: negative distance to the nearest face.
                    let mut best = (f64::INFINITY, Vector3::zeros());
                    for k in 0..3 {
                        let dl = x[k] - lo[k];
                        let dh = hi[k] - x[k];
                        if dl < best.0 {
                            let mut g = Vector3::zeros();
                            g[k] = -1.0;
                            best = (dl, g);
                        }
                        if dh < best.0 {
                            let mut g = Vector3::zeros();
                            g[k] = 1.0;
                            best = (dh, g);
                        }
                    }
                    DistanceEval {
                        d: -best.0,
                        grad: best.1,
                        hess: Matrix3::zeros(),
                    }
                }
            }
        }
    }

    /// The largest `t ∈ [0, 1]` such that the segment `x + s·dx, s ∈ [0, t)` stays outside the
    /// obstacle (1 when it never enters). Assumes `x` is outside.
    pub fn time_of_impact(&self, x: &Vector3<f64>, dx: &Vector3<f64>) -> f64 {
        match self {
            Obstacle::HalfSpace { normal, offset } => {
                let n = Vector3::from(*normal);
                let d = n.dot(x) - offset;
                let v = n.dot(dx);
                if v < 0.0 {
                    (d / -v).clamp(0.0, 1.0)
                } else {
                    1.0
                }
            }
            Obstacle::Sphere { center, radius } => {
                // |x - c + t dx|² = r²  →  a t² + 2 b t + c0 = 0
                let r = x - Vector3::from(*center);
                let a = dx.norm_squared();
                let b = r.dot(dx);
                let c0 = r.norm_squared() - radius * radius;
                if a == 0.0 || b >= 0.0 {
                    return 1.0;
                }
                let disc = b * b - a * c0;
                if disc < 0.0 {
                    return 1.0;
                }
                let t = (-b - disc.sqrt()) / a;
                t.clamp(0.0, 1.0)
            }
            Obstacle::Box { min, max } => {
                // Slab test: entry time of the ray into the box.
                let mut t_enter = 0.0f64;
                let mut t_exit = 1.0f64;
                for k in 0..3 {
                    if dx[k] == 0.0 {
                        if x[k] < min[k] || x[k] > max[k] {
                            return 1.0;
                        }
                    } else {
                        let t0 = (min[k] - x[k]) / dx[k];
                        let t1 = (max[k] - x[k]) / dx[k];
                        let (a, b) = if t0 < t1 { (t0, t1) } else { (t1, t0) };
                        t_enter = t_enter.max(a);
                        t_exit = t_exit.min(b);
                    }
                }
                if t_enter <= t_exit {
                    t_enter.clamp(0.0, 1.0)
                } else {
                    1.0
                }
            }
        }
    }
}

/// IPC barrier parameters. The barrier on a vertex at distance d < d̂ from an obstacle is
/// κ · (m_v / h²) · b(d), with b(d) = −(d − d̂)² ln(d/d̂) (m²): scaling by the vertex's inertia
/// weight m/h² makes κ dimensionless and the same κ work across masses, time steps and scenes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BarrierParams {
    /// Activation distance d̂, m. Default: 1e-3 × the scene's bounding-box diagonal.
    pub dhat: f64,
    /// Dimensionless stiffness κ. Default 1.
    pub kappa: f64,
}
