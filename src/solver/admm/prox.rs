//! The z-step of ADMM-PD: per-element proximal operators
//! z = argmin_F U_e(F) + w²/2 ‖F − v‖²_F, with U_e = V_e Ψ_e(F) (J), w² = w_e² (J, the weight
//! of ½‖F − v‖²) and F, v deformation gradients (dimensionless, column convention:
//! F = Σ_a x_a ∇N_aᵀ, the transpose of the PD operator's D_e x).
//!
//! Optimality of the prox is P(z) V_e = w² (v − z): with ū = v − z (Algorithm 1's dual update)
//! that is the paper's Eq. 24, w²ū = ∇U(z) — `tests/cpu/admm.rs` checks it after every z-step.
//!
//! # Backends
//! - [`ProxKind::Pd`] — the PD projection (Overby et al. Eqs. 32–33) for energies of PD form
//!   U = min_{p ∈ C} (k/2)‖F − p‖²: jello's ARAP (and fixed corotated with λ = 0), where
//!   Ψ = μ‖F − R‖², k = 2μV and C the rotations (p the rotation of the signed SVD, correct
//!   through inversion), and linear elasticity with λ = 0, Ψ = μ‖sym F − I‖², k = 2μV and C the
//!   affine set I + skew (p = I + skew v). The exact weighted prox for any w is
//!   z = (k p + w² v)/(k + w²) (minimise over F for fixed p, then over p: p = proj_C(v)); with
//!   w² = k it is the paper's ½-average. Other materials are refused (their energy is not of PD
//!   form: PD would solve a different problem than every other solver).
//! - [`ProxKind::Hyperelastic`] (default) — every jello material.
//!   - Isotropic models: the signed SVD v = U diag(σ̃) Vᵀ (rotations U, V, the sign on the
//!     smallest singular value: [`crate::material::svd3_fast`], Jacobi on vᵀv; a group of
//!     elements takes them in lock-step, [`prox_hyperelastic_lanes`]), then the 3-D problem
//!     min_σ φ(σ) = ψ̂(σ) + τ/2‖σ − σ̃‖², τ = w²/V (Pa), and z = U diag(σ) Vᵀ. Solved by a
//!     damped Newton method on σ with jello's own ψ̂, ∂ψ̂/∂σ, ∂²ψ̂/∂σ²
//!     ([`crate::material::sigma_derivatives`]) — a documented substitute for the paper's
//!     "≤ 10 L-BFGS iterations": the Hessian is 3 × 3 and exact, so Newton converges
//!     quadratically in a handful of iterations to round-off, which T5 needs. The Hessian
//!     φ'' = ψ̂'' + τI is made definite by clamping its eigenvalues (Jacobi,
//!     [`crate::material::symmetric_eigen3`]) at 10⁻⁶τ (ψ̂ is nonconvex
//!     in σ for every model away from rest); backtracking halves the step until φ decreases
//!     (Armijo, 10⁻⁴; near the minimum, where φ's decrease falls below the round-off of
//!     ψ̂'s cancelling terms, the full Newton step is also taken when it halves ‖∇φ‖ and φ
//!     rises by no more than 10⁻¹⁰ of its scale), which also keeps J > 0 for the models infinite through inversion
//!     (Neo-Hookean). The start is the best of σ̃, |σ̃| and (1, 1, 1) by φ (σ̃ may have J ≤ 0).
//!     σ is not constrained to be ≥ 0 (the paper's IFE convention): the signed SVD already
//!     puts inversion on σ₃, and the fixed-corotated and stable Neo-Hookean energies are
//!     finite there. Tolerance: ‖∇φ‖ ≤ 10⁻¹²·τ·(1 + ‖σ̃‖), at most [`NEWTON_MAX`] iterations
//!     (typically 3–6 are taken); if the line search fails the best point so far is returned.
//!   - Linear elasticity is not a function of σ but is quadratic in F: P(F) = C:(F − I) with
//!     the constant tensor C ([`crate::material::rest_tensor`]), so the prox is the 9 × 9 solve
//!     (C + τI) vec(F − I) = τ vec(v − I), exact.

use crate::material::{
    rest_tensor, sigma_derivatives, svd3, svd3_fast, svd3_fast_lanes, symmetric_eigen3, Material,
    MaterialModel, Svd3,
};
use crate::problem::StrainLimit;
use nalgebra::{Matrix3, Vector3};

/// Which proximal operator the z-step uses (`[solver] prox`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProxKind {
    /// PD projection (ARAP/corotated with λ = 0 and linear with λ = 0 only).
    Pd,
    /// Isotropic prox on singular values (every material; linear: a 9 × 9 solve). Default.
    Hyperelastic,
}

impl ProxKind {
    /// Name as in scene files.
    pub fn name(self) -> &'static str {
        match self {
            ProxKind::Pd => "pd",
            ProxKind::Hyperelastic => "hyperelastic",
        }
    }

    /// Parses a scene-file name.
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "pd" => Some(ProxKind::Pd),
            "hyperelastic" => Some(ProxKind::Hyperelastic),
            _ => None,
        }
    }
}

/// Newton iterations of the σ-prox at most.
pub const NEWTON_MAX: usize = 50;

/// Whether `m` has an energy of PD form (what [`ProxKind::Pd`] needs), and its projection.
/// A projection onto a PD constraint set.
type Projection = fn(&Matrix3<f64>) -> Matrix3<f64>;

fn pd_projection(m: &Material) -> Option<Projection> {
    match m.model {
        MaterialModel::Arap => Some(rotation),
        MaterialModel::FixedCorotated if m.lambda == 0.0 => Some(rotation),
        MaterialModel::Linear if m.lambda == 0.0 => Some(identity_plus_skew),
        _ => None,
    }
}

fn rotation(v: &Matrix3<f64>) -> Matrix3<f64> {
    svd3(v).rotation()
}

fn identity_plus_skew(v: &Matrix3<f64>) -> Matrix3<f64> {
    Matrix3::identity() + (v - v.transpose()) * 0.5
}

/// Why [`ProxKind::Pd`] cannot serve `m`, if it cannot.
pub fn pd_refusal(m: &Material) -> Option<String> {
    pd_projection(m).is_none().then(|| {
        format!(
            "{} with λ = {} Pa has no PD form (PD projections serve arap, and fixed_corotated or \
             linear with λ = 0); use prox = \"hyperelastic\"",
            m.model.name(),
            m.lambda
        )
    })
}

/// The PD z-step: z = (k p + w² v)/(k + w²), k = 2μV, p = proj_C(v). `None` when the material
/// has no PD form ([`pd_refusal`]).
pub fn prox_pd(m: &Material, volume: f64, v: &Matrix3<f64>, w2: f64) -> Option<Matrix3<f64>> {
    prox_pd_within(m, volume, v, w2, None)
}

/// [`prox_pd`] with hard strain limits: for the rotation projection (ARAP; corotated with
/// λ = 0) the prox is z = U diag((k + w²σ̃ᵢ)/(k + w²)) Vᵀ on the signed SVD of v, whose σ-space
/// objective k/2‖σ − 1‖² + w²/2‖σ − σ̃‖² is separable and convex, so clamping each σᵢ into
/// `[lo, hi]` is the exact constrained prox. The affine projection (linear, λ = 0) has no
/// singular-value form; [`crate::problem::Model::with_strain_limits`] refuses it.
pub fn prox_pd_within(
    m: &Material,
    volume: f64,
    v: &Matrix3<f64>,
    w2: f64,
    limit: Option<StrainLimit>,
) -> Option<Matrix3<f64>> {
    let proj = pd_projection(m)?;
    let k = 2.0 * m.mu * volume;
    let Some(limit) = limit else {
        let p = proj(v);
        return Some((p * k + v * w2) / (k + w2));
    };
    if m.model == MaterialModel::Linear {
        return None;
    }
    let svd = svd3(v);
    let sigma = svd.sigma.map(|s| limit.clamp((k + w2 * s) / (k + w2)));
    Some(svd.u * Matrix3::from_diagonal(&sigma) * svd.v.transpose())
}

/// The hyperelastic z-step argmin_F V Ψ(F) + w²/2 ‖F − v‖² (see the module docs).
pub fn prox_hyperelastic(m: &Material, volume: f64, v: &Matrix3<f64>, w2: f64) -> Matrix3<f64> {
    prox_hyperelastic_within(m, volume, v, w2, None)
}

/// [`prox_hyperelastic`] with hard strain limits: argmin over F with every signed singular
/// value in `[lo, hi]` — the prox of U_e + δ_S (S the limited set), computed on the signed SVD
/// of v by [`prox_sigma_within`] (an isotropic energy plus an isotropic constraint keeps U and
/// V). Linear elasticity (not a function of σ) ignores `limit`; models refuse that pairing.
pub fn prox_hyperelastic_within(
    m: &Material,
    volume: f64,
    v: &Matrix3<f64>,
    w2: f64,
    limit: Option<StrainLimit>,
) -> Matrix3<f64> {
    let tau = w2 / volume;
    if m.model == MaterialModel::Linear {
        let c = rest_tensor(m);
        let a = c + nalgebra::SMatrix::<f64, 9, 9>::identity() * tau;
        let rhs =
            nalgebra::SVector::<f64, 9>::from_column_slice((v - Matrix3::identity()).as_slice())
                * tau;
        // C + τI is SPD (C is PSD for μ, λ ≥ 0 and τ > 0).
        let d = a.cholesky().map(|ch| ch.solve(&rhs)).unwrap_or(rhs / tau);
        return Matrix3::identity() + Matrix3::from_column_slice(d.as_slice());
    }
    prox_of_svd(m, &svd3_fast(v), tau, limit)
}

/// The hyperelastic z-step of the isotropic models once v's signed SVD is known: the σ-prox
/// ([`prox_sigma_within`]) recomposed on v's rotations.
fn prox_of_svd(
    m: &Material,
    svd: &Svd3<f64>,
    tau: f64,
    limit: Option<StrainLimit>,
) -> Matrix3<f64> {
    let sigma = prox_sigma_within(m, &svd.sigma, tau, limit);
    svd.u * Matrix3::from_diagonal(&sigma) * svd.v.transpose()
}

/// One element's z-step inputs for [`prox_hyperelastic_lanes`]: material, rest volume (m³), v
/// (F form), w² (J) and its strain limit.
#[derive(Clone, Copy, Debug)]
pub struct ProxInput<'a> {
    /// The element's material.
    pub material: &'a Material,
    /// Rest volume V_e, m³.
    pub volume: f64,
    /// v = D_e x + ū_e (F form, dimensionless).
    pub v: Matrix3<f64>,
    /// w_e² (J).
    pub w2: f64,
    /// Hard strain limits, if any.
    pub limit: Option<StrainLimit>,
}

/// [`prox_hyperelastic_within`] of `L` elements at once, bit-identical to calling it on each:
/// the signed SVDs of the isotropic lanes run in lock-step ([`svd3_fast_lanes`]: their Jacobi
/// eigen-solves are one dependent chain of square roots and divisions per element, which a
/// lone element leaves the core waiting on), then each lane's σ-prox on its own. Linear lanes
/// take their 9 × 9 route, and a group with no isotropic lane takes no SVD.
pub fn prox_hyperelastic_lanes<const L: usize>(p: &[ProxInput<'_>; L]) -> [Matrix3<f64>; L] {
    let scalar =
        |q: &ProxInput<'_>| prox_hyperelastic_within(q.material, q.volume, &q.v, q.w2, q.limit);
    let isotropic: [bool; L] =
        std::array::from_fn(|l| p[l].material.model != MaterialModel::Linear);
    if !isotropic.iter().any(|&i| i) {
        return std::array::from_fn(|l| scalar(&p[l]));
    }
    let svd: [Svd3<f64>; L] = svd3_fast_lanes(&std::array::from_fn(|l| p[l].v));
    std::array::from_fn(|l| {
        if isotropic[l] {
            prox_of_svd(p[l].material, &svd[l], p[l].w2 / p[l].volume, p[l].limit)
        } else {
            scalar(&p[l])
        }
    })
}

/// H = Q diag(λ) Qᵀ (symmetric 3 × 3) by Jacobi ([`symmetric_eigen3`], about a tenth of
/// nalgebra's general `SymmetricEigen`), λ clamped below at `floor`.
fn clamped_eigen(h: &Matrix3<f64>, floor: f64) -> (Vector3<f64>, Matrix3<f64>) {
    let (lambda, q) = symmetric_eigen3(h);
    (lambda.map(|l| if l > floor { l } else { floor }), q)
}

/// H̃⁻¹ r, H̃ the symmetric `h` with its eigenvalues clamped below at `floor` (> 0). Where H −
/// floor·I has a Cholesky factor every eigenvalue already exceeds the floor, H̃ = H, and H's own
/// Cholesky solves (the common case: φ'' = ψ̂'' + τI is definite near the prox's minimum);
/// otherwise Q diag(1/λ̃) Qᵀ r on the clamped eigen-decomposition ([`clamped_eigen`]). The
/// eigen-solve's Jacobi sweeps were a sixth of ADMM's iteration on an 86k-tet bar.
fn clamped_solve(h: &Matrix3<f64>, r: &Vector3<f64>, floor: f64) -> Vector3<f64> {
    let definite = Ldlt3::new(&(h - Matrix3::identity() * floor)).is_some();
    if let Some(f) = Ldlt3::new(h).filter(|_| definite) {
        return f.solve(r);
    }
    let (lambda, q) = clamped_eigen(h, floor);
    q * q.tr_mul(r).component_div(&lambda)
}

/// H = L D Lᵀ of a symmetric 3 × 3 matrix (L unit lower triangular), written out: no square
/// roots, one division per pivot.
struct Ldlt3 {
    /// L's entries below the diagonal: (1, 0), (2, 0), (2, 1).
    l: [f64; 3],
    /// D's diagonal.
    d: [f64; 3],
}

impl Ldlt3 {
    /// The factorisation if every pivot is > 0 (H positive definite; NaN fails).
    fn new(h: &Matrix3<f64>) -> Option<Self> {
        let positive = |x: f64| (x > 0.0).then_some(x);
        let d0 = positive(h[(0, 0)])?;
        let (l10, l20) = (h[(1, 0)] / d0, h[(2, 0)] / d0);
        let d1 = positive(h[(1, 1)] - l10 * h[(1, 0)])?;
        let l21 = (h[(2, 1)] - l20 * h[(1, 0)]) / d1;
        let d2 = positive(h[(2, 2)] - l20 * h[(2, 0)] - l21 * l21 * d1)?;
        Some(Ldlt3 {
            l: [l10, l20, l21],
            d: [d0, d1, d2],
        })
    }

    /// H⁻¹ r.
    fn solve(&self, r: &Vector3<f64>) -> Vector3<f64> {
        let [l10, l20, l21] = self.l;
        // L y = r, then D z = y, then Lᵀ x = z.
        let y0 = r[0];
        let y1 = r[1] - l10 * y0;
        let y2 = r[2] - l20 * y0 - l21 * y1;
        let x2 = y2 / self.d[2];
        let x1 = y1 / self.d[1] - l21 * x2;
        let x0 = y0 / self.d[0] - l10 * x1 - l20 * x2;
        Vector3::new(x0, x1, x2)
    }
}

/// min_σ ψ̂(σ) + τ/2‖σ − σ̃‖² by damped Newton (see the module docs).
pub fn prox_sigma(m: &Material, target: &Vector3<f64>, tau: f64) -> Vector3<f64> {
    prox_sigma_within(m, target, tau, None)
}

/// [`prox_sigma`] over the box σ ∈ [lo, hi]³ of `limit` (none: unconstrained) by projected
/// Newton: components at a bound whose gradient points out of the box are held there, the
/// Newton step runs on the others, and trials are projected back into the box (Armijo on the
/// projected move). If that direction makes no progress, a projected gradient step is tried
/// before giving up. Stops when the projected gradient is below the unconstrained tolerance.
pub fn prox_sigma_within(
    m: &Material,
    target: &Vector3<f64>,
    tau: f64,
    limit: Option<StrainLimit>,
) -> Vector3<f64> {
    let (lo, hi) = limit.map_or((f64::NEG_INFINITY, f64::INFINITY), |l| (l.lo, l.hi));
    let project = |s: Vector3<f64>| s.map(|x| x.clamp(lo, hi));
    let phi = |s: &Vector3<f64>| {
        let psi = sigma_derivatives(m, s).psi;
        psi + 0.5 * tau * (s - target).norm_squared()
    };
    // The gradient with the components held at a bound (pointing out of the box) zeroed.
    let projected = |s: &Vector3<f64>, g: &Vector3<f64>| {
        Vector3::from_fn(|i, _| {
            let held = (s[i] <= lo && g[i] > 0.0) || (s[i] >= hi && g[i] < 0.0);
            if held {
                0.0
            } else {
                g[i]
            }
        })
    };
    let starts = [target.abs(), *target, Vector3::repeat(1.0)].map(project);
    let mut s = starts[0];
    let mut f = f64::INFINITY;
    for c in starts {
        let fc = phi(&c);
        if fc < f {
            (s, f) = (c, fc);
        }
    }
    let tol = 1e-12 * tau * (1.0 + target.norm());
    // φ's evaluation noise (J/m³), generous: what the full-step test may let φ rise by.
    let noise = 1e-10 * (f.abs() + tau * (1.0 + target.norm_squared()));
    for _ in 0..NEWTON_MAX {
        let d = sigma_derivatives(m, &s);
        let g = d.grad + (s - target) * tau;
        let pg = projected(&s, &g);
        // NaN (a non-finite ψ̂ derivative) stops as well.
        if pg.norm().is_nan() || pg.norm() <= tol {
            break;
        }
        // Newton on the free components (held rows and columns replaced by the identity).
        let mut h = d.hess + Matrix3::identity() * tau;
        for i in (0..3).filter(|&i| pg[i] == 0.0 && g[i] != 0.0) {
            h.row_mut(i).fill(0.0);
            h.column_mut(i).fill(0.0);
            h[(i, i)] = 1.0;
        }
        let floor = 1e-6 * tau;
        let newton = -clamped_solve(&h, &pg, floor);
        let mut accepted = false;
        for k in 0..2 {
            // The gradient step, scaled by H's largest clamped eigenvalue, only where the
            // Newton step found no decrease (rare: its eigen-solve is not paid otherwise).
            let step = if k == 0 {
                newton
            } else {
                let largest = clamped_eigen(&h, floor).0.max();
                -pg / largest
            };
            let mut alpha = 1.0;
            for _ in 0..60 {
                let trial = project(s + step * alpha);
                let ft = phi(&trial);
                let slope = g.dot(&(trial - s));
                // Armijo on the projected move, or — for the full Newton step only — a halved
                // projected gradient with φ unchanged to within its evaluation noise: near the
                // minimum Newton's decrease (~‖∇φ‖²/φ'') falls below the round-off of ψ̂'s
                // cancelling terms (stable Neo-Hookean's λ/2 (J − α)² − λ/2 (1 − α)² at
                // 1e5 Pa: ~1e-12 J/m³), and Armijo alone then stalls at ‖∇φ‖ ~ 1e-8τ.
                let armijo = slope < 0.0 && ft <= f + 1e-4 * slope;
                let full = k == 0 && alpha == 1.0 && ft <= f + noise && {
                    let gt = sigma_derivatives(m, &trial).grad + (trial - target) * tau;
                    projected(&trial, &gt).norm() <= 0.5 * pg.norm()
                };
                if ft.is_finite() && (armijo || full) {
                    (s, f) = (trial, ft);
                    accepted = true;
                    break;
                }
                alpha *= 0.5;
            }
            if accepted {
                break;
            }
        }
        if !accepted {
            break;
        }
    }
    s
}
