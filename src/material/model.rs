//! Material models and their parameters.

use crate::error::{JelloError, Result};
use serde::{Deserialize, Serialize};

/// The constitutive models jello implements. Ψ is written with the model's own `mu`, `lambda`
/// (see [`Material::from_young_poisson`] for how Young's modulus and Poisson's ratio map onto
/// them; the mapping makes every model's small-strain response that of linear elasticity with
/// the given E and ν).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaterialModel {
    /// Stable Neo-Hookean of Smith et al. 2018, with its log term:
    /// Ψ = μ/2 (I_C − 3) + λ/2 (J − α)² − μ/2 log(I_C + 1), α = 1 + 3μ/(4λ).
    /// Defined (and finite) for inverted elements.
    StableNeoHookean,
    /// The log-free stable Neo-Hookean used by VBD-style GPU codes:
    /// Ψ = μ/2 (I_C − 3) + λ/2 (J − α)², α = 1 + μ/λ. Defined for inverted elements.
    StableNeoHookeanVbd,
    /// Fixed corotated (Stomakhin et al. 2012): Ψ = μ‖F − R‖² + λ/2 (J − 1)².
    FixedCorotated,
    /// Compressible Neo-Hookean with log J: Ψ = μ/2 (I_C − 3) − μ log J + λ/2 (log J)²;
    /// Ψ = +∞ for J ≤ 0 (line searches must reject such states).
    NeoHookean,
    /// Saint Venant–Kirchhoff: Ψ = μ‖E‖² + λ/2 tr(E)², E = ½(FᵀF − I).
    StVk,
    /// As-rigid-as-possible: Ψ = μ‖F − R‖² (fixed corotated with λ = 0).
    Arap,
    /// Linear (small-strain) elasticity: Ψ = μ‖ε‖² + λ/2 tr(ε)², ε = sym(F) − I. Not rotation
    /// invariant; its Hessian is constant.
    Linear,
}

impl MaterialModel {
    /// All models, for tests and CLI help.
    pub const ALL: [MaterialModel; 7] = [
        MaterialModel::StableNeoHookean,
        MaterialModel::StableNeoHookeanVbd,
        MaterialModel::FixedCorotated,
        MaterialModel::NeoHookean,
        MaterialModel::StVk,
        MaterialModel::Arap,
        MaterialModel::Linear,
    ];

    /// The scene-file name of the model.
    pub fn name(self) -> &'static str {
        match self {
            MaterialModel::StableNeoHookean => "stable_neo_hookean",
            MaterialModel::StableNeoHookeanVbd => "stable_neo_hookean_vbd",
            MaterialModel::FixedCorotated => "fixed_corotated",
            MaterialModel::NeoHookean => "neo_hookean",
            MaterialModel::StVk => "st_vk",
            MaterialModel::Arap => "arap",
            MaterialModel::Linear => "linear",
        }
    }

    /// Parses a scene-file name (see [`MaterialModel::name`]); a few common aliases are accepted.
    pub fn from_name(s: &str) -> Option<Self> {
        let s = s.to_ascii_lowercase().replace('-', "_");
        Some(match s.as_str() {
            "stable_neo_hookean" | "snh" => MaterialModel::StableNeoHookean,
            "stable_neo_hookean_vbd" | "snh_vbd" => MaterialModel::StableNeoHookeanVbd,
            "fixed_corotated" | "fcr" | "corotated" => MaterialModel::FixedCorotated,
            "neo_hookean" | "nh" => MaterialModel::NeoHookean,
            "st_vk" | "stvk" | "saint_venant_kirchhoff" => MaterialModel::StVk,
            "arap" => MaterialModel::Arap,
            "linear" => MaterialModel::Linear,
            _ => return None,
        })
    }

    /// Whether Ψ is +∞ for J ≤ 0 (so no solver can accept an inverted element of this model);
    /// the others are finite through inversion.
    pub fn infinite_when_inverted(self) -> bool {
        matches!(self, MaterialModel::NeoHookean)
    }

    /// Stable index used by GPU kernels (`u32` material id) — keep in sync with shaders.
    pub fn gpu_id(self) -> u32 {
        match self {
            MaterialModel::StableNeoHookean => 0,
            MaterialModel::StableNeoHookeanVbd => 1,
            MaterialModel::FixedCorotated => 2,
            MaterialModel::NeoHookean => 3,
            MaterialModel::StVk => 4,
            MaterialModel::Arap => 5,
            MaterialModel::Linear => 6,
        }
    }
}

/// One element's constitutive law: a model and its own parameters `mu`, `lambda` (Pa).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Material {
    /// Which energy density.
    pub model: MaterialModel,
    /// The model's first parameter μ, Pa.
    pub mu: f64,
    /// The model's second parameter λ, Pa (ignored by ARAP).
    pub lambda: f64,
}

/// Lamé parameters `(μ, λ)` in Pa from Young's modulus `e` (Pa) and Poisson's ratio `nu`.
/// Errors unless `e > 0` and `-1 < nu < 0.5` (both finite).
pub fn lame_from_young_poisson(e: f64, nu: f64) -> Result<(f64, f64)> {
    if !(e.is_finite() && e > 0.0) {
        return Err(JelloError::Material(format!(
            "Young's modulus must be a finite value > 0 Pa, got {e}"
        )));
    }
    if !(nu.is_finite() && nu > -1.0 && nu < 0.5) {
        return Err(JelloError::Material(format!(
            "Poisson's ratio must lie in (-1, 0.5), got {nu}"
        )));
    }
    let mu = e / (2.0 * (1.0 + nu));
    let lambda = e * nu / ((1.0 + nu) * (1.0 - 2.0 * nu));
    Ok((mu, lambda))
}

impl Material {
    /// A material whose small-strain response equals linear elasticity with Young's modulus `e`
    /// (Pa) and Poisson ratio `nu`. With Lamé (μ_L, λ_L):
    /// - stable Neo-Hookean (Smith 2018): μ = 4/3 μ_L, λ = λ_L + 5/6 μ_L (the paper's mapping);
    /// - log-free "VBD" stable Neo-Hookean: μ = μ_L, λ = λ_L + μ_L (its rest tensor is
    ///   μ(δδ + δδᵀ) + (λ − μ) δ⊗δ, so λ must absorb μ);
    /// - ARAP: μ = μ_L, λ = 0; every other model: μ = μ_L, λ = λ_L.
    pub fn from_young_poisson(model: MaterialModel, e: f64, nu: f64) -> Result<Self> {
        let (mu_l, lambda_l) = lame_from_young_poisson(e, nu)?;
        let (mu, lambda) = match model {
            MaterialModel::StableNeoHookean => (4.0 / 3.0 * mu_l, lambda_l + 5.0 / 6.0 * mu_l),
            MaterialModel::StableNeoHookeanVbd => (mu_l, lambda_l + mu_l),
            MaterialModel::Arap => (mu_l, 0.0),
            _ => (mu_l, lambda_l),
        };
        Material::new(model, mu, lambda)
    }

    /// A material from the model's own parameters (Pa); validated.
    pub fn new(model: MaterialModel, mu: f64, lambda: f64) -> Result<Self> {
        if !(mu.is_finite() && mu > 0.0) {
            return Err(JelloError::Material(format!(
                "mu must be finite and > 0 Pa, got {mu}"
            )));
        }
        if !lambda.is_finite() {
            return Err(JelloError::Material(format!(
                "lambda must be finite, got {lambda}"
            )));
        }
        let needs_positive_lambda = matches!(
            model,
            MaterialModel::StableNeoHookean | MaterialModel::StableNeoHookeanVbd
        );
        if needs_positive_lambda && lambda <= 0.0 {
            return Err(JelloError::Material(format!(
                "{} needs lambda > 0 (its rest-state offset α divides by λ), got {lambda}",
                model.name()
            )));
        }
        if 3.0 * lambda + 2.0 * mu <= 0.0 && model != MaterialModel::Arap {
            return Err(JelloError::Material(format!(
                "bulk modulus λ + 2μ/3 must be > 0, got mu = {mu}, lambda = {lambda}"
            )));
        }
        Ok(Material { model, mu, lambda })
    }
}
