//! The bundled two-material bar (assets/scenes/stiff_soft.toml): clamped at x = 0, the half
//! x < 0.5 m at E = 10 MPa, the half x > 0.5 m at E = 10 kPa (1000× softer), under gravity.
//!
//! The soft half must sag while the stiff half barely bends, and every step must do real work
//! (at least one Newton iteration): with a single global stiffness scale in the stopping rule
//! the soft half's forces read as ~1e-6 of the stiff scale, every step "converged" at the rest
//! state with 0 iterations, and the bar hung motionless (see `problem::CharacteristicNorm`).

use jello::runner::make_solver;
use jello::scene::Scene;
use jello::sim::Simulation;
use std::path::Path;

#[test]
fn the_soft_half_sags_and_the_stiff_half_holds() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes/stiff_soft.toml");
    let built = Scene::load(&path).unwrap().build().unwrap();
    let steps = 30;
    let h = built.config.h;
    let solver = make_solver(&built.config, &built.model, None).unwrap();
    let state = built.model.initial_state(&built.velocity);
    let mut sim = Simulation::new(built.model, state, h, solver).unwrap();
    let pos = sim.model.mesh.positions.clone();
    // Mean vertical displacement of the vertices at x ≈ `at` (m).
    let sag = |sim: &Simulation, at: f64| {
        let ids: Vec<usize> = (0..pos.len())
            .filter(|&v| (pos[v][0] - at).abs() < 1e-9)
            .collect();
        assert!(!ids.is_empty());
        ids.iter()
            .map(|&v| pos[v][1] - sim.state.x[3 * v + 1])
            .sum::<f64>()
            / ids.len() as f64
    };
    for step in 1..=steps {
        let r = sim.step(false).unwrap();
        assert!(r.converged, "step {step}: residual {:e}", r.residual);
        assert!(r.iterations >= 1, "step {step}: no Newton iteration");
    }
    let (mid, tip) = (sag(&sim, 0.5), sag(&sim, 1.0));
    // Free fall over the same time would be g t²/2 = 0.44 m; the soft half hangs from the
    // stiff one and its tip must at least drop by a visible fraction of that.
    eprintln!(
        "after {steps} steps of {h} s: sag at the material interface {mid:.3e} m, at the soft tip \
         {tip:.3e} m"
    );
    assert!(tip > 0.02, "the soft tip barely moved: {tip} m");
    assert!(
        mid < 0.1 * tip,
        "the stiff half bent as much as the soft one: {mid} vs {tip}"
    );
}
