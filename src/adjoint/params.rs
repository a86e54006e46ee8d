//! The parameter classes a backward pass can differentiate with respect to, the gradients it
//! returns, and the material-parameter derivatives of the stress.

use crate::error::{JelloError, Result};
use crate::material::{pk1, Material, MaterialModel};
use nalgebra::Matrix3;

/// A class of inputs of a recorded run ([`super::Tape::backward`]'s `wrt`). Python names in
/// brackets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Param {
    /// x⁰, m, every vertex (pinned ones too: they set the first step's pinned velocities)
    /// (`initial_positions`).
    InitialPositions,
    /// v⁰, m/s, every vertex (`initial_velocities`).
    InitialVelocities,
    /// Per tet, the model's own first parameter μ, Pa (`mu`).
    Mu,
    /// Per tet, the model's own second parameter λ, Pa (`lambda`).
    Lambda,
    /// Per tet, Young's modulus E, Pa, with ν held (`youngs_modulus`).
    YoungsModulus,
    /// Per tet, Poisson's ratio ν, with E held (`poisson_ratio`).
    PoissonRatio,
    /// Per tet, density ρ, kg/m³ (`density`).
    Density,
    /// Per step s ≥ 1, the position of every pinned vertex at the end of step s (its target),
    /// m (`pin_targets`).
    PinTargets,
    /// Per step s ≥ 0, an external force on every vertex acting during the step from s to
    /// s + 1 (applied as x̃_v += ĥ² f_v/m_v, as gravity is), N (`forces`).
    Forces,
    /// The IPC contact stiffness κ between meshes, J/m⁴, one value for the run: needs a fixed
    /// κ (`contact.ipc_kappa`; an adaptive κ is chosen by the solver, not an input)
    /// (`contact_stiffness`).
    ContactStiffness,
}

impl Param {
    /// Every class, in the order gradients are reported.
    pub const ALL: [Param; 10] = [
        Param::InitialPositions,
        Param::InitialVelocities,
        Param::Mu,
        Param::Lambda,
        Param::YoungsModulus,
        Param::PoissonRatio,
        Param::Density,
        Param::PinTargets,
        Param::Forces,
        Param::ContactStiffness,
    ];

    /// The Python name.
    pub fn name(self) -> &'static str {
        match self {
            Param::InitialPositions => "initial_positions",
            Param::InitialVelocities => "initial_velocities",
            Param::Mu => "mu",
            Param::Lambda => "lambda",
            Param::YoungsModulus => "youngs_modulus",
            Param::PoissonRatio => "poisson_ratio",
            Param::Density => "density",
            Param::PinTargets => "pin_targets",
            Param::Forces => "forces",
            Param::ContactStiffness => "contact_stiffness",
        }
    }

    /// Parses a Python name; `None` for anything else (the caller lists [`Param::ALL`]).
    pub fn parse(name: &str) -> Option<Self> {
        Param::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// dL/d(inputs) of a recorded run; a class not asked for is `None`. Flattened per vertex
/// `[x0 y0 z0 x1 …]` where per vertex.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Gradients {
    /// dL/dx⁰, 1/m × [L].
    pub initial_positions: Option<Vec<f64>>,
    /// dL/dv⁰, s/m × [L].
    pub initial_velocities: Option<Vec<f64>>,
    /// dL/dμ per tet, 1/Pa × [L].
    pub mu: Option<Vec<f64>>,
    /// dL/dλ per tet, 1/Pa × [L].
    pub lambda: Option<Vec<f64>>,
    /// dL/dE per tet, 1/Pa × [L].
    pub youngs_modulus: Option<Vec<f64>>,
    /// dL/dν per tet, [L].
    pub poisson_ratio: Option<Vec<f64>>,
    /// dL/dρ per tet, m³/kg × [L].
    pub density: Option<Vec<f64>>,
    /// dL/d(pin target) per step: entry s (0 ..= steps) holds 3 values per pinned vertex in the
    /// order of [`crate::problem::Model::pins`] and their vertices; entry 0 is all zeros (the
    /// initial pinned positions are part of x⁰).
    pub pin_targets: Option<Vec<Vec<f64>>>,
    /// dL/df per step: entry s (0 .. steps) is per vertex (3n), the force acting from step s to
    /// s + 1; zero on pinned vertices (their motion is scripted).
    pub forces: Option<Vec<Vec<f64>>>,
    /// dL/dκ of the fixed IPC stiffness, [L]·m⁴/J.
    pub contact_stiffness: Option<f64>,
    /// Steps (1-based: the step that ends at state s) that did not converge, whose gradient
    /// this includes anyway ([`super::Unconverged::Flag`]); empty when every step converged.
    pub unconverged_steps: Vec<usize>,
}

/// ∂P/∂μ and ∂P/∂λ at F (Pa/Pa = dimensionless): P is linear in (μ, λ) for every model (the
/// stable Neo-Hookeans' offset α = 1 + cμ/λ enters P only through λ(J − α) = λ(J − 1) − cμ, and
/// the energy's constant shifts drop out of P), so P = μ P_μ + λ P_λ and each is the difference
/// of two stress evaluations at doubled parameters divided by the parameter — exact up to
/// round-off, not a finite difference (`tests/cpu/adjoint.rs` and the unit test below check the
/// linearity). λ = 0 (ARAP ignores it) gives P_λ = 0.
pub fn stress_parameter_derivatives(
    m: &Material,
    f: &Matrix3<f64>,
) -> (Matrix3<f64>, Matrix3<f64>) {
    let base = pk1(m, f);
    let with = |mu: f64, lambda: f64| {
        pk1(
            &Material {
                model: m.model,
                mu,
                lambda,
            },
            f,
        )
    };
    let p_mu = (with(2.0 * m.mu, m.lambda) - base) / m.mu;
    let p_lambda = if m.lambda == 0.0 || m.model == MaterialModel::Arap {
        Matrix3::zeros()
    } else {
        (with(m.mu, 2.0 * m.lambda) - base) / m.lambda
    };
    (p_mu, p_lambda)
}

/// The (E, ν) an element's (μ, λ) came from ([`Material::from_young_poisson`] inverted), and
/// the Jacobian ∂(μ, λ)/∂(E, ν) as `[[∂μ/∂E, ∂μ/∂ν], [∂λ/∂E, ∂λ/∂ν]]`. Errors for ARAP, whose
/// λ = 0 forgets ν (ask for `mu` instead), naming the tet.
pub fn young_poisson_jacobian(m: &Material, tet: usize) -> Result<[[f64; 2]; 2]> {
    // Lamé (μ_L, λ_L) from the model's own parameters, and d(μ, λ)/d(μ_L, λ_L).
    let (mu_l, la_l, dmu, dla) = match m.model {
        MaterialModel::StableNeoHookean => {
            let mu_l = 0.75 * m.mu;
            (
                mu_l,
                m.lambda - 5.0 / 6.0 * mu_l,
                [4.0 / 3.0, 0.0],
                [5.0 / 6.0, 1.0],
            )
        }
        MaterialModel::StableNeoHookeanVbd => (m.mu, m.lambda - m.mu, [1.0, 0.0], [1.0, 1.0]),
        MaterialModel::Arap => {
            return Err(JelloError::Invalid(format!(
                "tet {tet} is ARAP, whose λ = 0 does not keep Poisson's ratio: ask for `mu` \
                 instead of `youngs_modulus`/`poisson_ratio`"
            )))
        }
        _ => (m.mu, m.lambda, [1.0, 0.0], [0.0, 1.0]),
    };
    // E = μ_L(3λ_L + 2μ_L)/(λ_L + μ_L), ν = λ_L/(2(λ_L + μ_L)); then
    // μ_L = E/(2(1+ν)), λ_L = Eν/((1+ν)(1−2ν)).
    let e = mu_l * (3.0 * la_l + 2.0 * mu_l) / (la_l + mu_l);
    let nu = la_l / (2.0 * (la_l + mu_l));
    let dmul_de = 1.0 / (2.0 * (1.0 + nu));
    let dmul_dnu = -e / (2.0 * (1.0 + nu) * (1.0 + nu));
    let q = (1.0 + nu) * (1.0 - 2.0 * nu);
    let dlal_de = nu / q;
    // d/dν [ν/q] with q' = (1 − 2ν) − 2(1 + ν) = −1 − 4ν.
    let dlal_dnu = e * (q + nu * (1.0 + 4.0 * nu)) / (q * q);
    Ok([
        [
            dmu[0] * dmul_de + dmu[1] * dlal_de,
            dmu[0] * dmul_dnu + dmu[1] * dlal_dnu,
        ],
        [
            dla[0] * dmul_de + dla[1] * dlal_de,
            dla[0] * dmul_dnu + dla[1] * dlal_dnu,
        ],
    ])
}
