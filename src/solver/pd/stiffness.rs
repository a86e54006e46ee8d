//! The per-element PD stiffness k_e: the least-squares slope through (1, 0) of the material's
//! 1-D stress curve (Liu, Bouaziz, Kavan 2017, Eqs. 10–11).
//!
//! With σ₂ = σ₃ = 1 the stress curve is f(x) = ∂Ψ/∂σ₁ at σ = (x, 1, 1) (Pa), and
//!
//! k = argmin_k ∫_{x₀}^{x₁} (k (x − 1) − f(x))² dx = ∫ (x − 1) f(x) dx / ∫ (x − 1)² dx,
//!
//! on the paper's interval [x₀, x₁] = [0.5, 1.5] (then ∫(x − 1)² = 1/12). The integral is a
//! 24-point Gauss–Legendre rule over f evaluated with the material's own f64 stress
//! ([`crate::material::sigma_derivatives`], [`crate::material::pk1`] for linear elasticity),
//! so every model — and any model added later — gets its k with no per-model code; f is smooth
//! on [0.5, 1.5] for every jello model, so the rule is exact to round-off (the closed forms
//! below agree to 1e-13, `tests/cpu/pd.rs`).
//!
//! # jello's μ, λ and k
//! Each model is written with its own parameters (see [`crate::material::Material`]); in terms
//! of them, and of the Lamé constants (μ_L, λ_L) that [`Material::from_young_poisson`] maps from
//! (E, ν):
//!
//! | model | f(x) | k on [0.5, 1.5] | in Lamé constants |
//! |---|---|---|---|
//! | fixed corotated | (2μ + λ)(x − 1) | 2μ + λ (exact on any interval) | 2μ_L + λ_L |
//! | ARAP | 2μ(x − 1) | 2μ (PD's weight) | 2μ_L |
//! | linear | (2μ + λ)(x − 1) | 2μ + λ | 2μ_L + λ_L |
//! | Neo-Hookean (log J) | μx − μ/x + λ ln x / x | (12 ln 3 − 11)μ + 12[x ln x − x − ½ln²x]λ ≈ 2.18335μ + 1.35356λ | same (μ = μ_L, λ = λ_L) |
//! | StVK | (μ + λ/2)(x² − 1)x | 2.15(μ + λ/2) | 2.15(μ_L + λ_L/2) |
//! | stable NH (Smith 2018) | μx + λ(x − α) − μx/(x² + 3) | μ + λ − 12μ·I ≈ 0.87072μ + λ, I = ∫(x² − x)/(x² + 3) | ≈ 1.99430μ_L + λ_L (μ = 4/3 μ_L, λ = λ_L + 5/6 μ_L) |
//! | stable NH, log-free | μx + λ(x − α) | μ + λ | 2μ_L + λ_L (μ = μ_L, λ = λ_L + μ_L) |
//!
//! (α's constant offsets integrate to zero against the odd weight x − 1.) So on the interval
//! the paper uses, every model's k is within 10% of the rest-pose P-wave modulus 2μ_L + λ_L
//! except Neo-Hookean and StVK, whose stress curves stiffen away from rest.
//!
//! [`Material::from_young_poisson`]: crate::material::Material::from_young_poisson

use crate::error::{JelloError, Result};
use crate::material::{pk1, sigma_derivatives, Material, MaterialModel};
use nalgebra::{Matrix3, Vector3};

/// The paper's stretch interval [x₀, x₁] for the fit (QN §5: "in all simulations").
pub const PAPER_INTERVAL: [f64; 2] = [0.5, 1.5];

/// Points of the Gauss–Legendre rule used for the fit.
const RULE_POINTS: usize = 24;

/// The 1-D stress curve f(x) = ∂Ψ/∂σ₁ at σ = (x, 1, 1), Pa.
pub fn stress_curve(m: &Material, x: f64) -> f64 {
    if m.model == MaterialModel::Linear {
        // Linear elasticity is not a singular-value model; at F = diag(x, 1, 1), P₁₁ is f(x).
        let f = Matrix3::from_diagonal(&Vector3::new(x, 1.0, 1.0));
        return pk1(m, &f)[(0, 0)];
    }
    sigma_derivatives(m, &Vector3::new(x, 1.0, 1.0)).grad[0]
}

/// k (Pa) of material `m` fitted on the stretch interval `[x0, x1]` (QN Eq. 11). Errors when
/// the interval is empty or not finite, or the fit is not positive and finite (the global
/// matrix must be SPD).
pub fn fit_stiffness(m: &Material, interval: [f64; 2]) -> Result<f64> {
    let [x0, x1] = interval;
    if !(x0.is_finite() && x1.is_finite() && x0 > 0.0 && x1 > x0) {
        return Err(JelloError::Invalid(format!(
            "PD stiffness interval must satisfy 0 < x0 < x1, got [{x0}, {x1}]"
        )));
    }
    let (nodes, weights) = gauss_legendre(RULE_POINTS);
    let (mid, half) = ((x0 + x1) / 2.0, (x1 - x0) / 2.0);
    let (mut num, mut den) = (0.0, 0.0);
    for (t, w) in nodes.iter().zip(&weights) {
        let x = mid + half * t;
        num += w * half * (x - 1.0) * stress_curve(m, x);
        den += w * half * (x - 1.0) * (x - 1.0);
    }
    let k = num / den;
    if !(k.is_finite() && k > 0.0) {
        return Err(JelloError::Material(format!(
            "{}: the PD stiffness fit on [{x0}, {x1}] is {k} Pa (must be > 0)",
            m.model.name()
        )));
    }
    Ok(k)
}

/// Per-element PD weights w_e = V_e · k_e · `scale` (N/m · m = J/m², the weight of
/// ½‖D_e x − p_e‖²), with k_e fitted once per distinct material.
pub fn element_weights(
    materials: &[Material],
    volumes: impl Iterator<Item = f64>,
    interval: [f64; 2],
    scale: f64,
) -> Result<Vec<f64>> {
    let mut cache: Vec<(Material, f64)> = Vec::new();
    materials
        .iter()
        .zip(volumes)
        .map(|(m, v)| {
            let k = match cache.iter().find(|(c, _)| c == m) {
                Some((_, k)) => *k,
                None => {
                    let k = fit_stiffness(m, interval)?;
                    cache.push((*m, k));
                    k
                }
            };
            Ok(v * k * scale)
        })
        .collect()
}

/// Nodes and weights of the `n`-point Gauss–Legendre rule on [−1, 1] (Newton on Pₙ from the
/// Chebyshev guesses; converged to round-off).
pub fn gauss_legendre(n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut nodes = vec![0.0; n];
    let mut weights = vec![0.0; n];
    for i in 0..n {
        let mut x = (std::f64::consts::PI * (i as f64 + 0.75) / (n as f64 + 0.5)).cos();
        let mut dp = 1.0;
        for _ in 0..100 {
            // Pₙ(x) and P'ₙ(x) by the three-term recurrence.
            let (mut p0, mut p1) = (1.0, x);
            for k in 2..=n {
                let p2 = ((2 * k - 1) as f64 * x * p1 - (k - 1) as f64 * p0) / k as f64;
                p0 = p1;
                p1 = p2;
            }
            let p = if n == 0 { 1.0 } else { p1 };
            let pm1 = if n == 0 { 0.0 } else { p0 };
            dp = n as f64 * (x * p - pm1) / (x * x - 1.0);
            let step = p / dp;
            x -= step;
            if step.abs() < 1e-16 {
                break;
            }
        }
        nodes[i] = x;
        weights[i] = 2.0 / ((1.0 - x * x) * dp * dp);
    }
    (nodes, weights)
}
