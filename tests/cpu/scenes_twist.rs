//! The bundled twist scene (assets/scenes/twist.toml) loaded from its file and run through
//! `jello::runner::run`: every step converges to the characteristic-norm ε = 1e-5 with projected
//! Newton, no element inverts, and the twist is distributed along the bar as a uniform bar under
//! end torques must distribute it (linearly in x, zero at the middle by symmetry).

use jello::runner::{run, RunOptions};
use jello::scene::Scene;
use jello::solver::StopRule;
use std::path::Path;

/// Mean rotation angle (rad, right-handed about +x) of the vertices whose rest x is within
/// 1e-9 of `x_section`, measured from their rest positions about the x axis.
fn section_angle(rest: &[[f64; 3]], x: &[f64], x_section: f64) -> f64 {
    let mut sum = 0.0;
    let mut n = 0;
    for (v, p) in rest.iter().enumerate() {
        if (p[0] - x_section).abs() > 1e-9 || p[1].hypot(p[2]) < 1e-9 {
            continue;
        }
        let (y, z) = (x[3 * v + 1], x[3 * v + 2]);
        // angle from (p_y, p_z) to (y, z)
        let cross = p[1] * z - p[2] * y;
        let dot = p[1] * y + p[2] * z;
        sum += cross.atan2(dot);
        n += 1;
    }
    assert!(n > 0, "no vertex in section x = {x_section}");
    sum / n as f64
}

#[test]
fn twist_scene_converges_every_step() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes/twist.toml");
    let built = Scene::load(&path).unwrap().build().unwrap();
    assert_eq!(built.config.solver.name(), "newton");
    assert_eq!(built.config.stop, StopRule::Cn { eps: 1e-5 });
    let steps = built.config.steps;
    let h = built.config.h;
    let rest = built.model.mesh.positions.clone();
    let mut iterations = Vec::with_capacity(steps);
    let mut failures = Vec::new();
    let opts = RunOptions {
        out_dir: None,
        trace: false,
        backend: jello::gpu::Backend::Cpu,
        ..Default::default()
    };
    let (sim, stats) = run(&path, built, &opts, |step, r| {
        iterations.push(r.iterations);
        if !(r.converged && r.residual < 1e-5) {
            failures.push((step, r.iterations, r.residual));
        }
    })
    .unwrap();
    eprintln!("twist.toml: {steps} steps of h = {h} s, Newton iterations per step: {iterations:?}");
    eprintln!(
        "total {} iterations, mean {:.2}, max {}",
        stats.total_iterations,
        stats.total_iterations as f64 / steps as f64,
        iterations.iter().max().unwrap()
    );
    assert!(
        failures.is_empty(),
        "steps not converged (step, its, residual): {failures:?}"
    );
    assert_eq!(stats.converged_steps, steps);
    assert_eq!(stats.steps.len(), steps);
    // Every iteration that was taken reduced the residual below ε by the end of its step.
    assert!(stats.steps.iter().all(|s| s.residual < 1e-5));
    let min_ratio = sim.model.min_volume_ratio(&sim.state.x);
    eprintln!("min volume ratio after {steps} steps: {min_ratio:.4}");
    assert!(min_ratio > 0.0);

    // The caps turned ±ω t = ±0.1π · 2 s = ±0.2π rad. The bar (uniform, slow twist: the
    // torsional wave crosses it in ~0.17 s ≪ 2 s) carries the same torque in every section, so
    // the section angle grows linearly in x: 0 at the middle and half the cap's at x = ±0.25.
    let t = sim.state.t;
    let cap = 0.1 * std::f64::consts::PI * t;
    let a_right = section_angle(&rest, &sim.state.x, 0.5);
    let a_left = section_angle(&rest, &sim.state.x, -0.5);
    assert!(
        (a_right - cap).abs() < 1e-9 && (a_left + cap).abs() < 1e-9,
        "pins follow the script"
    );
    let a_mid = section_angle(&rest, &sim.state.x, 0.0);
    let a_q = section_angle(&rest, &sim.state.x, 0.25);
    let a_mq = section_angle(&rest, &sim.state.x, -0.25);
    eprintln!(
        "t = {t} s: cap ±{cap:.4} rad, section angles: x=-0.25 {a_mq:.4}, x=0 {a_mid:.4}, x=0.25 {a_q:.4}"
    );
    assert!(
        a_mid.abs() < 0.02 * cap,
        "middle section turned {a_mid} rad"
    );
    assert!(
        (a_q - cap / 2.0).abs() < 0.1 * cap / 2.0,
        "x = 0.25 turned {a_q} rad"
    );
    assert!(
        (a_mq + cap / 2.0).abs() < 0.1 * cap / 2.0,
        "x = -0.25 turned {a_mq} rad"
    );
}

/// The ε = 1e-5 trajectory is the converged one: over the whole run it stays within 1e-4 m
/// (1e-4 of the bar's length) of the trajectory solved to ε = 1e-10, so the steps that stop
/// after 0–1 iterations (the constant-velocity prediction already meets ε) leave no drift.
#[test]
fn twist_at_cn_tolerance_tracks_the_tightly_converged_trajectory() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes/twist.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("tolerance = 1e-5"));
    let final_x = |tol: &str| {
        let t = text.replace("tolerance = 1e-5", &format!("tolerance = {tol}"));
        let built = Scene::parse(&path, &t).unwrap().build().unwrap();
        let mut its = Vec::new();
        let opts = RunOptions {
            out_dir: None,
            trace: false,
            backend: jello::gpu::Backend::Cpu,
            ..Default::default()
        };
        let (sim, stats) = run(&path, built, &opts, |_, r| its.push(r.iterations)).unwrap();
        assert_eq!(stats.converged_steps, stats.steps.len(), "ε = {tol}");
        eprintln!("ε = {tol}: iterations per step {its:?}");
        sim.state.x
    };
    let loose = final_x("1e-5");
    let tight = final_x("1e-10");
    let d = loose
        .iter()
        .zip(&tight)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    eprintln!("max |x(ε = 1e-5) − x(ε = 1e-10)| after 2 s = {d:.3e} m");
    assert!(
        d < 1e-4,
        "ε = 1e-5 drifts {d:e} m from the converged trajectory"
    );
}
