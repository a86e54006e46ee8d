//! DOT in the hard regime of the large-step comparison (`JELLO_SOLVERS_CASES=dot_hard` in
//! `benches/solvers.rs`): a twist–stretch–squash bar driven fast enough that projected Newton
//! needs several iterations per step at h = 25 ms and elements invert in the squash (fixed
//! corotated is finite through inversion; the scene allows it, as the paper's setting does).
//! Every step of DOT (s = 2 and 4) and of LBFGS-H must meet the stop rule (CN ε = 1e-5): the
//! paper's robustness claim where it is hardest.

use crate::common;

use jello::scene::{BuiltScene, Scene};
use jello::solver::backend::CpuBackend;
use jello::solver::dot::{DotParams, DotSolver};
use jello::solver::{NewtonParams, NewtonSolver, StepSolver};
use std::path::Path;

/// `common::TSS_BAR` (1 × 0.2 × 0.2 m; caps turn, pull apart by 0.1 m each, push together)
/// on a finer grid (16 × 3 × 3 cells), twice as fast (each phase in half the time: 10 steps),
/// the caps turned ±180° instead of ±90° and pushed together by 0.3 m each instead of 0.2 m,
/// E = 1e4 Pa instead of 1e5, inversion allowed.
fn hard_tss_bar() -> BuiltScene {
    let edits = [
        ("steps = 20", "steps = 10\ninversion = \"allow\""),
        ("cells = [10, 2, 2]", "cells = [16, 3, 3]"),
        ("youngs_modulus = 1e5", "youngs_modulus = 1e4"),
        ("degrees = -90.0", "degrees = -180.0"),
        ("degrees = 90.0", "degrees = 180.0"),
        ("translate = [0.2,", "translate = [0.3,"),
        ("translate = [-0.2,", "translate = [-0.3,"),
        ("end = 0.25,", "end = 0.125,"),
        ("start = 0.25, end = 0.375,", "start = 0.125, end = 0.1875,"),
        ("start = 0.375, end = 0.5,", "start = 0.1875, end = 0.25,"),
    ];
    let mut text = common::TSS_BAR.to_string();
    for (from, to) in edits {
        assert!(
            text.contains(from),
            "common::TSS_BAR no longer has `{from}`"
        );
        text = text.replace(from, to);
    }
    Scene::parse(Path::new("hard_tss_bar.toml"), &text)
        .unwrap()
        .build()
        .unwrap()
}

/// Runs `solver` over the whole scene: per step (iterations, stop rule met, residual,
/// inverted elements at the step's end).
fn run(built: &BuiltScene, solver: Box<dyn StepSolver>) -> Vec<(usize, bool, f64, usize)> {
    let mut sim = common::simulation(built, solver);
    (0..built.config.steps)
        .map(|_| {
            let r = sim.step(false).unwrap();
            (
                r.iterations,
                r.stop_rule_met,
                r.residual,
                r.check.total_inverted(),
            )
        })
        .collect()
}

/// The scene is hard (Newton: at least 4 iterations per step on average, some step ending
/// inverted) and every step of DOT and LBFGS-H still reaches the stop rule.
#[test]
fn every_step_of_a_fast_inverting_tss_reaches_the_stop_rule() {
    let built = hard_tss_bar();
    let m = &built.model;
    let newton = run(
        &built,
        Box::new(NewtonSolver::new(m, NewtonParams::default()).unwrap()),
    );
    let steps = newton.len() as f64;
    let newton_mean = newton.iter().map(|s| s.0).sum::<usize>() as f64 / steps;
    let inverted = newton.iter().filter(|s| s.3 > 0).count();
    eprintln!(
        "newton: {:?} iterations ({newton_mean:.1} per step), {inverted} steps end inverted",
        newton.iter().map(|s| s.0).collect::<Vec<_>>()
    );
    assert!(
        newton.iter().all(|s| s.1),
        "newton did not converge: {newton:?}"
    );
    assert!(
        newton_mean >= 4.0,
        "not the hard regime: newton {newton_mean:.1} iterations per step"
    );
    assert!(inverted > 0, "no step of the squash inverts an element");
    for s in [1, 2, 4] {
        let dot = DotSolver::new(
            m,
            CpuBackend::new(m.num_vertices()),
            DotParams {
                subdomains: s,
                ..DotParams::default()
            },
        )
        .unwrap();
        let steps = run(&built, Box::new(dot));
        eprintln!(
            "s = {s}: {:?} iterations",
            steps.iter().map(|s| s.0).collect::<Vec<_>>()
        );
        for (k, (iterations, met, residual, _)) in steps.iter().enumerate() {
            assert!(
                met,
                "s = {s}, step {}: residual {residual:e} after {iterations} iterations",
                k + 1
            );
        }
    }
}
