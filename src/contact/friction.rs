//! IPC's lagged smooth friction (Li et al. 2020, §5): per contact pair a dissipative potential
//! in the tangential relative displacement over the step, with the normal force and the
//! tangent frame lagged (fixed during one Newton solve, updated between solves).
//!
//! For a pair k lagged at positions xˡ:
//! - the closest points of the two primitives are c_A = Σ wᵢ xᵢ and c_B = Σ vⱼ xⱼ (point–triangle:
//!   the point and its closest point on the triangle, barycentric weights; edge–edge: the two
//!   segment parameters), and Γ (3×12) maps the stencil to c_A − c_B;
//! - the contact normal n = (c_A − c_B)/‖c_A − c_B‖ and an orthonormal tangent basis P (3×2) of
//!   the plane ⟂ n; T = Pᵀ Γ (2×12);
//! - the normal force λ = κ·m·|∂b/∂δ| = κ·m·|b′(δ²)|·2δ (N), δ the unsquared distance, b the
//!   barrier on squared distances and m the pair's mollifier (1 for point–triangle);
//! - u(x) = T (x − xᵗ) ∈ ℝ² (m), the tangential relative displacement over the step, and
//!   D(x) = μ λ f₀(‖u‖) (J) with IPC's C¹ friction mollifier of width ε_v·h (m):
//!   f₁(y) = 2y/(ε_v h) − y²/(ε_v h)² below ε_v h and 1 above, f₀′ = f₁,
//!   f₀(y) = −y³/(3(ε_v h)²) + y²/(ε_v h) + ε_v h/3 below and y above.
//!
//! So a pair sliding faster than ε_v feels the Coulomb force μλ against its sliding direction,
//! and a slower one a stiff viscous-like force (static friction up to the mollifier's accuracy).
//! ∇D = μλ f₁(y)/y · Tᵀu and ∇²D = μλ Tᵀ [(f₁′(y)y − f₁(y))/y³ · uuᵀ + f₁(y)/y · I₂] T, whose 2×2
//! core is positive semi-definite for every y (below ε_v h its eigenvalues are
//! 2(ε_v h − y)/(ε_v h)² along u and 2/(ε_v h) − y/(ε_v h)² across; above, 0 and 1/y): no
//! projection needed. The weights of Γ sum to zero (c_A − c_B is a difference of affine
//! combinations), so each pair's force sums to zero over its vertices: friction between bodies
//! conserves momentum.

use super::ccd::PairKind;
use super::distance::SecondOrder;
use crate::problem::{barycentric, closest_feature_on_triangle, segment_closest};
use nalgebra::{Matrix2, SMatrix, SVector, Vector2, Vector3};

type V3 = Vector3<f64>;

/// f₁(y) (dimensionless) and f₁(y)/y (1/m) of IPC's friction mollifier of width `eps` = ε_v·h
/// (m); f₁(y)/y → 2/ε at y = 0.
pub fn f1_and_ratio(y: f64, eps: f64) -> (f64, f64) {
    if y >= eps {
        (1.0, 1.0 / y)
    } else {
        let f1 = 2.0 * y / eps - (y / eps).powi(2);
        (f1, 2.0 / eps - y / (eps * eps))
    }
}

/// f₀(y) (m) of IPC's friction mollifier of width `eps` (m).
pub fn f0(y: f64, eps: f64) -> f64 {
    if y >= eps {
        y
    } else {
        -y.powi(3) / (3.0 * eps * eps) + y * y / eps + eps / 3.0
    }
}

/// Friction between IPC contact pairs: a coefficient per pair of collision bodies, the
/// mollifier's velocity threshold and how often per step the lagged quantities are refreshed.
#[derive(Clone, Debug, PartialEq)]
pub struct FrictionParams {
    /// Number of collision bodies ([`super::CollisionMesh::bodies`]).
    pub bodies: usize,
    /// μ (dimensionless, ≥ 0) per pair of bodies, row-major `bodies × bodies`, symmetric.
    pub mu: Vec<f64>,
    /// ε_v, m/s: tangential speeds below it are treated as (mollified) sticking; the
    /// mollifier's width over a step is ε_v·ĥ.
    pub eps_v: f64,
    /// Lagging passes per step (≥ 1): the first lags normal forces and tangent frames at the
    /// step's start; each further pass re-lags them at the previous pass's solution and solves
    /// again.
    pub passes: usize,
}

impl FrictionParams {
    /// The default ε_v, 1e-3 m/s (IPC's choice for metre-scale scenes).
    pub const DEFAULT_EPS_V: f64 = 1e-3;

    /// The same μ between every pair of `bodies` bodies (and within each).
    pub fn uniform(bodies: usize, mu: f64, eps_v: f64, passes: usize) -> Self {
        FrictionParams {
            bodies,
            mu: vec![mu; bodies * bodies],
            eps_v,
            passes,
        }
    }

    /// Sets μ between bodies `a` and `b` (both orders).
    pub fn set(&mut self, a: usize, b: usize, mu: f64) {
        self.mu[a * self.bodies + b] = mu;
        self.mu[b * self.bodies + a] = mu;
    }

    /// μ between bodies `a` and `b`.
    pub fn mu(&self, a: u32, b: u32) -> f64 {
        self.mu[a as usize * self.bodies + b as usize]
    }

    /// Whether any pair of bodies has friction.
    pub fn any(&self) -> bool {
        self.mu.iter().any(|&m| m > 0.0)
    }

    /// Checks the values; errors name the scene key (`contact.friction`,
    /// `contact.friction_velocity`, `contact.friction_iterations`).
    pub fn validate(&self) -> crate::error::Result<()> {
        use crate::error::JelloError;
        if self.mu.len() != self.bodies * self.bodies {
            return Err(JelloError::Invalid(format!(
                "contact.friction: {} coefficients for {} bodies",
                self.mu.len(),
                self.bodies
            )));
        }
        if let Some(m) = self.mu.iter().find(|m| !(m.is_finite() && **m >= 0.0)) {
            return Err(JelloError::Invalid(format!(
                "contact.friction: the coefficient must be finite and ≥ 0, got {m}"
            )));
        }
        if !(self.eps_v.is_finite() && self.eps_v > 0.0) {
            return Err(JelloError::Invalid(format!(
                "contact.friction_velocity: ε_v must be finite and > 0 m/s, got {}",
                self.eps_v
            )));
        }
        if self.passes == 0 {
            return Err(JelloError::Invalid(
                "contact.friction_iterations: at least 1 lagging pass per step".into(),
            ));
        }
        Ok(())
    }
}

/// One pair's lagged friction data.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrictionPair {
    /// The stencil (global collision-mesh ids, [`super::ContactPair::ids`]).
    pub ids: [u32; 4],
    /// Friction coefficient μ (dimensionless).
    pub mu: f64,
    /// Lagged normal force λ, N.
    pub lambda: f64,
    /// Lagged T = Pᵀ Γ (2×12): stencil displacement → tangential relative displacement.
    pub tangent: SMatrix<f64, 2, 12>,
}

/// The weights of c_A − c_B over the stencil `x` of a pair of `kind` (point–triangle:
/// `[1, −β₀, −β₁, −β₂]`; edge–edge: `[1 − s, s, −(1 − t), −t]`).
pub fn closest_weights(kind: PairKind, x: &[V3; 4]) -> [f64; 4] {
    match kind {
        PairKind::PointTriangle => {
            let (c, _) = closest_feature_on_triangle(&x[0], &x[1], &x[2], &x[3]);
            let b = barycentric(&c, &x[1], &x[2], &x[3]);
            [1.0, -b[0], -b[1], -b[2]]
        }
        PairKind::EdgeEdge => {
            let (s, t, _) = segment_closest(&x[0], &x[1], &x[2], &x[3]);
            [1.0 - s, s, -(1.0 - t), -t]
        }
    }
}

/// An orthonormal basis (3×2) of the plane ⟂ the unit vector `n`.
fn tangent_basis(n: &V3) -> SMatrix<f64, 3, 2> {
    // Cross with the axis least aligned with n: well conditioned for every n.
    let a = if n.x.abs() <= n.y.abs() && n.x.abs() <= n.z.abs() {
        V3::x()
    } else if n.y.abs() <= n.z.abs() {
        V3::y()
    } else {
        V3::z()
    };
    let t1 = n.cross(&a).normalize();
    let t2 = n.cross(&t1);
    SMatrix::<f64, 3, 2>::from_columns(&[t1, t2])
}

impl FrictionPair {
    /// Lags a pair at stencil positions `x` (m) of `kind`: the closest points, normal and
    /// tangent basis, and λ = |∂(κ m b)/∂δ| from `barrier_derivative` = ∂(κ m b)/∂(d²) (J/m²;
    /// κ·m·b′(d²) for the pair's squared distance `dist_sq`, m²). `None` when the primitives
    /// touch (no normal).
    pub fn lag(
        kind: PairKind,
        ids: [u32; 4],
        x: &[V3; 4],
        mu: f64,
        barrier_derivative: f64,
        dist_sq: f64,
    ) -> Option<Self> {
        let w = closest_weights(kind, x);
        let r: V3 = (0..4).map(|k| x[k] * w[k]).sum();
        let d = r.norm();
        if d.is_nan() || d <= 0.0 {
            return None;
        }
        let n = r / d;
        let p = tangent_basis(&n);
        let mut tangent = SMatrix::<f64, 2, 12>::zeros();
        for (k, wk) in w.iter().enumerate() {
            tangent
                .fixed_view_mut::<2, 3>(0, 3 * k)
                .copy_from(&(p.transpose() * *wk));
        }
        // |∂(κ m b)/∂δ| with δ = √(d²): the chain rule through d² = δ² gives 2δ·|∂/∂d²|.
        let lambda = (barrier_derivative * 2.0 * dist_sq.sqrt()).abs();
        Some(FrictionPair {
            ids,
            mu,
            lambda,
            tangent,
        })
    }

    /// The tangential relative displacement u = T·dx (m) for the stencil's step displacements
    /// `dx` = x − xᵗ (12, m).
    pub fn relative(&self, dx: &SVector<f64, 12>) -> Vector2<f64> {
        self.tangent * dx
    }

    /// D = μλ f₀(‖u‖) (J) with its gradient (N) and Hessian (N/m, PSD) over the stencil, for
    /// step displacements `dx` (m) and mollifier width `eps` = ε_v·h (m).
    pub fn potential(&self, dx: &SVector<f64, 12>, eps: f64) -> SecondOrder<12> {
        let u = self.relative(dx);
        let y = u.norm();
        let s = self.mu * self.lambda;
        let (_, ratio) = f1_and_ratio(y, eps);
        let grad = self.tangent.transpose() * (u * (s * ratio));
        // (f₁′(y)·y − f₁(y))/y³: −1/y³ above ε, −1/(ε²y) below (written without dividing 0/0).
        let core = if y >= eps {
            (Matrix2::identity() - u * u.transpose() / (y * y)) / y
        } else if y > 0.0 {
            Matrix2::identity() * ratio - u * u.transpose() / (eps * eps * y)
        } else {
            Matrix2::identity() * ratio
        };
        SecondOrder {
            value: s * f0(y, eps),
            grad,
            hess: self.tangent.transpose() * (core * s) * self.tangent,
        }
    }
}

/// The lagged friction of one Newton solve: every contact pair active at the lagging point,
/// with its normal force and frame fixed, and the mollifier width ε_v·h (m).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FrictionSet {
    /// The lagged pairs (pairs with μ = 0 are left out).
    pub pairs: Vec<FrictionPair>,
    /// ε_v·h, m.
    pub eps: f64,
    /// The step displacement of each obstacle vertex (global id `n + i` for the model's `n`
    /// vertices), m: a scripted obstacle's motion over the step, the counterpart of a model
    /// vertex's x − x̂ ([`crate::problem::StepProblem::lag_friction`]). Empty: obstacles still.
    pub obstacle_motion: Vec<[f64; 3]>,
}

impl FrictionSet {
    /// Lags the pairs of `ipc` active at the flat model positions `x` (m), obstacles at rest,
    /// with contact stiffness `kappa` (J/m⁴), coefficient `mu(body a, body b)` per pair of
    /// collision bodies, and mollifier width `eps` = ε_v·h (m): [`Self::lag_at`].
    pub fn lag(
        ipc: &super::IpcContact,
        x: &[f64],
        kappa: f64,
        mu: impl Fn(u32, u32) -> f64,
        eps: f64,
    ) -> crate::error::Result<Self> {
        Self::lag_at(ipc, &ipc.positions(x), kappa, mu, eps)
    }

    /// [`Self::lag`] at the full collision position array `xs` (m; obstacles where the step
    /// has them). The obstacles are still until [`Self::obstacle_motion`] is set.
    pub fn lag_at(
        ipc: &super::IpcContact,
        xs: &[[f64; 3]],
        kappa: f64,
        mu: impl Fn(u32, u32) -> f64,
        eps: f64,
    ) -> crate::error::Result<Self> {
        let m = &ipc.mesh;
        let body = |v: u32| m.vertex_body[m.vertices.binary_search(&v).unwrap_or(0)];
        let dsq_hat = ipc.dhat_sq();
        let pairs = ipc
            .active_pairs(xs)?
            .into_iter()
            .filter_map(|p| {
                let coeff = mu(body(p.ids[0]), body(p.ids[3]));
                if coeff <= 0.0 {
                    return None;
                }
                let st = p.ids.map(|v| {
                    let q = xs[v as usize];
                    V3::new(q[0], q[1], q[2])
                });
                let d = super::potential::distance_sq(&p, xs);
                let mut db = super::barrier::barrier(d, dsq_hat).1 * kappa;
                if p.kind == PairKind::EdgeEdge {
                    let c = (st[1] - st[0]).cross(&(st[3] - st[2])).norm_squared();
                    db *= super::mollifier::mollifier(c, p.eps_x).0;
                }
                FrictionPair::lag(p.kind, p.ids, &st, coeff, db, d)
            })
            .collect();
        Ok(FrictionSet {
            pairs,
            eps,
            obstacle_motion: Vec::new(),
        })
    }

    /// The stencil displacement x − x_prev of pair `p` (12, m); obstacle vertices (ids past the
    /// model's) move by [`Self::obstacle_motion`] (not at all when it is empty).
    fn displacement(&self, p: &FrictionPair, x: &[f64], x_prev: &[f64]) -> SVector<f64, 12> {
        let n = x.len() / 3;
        let mut d = SVector::<f64, 12>::zeros();
        for (k, &v) in p.ids.iter().enumerate() {
            let v = v as usize;
            if v < n {
                for c in 0..3 {
                    d[3 * k + c] = x[3 * v + c] - x_prev[3 * v + c];
                }
            } else if let Some(m) = self.obstacle_motion.get(v - n) {
                for c in 0..3 {
                    d[3 * k + c] = m[c];
                }
            }
        }
        d
    }

    /// Σ D (J) of the pairs `which` (indices into [`Self::pairs`]) with model vertex `v` at `p`
    /// and every other vertex at `x` (flat, m), for the step from `x_prev`: the friction part
    /// of a per-vertex local energy.
    pub fn vertex_energy(
        &self,
        which: &[u32],
        v: usize,
        p: &nalgebra::Vector3<f64>,
        x: &[f64],
        x_prev: &[f64],
    ) -> f64 {
        which
            .iter()
            .map(|&k| {
                let pair = &self.pairs[k as usize];
                let mut d = self.displacement(pair, x, x_prev);
                for (slot, &u) in pair.ids.iter().enumerate() {
                    if u as usize == v {
                        for c in 0..3 {
                            d[3 * slot + c] = p[c] - x_prev[3 * v + c];
                        }
                    }
                }
                let u = pair.relative(&d).norm();
                pair.mu * pair.lambda * f0(u, self.eps)
            })
            .sum()
    }

    /// Σ D (J) at `x` for the step from `x_prev` (flat model positions, m).
    pub fn energy(&self, x: &[f64], x_prev: &[f64]) -> f64 {
        self.pairs
            .iter()
            .map(|p| {
                let u = p.relative(&self.displacement(p, x, x_prev)).norm();
                p.mu * p.lambda * f0(u, self.eps)
            })
            .sum()
    }

    /// Adds ∇ Σ D (N) into `g` (model vertices) and returns Σ D (J).
    pub fn add_gradient(&self, x: &[f64], x_prev: &[f64], g: &mut [f64]) -> f64 {
        let n = x.len() / 3;
        let mut e = 0.0;
        for p in &self.pairs {
            let d = p.potential(&self.displacement(p, x, x_prev), self.eps);
            e += d.value;
            for (k, &v) in p.ids.iter().enumerate() {
                let v = v as usize;
                if v < n {
                    for c in 0..3 {
                        g[3 * v + c] += d.grad[3 * k + c];
                    }
                }
            }
        }
        e
    }

    /// Each pair's Hessian (N/m, PSD) with its stencil.
    pub fn hessian_blocks(
        &self,
        x: &[f64],
        x_prev: &[f64],
    ) -> Vec<([u32; 4], SMatrix<f64, 12, 12>)> {
        self.pairs
            .iter()
            .map(|p| {
                (
                    p.ids,
                    p.potential(&self.displacement(p, x, x_prev), self.eps).hess,
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(seed: u64) -> (FrictionPair, [V3; 4]) {
        // A point 1 mm over a triangle's face, or two crossing edges 1 mm apart.
        let h = |i: u64| {
            let mut z = (seed * 16 + i).wrapping_add(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let (kind, x) = if seed.is_multiple_of(2) {
            let t = [
                V3::new(0.0, 0.0, 0.0),
                V3::new(0.1, 0.0, 0.0),
                V3::new(0.0, 0.1, 0.0),
            ];
            let p = V3::new(0.02 + 0.02 * h(0), 0.03 + 0.02 * h(1), 1e-3);
            (PairKind::PointTriangle, [p, t[0], t[1], t[2]])
        } else {
            let a = [V3::new(-0.05, 0.0, 0.0), V3::new(0.05, 0.01 * h(2), 0.0)];
            let b = [V3::new(0.01 * h(3), -0.05, 1e-3), V3::new(0.0, 0.05, 1e-3)];
            (PairKind::EdgeEdge, [a[0], a[1], b[0], b[1]])
        };
        let ids = [0, 1, 2, 3];
        (
            FrictionPair::lag(kind, ids, &x, 0.4, -250.0, 1e-6).unwrap(),
            x,
        )
    }

    #[test]
    fn tangent_frame_is_orthogonal_to_the_normal_and_forces_balance() {
        for seed in 0..20 {
            let (p, x) = pair(seed);
            // Moving the stencil along the normal (every vertex the same) or rigidly: u = 0.
            let mut shift = SVector::<f64, 12>::zeros();
            for k in 0..4 {
                shift
                    .fixed_rows_mut::<3>(3 * k)
                    .copy_from(&V3::new(0.3, -0.2, 0.7));
            }
            assert!(
                p.relative(&shift).norm() < 1e-14,
                "a translation slides: seed {seed}"
            );
            // A relative move along the normal (the point or edge a lifted off) does not slide.
            let w = closest_weights(
                if seed.is_multiple_of(2) {
                    PairKind::PointTriangle
                } else {
                    PairKind::EdgeEdge
                },
                &x,
            );
            let r: V3 = (0..4).map(|k| x[k] * w[k]).sum();
            let mut lift = SVector::<f64, 12>::zeros();
            lift.fixed_rows_mut::<3>(0)
                .copy_from(&(r.normalize() * 1e-3));
            if seed % 2 == 1 {
                lift.fixed_rows_mut::<3>(3)
                    .copy_from(&(r.normalize() * 1e-3));
            }
            assert!(
                p.relative(&lift).norm() < 1e-15,
                "lifting slides: seed {seed}"
            );
            // λ = |b′|·2δ with δ = 1 mm.
            assert!((p.lambda - 250.0 * 2.0 * 1e-3).abs() < 1e-12);
            // Forces sum to zero (momentum).
            let dx = SVector::<f64, 12>::from_fn(|i, _| 1e-4 * ((i * 7 % 5) as f64 - 2.0));
            let g = p.potential(&dx, 1e-4).grad;
            let sum: V3 = (0..4).map(|k| g.fixed_rows::<3>(3 * k).into_owned()).sum();
            assert!(
                sum.norm() < 1e-12 * g.norm().max(1e-300),
                "seed {seed}: Σf = {sum:?}"
            );
        }
    }

    #[test]
    fn potential_derivatives_match_finite_differences() {
        // Both regimes of the mollifier: sliding (‖u‖ > ε_v h) and sticking (‖u‖ < ε_v h).
        let eps = 1e-4;
        let mut worst = (0.0f64, 0.0f64);
        for seed in 0..40 {
            let (p, _) = pair(seed);
            for scale in [3e-6, 3e-5, 3e-4, 3e-3] {
                let dx = SVector::<f64, 12>::from_fn(|i, _| {
                    scale * (((i as u64 * 2654435761 + seed * 97) % 1000) as f64 / 500.0 - 1.0)
                });
                let y = p.relative(&dx).norm();
                if (y - eps).abs() < 0.05 * eps {
                    continue; // f₁′ jumps at ε: no difference quotient across it
                }
                let exact = p.potential(&dx, eps);
                let h = 1e-6 * scale;
                let mut g = SVector::<f64, 12>::zeros();
                let mut hs = SMatrix::<f64, 12, 12>::zeros();
                for k in 0..12 {
                    let (mut a, mut b) = (dx, dx);
                    a[k] += h;
                    b[k] -= h;
                    let (pa, pb) = (p.potential(&a, eps), p.potential(&b, eps));
                    g[k] = (pa.value - pb.value) / (2.0 * h);
                    hs.set_column(k, &((pa.grad - pb.grad) / (2.0 * h)));
                }
                let eg = (g - exact.grad).norm() / exact.grad.norm().max(1e-300);
                let eh = (hs - exact.hess).norm() / exact.hess.norm().max(1e-300);
                worst = (worst.0.max(eg), worst.1.max(eh));
                assert!(
                    eg < 1e-6,
                    "seed {seed}, |dx| ~ {scale}: gradient error {eg:.2e}"
                );
                assert!(
                    eh < 1e-5,
                    "seed {seed}, |dx| ~ {scale}: Hessian error {eh:.2e}"
                );
                let ev = exact.hess.symmetric_eigen().eigenvalues;
                let top = ev.max().max(0.0);
                assert!(
                    ev.min() >= -1e-12 * top,
                    "seed {seed}: Hessian not PSD: {}",
                    ev.min()
                );
            }
        }
        eprintln!(
            "worst relative errors: gradient {:.2e}, Hessian {:.2e}",
            worst.0, worst.1
        );
    }

    #[test]
    fn mollifier_is_c1_and_coulomb_above_its_width() {
        let eps = 2e-4;
        // f₀ continuous with f₀′ = f₁, f₁ continuous, f₁ = 1 from ε on.
        for &y in &[0.0, 0.3 * eps, eps * (1.0 - 1e-12), eps, 2.0 * eps] {
            let d = 1e-9 * eps;
            let num = (f0(y + d, eps) - f0((y - d).max(0.0), eps)) / (y + d - (y - d).max(0.0));
            assert!(
                (num - f1_and_ratio(y, eps).0).abs() < 1e-6,
                "f₀′ ≠ f₁ at {y}"
            );
        }
        assert!((f0(eps * (1.0 - 1e-12), eps) - f0(eps, eps)).abs() < 1e-15);
        assert_eq!(f1_and_ratio(3.0 * eps, eps).0, 1.0);
        assert!((f1_and_ratio(0.0, eps).1 - 2.0 / eps).abs() < 1e-9 / eps);
    }
}
