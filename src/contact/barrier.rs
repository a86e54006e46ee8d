//! IPC's log barrier and its adaptive stiffness (Li et al. 2020, "Incremental Potential Contact").
//!
//! # Barrier
//! b(d) = −(d − d̂)² ln(d/d̂) for 0 < d < d̂, 0 for d ≥ d̂, +∞ for d ≤ 0 ([`barrier`]). For contact
//! pairs d and d̂ are *squared* distances (m², IPC's implementation form: no square roots, smooth
//! derivatives of the squared distances), so b is in m⁴ and the contact energy κ·Σ m·b needs κ in
//! J/m⁴ (or (units of `inertia`)/m², below). b is C² at d̂ (b = b′ = b″ = 0 there) and b → +∞ as
//! d → 0. The obstacle barrier ([`crate::problem::Obstacle`]) applies the same function to unsquared
//! distances in metres.
//!
//! # Stiffness κ (IPC's adaptive rule, as in the paper's supplement and ipc-toolkit)
//! IPC minimises E(x) + κ·B(x), E the incremental potential, B = Σ b. With `inertia` the mass
//! scale of E's Hessian (IPC's E = ½‖x − x̃‖²_M + h²Ψ: the average vertex mass m̄ in kg; jello's
//! potential divides by h²: m̄/h² in kg/s²), κ is in (units of `inertia`)/m².
//! - Bounds ([`stiffness_bounds`]): at a gap δ₀ = 10⁻⁸·l (l the bounding-box diagonal), i.e. the
//!   squared distance d₀ = δ₀² (or d̂²/2 if that is not below d̂², d̂ the activation distance in
//!   m), the barrier's stiffness along the contact normal, approximated by its Gauss–Newton part
//!   κ·4d₀·b″(d₀) (∂²b/∂δ² = 4δ²b″ + 2b′ with d = δ²), should be 10¹¹ × inertia:
//!   κ_min = 10¹¹·inertia / (4d₀ b″(d₀)); κ_max = 100 κ_min. (The full ∂²b/∂δ² there is about
//!   half of the Gauss–Newton part; IPC's rule is kept as published.)
//! - Initial value ([`initial_stiffness`]): the κ that best balances the gradients at the start of
//!   the step, argmin_κ ‖∇E + κ∇B‖ = −∇E·∇B / ‖∇B‖², clamped to [κ_min, κ_max] (κ_min when
//!   ∇B = 0: no pair is active and κ does not matter yet).
//! - Raise ([`raise_stiffness`]): after each Newton iteration, when the smallest pair distance
//!   is below (10⁻⁹·l)² both now and at the previous check, and still decreasing, the barrier is
//!   not pushing hard enough: κ doubles, up to κ_max.
//! - The raise gap is a parameter of [`raise_stiffness`]; every solver passes IPC's 10⁻⁹
//!   ([`KAPPA_RAISE_GAP`]), the f32 JGS2 / VBD device iteration included: it reads contact
//!   positions with more than f32's digits near a pair (its `device_ipc.rs`, "κ and friction",
//!   says how, and what a larger gap cost).

use super::distance::SecondOrder;

/// The gap (fraction of the bounding-box diagonal) at which κ_min is calibrated.
pub const KAPPA_MIN_GAP: f64 = 1e-8;
/// The normal stiffness, in units of the inertia, that κ_min gives at that gap.
pub const KAPPA_MIN_SCALE: f64 = 1e11;
/// κ_max / κ_min.
pub const KAPPA_RANGE: f64 = 100.0;
/// The distance (fraction of the bounding-box diagonal) below which a shrinking gap raises κ.
pub const KAPPA_RAISE_GAP: f64 = 1e-9;

/// b(d), b′(d), b″(d) of −(d − d̂)² ln(d/d̂) for 0 < d < d̂ (zero at and beyond d̂; +∞, −∞, +∞ at
/// d ≤ 0). d and d̂ in the same units (m² for contact pairs).
pub fn barrier(d: f64, dhat: f64) -> (f64, f64, f64) {
    if d >= dhat {
        return (0.0, 0.0, 0.0);
    }
    if d <= 0.0 {
        return (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY);
    }
    let r = d - dhat;
    let l = (d / dhat).ln();
    let b = -r * r * l;
    let db = -(2.0 * r * l + r * r / d);
    let ddb = -(2.0 * l + 4.0 * r / d - r * r / (d * d));
    (b, db, ddb)
}

/// κ·b(d(x)) with its exact derivatives, from a squared distance `d` with derivatives and
/// `dhat_sq` = d̂² (m²); zero beyond d̂. `d.value` must be positive (CCD keeps it so).
pub fn pair_barrier<const N: usize>(
    d: &SecondOrder<N>,
    dhat_sq: f64,
    kappa: f64,
) -> SecondOrder<N> {
    if d.value >= dhat_sq {
        return SecondOrder::constant(0.0);
    }
    let (b, db, ddb) = barrier(d.value, dhat_sq);
    d.compose((kappa * b, kappa * db, kappa * ddb))
}

/// The range κ is kept in ([`stiffness_bounds`]), (units of `inertia`)/m².
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StiffnessBounds {
    /// κ_min.
    pub min: f64,
    /// κ_max = 100 κ_min.
    pub max: f64,
}

/// IPC's κ range for a scene with bounding-box diagonal `bbox_diagonal` (m), squared activation
/// distance `dhat_sq` (m²) and mass scale `inertia` (see the module docs).
pub fn stiffness_bounds(inertia: f64, bbox_diagonal: f64, dhat_sq: f64) -> StiffnessBounds {
    let mut d0 = (KAPPA_MIN_GAP * bbox_diagonal).powi(2);
    if d0 >= dhat_sq {
        d0 = 0.5 * dhat_sq;
    }
    let normal_stiffness = 4.0 * d0 * barrier(d0, dhat_sq).2;
    let min = KAPPA_MIN_SCALE * inertia / normal_stiffness;
    StiffnessBounds {
        min,
        max: KAPPA_RANGE * min,
    }
}

/// The initial κ: −∇E·∇B / ‖∇B‖² clamped to `bounds` (κ_min when ∇B = 0). `grad_energy` is ∇E
/// and `grad_barrier` the gradient of the barrier sum at κ = 1, both at the step's start.
pub fn initial_stiffness(
    grad_energy: &[f64],
    grad_barrier: &[f64],
    bounds: StiffnessBounds,
) -> f64 {
    debug_assert_eq!(grad_energy.len(), grad_barrier.len());
    let bb: f64 = grad_barrier.iter().map(|g| g * g).sum();
    if bb <= 0.0 {
        return bounds.min;
    }
    let eb: f64 = grad_energy
        .iter()
        .zip(grad_barrier)
        .map(|(e, b)| e * b)
        .sum();
    (-eb / bb).clamp(bounds.min, bounds.max)
}

/// κ after a Newton iteration: doubled (up to `max`) when the smallest squared pair distance
/// `min_dist_sq` (m²) and the previous one `prev_min_dist_sq` are both below
/// (`raise`·`bbox_diagonal`)² (IPC's `raise` is [`KAPPA_RAISE_GAP`], 10⁻⁹) and the distance is
/// still shrinking; otherwise unchanged.
pub fn raise_stiffness(
    kappa: f64,
    max: f64,
    prev_min_dist_sq: f64,
    min_dist_sq: f64,
    bbox_diagonal: f64,
    raise: f64,
) -> f64 {
    let eps = (raise * bbox_diagonal).powi(2);
    if prev_min_dist_sq < eps && min_dist_sq < eps && min_dist_sq < prev_min_dist_sq {
        (2.0 * kappa).min(max)
    } else {
        kappa
    }
}
