//! The bundled IPC contact scenes (assets/scenes/contact_*.toml): each runs on projected Newton
//! with every step converged and intersection-free (an exact triangle–triangle check over all
//! surface pairs after each step), and does what its comment says.

mod common;

use jello::contact::check_intersection_free;
use jello::problem::Model;

/// The scene's run: (model, states after each step). Panics when a step fails or a state
/// intersects or touches.
fn run(name: &str, steps: usize) -> (Model, Vec<Vec<f64>>) {
    let built = common::bundled_scene(name);
    let m = built.model.clone();
    assert!(m.contact.is_some(), "{name}: IPC contact is on");
    let params = jello::solver::NewtonParams {
        stop: built.config.stop,
        ..jello::solver::NewtonParams::default()
    };
    let solver = jello::solver::NewtonSolver::new(&m, params).unwrap();
    let mut sim = common::simulation(&built, Box::new(solver));
    let ipc = m.contact.clone().unwrap();
    let mut states = Vec::new();
    let (mut closest, mut iterations) = (f64::INFINITY, 0);
    for step in 0..steps {
        let r = sim.step(false).unwrap();
        assert!(
            r.converged,
            "{name}: step {step} did not converge: {:?}",
            r.failure
        );
        iterations += r.iterations;
        let xs = ipc.positions(&sim.state.x);
        check_intersection_free(&ipc.mesh, &xs)
            .unwrap_or_else(|e| panic!("{name}: step {step}: {e}"));
        let pairs = ipc.active_pairs(&xs).unwrap();
        let d = ipc.min_distance_sq(&pairs, &xs).sqrt();
        assert!(d > 0.0, "{name}: step {step}: a pair touches");
        closest = closest.min(d);
        if std::env::var("DBG").is_ok() {
            let c: Vec<String> = (0..m.bodies.len())
                .map(|b| {
                    format!(
                        "({:.4},{:.4},{:.4})",
                        centre(&m, &sim.state.x, b, 0),
                        centre(&m, &sim.state.x, b, 1),
                        centre(&m, &sim.state.x, b, 2)
                    )
                })
                .collect();
            eprintln!("step {step}: it {} d {d:.2e} {}", r.iterations, c.join(" "));
        }
        states.push(sim.state.x.clone());
    }
    eprintln!(
        "{name}: {steps} steps, {:.1} Newton iterations per step, closest pair {closest:.3e} m \
         (d̂ {:.3e} m)",
        iterations as f64 / steps as f64,
        ipc.dhat
    );
    (m, states)
}

/// Mass-weighted mean x-velocity of body `b` between two states `h` apart.
fn centre(m: &Model, x: &[f64], b: usize, axis: usize) -> f64 {
    let r = m.bodies[b].vertices.clone();
    let mass: f64 = r.clone().map(|v| m.mass[v]).sum();
    r.map(|v| m.mass[v] * x[3 * v + axis]).sum::<f64>() / mass
}

#[test]
fn balls_collide_head_on_and_bounce_apart() {
    let built = common::bundled_scene("contact_balls.toml");
    let steps = built.config.steps;
    let h = built.config.h;
    let (m, states) = run("contact_balls.toml", steps);
    let n = states.len();
    let v = |b: usize| (centre(&m, &states[n - 1], b, 0) - centre(&m, &states[n - 2], b, 0)) / h;
    let (vl, vr) = (v(0), v(1));
    eprintln!("after the collision: left ball {vl:.3} m/s, right ball {vr:.3} m/s (x)");
    assert!(
        vl < -0.5 && vr > 0.5,
        "the balls must bounce apart: {vl}, {vr}"
    );
}

#[test]
fn a_stack_of_cubes_settles_without_interpenetrating() {
    let built = common::bundled_scene("contact_stack.toml");
    let steps = built.config.steps;
    let (m, states) = run("contact_stack.toml", steps);
    let last = states.last().unwrap();
    // Resting: each cube's centre above the one below it by about a cube's height (0.1 m,
    // squashed a little under the weight above) and the whole stack still.
    let y: Vec<f64> = (0..3).map(|b| centre(&m, last, b, 1)).collect();
    let before = &states[states.len() - 2];
    let speed = (0..3)
        .map(|b| (centre(&m, last, b, 1) - centre(&m, before, b, 1)).abs() / built.config.h)
        .fold(0.0, f64::max);
    eprintln!("centres {y:?} m, largest vertical speed {speed:.3e} m/s");
    for b in 0..2 {
        let gap = y[b + 1] - y[b];
        assert!(
            gap > 0.09 && gap < 0.102,
            "cubes {b} and {}: centres {gap} m apart",
            b + 1
        );
    }
    assert!(
        y[0] > 0.045 && y[0] < 0.052,
        "the bottom cube rests on the ground: {}",
        y[0]
    );
    assert!(speed < 0.05, "the stack has not settled: {speed} m/s");
}
