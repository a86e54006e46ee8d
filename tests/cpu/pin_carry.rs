//! The pins' carry (`jello::solver::pd::PinCarry`): a step whose moving pins would invert their
//! neighbours at the default initial guess starts from a carried guess instead.
//!
//! The scenes are a neo-Hookean column (energy +∞ for J ≤ 0) whose base is shoved up by 1.5
//! element heights per step, or tipped by 30° per step: without the carry the step's start has
//! inverted elements and an infinite energy, and no solver can start.

use crate::common;

use jello::problem::{InversionPolicy, StepProblem};
use jello::scene::{BuiltScene, Scene};
use jello::solver::backend::CpuBackend;
use jello::solver::dot::{DotParams, DotSolver};
use jello::solver::pd::PinCarry;
use jello::solver::qn::{QnParams, QnSolver};
use jello::solver::{NewtonParams, NewtonSolver, StepSolver};
use std::path::Path;

/// A 0.2 × 1 × 0.2 m column of 4 × 20 × 4 cells (elements 5 cm tall), neo-Hookean E = 1e5 Pa,
/// no gravity; its base face is pinned and follows `motion` over the first two steps.
fn column(motion: &str) -> BuiltScene {
    let text = format!(
        r#"[simulation]
h = 0.025
steps = 4
gravity = [0.0, 0.0, 0.0]

[solver]
name = "newton"
stop = "cn"
tolerance = 1e-5

[[objects]]
name = "column"
mesh = {{ generator = "box", min = [-0.1, 0.0, -0.1], max = [0.1, 1.0, 0.1], cells = [4, 20, 4] }}
material = {{ model = "neo_hookean", youngs_modulus = 1e5, poisson_ratio = 0.4, density = 1000.0 }}

[[pins]]
region = {{ slab = {{ normal = [0.0, 1.0, 0.0], offset = 0.0, thickness = 0.002 }} }}
script = {{ type = "keyframes", phases = [ {{ start = 0.0, end = 0.05, {motion} }} ] }}
"#
    );
    Scene::parse(Path::new("column.toml"), &text)
        .unwrap()
        .build()
        .unwrap()
}

/// Shoved up 7.5 cm per step.
const SHOVE: &str = "translate = [0.0, 0.15, 0.0]";
/// Tipped 30° per step about a horizontal axis through the base's centre.
const TIP: &str = "rotate = { center = [0.0, 0.0, 0.0], axis = [0.0, 0.0, 1.0], degrees = 60.0 }";

#[test]
fn the_carry_starts_where_the_default_guess_inverts() {
    for (name, motion) in [("shove", SHOVE), ("tip", TIP)] {
        let built = column(motion);
        let m = &built.model;
        assert_eq!(m.inversion, InversionPolicy::Forbid);
        let state = m.initial_state(&built.velocity);
        let mut problem = StepProblem::new(m, &state, built.config.h);
        let before = problem.start_inversions();
        eprintln!("{name}: the default guess inverts {before} elements");
        assert!(problem.pins_move());
        assert!(before > 0, "{name}: the default guess inverts nothing");
        assert!(!problem.start_is_finite(m), "{name}: neo-Hookean is finite");
        let mut carry = PinCarry::new();
        let candidates = carry.candidates(m, &problem).unwrap();
        assert_eq!(candidates.len(), 3);
        for (i, c) in candidates.iter().enumerate() {
            for (k, &ck) in c.iter().enumerate() {
                if problem.fixed[k] {
                    assert_eq!(ck, problem.x_tilde[k], "{name}: candidate {i} moved a pin");
                }
            }
        }
        let taken = problem.offer_starts(candidates);
        eprintln!(
            "{name}: took candidate {taken:?}, {} inversions",
            problem.start_inversions()
        );
        assert!(taken.is_some());
        assert_eq!(problem.start_inversions(), 0, "{name}");
        assert!(problem.start_is_finite(m), "{name}");
        assert_eq!(carry.factorizations(), 1);
    }
}

/// Runs `steps` steps; per step (converged, inverted elements at its end).
fn run(built: &BuiltScene, solver: Box<dyn StepSolver>, carry: bool) -> Result<Vec<bool>, String> {
    let mut sim = common::simulation(built, solver);
    sim.set_pin_carry(carry);
    (0..built.config.steps)
        .map(|_| {
            let r = sim.step(false).map_err(|e| e.to_string())?;
            Ok(r.converged && r.check.total_inverted() == 0)
        })
        .collect()
}

#[test]
fn every_solver_runs_a_shoved_and_a_tipped_neo_hookean_column() {
    for (name, motion) in [("shove", SHOVE), ("tip", TIP)] {
        let built = column(motion);
        let m = &built.model;
        let nv = m.num_vertices();
        let solvers = || -> Vec<(&str, Box<dyn StepSolver>)> {
            vec![
                (
                    "newton",
                    Box::new(NewtonSolver::new(m, NewtonParams::default()).unwrap()),
                ),
                (
                    "dot",
                    Box::new(
                        DotSolver::new(
                            m,
                            CpuBackend::new(nv),
                            DotParams {
                                subdomains: 2,
                                ..DotParams::default()
                            },
                        )
                        .unwrap(),
                    ),
                ),
                (
                    "qn",
                    Box::new(QnSolver::new(m, CpuBackend::new(nv), QnParams::default()).unwrap()),
                ),
            ]
        };
        for (solver, s) in solvers() {
            let steps = run(&built, s, true);
            eprintln!("{name} {solver}: {steps:?}");
            let steps = steps.unwrap_or_else(|e| panic!("{name} {solver}: {e}"));
            assert!(steps.iter().all(|&ok| ok), "{name} {solver}: {steps:?}");
        }
        // Without the carry the first step cannot start.
        let (solver, s) = solvers().remove(0);
        let err = run(&built, s, false).expect_err("the default guess started");
        eprintln!("{name} {solver} without the carry: {err}");
        assert!(err.contains("step 1") && err.contains("inverted"), "{err}");
    }
}
