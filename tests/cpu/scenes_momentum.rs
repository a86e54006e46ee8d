//! Momentum invariants of implicit Euler through the scene-file path
//! (tests/data/scenes/spin.toml: a soft block thrown with a spin, no gravity, pins or obstacles).
//!
//! Internal forces sum to zero (Ψ is translation invariant) and the Newton direction preserves
//! Σ m (x − x̃) = 0 exactly, so each step changes the total linear momentum by exactly the
//! external impulse h Σ m g. Angular momentum is not conserved exactly by implicit Euler (it is
//! dissipative); its drift is printed, not asserted.

use jello::runner::make_solver;
use jello::scene::Scene;
use jello::sim::Simulation;
use std::path::{Path, PathBuf};

fn scene_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/scenes/spin.toml")
}

fn norm(a: [f64; 3]) -> f64 {
    (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]).sqrt()
}

fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

/// Builds the spin scene with `gravity` (m/s²) and adds a non-rigid velocity field on top of the
/// scene's rigid throw + spin: an axial stretch rate of 2 1/s and a shear rate of 1.5 1/s.
fn simulation(gravity: [f64; 3]) -> Simulation {
    let path = scene_path();
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replace(
        "gravity = [0.0, 0.0, 0.0]",
        &format!(
            "gravity = [{:?}, {:?}, {:?}]",
            gravity[0], gravity[1], gravity[2]
        ),
    );
    let mut built = Scene::parse(&path, &text).unwrap().build().unwrap();
    assert_eq!(built.model.gravity, gravity);
    assert!(built.model.pins.is_empty() && built.model.obstacles.is_empty());
    // The scene's velocity is rigid (throw + spin about the centroid): check that, then make it
    // non-rigid.
    let p = &built.model.mesh.positions;
    let c = p
        .iter()
        .fold([0.0; 3], |a, q| [a[0] + q[0], a[1] + q[1], a[2] + q[2]]);
    let c = c.map(|s| s / p.len() as f64);
    for (v, q) in built.velocity.iter_mut().zip(p) {
        let r = sub(*q, c);
        v[0] += 2.0 * r[0] + 1.5 * r[1];
        v[1] -= 1.0 * r[1];
    }
    let solver = make_solver(&built.config, &built.model, None).unwrap();
    let state = built.model.initial_state(&built.velocity);
    Simulation::new(built.model, state, built.config.h, solver).unwrap()
}

/// Largest relative change of a tet edge length from rest (a rigid motion has 0).
fn max_edge_strain(sim: &Simulation) -> f64 {
    let (x, rest) = (&sim.state.x, &sim.model.mesh.positions);
    let mut m: f64 = 0.0;
    for t in &sim.model.mesh.tets {
        for a in 0..4 {
            for b in a + 1..4 {
                let (i, j) = (t[a] as usize, t[b] as usize);
                let l0 = norm(sub(rest[i], rest[j]));
                let l = norm([
                    x[3 * i] - x[3 * j],
                    x[3 * i + 1] - x[3 * j + 1],
                    x[3 * i + 2] - x[3 * j + 2],
                ]);
                m = m.max((l / l0 - 1.0).abs());
            }
        }
    }
    m
}

#[test]
fn spinning_deforming_body_conserves_linear_momentum() {
    let mut sim = simulation([0.0; 3]);
    let p0 = sim.model.linear_momentum(&sim.state.v);
    let l0 = sim.model.angular_momentum(&sim.state.x, &sim.state.v);
    assert!(
        norm(p0) > 1.0 && norm(l0) > 0.01,
        "the body moves and spins"
    );
    let mut max_strain: f64 = 0.0;
    for step in 1..=20 {
        let r = sim.step(false).unwrap();
        assert!(r.converged, "step {step}: residual {:e}", r.residual);
        let p = sim.model.linear_momentum(&sim.state.v);
        let dp = norm(sub(p, p0)) / norm(p0);
        assert!(dp < 1e-9, "step {step}: linear momentum drift {dp:e}");
        let l = sim.model.angular_momentum(&sim.state.x, &sim.state.v);
        max_strain = max_strain.max(max_edge_strain(&sim));
        eprintln!(
            "step {step:2}: {} it, |Δp|/|p0| = {dp:.2e}, |ΔL|/|L0| = {:.3e}, max edge strain {:.3}",
            r.iterations,
            norm(sub(l, l0)) / norm(l0),
            max_edge_strain(&sim)
        );
    }
    let l = sim.model.angular_momentum(&sim.state.x, &sim.state.v);
    eprintln!(
        "angular momentum drift over 20 steps (implicit Euler, reported not asserted): {:.3e} relative",
        norm(sub(l, l0)) / norm(l0)
    );
    assert!(
        max_strain > 0.01,
        "the body must deform, max edge strain {max_strain}"
    );
    assert!(sim.model.min_volume_ratio(&sim.state.x) > 0.0);
}

#[test]
fn gravity_changes_linear_momentum_by_h_g_m_each_step() {
    let g = [1.5, -9.81, 0.7];
    let mut sim = simulation(g);
    let total_mass: f64 = sim.model.mass.iter().sum();
    // Independent mass: ρ × box volume.
    assert!((total_mass - 1000.0 * 0.4 * 0.2 * 0.2).abs() < 1e-9 * total_mass);
    let impulse = g.map(|gk| sim.h * gk * total_mass);
    let mut p = sim.model.linear_momentum(&sim.state.v);
    for step in 1..=20 {
        let r = sim.step(false).unwrap();
        assert!(r.converged, "step {step}: residual {:e}", r.residual);
        let p1 = sim.model.linear_momentum(&sim.state.v);
        let dp = sub(p1, p);
        let err = norm(sub(dp, impulse)) / (norm(p) + norm(impulse));
        eprintln!(
            "step {step:2}: {} it, |Δp − h g M| / (|p| + |h g M|) = {err:.2e}",
            r.iterations
        );
        assert!(err < 1e-9, "step {step}: Δp = {dp:?}, h g M = {impulse:?}");
        p = p1;
    }
}
