//! IPC friction on Newton: a block on a pinned plate under tilted gravity sticks when
//! tan θ < μ and slides with the analytic acceleration g(sin θ − μ cos θ) when tan θ > μ.

use crate::common;

use jello::problem::Model;
use jello::solver::{NewtonParams, NewtonSolver};
use rand::Rng;

/// A 0.1 m block resting 0.5 mm (½ d̂) above a pinned 1 m plate, gravity `g` (m/s²) tilted
/// by `theta` (rad) about z so the block slides toward +x; μ and the lagging passes as given.
fn slope(theta: f64, mu: f64, passes: usize) -> jello::scene::BuiltScene {
    let g = 9.81;
    let text = format!(
        r#"[simulation]
h = 0.01
steps = 40
gravity = [{gx}, {gy}, 0.0]

[solver]
name = "newton"
stop = "cn"
tolerance = 1e-7

[[objects]]
name = "plate"
mesh = {{ generator = "box", min = [-0.5, -0.02, -0.15], max = [0.5, 0.0, 0.15], cells = [10, 1, 3] }}
material = {{ model = "stable_neo_hookean", youngs_modulus = 1e6, poisson_ratio = 0.3, density = 1000.0 }}

[[objects]]
name = "block"
mesh = {{ generator = "box", min = [-0.35, 0.0005, -0.05], max = [-0.25, 0.1005, 0.05], cells = [2, 2, 2] }}
material = {{ model = "stable_neo_hookean", youngs_modulus = 1e6, poisson_ratio = 0.3, density = 1000.0 }}

[[pins]]
object = "plate"
region = {{ box = {{ min = [-1.0, -1.0, -1.0], max = [1.0, 1.0, 1.0] }} }}

[contact]
ipc = true
dhat = 1e-3
friction_pairs = [{{ objects = ["plate", "block"], mu = {mu} }}]
friction_iterations = {passes}
"#,
        gx = g * theta.sin(),
        gy = -g * theta.cos(),
    );
    jello::scene::Scene::parse(std::path::Path::new("slope.toml"), &text)
        .unwrap()
        .build()
        .unwrap()
}

/// The block's mass-weighted mean velocity along x, m/s.
fn block_velocity(m: &Model, v: &[f64]) -> f64 {
    let b = &m.bodies[1];
    let (mut p, mut mass) = (0.0, 0.0);
    for i in b.vertices.clone() {
        p += m.mass[i] * v[3 * i];
        mass += m.mass[i];
    }
    p / mass
}

/// The block's x velocity after each step of `steps`.
fn run(built: &jello::scene::BuiltScene, steps: usize) -> Vec<f64> {
    let params = NewtonParams {
        stop: built.config.stop,
        ..NewtonParams::default()
    };
    let solver = NewtonSolver::new(&built.model, params).unwrap();
    let mut sim = common::simulation(built, Box::new(solver));
    let ipc = built.model.contact.clone().unwrap();
    let mut out = Vec::new();
    let mut iters = 0;
    for step in 0..steps {
        let r = sim.step(false).unwrap();
        assert!(r.converged, "step {step} did not converge: {r:?}");
        let xs = ipc.positions(&sim.state.x);
        jello::contact::check_intersection_free(&ipc.mesh, &xs)
            .unwrap_or_else(|e| panic!("step {step}: {e}"));
        iters += r.iterations;
        out.push(block_velocity(&built.model, &sim.state.v));
    }
    eprintln!("{iters} Newton iterations over {steps} steps");
    out
}

/// Least-squares slope of `v` against time over steps `from..` (step k ends at (k+1)·h).
fn fitted_acceleration(v: &[f64], h: f64, from: usize) -> f64 {
    let pts: Vec<(f64, f64)> = (from..v.len())
        .map(|k| ((k + 1) as f64 * h, v[k]))
        .collect();
    let n = pts.len() as f64;
    let (mt, mv) = (
        pts.iter().map(|p| p.0).sum::<f64>() / n,
        pts.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let num: f64 = pts.iter().map(|p| (p.0 - mt) * (p.1 - mv)).sum();
    let den: f64 = pts.iter().map(|p| (p.0 - mt).powi(2)).sum();
    num / den
}

#[test]
fn a_block_slides_down_a_slope_with_coulomb_deceleration() {
    let g = 9.81;
    // Well past the friction angle, and just past it (tan θ = 1.25 μ: the net acceleration is
    // a fifth of the frictionless one, so an error in the friction force shows five-fold).
    for (theta, mu, passes) in [
        (30.0f64.to_radians(), 0.2, 1),
        (40.0f64.to_radians(), 0.5, 1),
        (0.5f64.atan(), 0.4, 1),
        (0.5f64.atan(), 0.4, 2),
    ] {
        let deg = theta.to_degrees();
        assert!(theta.tan() > mu);
        let built = slope(theta, mu, passes);
        let v = run(&built, 30);
        let a = fitted_acceleration(&v, 0.01, 10);
        let expected = g * (theta.sin() - mu * theta.cos());
        let err = (a - expected).abs() / expected;
        eprintln!(
            "θ = {deg:.2}°, μ = {mu}, {passes} pass(es): a = {a:.4} m/s², analytic \
             {expected:.4} ({err:.2e})"
        );
        assert!(err < 0.03, "θ = {deg}°, μ = {mu}: a = {a} vs {expected}");
    }
}

#[test]
fn a_block_sticks_on_a_slope_below_the_friction_angle() {
    let g = 9.81;
    // Well below the friction angle and just below it (tan θ = 0.9 μ).
    for (theta, mu) in [(20.0f64.to_radians(), 0.5), (0.36f64.atan(), 0.4)] {
        assert!(theta.tan() < mu);
        let v = run(&slope(theta, mu, 1), 30);
        let free = g * theta.sin() * 0.3;
        let tail = v[20..].iter().fold(0.0f64, |a, b| a.max(b.abs()));
        eprintln!(
            "θ = {:.2}°, μ = {mu}: block speed over 0.2–0.3 s ≤ {tail:.3e} m/s (frictionless \
             {free:.3} m/s at 0.3 s)",
            theta.to_degrees()
        );
        // Mollified static friction creeps below ε_v = 1 mm/s.
        assert!(tail < 1e-3, "the block slides: {tail} m/s");
    }
}

#[test]
fn bad_friction_keys_are_refused_with_the_key() {
    let base = |contact: &str| {
        format!(
            r#"[simulation]
h = 0.01
steps = 1

[[objects]]
name = "a"
mesh = {{ generator = "box", min = [0.0, 0.0, 0.0], max = [0.1, 0.1, 0.1], cells = [1, 1, 1] }}
material = {{ model = "stable_neo_hookean", youngs_modulus = 1e5, poisson_ratio = 0.3, density = 1000.0 }}

[[objects]]
name = "b"
mesh = {{ generator = "box", min = [0.0, 0.2, 0.0], max = [0.1, 0.3, 0.1], cells = [1, 1, 1] }}
material = {{ model = "stable_neo_hookean", youngs_modulus = 1e5, poisson_ratio = 0.3, density = 1000.0 }}

[contact]
{contact}
"#
        )
    };
    let err = |contact: &str| {
        let text = base(contact);
        match jello::scene::Scene::parse(std::path::Path::new("f.toml"), &text) {
            Ok(s) => s.build().map(|_| ()).unwrap_err().to_string(),
            Err(e) => e.to_string(),
        }
    };
    for (contact, key, what) in [
        ("ipc = true\nfriction = -0.1", "contact.friction", "≥ 0"),
        ("ipc = true\nfriction = nan", "contact.friction", "finite"),
        (
            "ipc = true\nfriction_pairs = [{ objects = [\"a\", \"c\"], mu = 0.3 }]",
            "contact.friction_pairs[0].objects",
            "`c`",
        ),
        (
            "ipc = true\nfriction_pairs = [{ objects = [\"a\", \"b\"], mu = -1.0 }]",
            "contact.friction_pairs[0].mu",
            "≥ 0",
        ),
        (
            "ipc = true\nfriction = 0.3\nfriction_velocity = 0.0",
            "contact.friction_velocity",
            "> 0",
        ),
        (
            "ipc = true\nfriction = 0.3\nfriction_iterations = 0",
            "contact.friction_iterations",
            "≥ 1",
        ),
        ("friction = 0.3", "contact.friction", "contact.ipc"),
    ] {
        let e = err(contact);
        eprintln!("{e}");
        assert!(e.contains(key) && e.contains(what), "{contact}: {e}");
        assert!(e.contains("f.toml") && !e.contains('\n'), "{e}");
    }
    // A good one builds, with μ per pair as given.
    let text = base(
        "ipc = true\nfriction = 0.1\nfriction_pairs = [{ objects = [\"a\", \"b\"], mu = 0.6 }]",
    );
    let built = jello::scene::Scene::parse(std::path::Path::new("f.toml"), &text)
        .unwrap()
        .build()
        .unwrap();
    let f = built.model.contact.unwrap().friction.clone().unwrap();
    assert_eq!(
        (f.mu(0, 1), f.mu(1, 0), f.mu(0, 0), f.mu(1, 1)),
        (0.6, 0.6, 0.1, 0.1)
    );
    assert_eq!((f.eps_v, f.passes), (1e-3, 1));
}

#[test]
fn step_energy_with_lagged_friction_matches_its_gradient() {
    // A block sliding on the slope (5 steps in): the step's E with friction lagged at xᵗ —
    // ∇E·u against central differences of E(x) − E(x_start) along random u, in the sliding
    // regime; E(x_start) − E(x_start) = 0 after the lag (the reference follows the new
    // potential); and the lag changes the gradient (friction is in it).
    let mut rng = common::rng("step_energy_with_lagged_friction_matches_its_gradient");
    let built = slope(30f64.to_radians(), 0.3, 1);
    let m = &built.model;
    let params = NewtonParams {
        stop: built.config.stop,
        ..NewtonParams::default()
    };
    let mut sim = common::simulation(&built, Box::new(NewtonSolver::new(m, params).unwrap()));
    for _ in 0..5 {
        sim.step(false).unwrap();
    }
    let prob = jello::problem::StepProblem::new(m, &sim.state, built.config.h);
    prob.init_contact_stiffness(m);
    // The block slid 0.3 mm down the slope from the start (the sliding regime: ‖u‖ ≫ ε_v h).
    let mut x = prob.x_start.clone();
    for v in m.bodies[1].vertices.clone() {
        x[3 * v] += 3e-4;
    }
    let mut g_free = vec![0.0; x.len()];
    prob.gradient(m, &x, &mut g_free);
    let lagged = prob.lag_friction(&prob.x_prev);
    assert!(lagged > 0, "the block must be in contact");
    assert_eq!(prob.energy_change(m, &prob.x_start.clone()), 0.0);
    let mut g = vec![0.0; x.len()];
    prob.gradient(m, &x, &mut g);
    let diff = g
        .iter()
        .zip(&g_free)
        .map(|(a, b)| (a - b).powi(2))
        .sum::<f64>()
        .sqrt();
    eprintln!("{lagged} lagged pairs; |∇E − ∇E without friction| = {diff:.3e} N");
    assert!(diff > 0.1, "friction must enter the gradient: {diff}");
    for trial in 0..5 {
        // Free DOFs only: the gradient is zero on pinned ones (the plate).
        let u: Vec<f64> = (0..x.len())
            .map(|k| {
                let r = rng.random_range(-1.0..1.0);
                if prob.fixed[k] {
                    0.0
                } else {
                    r
                }
            })
            .collect();
        let h = 1e-8;
        let at = |s: f64| {
            let y: Vec<f64> = x.iter().zip(&u).map(|(a, b)| a + s * b).collect();
            prob.energy_change(m, &y)
        };
        let fd = (at(h) - at(-h)) / (2.0 * h);
        let exact: f64 = g.iter().zip(&u).map(|(a, b)| a * b).sum();
        // Relative to |∇E·u| plus the typical size of a directional derivative
        // (‖∇E‖·rms(u)): a direction nearly ⟂ ∇E leaves only the energy's round-off / 2h.
        let gn = g.iter().map(|v| v * v).sum::<f64>().sqrt();
        let rms = (u.iter().map(|v| v * v).sum::<f64>() / u.len() as f64).sqrt();
        let err = (fd - exact).abs() / (exact.abs() + gn * rms);
        eprintln!(
            "trial {trial}: ∇E·u = {exact:.6e}, difference quotient {fd:.6e}, error {err:.2e}"
        );
        // Measured ≤ 1.3e-6 over seeds 1–12; a missing or wrong friction term is O(1).
        assert!(err < 1e-4, "trial {trial}: relative error {err:.2e}");
    }
}
