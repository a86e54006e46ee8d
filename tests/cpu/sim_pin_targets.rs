//! Pins driven from outside (`Simulation::set_pin_targets`, what the Python package's controller
//! loops call): a controller that sets, before every step, the targets a script would give
//! reproduces the scripted run bit for bit; the pinned vertices end each step exactly at their
//! targets; bad targets are one-line errors that change nothing.

use jello::gpu::Backend;
use jello::scene::Scene;
use jello::sim::Simulation;
use std::path::Path;

/// A 0.4 × 0.1 × 0.1 m neo-Hookean beam (8 × 2 × 2 cells) under gravity, its x = 0 face held
/// by one pin running `script`.
fn beam(script: &str) -> Simulation {
    let text = format!(
        r#"[simulation]
h = 0.01
steps = 4
gravity = [0.0, -9.81, 0.0]

[solver]
name = "newton"

[[objects]]
name = "beam"
mesh = {{ generator = "box", min = [0.0, -0.05, -0.05], max = [0.4, 0.05, 0.05], cells = [8, 2, 2] }}
material = {{ model = "neo_hookean", youngs_modulus = 1e5, poisson_ratio = 0.3, density = 1000.0 }}

[[pins]]
region = {{ box = {{ min = [-0.001, -1.0, -1.0], max = [0.001, 1.0, 1.0] }} }}
script = {script}
"#
    );
    let built = Scene::parse(Path::new("beam.toml"), &text)
        .unwrap()
        .build()
        .unwrap();
    jello::runner::setup(&built, Backend::Cpu, None)
        .unwrap()
        .sim
}

const FIXED: &str = r#"{ type = "fixed" }"#;
const LIFT: &str = r#"{ type = "translate", velocity = [0.0, 0.5, 0.2] }"#;

fn pinned(sim: &Simulation) -> Vec<[f64; 3]> {
    sim.model.pins[0]
        .vertices
        .iter()
        .map(|&v| {
            let x = &sim.state.x[3 * v as usize..3 * v as usize + 3];
            [x[0], x[1], x[2]]
        })
        .collect()
}

#[test]
fn a_controller_replaying_a_script_gives_the_scripted_run_bit_for_bit() {
    let mut scripted = beam(LIFT);
    let mut driven = beam(FIXED);
    assert_eq!(scripted.state.x, driven.state.x);
    for step in 1..=4 {
        let t_end = scripted.state.t + scripted.h;
        let targets = scripted.pin_targets(0, t_end).unwrap();
        driven.set_pin_targets(0, &targets).unwrap();
        let a = scripted.step(false).unwrap();
        let b = driven.step(false).unwrap();
        assert!(a.converged && b.converged, "step {step}");
        assert_eq!(a.iterations, b.iterations, "step {step}");
        assert_eq!(scripted.state.x, driven.state.x, "positions, step {step}");
        assert_eq!(scripted.state.v, driven.state.v, "velocities, step {step}");
        assert_eq!(pinned(&driven), targets, "pinned vertices at their targets");
        assert_eq!(
            driven.pin_targets(0, 1e3).unwrap(),
            targets,
            "held until set again"
        );
    }
    // The pin moved (2, 0.8) cm in y and z over the four steps and pulled the body along: its
    // mean position moved that way relative to the run whose pin stayed put.
    let mut still = beam(FIXED);
    for _ in 0..4 {
        still.step(false).unwrap();
    }
    let mean = |s: &Simulation, k: usize| {
        let n = s.model.num_vertices();
        (0..n).map(|v| s.state.x[3 * v + k]).sum::<f64>() / n as f64
    };
    for (k, axis) in [(1, "y"), (2, "z")] {
        let (d, s) = (mean(&driven, k), mean(&still, k));
        eprintln!("mean {axis}: driven {d:.6} m, still {s:.6} m");
        assert!(d > s + 1e-4, "mean {axis}: driven {d} vs still {s}");
    }
}

#[test]
fn the_targets_a_fixed_pin_has_change_nothing() {
    let mut a = beam(FIXED);
    let mut b = beam(FIXED);
    let same = b.pin_targets(0, 0.0).unwrap();
    for _ in 0..2 {
        b.set_pin_targets(0, &same).unwrap();
        a.step(false).unwrap();
        b.step(false).unwrap();
        assert_eq!(a.state.x, b.state.x);
        assert_eq!(a.state.v, b.state.v);
    }
}

#[test]
fn bad_targets_are_one_line_errors_that_change_nothing() {
    let mut sim = beam(LIFT);
    let n = sim.model.pins[0].vertices.len();
    let good = sim.pin_targets(0, 0.0).unwrap();
    let mut nan = good.clone();
    nan[2][1] = f64::NAN;
    let cases: [(usize, Vec<[f64; 3]>, &str); 3] = [
        (
            1,
            good.clone(),
            "pin 1 does not exist: the model has 1 pin(s)",
        ),
        (
            0,
            good[1..].to_vec(),
            &format!("pin 0 holds {n} vertices, got {} target(s)", n - 1),
        ),
        (0, nan, "pin 0: target 2 (vertex"),
    ];
    for (pin, targets, want) in cases {
        let err = sim.set_pin_targets(pin, &targets).unwrap_err().to_string();
        assert!(err.contains(want), "{err:?} should say {want:?}");
        assert!(!err.contains('\n'), "one line: {err:?}");
        assert_eq!(sim.pin_targets(0, 0.0).unwrap(), good, "nothing changed");
        assert_eq!(
            sim.model.pins[0].script,
            jello::problem::Script::Translate {
                velocity: [0.0, 0.5, 0.2]
            }
        );
    }
    assert!(sim.pin_targets(1, 0.0).is_none());
}
