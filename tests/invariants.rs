//! Physical invariants after every step: inversion policy, obstacle surfaces, non-finite input.

use jello::problem::StepProblem;
use jello::scene::Scene;
use std::path::Path;

fn built(text: &str) -> jello::scene::BuiltScene {
    Scene::parse(Path::new("test.toml"), text)
        .unwrap()
        .build()
        .unwrap()
}

const BALL: &str = r#"
[simulation]
h = 0.01
steps = 3
[[objects]]
name = "ball"
mesh = { generator = "ball", center = [0.0, 0.12, 0.0], radius = 0.1, resolution = 6 }
material = { model = "stable_neo_hookean", youngs_modulus = 5e4, poisson_ratio = 0.4, density = 1000.0 }
velocity = [0.0, -100.0, 0.0]
[[obstacles]]
type = "ground"
"#;

#[test]
fn strict_vbd_keeps_elements_positive() {
    let b = built(BALL);
    let model = &b.model;
    let mut state = model.initial_state(&b.velocity);
    // One clean step first (VBD from rest never inverts here), then a strict one.
    let params = jello::solver::jgs2::Jgs2Params {
        max_iterations: 200,
        ..Default::default()
    };
    let params = jello::solver::jgs2::Jgs2Params {
        variant: jello::solver::jgs2::Variant::GaussSeidel,
        safeguard: false,
        ..params
    };
    let mut solver = jello::solver::jgs2::Jgs2Solver::vbd(model, params);
    use jello::solver::StepSolver;
    for step in 0..2 {
        let mut p = StepProblem::new(model, &state, 0.01);
        p.strict_inversion = true;
        let c0 = model.check_state(&p.x_start);
        assert_eq!(c0.total_inverted(), 0, "x_start inverted");
        let mut x = Vec::new();
        let r = solver.step(&p, model, &mut x, false).unwrap();
        let c = model.check_state(&x);
        eprintln!(
            "step {step}: {} it, converged {}, inverted {:?}, min J {}",
            r.iterations, r.converged, c.inverted, c.min_j
        );
        assert_eq!(c.total_inverted(), 0);
        let v: Vec<f64> = x
            .iter()
            .zip(&state.x)
            .map(|(a, b)| (a - b) / 0.01)
            .collect();
        state = jello::problem::State {
            x,
            v,
            t: state.t + 0.01,
        };
    }
}

#[test]
fn debug_strict_vbd_iterations() {
    let b = built(BALL);
    let model = &b.model;
    let mut state = model.initial_state(&b.velocity);
    {
        let params = jello::solver::jgs2::Jgs2Params {
            max_iterations: 200,
            variant: jello::solver::jgs2::Variant::GaussSeidel,
            safeguard: false,
            ..Default::default()
        };
        let mut solver = jello::solver::jgs2::Jgs2Solver::vbd(model, params);
        use jello::solver::StepSolver;
        let mut p = StepProblem::new(model, &state, 0.01);
        p.strict_inversion = true;
        let mut x = Vec::new();
        solver.step(&p, model, &mut x, false).unwrap();
        let v: Vec<f64> = x
            .iter()
            .zip(&state.x)
            .map(|(a, b)| (a - b) / 0.01)
            .collect();
        state = jello::problem::State {
            x,
            v,
            t: state.t + 0.01,
        };
    }
    let params = jello::solver::jgs2::Jgs2Params {
        max_iterations: 1,
        variant: jello::solver::jgs2::Variant::GaussSeidel,
        safeguard: false,
        ..Default::default()
    };
    let mut solver = jello::solver::jgs2::Jgs2Solver::vbd(model, params);
    use jello::solver::StepSolver;
    let mut p = StepProblem::new(model, &state, 0.01);
    p.strict_inversion = true;
    let mut x = p.x_start.clone();
    for it in 0..300 {
        p.x_start = x.clone();
        let before = model.check_state(&x);
        let mut y = Vec::new();
        solver.step(&p, model, &mut y, false).unwrap();
        let c = model.check_state(&y);
        if c.total_inverted() > 0 {
            // Which elements flipped, and by how much did their vertices move?
            for t in 0..model.mesh.num_tets() {
                let (j0, j1) = (model.element_j(&x, t), model.element_j(&y, t));
                if j1 <= 0.0 {
                    let tet = model.mesh.tets[t];
                    let mv: Vec<f64> = tet
                        .iter()
                        .map(|&v| {
                            (0..3)
                                .map(|k| (y[3 * v as usize + k] - x[3 * v as usize + k]).powi(2))
                                .sum::<f64>()
                                .sqrt()
                        })
                        .collect();
                    eprintln!("it {it}: tet {t} J {j0:.3e} -> {j1:.3e}, moves {mv:?}");
                }
            }
            panic!("inverted at iteration {it} (before: {:?})", before.inverted);
        }
        x = y;
    }
}
