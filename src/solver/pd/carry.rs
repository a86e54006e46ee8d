//! The pins' motion carried into the body: initial guesses for a step whose pins move fast.
//!
//! [`StepProblem::new`] starts a step with the pinned vertices at their targets and the free
//! ones at xᵗ, or moved toward x̃ as far as the inversion filter allows. A fast pin script
//! shears the elements that have pinned and free corners through zero volume before any
//! solver runs: the hard twist–stretch–squash armadillo (handles turning 9° per 25 ms step)
//! started its first steps with 54, 11 and 11 such elements. Under `inversion = "forbid"` no
//! solver can repair that, since the strict retry keeps positive only the elements that are
//! positive at the start; every step of the twist then failed, for Newton and DOT alike.
//!
//! The carry is the body's linear response to the pins' displacement u_p with the global
//! matrix of projective dynamics, A = M/h² + Σ_e w_e D_eᵀD_e ([`GlobalSystem`]: rest-shape,
//! stiffness-weighted, factored once per pin set and h):
//!
//! - carry: A_ff u_f = −A_fp u_p;
//! - carry with inertia: A_ff u_f = M_f (x̃ − xᵗ)_f / h² − A_fp u_p — one linearised implicit
//!   step about xᵗ with the rest-shape stiffness.
//!
//! The mass term sets how far a pin's move spreads: about the distance an elastic wave travels
//! in one step, √(k/ρ)·h (8 cm for E = 1e4 Pa, ρ = 1000 kg/m³, h = 25 ms). The candidates
//! xᵗ + u of both, and the first moved toward x̃ as far as the filters allow, go to
//! [`StepProblem::offer_starts`], which keeps the one with the fewest new inversions, then the
//! lowest energy. A linear extension of a rotation shrinks what it turns (by 1 − cos(θ/2) at
//! most, 0.3% at 9° per step), so it stays positive for any per-step angle a step can resolve.

use super::global::{GlobalOptions, GlobalSystem};
use crate::error::Result;
use crate::problem::{Model, StepProblem};
use nalgebra::{Matrix3, Vector3};

/// Rounds of [`rigid_patch`]: each grows the rigidly moved patch by one ring of elements.
const PATCH_ROUNDS: usize = 8;

/// A rigid motion x ↦ R (x − c₀) + c₁, fitted to a pin's vertices over the step.
#[derive(Clone, Copy, Debug)]
struct Rigid {
    r: Matrix3<f64>,
    from: Vector3<f64>,
    to: Vector3<f64>,
}

impl Rigid {
    /// The least-squares rigid motion taking `a` to `b` (Kabsch: R from the SVD of the
    /// covariance, reflection removed); a translation for fewer than three points.
    fn fit(a: &[Vector3<f64>], b: &[Vector3<f64>]) -> Option<Rigid> {
        if a.is_empty() {
            return None;
        }
        let n = a.len() as f64;
        let from = a.iter().sum::<Vector3<f64>>() / n;
        let to = b.iter().sum::<Vector3<f64>>() / n;
        let mut r = Matrix3::identity();
        if a.len() >= 3 {
            let mut cov = Matrix3::zeros();
            for (p, q) in a.iter().zip(b) {
                cov += (q - to) * (p - from).transpose();
            }
            let svd = cov.svd(true, true);
            if let (Some(u), Some(vt)) = (svd.u, svd.v_t) {
                let d = (u * vt).determinant().signum();
                r = u * Matrix3::from_diagonal(&Vector3::new(1.0, 1.0, d)) * vt;
            }
        }
        Some(Rigid { r, from, to })
    }

    fn apply(&self, p: Vector3<f64>) -> Vector3<f64> {
        self.r * (p - self.from) + self.to
    }
}

/// The carry's global system, built on first use (see the module docs).
pub struct PinCarry {
    system: Option<GlobalSystem>,
    pinned: Vec<bool>,
}

impl Default for PinCarry {
    fn default() -> Self {
        Self::new()
    }
}

impl PinCarry {
    /// Nothing is built until [`Self::candidates`] first needs it.
    pub fn new() -> Self {
        PinCarry {
            system: None,
            pinned: Vec::new(),
        }
    }

    /// Numeric factorisations made so far (one per pin set and time step size).
    pub fn factorizations(&self) -> usize {
        self.system.as_ref().map_or(0, GlobalSystem::factorizations)
    }

    /// The carried initial guesses for `problem` (empty for a static increment or when no pin
    /// moves): xᵗ + u for the carry and the carry with inertia, and the carry moved toward x̃
    /// as far as [`StepProblem::max_step`] allows. Pinned DOFs hold their targets.
    pub fn candidates(&mut self, model: &Model, problem: &StepProblem) -> Result<Vec<Vec<f64>>> {
        if problem.is_static() || !problem.pins_move() {
            return Ok(Vec::new());
        }
        let n = problem.x_prev.len();
        self.pinned.clear();
        self.pinned.extend((0..n / 3).map(|v| problem.fixed[3 * v]));
        if self.system.is_none() {
            self.system = Some(GlobalSystem::new(model, GlobalOptions::default())?);
        }
        let system = self.system.as_mut().expect("built above");
        system.prepare(model, &self.pinned, problem.inertia)?;
        let x0 = &problem.x_prev;
        let pin_move: Vec<f64> = (0..n)
            .map(|k| {
                if problem.fixed[k] {
                    problem.x_tilde[k] - x0[k]
                } else {
                    0.0
                }
            })
            .collect();
        let from = |u: &[f64]| -> Vec<f64> {
            (0..n)
                .map(|k| {
                    if problem.fixed[k] {
                        problem.x_tilde[k]
                    } else {
                        x0[k] + u[k]
                    }
                })
                .collect()
        };
        // Carry: A_ff u_f = −A_fp u_p.
        let mut u = vec![0.0; n];
        system.subtract_pinned(&pin_move, &mut u)?;
        system.solve(&mut u)?;
        let mut carry = from(&u);
        let motions = pin_motions(model, problem);
        rigid_patch(model, problem, &motions, &mut carry);
        // With inertia: + M_f (x̃ − xᵗ)_f / h².
        let mut w = vec![0.0; n];
        for (k, wk) in w.iter_mut().enumerate() {
            if !problem.fixed[k] {
                *wk = problem.inertia * model.mass[k / 3] * (problem.x_tilde[k] - x0[k]);
            }
        }
        system.subtract_pinned(&pin_move, &mut w)?;
        system.solve(&mut w)?;
        let mut inertial = from(&w);
        rigid_patch(model, problem, &motions, &mut inertial);
        // The carry moved toward x̃ as far as the filters allow (as `StepProblem::new` does
        // from the pins' targets).
        let dx: Vec<f64> = (0..n)
            .map(|k| {
                if problem.fixed[k] {
                    0.0
                } else {
                    problem.x_tilde[k] - carry[k]
                }
            })
            .collect();
        let alpha = problem.max_step(&carry, &dx);
        let predicted: Vec<f64> = (0..n).map(|k| carry[k] + alpha * dx[k]).collect();
        Ok(vec![carry, inertial, predicted])
    }
}

/// Per vertex, the rigid motion over the step of the pin that holds it (`None` for free
/// vertices), fitted to the pin's vertices from xᵗ to their targets.
fn pin_motions(model: &Model, problem: &StepProblem) -> Vec<Option<Rigid>> {
    let at = |x: &[f64], v: u32| Vector3::from_column_slice(&x[3 * v as usize..3 * v as usize + 3]);
    let mut out = vec![None; model.num_vertices()];
    for pin in &model.pins {
        let a: Vec<_> = pin
            .vertices
            .iter()
            .map(|&v| at(&problem.x_prev, v))
            .collect();
        let b: Vec<_> = pin
            .vertices
            .iter()
            .map(|&v| at(&problem.x_tilde, v))
            .collect();
        let motion = Rigid::fit(&a, &b);
        for &v in &pin.vertices {
            out[v as usize] = out[v as usize].or(motion);
        }
    }
    out
}

/// Repairs what a linear carry inverts next to the pins: an element positive at xᵗ and
/// inverted in `x` takes the rigid motion of a pinned (or already repaired) corner for its
/// free corners, which keeps its J exactly when all four move alike — the case of the thin
/// elements with three corners on a turning pin (J = 0.02 at xᵗ on the hard TSS armadillo,
/// inverted by any carry that moves the fourth corner a few per cent short of the rotation).
/// Each round grows the repaired patch by the elements it inverted in turn.
fn rigid_patch(model: &Model, problem: &StepProblem, pins: &[Option<Rigid>], x: &mut [f64]) {
    let mut motion = pins.to_vec();
    for _ in 0..PATCH_ROUNDS {
        let bad: Vec<usize> = (0..model.mesh.num_tets())
            .filter(|&t| model.element_j(&problem.x_prev, t) > 0.0 && model.element_j(x, t) <= 0.0)
            .collect();
        if bad.is_empty() {
            return;
        }
        let mut moved = false;
        for t in bad {
            let tet = model.mesh.tets[t];
            let Some(rigid) = tet.iter().find_map(|&v| motion[v as usize]) else {
                continue;
            };
            for &v in &tet {
                let v = v as usize;
                if motion[v].is_none() && !problem.fixed[3 * v] {
                    let p = rigid.apply(Vector3::from_column_slice(
                        &problem.x_prev[3 * v..3 * v + 3],
                    ));
                    x[3 * v..3 * v + 3].copy_from_slice(p.as_slice());
                    motion[v] = Some(rigid);
                    moved = true;
                }
            }
        }
        if !moved {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::Rotation3;

    /// The fit recovers a rigid motion from points it moved (and keeps J of anything it moves).
    #[test]
    fn fit_recovers_a_rigid_motion() {
        let r = *Rotation3::from_axis_angle(
            &nalgebra::Unit::new_normalize(Vector3::new(0.3, -1.0, 0.5)),
            0.7,
        )
        .matrix();
        let t = Vector3::new(0.1, -0.4, 2.0);
        let a: Vec<Vector3<f64>> = [
            [0.0, 0.0, 0.0],
            [1.0, 0.2, 0.0],
            [0.1, 0.9, 0.3],
            [0.4, 0.1, 1.1],
            [0.7, 0.6, 0.5],
        ]
        .iter()
        .map(|p| Vector3::from(*p))
        .collect();
        let b: Vec<_> = a.iter().map(|p| r * p + t).collect();
        let fit = Rigid::fit(&a, &b).unwrap();
        let probe = Vector3::new(-0.3, 2.0, 0.8);
        let err = (fit.apply(probe) - (r * probe + t)).norm();
        assert!(err < 1e-12, "fit off by {err:e}");
        assert!((fit.r.determinant() - 1.0).abs() < 1e-12);
        // Two points: a translation by their mean displacement.
        let fit = Rigid::fit(&a[..2], &b[..2]).unwrap();
        assert_eq!(fit.r, Matrix3::identity());
        assert!(Rigid::fit(&[], &[]).is_none());
    }
}
