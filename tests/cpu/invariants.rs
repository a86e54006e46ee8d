//! Physical invariants after every step: the inversion policy, obstacles against the whole
//! surface (not only vertices), infeasible starts, and non-finite inputs named by their key.

use jello::problem::{InversionPolicy, StepProblem};
use jello::scene::{BuiltScene, Scene};
use jello::sim::Simulation;
use std::path::Path;

fn parse(text: &str) -> jello::Result<BuiltScene> {
    Scene::parse(Path::new("test.toml"), text)?.build()
}

fn built(text: &str) -> BuiltScene {
    parse(text).unwrap()
}

fn sim(b: &BuiltScene, solver: &str) -> Simulation {
    let mut b = b.clone();
    b.config.solver = solver.parse().unwrap();
    jello::runner::setup(&b, jello::gpu::Backend::Cpu, None)
        .unwrap()
        .sim
}

/// A soft stable-Neo-Hookean ball (E = 50 kPa) thrown at the ground: 2 cm above it, `speed`
/// m/s down, h = 10 ms.
fn thrown_ball(speed: f64, policy: &str) -> String {
    format!(
        r#"
[simulation]
h = 0.01
steps = 3
inversion = "{policy}"
[[objects]]
name = "ball"
mesh = {{ generator = "ball", center = [0.0, 0.12, 0.0], radius = 0.1, resolution = 6 }}
material = {{ model = "stable_neo_hookean", youngs_modulus = 5e4, poisson_ratio = 0.4, density = 1000.0 }}
velocity = [0.0, -{speed}, 0.0]
[[obstacles]]
type = "ground"
"#
    )
}

/// Under `inversion = "forbid"` no accepted step of any CPU solver has an inverted element —
/// the violent throw makes the plain solve end inverted, so the strict retry / substeps / failure
/// path is exercised — and a step that could not be solved without inverting is reported as
/// failed, never as converged.
#[test]
fn forbid_keeps_every_element_positive_on_every_solver() {
    let mut b = built(&thrown_ball(30.0, "forbid").replace("resolution = 6", "resolution = 4"));
    // Each retry solves the step again; the cap keeps the test's cost bounded.
    b.config.max_iterations = Some(150);
    assert_eq!(b.model.inversion, InversionPolicy::Forbid);
    for solver in ["newton", "jgs2", "vbd", "qn"] {
        let mut s = sim(&b, solver);
        let mut retried = 0;
        for step in 1..=2 {
            let r = s.step(false).unwrap();
            let c = s.model.check_state(&s.state.x);
            eprintln!(
                "{solver} step {step}: {} it, converged {}, substeps {}, inverted {:?}, min J {:.3e}, failure {:?}",
                r.iterations, r.converged, r.substeps, c.inverted, c.min_j, r.failure
            );
            assert_eq!(
                c.total_inverted(),
                0,
                "{solver} step {step}: inverted elements"
            );
            assert_eq!(r.check, c, "{solver} step {step}: the report's check");
            if r.failure.is_some() {
                assert!(
                    !r.converged,
                    "{solver} step {step}: a failed step reported converged"
                );
                assert!(
                    !r.warnings.is_empty(),
                    "{solver} step {step}: a failure without warning"
                );
            }
            retried += (r.substeps > 1 || r.failure.is_some()) as usize;
        }
        eprintln!("{solver}: {retried} step(s) retried or failed");
    }
}

/// Under `inversion = "allow"` inverted elements are counted per object, named in a warning,
/// and such a step is never reported as converged (its stop rule alone may be met).
#[test]
fn allow_reports_inverted_elements_and_never_calls_the_step_converged() {
    let b = built(&thrown_ball(100.0, "allow"));
    let mut s = sim(&b, "newton");
    let mut seen = 0;
    for step in 1..=3 {
        let r = s.step(false).unwrap();
        let c = s.model.check_state(&s.state.x);
        assert_eq!(r.check, c, "step {step}");
        if c.total_inverted() > 0 {
            seen += 1;
            assert!(!r.converged, "step {step}: inverted yet converged");
            assert_eq!(r.check.inverted, vec![c.total_inverted()]);
            let w = r.warnings.join("\n");
            assert!(
                w.contains(&format!("step {step} "))
                    && w.contains("inverted")
                    && w.contains("`ball`"),
                "step {step}: warning {w:?}"
            );
        }
    }
    assert!(
        seen > 0,
        "a 100 m/s throw at 50 kPa inverted nothing: the test tests nothing"
    );
}

#[test]
fn allow_is_refused_for_a_model_infinite_at_inversion() {
    let text = thrown_ball(1.0, "allow").replace("stable_neo_hookean", "neo_hookean");
    let e = parse(&text).unwrap_err().to_string();
    assert!(
        e.contains("simulation.inversion") && e.contains("neo_hookean"),
        "{e}"
    );
    let e = parse(&thrown_ball(1.0, "sometimes"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("simulation.inversion") && e.contains("sometimes"),
        "{e}"
    );
}

/// A ball (surface edges ~3 cm) dropped onto obstacles smaller than its edges — a 4 mm sphere,
/// a 3 mm thick plate — with the ground far below: vertices alone would let them slip between;
/// the surface triangles stop the ball. Newton and QN (whose initial inverse Hessian takes the
/// surface pairs' curvature), every step: no surface triangle inside an obstacle, no vertex
/// inside, every step converged; the ball ends resting on the obstacle (its lowest point
/// within a few d̂ of the obstacle's top), not below it.
#[test]
fn small_obstacles_stop_the_surface_not_just_the_vertices() {
    let cases = [
        (
            "sphere",
            "type = \"sphere\"\ncenter = [0.004, 0.0, -0.006]\nradius = 0.004",
            0.004,
        ),
        (
            "plate",
            "type = \"box\"\nmin = [-0.012, -0.0015, -0.009]\nmax = [0.011, 0.0015, 0.013]",
            0.0015,
        ),
    ];
    for (name, obstacle, top) in cases {
        let text = format!(
            r#"
[simulation]
h = 0.01
steps = 25
[contact]
dhat = 1e-3
[[objects]]
name = "ball"
mesh = {{ generator = "ball", center = [0.0, 0.106, 0.0], radius = 0.1, resolution = 6 }}
material = {{ model = "stable_neo_hookean", youngs_modulus = 1e5, poisson_ratio = 0.3, density = 1000.0 }}
[[obstacles]]
{obstacle}
[[obstacles]]
type = "ground"
height = -0.5
"#
        );
        let b = built(&text);
        for solver in ["newton", "qn"] {
            let mut s = sim(&b, solver);
            let mut lowest = f64::INFINITY;
            for step in 1..=25 {
                let r = s.step(false).unwrap();
                assert!(
                    r.converged,
                    "{solver} {name} step {step}: residual {}",
                    r.residual
                );
                let c = s.model.check_state(&s.state.x);
                assert_eq!(c.total_penetrations(), 0, "{solver} {name} step {step}");
                lowest = s
                    .state
                    .x
                    .chunks(3)
                    .map(|p| p[1])
                    .fold(f64::INFINITY, f64::min);
            }
            eprintln!(
                "{solver} {name}: lowest vertex at the end {lowest:.4} m (obstacle top {top} m)"
            );
            // Passing the obstacle would drop the ball toward the ground at −0.5 m.
            assert!(
                lowest > -0.05,
                "{solver} {name}: the ball went past the obstacle ({lowest})"
            );
            // Vertices alone: the obstacle fits between them, so the lowest vertex can hang below
            // its top — but not by more than an edge.
            assert!(
                lowest < top + 0.02,
                "{solver} {name}: the ball never reached it ({lowest})"
            );
        }
    }
}

/// Infeasible starts are refused with one line naming the obstacle and the object: a box
/// slicing through the body between its vertices, a sphere inside the body whole.
#[test]
fn obstacles_overlapping_a_body_at_the_start_are_refused() {
    let body = r#"
[simulation]
h = 0.01
steps = 1
[[objects]]
name = "cube"
mesh = { generator = "box", min = [0.0, 0.0, 0.0], max = [1.0, 1.0, 1.0], cells = [2, 2, 2] }
material = { model = "fixed_corotated", youngs_modulus = 1e5, poisson_ratio = 0.3, density = 1000.0 }
"#;
    let cases = [
        // A thin slab through the middle of the cells, touching no vertex.
        (
            "slab",
            "[[obstacles]]\ntype = \"box\"\nmin = [-1.0, 0.2, -1.0]\nmax = [2.0, 0.3, 2.0]",
            "surface triangle",
        ),
        (
            "inside",
            "[[obstacles]]\ntype = \"sphere\"\ncenter = [0.3, 0.3, 0.3]\nradius = 0.05",
            "inside object `cube`",
        ),
    ];
    for (name, obs, what) in cases {
        let e = parse(&format!("{body}{obs}")).unwrap_err().to_string();
        assert!(
            e.contains("obstacles[0]") && e.contains("`cube`") && e.contains(what),
            "{name}: {e}"
        );
        assert_eq!(e.lines().count(), 1, "{name}: {e}");
    }
}

/// Non-finite energies stop the run with one line naming the step, the time and the cause —
/// the scene key where one is to blame — and never blame inversion when it is not the cause.
/// Scene files cap every value (1e30: `jello::limits`), so the overflowing inputs are set on
/// the model and state directly, as a library user can.
#[test]
fn non_finite_inputs_are_named() {
    let text = r#"
[simulation]
h = 0.01
steps = 2
[[objects]]
name = "bar"
mesh = { generator = "box", min = [0.0, 0.0, 0.0], max = [0.2, 0.05, 0.05], cells = [4, 1, 1] }
material = { model = "neo_hookean", youngs_modulus = 1e5, poisson_ratio = 0.3, density = 1000.0 }
"#;
    let b = built(text);
    let tip: Vec<u32> = (0..b.model.num_vertices() as u32)
        .filter(|&v| b.model.mesh.positions[v as usize][0] > 0.15)
        .collect();
    type Poison = Box<dyn Fn(&mut jello::problem::Model, &mut jello::problem::State)>;
    let cases: Vec<(&str, Poison, &str, usize)> = vec![
        (
            "gravity",
            Box::new(|m, _| m.gravity = [0.0, -1e300, 0.0]),
            "simulation.gravity",
            1,
        ),
        (
            "velocity",
            Box::new(|_, s| s.v.iter_mut().for_each(|v| *v = 1e300)),
            "objects[0].velocity",
            1,
        ),
        (
            "force",
            Box::new(move |m, _| {
                m.forces = vec![jello::problem::ExternalForce {
                    vertices: tip.clone(),
                    force: [0.0, -1e300, 0.0],
                    start: 0.01,
                    end: f64::INFINITY,
                }]
            }),
            "forces[0].force",
            2,
        ),
    ];
    for (name, poison, key, step) in cases {
        let mut model = b.model.clone();
        let mut state = model.initial_state(&b.velocity);
        poison(&mut model, &mut state);
        let solver = jello::solver::NewtonSolver::new(&model, Default::default()).unwrap();
        let mut s = Simulation::new(model, state, 0.01, Box::new(solver)).unwrap();
        let mut err = None;
        for _ in 0..2 {
            if let Err(e) = s.step(false) {
                err = Some(e.to_string());
                break;
            }
        }
        let e = err.unwrap_or_else(|| panic!("{name}: no error"));
        eprintln!("{name}: {e}");
        assert!(e.contains(key), "{name}: key not named: {e}");
        assert!(
            e.contains(&format!("step {step} ")),
            "{name}: step not named: {e}"
        );
        assert!(e.contains("t = "), "{name}: time not named: {e}");
        assert!(!e.contains("invert"), "{name}: blames inversion: {e}");
        assert_eq!(e.lines().count(), 1, "{name}: {e}");
    }
    // In a scene file the same values are refused at load, naming the key.
    let e = parse(&text.replace("steps = 2", "steps = 2\ngravity = [0.0, -1e300, 0.0]"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("simulation.gravity"), "{e}");
}

/// The strict filter holds on elements flattened to round-off: VBD (per-vertex moves, exact
/// affine volume bound) started where the previous strict step left elements at J ~ 1e-4.
#[test]
fn strict_vertex_moves_keep_flattened_elements_positive() {
    let b = built(&thrown_ball(100.0, "forbid"));
    let model = &b.model;
    let mut state = model.initial_state(&b.velocity);
    let params = jello::solver::jgs2::Jgs2Params {
        max_iterations: 200,
        variant: jello::solver::jgs2::Variant::GaussSeidel,
        safeguard: jello::solver::jgs2::Safeguard::Off,
        ..Default::default()
    };
    let mut solver = jello::solver::jgs2::Jgs2Solver::vbd(model, params);
    use jello::solver::StepSolver;
    let mut min_j = f64::INFINITY;
    for step in 0..3 {
        let mut p = StepProblem::new(model, &state, 0.01);
        p.strict_inversion = true;
        assert_eq!(model.check_state(&p.x_start).total_inverted(), 0);
        let mut x = Vec::new();
        solver.step(&p, model, &mut x, false).unwrap();
        let c = model.check_state(&x);
        assert_eq!(c.total_inverted(), 0, "step {step}: min J {}", c.min_j);
        min_j = min_j.min(c.min_j);
        let v: Vec<f64> = x
            .iter()
            .zip(&state.x)
            .map(|(a, b)| (a - b) / 0.01)
            .collect();
        state = jello::problem::State::new(x, v, state.t + 0.01);
    }
    eprintln!("smallest J over the strict VBD steps: {min_j:.3e}");
    assert!(
        min_j < 0.1,
        "nothing was squashed: the test tests nothing (min J {min_j})"
    );
}

/// The forbid ladder's orchestration, with a stand-in solver whose result inverts an element
/// whenever its step is longer than 3 ms: the full step, the strict retry and the 2-substep
/// attempt end inverted, 4 substeps are clean — so the step is accepted in 4 substeps, its
/// iterations summed over every solve, time advanced by h, and no element inverted.
#[test]
fn forbid_ladder_retries_strictly_then_in_substeps() {
    use jello::problem::ElasticTerms;
    use jello::solver::{StepReport, StepSolver};
    use std::sync::{Arc, Mutex};
    struct Flipper {
        calls: Arc<Mutex<Vec<(f64, bool)>>>,
    }
    impl StepSolver for Flipper {
        fn name(&self) -> String {
            "flipper".into()
        }
        fn step(
            &mut self,
            problem: &StepProblem,
            _elastic: &dyn ElasticTerms,
            x: &mut Vec<f64>,
            _trace: bool,
        ) -> jello::Result<StepReport> {
            self.calls
                .lock()
                .unwrap()
                .push((problem.h, problem.strict_inversion));
            x.clone_from(&problem.x_start);
            if problem.h > 0.003 {
                // Push the first tet's fourth corner through its opposite face.
                let tet = problem.model.mesh.tets[0];
                let (a, d) = (tet[0] as usize, tet[3] as usize);
                for k in 0..3 {
                    x[3 * d + k] = 2.0 * x[3 * a + k] - x[3 * d + k];
                }
            }
            Ok(StepReport {
                iterations: 3,
                converged: true,
                ..Default::default()
            })
        }
    }
    let b = built(
        &thrown_ball(0.0, "forbid")
            .replace("center = [0.0, 0.12, 0.0]", "center = [0.0, 1.0, 0.0]"),
    );
    let calls = Arc::new(Mutex::new(Vec::new()));
    let state = b.model.initial_state(&b.velocity);
    let mut s = Simulation::new(
        b.model.clone(),
        state,
        0.01,
        Box::new(Flipper {
            calls: calls.clone(),
        }),
    )
    .unwrap();
    let r = s.step(false).unwrap();
    let calls = calls.lock().unwrap().clone();
    eprintln!("solves (h, strict): {calls:?}");
    let expect: Vec<(f64, bool)> = [(0.01, false), (0.01, true), (0.005, true)]
        .into_iter()
        .chain(std::iter::repeat_n((0.0025, true), 4))
        .collect();
    assert_eq!(calls.len(), expect.len(), "{calls:?}");
    for (c, e) in calls.iter().zip(&expect) {
        assert!((c.0 - e.0).abs() < 1e-15 && c.1 == e.1, "{calls:?}");
    }
    assert_eq!(r.substeps, 4);
    assert_eq!(r.iterations, 3 * calls.len());
    assert!(r.converged && r.failure.is_none());
    assert_eq!(s.model.check_state(&s.state.x).total_inverted(), 0);
    assert!((s.state.t - 0.01).abs() < 1e-15);
    assert_eq!(s.steps, 1);
}
