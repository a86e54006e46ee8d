//! The time integrators: implicit Euler and BDF2, both as the minimisation of one incremental
//! potential E(x) = ½‖x − x̃‖²_M / ĥ² + Ψ(x) + B(x) per step; they differ only in ĥ, x̃ and the
//! velocity update, which this module computes.
//!
//! # Implicit Euler
//! x^{n+1} = xⁿ + h v^{n+1}, v^{n+1} = vⁿ + h a^{n+1}, with M a = −∇Ψ − ∇B + M g + f. Then
//! ĥ = h, x̂ = xⁿ, x̃ = xⁿ + h vⁿ + h² (g + M⁻¹f) and v^{n+1} = (x^{n+1} − xⁿ)/h. First order.
//!
//! # BDF2
//! The two-step backward differentiation formula (as IPC and the multilevel-bases paper use
//! it), on a fixed step h:
//!
//! x^{n+1} − 4/3 xⁿ + 1/3 xⁿ⁻¹ = 2/3 h v^{n+1},
//! v^{n+1} − 4/3 vⁿ + 1/3 vⁿ⁻¹ = 2/3 h a^{n+1},  M a^{n+1} = −∇Ψ(x^{n+1}) − ∇B(x^{n+1}) + M g + f.
//!
//! Write ĥ = 2h/3, x̂ = 4/3 xⁿ − 1/3 xⁿ⁻¹ and v̂ = 4/3 vⁿ − 1/3 vⁿ⁻¹. The first line is
//! v^{n+1} = (x^{n+1} − x̂)/ĥ, the second v^{n+1} = v̂ + ĥ a^{n+1}. Equating them,
//! x^{n+1} − x̂ − ĥ v̂ = ĥ² a^{n+1}, i.e.
//!
//! M (x^{n+1} − x̃)/ĥ² = −∇Ψ(x^{n+1}) − ∇B(x^{n+1}),  x̃ = x̂ + ĥ v̂ + ĥ² (g + M⁻¹f),
//!
//! which is ∇E(x^{n+1}) = 0 for E(x) = ½‖x − x̃‖²_M / ĥ² + Ψ(x) + B(x): the implicit-Euler
//! potential with h → ĥ in the inertia term and the target x̃ above (external forces scale with
//! ĥ² exactly as gravity does). After the solve v^{n+1} = (x^{n+1} − x̂)/ĥ. Second order; its
//! numerical damping is O(h³) per unit time against implicit Euler's O(h) (`tests/cpu/bdf2.rs`
//! measures both).
//!
//! The first step has no xⁿ⁻¹: it is an implicit-Euler step (what IPC does), and every later
//! step carries the previous step's start in [`State::history`]. A static solve has no
//! inertia and ignores the integrator.
//!
//! # What stays on h
//! Only the inertia term changes. Ψ and B are the potentials of the forces in the ODE above,
//! which the integrator discretises, not redefines: the obstacle barrier keeps its weight
//! κ·m/h² with the real step h (as in IPC, whose BDF2 scales the barrier with the elastic
//! energy, not with the inertia), so an implicit-Euler and a BDF2 run of one scene at one h
//! feel the same contact force law. The inertia weight the solvers use is
//! [`super::StepProblem::inertia`] = 1/ĥ², the barrier's is κ·m/h² from
//! [`super::StepProblem::h`]; nothing may assume they are equal.

use super::{Model, State};
use serde::{Deserialize, Serialize};

/// The scene's `[simulation] integrator` values, in the order error messages list them.
pub const INTEGRATORS: [&str; 2] = ["implicit_euler", "bdf2"];

/// How a dynamic step discretises time (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Integrator {
    /// Backward (implicit) Euler: first order, strongly damped at large h.
    #[default]
    ImplicitEuler,
    /// The two-step backward differentiation formula: second order; the first step (no
    /// history) is implicit Euler.
    Bdf2,
}

impl Integrator {
    /// The scene name (`implicit_euler`, `bdf2`).
    pub fn name(self) -> &'static str {
        match self {
            Integrator::ImplicitEuler => "implicit_euler",
            Integrator::Bdf2 => "bdf2",
        }
    }

    /// Parses a scene name; `None` for anything else (the caller names the key).
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "implicit_euler" => Some(Integrator::ImplicitEuler),
            "bdf2" => Some(Integrator::Bdf2),
            _ => None,
        }
    }

    /// Whether a step keeps its start as the next step's history.
    pub fn keeps_history(self) -> bool {
        self == Integrator::Bdf2
    }

    /// ĥ, s, of the steady steps (those with history) at time step `h`: h for implicit Euler,
    /// 2h/3 for BDF2. Their inertia weight is 1/ĥ² (what a precompute of the step's system
    /// matrix, such as JGS2's subspace, should be built for).
    pub fn steady_h(self, h: f64) -> f64 {
        match self {
            Integrator::ImplicitEuler => h,
            Integrator::Bdf2 => 2.0 * h / 3.0,
        }
    }
}

/// The state one step before a [`State`]: xⁿ⁻¹ (m) and vⁿ⁻¹ (m/s), flattened like the state's.
/// BDF2 needs it; implicit Euler keeps none.
#[derive(Clone, Debug, PartialEq)]
pub struct History {
    /// Positions at the start of the previous step, m.
    pub x: Vec<f64>,
    /// Velocities at the start of the previous step, m/s.
    pub v: Vec<f64>,
}

/// One dynamic step's discretisation: v^{n+1} = (x^{n+1} − x̂)/ĥ and v̂, the velocity the
/// inertial target extrapolates with (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct StepScheme {
    /// ĥ, s: h for implicit Euler (and BDF2's first step), 2h/3 for BDF2.
    pub h_hat: f64,
    /// x̂, m: xⁿ for implicit Euler, 4/3 xⁿ − 1/3 xⁿ⁻¹ for BDF2.
    pub x_hat: Vec<f64>,
    /// v̂, m/s: vⁿ for implicit Euler, 4/3 vⁿ − 1/3 vⁿ⁻¹ for BDF2.
    pub v_hat: Vec<f64>,
    /// Whether this step is a BDF2 step (false on BDF2's first step, which has no history).
    pub bdf2: bool,
}

impl StepScheme {
    /// The scheme of the step of length `h` (s) from `state` under `model`'s integrator: BDF2
    /// where the integrator is BDF2 and the state has a history of its size, else implicit
    /// Euler.
    pub fn new(model: &Model, state: &State, h: f64) -> Self {
        match (&state.history, model.integrator) {
            (Some(p), Integrator::Bdf2) if p.x.len() == state.x.len() => StepScheme {
                h_hat: Integrator::Bdf2.steady_h(h),
                x_hat: combine(&state.x, &p.x),
                v_hat: combine(&state.v, &p.v),
                bdf2: true,
            },
            _ => StepScheme {
                h_hat: h,
                x_hat: state.x.clone(),
                v_hat: state.v.clone(),
                bdf2: false,
            },
        }
    }

    /// The inertia weight 1/ĥ², 1/s².
    pub fn inertia(&self) -> f64 {
        1.0 / (self.h_hat * self.h_hat)
    }

    /// v^{n+1} = (x^{n+1} − x̂)/ĥ, m/s, for the step's end positions `x` (m) into `v`. (For
    /// implicit Euler this is (x − xⁿ)·(1/h), the same bits as before BDF2 existed.)
    pub fn velocity_into(&self, x: &[f64], v: &mut [f64]) {
        let inv = 1.0 / self.h_hat;
        for ((vk, xk), bk) in v.iter_mut().zip(x).zip(&self.x_hat) {
            *vk = (xk - bk) * inv;
        }
    }
}

/// 4/3 a − 1/3 b, per entry.
fn combine(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(a, b)| (4.0 * a - b) / 3.0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_none() {
        for name in INTEGRATORS {
            assert_eq!(Integrator::parse(name).unwrap().name(), name);
        }
        assert_eq!(Integrator::parse("BDF2"), None);
        assert_eq!(Integrator::parse("euler"), None);
        assert_eq!(Integrator::default(), Integrator::ImplicitEuler);
    }

    /// BDF2's velocity rule is exact for a quadratic trajectory x(t) = a + b t + c t²: the
    /// formula's error term is x''' (zero here), so v^{n+1} must equal b + 2c t^{n+1} to
    /// round-off, while implicit Euler's backward difference is off by c·h.
    #[test]
    fn bdf2_velocity_is_exact_on_a_quadratic() {
        let (a, b, c, h) = (0.3, -1.7, 2.5, 0.1);
        let x = |t: f64| a + b * t + c * t * t;
        let (t0, t1, t2) = (0.4, 0.5, 0.6);
        let hist = History {
            x: vec![x(t0)],
            v: vec![0.0],
        };
        let bdf2 = StepScheme {
            h_hat: Integrator::Bdf2.steady_h(h),
            x_hat: combine(&[x(t1)], &hist.x),
            v_hat: vec![0.0],
            bdf2: true,
        };
        let mut v = [0.0];
        bdf2.velocity_into(&[x(t2)], &mut v);
        let exact = b + 2.0 * c * t2;
        assert!((v[0] - exact).abs() < 1e-12, "{} vs {exact}", v[0]);
        let euler = StepScheme {
            h_hat: h,
            x_hat: vec![x(t1)],
            v_hat: vec![0.0],
            bdf2: false,
        };
        euler.velocity_into(&[x(t2)], &mut v);
        assert!(((exact - v[0]) - c * h).abs() < 1e-12, "{}", v[0]);
    }
}
