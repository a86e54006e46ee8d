//! The bundled drop scene (assets/scenes/drop.toml): a soft Neo-Hookean ball falls onto the
//! ground plane y = 0. After every step no vertex is at or below the ground, no element is
//! inverted, and every step converged; over the run the ball actually touches the ground (its
//! lowest vertex comes within a few d̂) and bounces (its centre-of-mass velocity turns upward
//! after the impact).

use jello::runner::make_solver;
use jello::scene::Scene;
use jello::sim::Simulation;
use std::path::Path;

#[test]
fn ball_drops_touches_the_ground_and_bounces_without_penetration_or_inversion() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes/drop.toml");
    let built = Scene::load(&path).unwrap().build().unwrap();
    let steps = built.config.steps;
    let h = built.config.h;
    let dhat = built.model.barrier.dhat;
    assert_eq!(built.model.obstacles.len(), 1);
    let solver = make_solver(&built.config, &built.model, None).unwrap();
    let state = built.model.initial_state(&built.velocity);
    let mut sim = Simulation::new(built.model, state, h, solver).unwrap();
    let total_mass: f64 = sim.model.mass.iter().sum();
    let com_vy = |sim: &Simulation| {
        sim.model
            .mass
            .iter()
            .enumerate()
            .map(|(v, m)| m * sim.state.v[3 * v + 1])
            .sum::<f64>()
            / total_mass
    };
    let min_y = |sim: &Simulation| {
        sim.state
            .x
            .chunks_exact(3)
            .map(|p| p[1])
            .fold(f64::INFINITY, f64::min)
    };
    eprintln!(
        "drop.toml: {} vertices, {} tets, h = {h} s, {steps} steps, d̂ = {dhat:.3e} m, start min y {:.4} m",
        sim.model.num_vertices(),
        sim.model.mesh.num_tets(),
        min_y(&sim)
    );
    let mut lowest = f64::INFINITY;
    let mut lowest_step = 0;
    let mut impact_step = None; // first step whose lowest vertex is within the barrier's reach
    let mut bounce_step = None; // first step after the impact with upward centre-of-mass velocity
    let mut max_up_velocity = f64::NEG_INFINITY;
    let mut iterations = Vec::with_capacity(steps);
    for step in 1..=steps {
        let r = sim.step(false).unwrap();
        iterations.push(r.iterations);
        assert!(r.converged, "step {step}: residual {:e}", r.residual);
        let y = min_y(&sim);
        let ratio = sim.model.min_volume_ratio(&sim.state.x);
        let vy = com_vy(&sim);
        assert!(
            y > 0.0,
            "step {step}: a vertex is at or below the ground (y = {y:e})"
        );
        assert!(
            ratio > 0.0,
            "step {step}: an element inverted (min volume ratio {ratio})"
        );
        if y < lowest {
            lowest = y;
            lowest_step = step;
        }
        if impact_step.is_none() && y < dhat {
            impact_step = Some(step);
        }
        if impact_step.is_some() && bounce_step.is_none() && vy > 0.0 {
            bounce_step = Some(step);
        }
        if bounce_step.is_some() {
            max_up_velocity = max_up_velocity.max(vy);
        }
        eprintln!(
            "step {step:2}: {} it, min y {y:.3e} m, com v_y {vy:+.4} m/s, min volume ratio {ratio:.3}",
            r.iterations
        );
    }
    eprintln!(
        "lowest vertex {lowest:.3e} m = {:.3} d̂ at step {lowest_step}; impact at step {impact_step:?}, \
         upward com velocity from step {bounce_step:?} (max {max_up_velocity:.3} m/s); iterations {iterations:?}",
        lowest / dhat
    );
    assert!(
        lowest < 3.0 * dhat,
        "no contact: the lowest vertex stayed {lowest:e} m above the ground (d̂ = {dhat:e})"
    );
    let impact = impact_step.expect("the ball never came within d̂ of the ground");
    let bounce = bounce_step.expect("the ball never moved upward after the impact");
    assert!(bounce > impact);
}
