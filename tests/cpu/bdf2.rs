//! The BDF2 integrator (`[simulation] integrator = "bdf2"`): second-order convergence of a
//! smooth trajectory under refinement of h (implicit Euler: first order), less numerical damping
//! than implicit Euler (energy over 100 steps), an implicit-Euler first step, pins that keep
//! following their scripts, and the scene key (default, accepted, refused). The device paths
//! under BDF2 are compared with the f64 CPU in tests/gpu/gpu_compare.rs.

use jello::problem::{Integrator, Model, State};
use jello::scene::{BuiltScene, Scene};
use jello::sim::{SimOptions, Simulation};
use jello::solver::{NewtonParams, NewtonSolver, StopRule};
use std::path::Path;

/// A cantilever 0.3 m × 5 cm × 5 cm (7 × 2 × 2 vertices, 36 tets), clamped at x = 0, released
/// straight from rest under gravity: it sags about 5 cm and swings about that equilibrium
/// (lowest mode ≈ 3 Hz). No contact, nothing switches on or off: the trajectory is smooth.
/// `INTEGRATOR` and `H_STEP` are replaced per run.
const CANTILEVER: &str = r#"[simulation]
h = H_STEP
steps = 1
integrator = "INTEGRATOR"

[solver]
tolerance = 1e-10

[[objects]]
name = "bar"
mesh = { generator = "box", min = [0.0, -0.025, -0.025], max = [0.3, 0.025, 0.025], cells = [6, 1, 1] }
material = { model = "stable_neo_hookean", youngs_modulus = 1e6, poisson_ratio = 0.3, density = 1000.0 }

[[pins]]
region = { box = { min = [-0.001, -1.0, -1.0], max = [0.001, 1.0, 1.0] } }
script = { type = "fixed" }
"#;

fn cantilever(integrator: &str, h: f64) -> BuiltScene {
    let text = CANTILEVER
        .replace("INTEGRATOR", integrator)
        .replace("H_STEP", &format!("{h:?}"));
    Scene::parse(Path::new("cantilever.toml"), &text)
        .unwrap()
        .build()
        .unwrap()
}

/// A simulation of `built` on projected Newton with the scene's (tight) stop rule.
fn newton_sim(built: &BuiltScene) -> Simulation {
    let m = &built.model;
    let params = NewtonParams {
        stop: built.config.stop,
        ..NewtonParams::default()
    };
    Simulation::new(
        m.clone(),
        m.initial_state(&built.velocity),
        built.config.h,
        Box::new(NewtonSolver::new(m, params).unwrap()),
    )
    .unwrap()
}

/// The cantilever without gravity, at rest shape, moving with `velocity` (per vertex, m/s).
fn swinging(integrator: &str, h: f64, velocity: &[[f64; 3]]) -> Simulation {
    let mut built = cantilever(integrator, h);
    assert!(matches!(built.config.stop, StopRule::Cn { eps } if eps == 1e-10));
    built.model.gravity = [0.0; 3];
    let mut sim = newton_sim(&built);
    sim.state = built.model.initial_state(velocity);
    sim
}

/// The state at time `t_end` (a whole number of steps of `h`) of [`swinging`]; every step must
/// meet the stop rule.
fn run_to(integrator: &str, h: f64, t_end: f64, velocity: &[[f64; 3]]) -> State {
    let mut sim = swinging(integrator, h, velocity);
    let steps = (t_end / h).round() as usize;
    assert!((steps as f64 * h - t_end).abs() < 1e-12 * t_end);
    for _ in 0..steps {
        let r = sim.step(false).unwrap();
        assert!(
            r.converged,
            "{integrator} h = {h}: step {} did not converge (residual {:e})",
            sim.steps, r.residual
        );
    }
    sim.state
}

/// The cantilever's lowest vibration mode at rest: ω₁ (rad/s) and its shape φ (per vertex,
/// m-normalised so max |φ_v| = 1; zero on the clamped vertices), from the generalised eigen
/// problem K φ = ω² M φ over the free DOFs (K: the elastic Hessian at rest, M: lumped masses).
fn lowest_mode(m: &Model) -> (f64, Vec<[f64; 3]>) {
    use jello::problem::ElasticTerms;
    let rest: Vec<f64> = m.mesh.positions.iter().flatten().copied().collect();
    let mut elem = Vec::new();
    m.elastic_element_hessians(&rest, &mut elem);
    let free: Vec<usize> = (0..rest.len()).filter(|&k| !m.pinned[k / 3]).collect();
    let mut index = vec![usize::MAX; rest.len()];
    for (i, &k) in free.iter().enumerate() {
        index[k] = i;
    }
    let n = free.len();
    let mut a = nalgebra::DMatrix::<f64>::zeros(n, n);
    for (t, h) in m.mesh.tets.iter().zip(&elem) {
        for p in 0..12 {
            for q in 0..12 {
                let (r, c) = (
                    index[3 * t[p / 3] as usize + p % 3],
                    index[3 * t[q / 3] as usize + q % 3],
                );
                if r != usize::MAX && c != usize::MAX {
                    a[(r, c)] += h[12 * p + q];
                }
            }
        }
    }
    // M^{-1/2} K M^{-1/2}: symmetric, same eigenvalues ω².
    let s: Vec<f64> = free.iter().map(|&k| 1.0 / m.mass[k / 3].sqrt()).collect();
    for r in 0..n {
        for c in 0..n {
            a[(r, c)] *= s[r] * s[c];
        }
    }
    let eig = a.symmetric_eigen();
    let low = (0..n)
        .min_by(|&i, &j| eig.eigenvalues[i].total_cmp(&eig.eigenvalues[j]))
        .unwrap();
    let mut phi = vec![[0.0; 3]; m.num_vertices()];
    for (i, &k) in free.iter().enumerate() {
        phi[k / 3][k % 3] = eig.eigenvectors[(i, low)] * s[i];
    }
    let top = phi.iter().flatten().fold(0.0f64, |a, b| a.max(b.abs()));
    for p in &mut phi {
        p.iter_mut().for_each(|c| *c /= top);
    }
    (eig.eigenvalues[low].sqrt(), phi)
}

/// √(Σ m|a − b|² / Σ m), m: the mass-weighted RMS distance between two position vectors.
fn rms(m: &Model, a: &[f64], b: &[f64]) -> f64 {
    let total: f64 = m.mass.iter().sum();
    let s: f64 = m
        .mass
        .iter()
        .enumerate()
        .map(|(v, mv)| {
            (0..3)
                .map(|k| (a[3 * v + k] - b[3 * v + k]).powi(2))
                .sum::<f64>()
                * mv
        })
        .sum();
    (s / total).sqrt()
}

/// Least-squares slope of log(error) against log(h): the observed order.
fn fitted_order(hs: &[f64], errors: &[f64]) -> f64 {
    let xs: Vec<f64> = hs.iter().map(|h| h.ln()).collect();
    let ys: Vec<f64> = errors.iter().map(|e| e.ln()).collect();
    let n = xs.len() as f64;
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
    sxy / sxx
}

/// The cantilever (no gravity) set swinging in its lowest mode at 5 cm/s peak (a 1.5 mm
/// swing: gentle, nearly linear), positions after about a quarter period with h = 4, 2, 1,
/// 0.5 ms, against BDF2 at h = 62.5 µs (its error is 1/64 of the finest level's, so it does
/// not bend the fit). BDF2's error must fall about 4× per halving, implicit Euler's about 2×.
///
/// Why a mode and not a release under gravity: a release excites every mode of the mesh, up to
/// ω ~ 10³ rad/s, and BDF2 (rightly) damps the ones with ωh > 1; their small amplitudes then
/// set an error floor that falls more slowly than h² until h ≲ 10⁻⁴ s (measured on this bar
/// released under gravity: ratios 3.0, 3.0, 3.2 per halving from h = 4 ms, order 1.6; 3.1,
/// 3.4, 3.9 from h = 1 ms).
#[test]
fn bdf2_converges_at_second_order_and_implicit_euler_at_first() {
    let model = cantilever("bdf2", 1e-3).model;
    let (omega, phi) = lowest_mode(&model);
    let velocity: Vec<[f64; 3]> = phi.iter().map(|p| p.map(|c| 0.05 * c)).collect();
    let period = 2.0 * std::f64::consts::PI / omega;
    eprintln!("lowest mode: ω₁ = {omega:.3} rad/s (period {period:.4} s)");
    let t_end = 0.04;
    let hs = [4e-3, 2e-3, 1e-3, 5e-4];
    let reference = run_to("bdf2", 6.25e-5, t_end, &velocity);
    let rest: Vec<f64> = model.mesh.positions.iter().flatten().copied().collect();
    let swing = rms(&model, &reference.x, &rest);
    eprintln!("RMS displacement at T = {t_end} s: {swing:.4e} m");
    let mut orders = Vec::new();
    for integrator in ["implicit_euler", "bdf2"] {
        let errors: Vec<f64> = hs
            .iter()
            .map(|&h| {
                rms(
                    &model,
                    &run_to(integrator, h, t_end, &velocity).x,
                    &reference.x,
                )
            })
            .collect();
        let ratios: Vec<String> = errors
            .windows(2)
            .map(|w| format!("{:.2}", w[0] / w[1]))
            .collect();
        let order = fitted_order(&hs, &errors);
        eprintln!(
            "{integrator}: RMS errors {:?} m at h = {hs:?} s; ratios per halving {ratios:?}; \
             fitted order {order:.3}",
            errors
                .iter()
                .map(|e| format!("{e:.3e}"))
                .collect::<Vec<_>>()
        );
        // Real discretisation errors: far above the solver's tolerance, below the motion.
        assert!(errors.iter().all(|&e| e > 1e-10 && e < swing), "{errors:?}");
        orders.push(order);
    }
    assert!(
        orders[0] > 0.8 && orders[0] <= 1.3,
        "implicit Euler's observed order {:.3} is not ≈ 1",
        orders[0]
    );
    assert!(
        orders[1] >= 1.8,
        "BDF2's observed order {:.3} is below 1.8",
        orders[1]
    );
}

/// A free body (no pins) thrown upward under gravity and a constant external force on all of
/// it: every vertex accelerates uniformly by a = g + F/M, so the body never deforms and the
/// trajectory is a parabola. BDF2 is exact on it but for its implicit-Euler first step, which
/// lands ½h²a off; the error then obeys e^{n+1} − 4/3 eⁿ + 1/3 eⁿ⁻¹ = 0, so
/// eⁿ = ¾h²a(1 − 3⁻ⁿ), while every velocity is exact (the velocity recurrence is satisfied by
/// v₀ + a t). Gravity and forces must both enter x̃ as ĥ²(g + M⁻¹f): any other weight gives
/// velocities off by a multiple of a·t.
#[test]
fn bdf2_is_exact_on_a_uniformly_accelerated_body_but_for_its_first_step() {
    let text = r#"[simulation]
h = 0.01
steps = 40
integrator = "bdf2"
gravity = [0.0, -9.81, 0.0]

[[objects]]
name = "block"
mesh = { generator = "box", min = [0.0, 0.0, 0.0], max = [0.2, 0.1, 0.1], cells = [2, 1, 1] }
material = { model = "stable_neo_hookean", youngs_modulus = 1e5, poisson_ratio = 0.3, density = 500.0 }
velocity = [0.3, 2.0, -0.1]

[[forces]]
region = { box = { min = [-1.0, -1.0, -1.0], max = [1.0, 1.0, 1.0] } }
force = [3.0, 0.0, 1.5]
"#;
    let built = Scene::parse(Path::new("free.toml"), text)
        .unwrap()
        .build()
        .unwrap();
    let m = built.model.clone();
    let total: f64 = m.mass.iter().sum();
    let a = [3.0 / total, -9.81, 1.5 / total];
    let (v0, h) = ([0.3, 2.0, -0.1], 0.01);
    let mut sim = newton_sim(&built);
    let x0 = sim.state.x.clone();
    let (mut worst_v, mut worst_x) = (0.0f64, 0.0f64);
    for n in 1..=40 {
        assert!(sim.step(false).unwrap().converged);
        let t = sim.state.t;
        for v in 0..m.num_vertices() {
            for k in 0..3 {
                let vel = v0[k] + a[k] * t;
                let exact = x0[3 * v + k] + v0[k] * t + 0.5 * a[k] * t * t;
                let e = 0.75 * h * h * a[k] * (1.0 - 3f64.powi(-n));
                worst_v = worst_v.max((sim.state.v[3 * v + k] - vel).abs());
                worst_x = worst_x.max((sim.state.x[3 * v + k] - (exact + e)).abs());
            }
        }
    }
    eprintln!(
        "free flight, 40 BDF2 steps: worst velocity error {worst_v:.2e} m/s, worst position \
         error beyond ¾h²a(1 − 3⁻ⁿ) {worst_x:.2e} m"
    );
    // Round-off (measured 8e-14 m/s and 1.5e-14 m: the body never deforms, so every step's
    // Newton solve starts at its minimiser x̃); a wrong weight on g or f would put the
    // velocities off by ~a·t·(1 − h²/ĥ²) ~ 1 m/s.
    assert!(worst_v < 1e-10, "velocity error {worst_v:e} m/s");
    assert!(worst_x < 1e-11, "position error {worst_x:e} m");
}

/// Kinetic + elastic + gravitational potential energy, J (gravity's potential −Σ m g·x).
fn total_energy(m: &Model, s: &State) -> f64 {
    let kinetic: f64 = m
        .mass
        .iter()
        .enumerate()
        .map(|(v, mv)| 0.5 * mv * (0..3).map(|k| s.v[3 * v + k].powi(2)).sum::<f64>())
        .sum();
    let gravity: f64 = m
        .mass
        .iter()
        .enumerate()
        .map(|(v, mv)| -mv * (0..3).map(|k| m.gravity[k] * s.x[3 * v + k]).sum::<f64>())
        .sum();
    kinetic + jello::problem::ElasticTerms::elastic_energy(m, &s.x) + gravity
}

/// The cantilever, released straight from rest under gravity, swings freely (nothing drives
/// or brakes it) for 100 steps of 10 ms, five periods of its lowest mode (ω₁ ≈ 32 rad/s,
/// ω₁h ≈ 0.32). The energy above the static equilibrium it swings about is what the swing
/// holds; the exact flow keeps all of it. Per step implicit Euler keeps 1/(1 + (ωh)²) of a
/// linear mode's energy (0.907 at ωh = 0.32), BDF2 1 − O((ωh)⁴) (0.996: the larger root of
/// (1 − ⅔iωh)r² − 4/3 r + 1/3 = 0 has |r| = 0.9979).
///
/// Measured: implicit Euler keeps 6.3% after 25 steps, 0.5% after 50 and 4e-5 after 100;
/// BDF2 72.6%, 62.7%, 54.4% and 47.4%. BDF2's loss is front-loaded: the release also excites
/// the mesh's stiff modes (ωh ≫ 1), whose share BDF2 damps in the first steps, as an L-stable
/// method must; the swing then loses ~0.6% per step (0.4% for the linear lowest mode alone).
/// The bounds: BDF2 keeps > 30% (measured 47%), implicit Euler < 1%, and BDF2 more than 10×
/// implicit Euler (measured 1.2e4×).
#[test]
fn bdf2_damps_a_free_swing_far_less_than_implicit_euler() {
    let h = 0.01;
    let steps = 100;
    // The static equilibrium under gravity: a static solve in one increment.
    let built = cantilever("implicit_euler", h);
    let model = built.model.clone();
    let m = &built.model;
    let solver = NewtonSolver::new(
        m,
        NewtonParams {
            stop: built.config.stop,
            ..NewtonParams::default()
        },
    )
    .unwrap();
    let options = SimOptions {
        static_increments: Some(1),
        ..SimOptions::default()
    };
    let state = m.initial_state(&built.velocity);
    let mut stat =
        Simulation::with_options(m.clone(), state, built.config.h, Box::new(solver), options)
            .unwrap();
    assert!(stat.step(false).unwrap().converged);
    let e_eq = total_energy(&model, &stat.state);
    let e0 = total_energy(&model, &model.initial_state(&built.velocity));
    let swing = e0 - e_eq;
    eprintln!("E(0) = {e0:.6e} J, equilibrium {e_eq:.6e} J: the swing holds {swing:.4e} J");
    assert!(swing > 0.0);
    let mut kept = Vec::new();
    for integrator in ["implicit_euler", "bdf2"] {
        let mut sim = newton_sim(&cantilever(integrator, h));
        let mut trace = Vec::new();
        for _ in 0..steps {
            assert!(sim.step(false).unwrap().converged);
            trace.push((total_energy(&model, &sim.state) - e_eq) / swing);
        }
        let k = trace[steps - 1];
        eprintln!(
            "{integrator}: fraction of the swing's energy left after steps 25, 50, 75, 100: \
             {:.4e} {:.4e} {:.4e} {:.4e}",
            trace[24], trace[49], trace[74], k
        );
        // Both dissipate (neither integrator injects energy into a free swing).
        assert!(
            trace.iter().all(|&f| f < 1.0 + 1e-6),
            "{integrator} gained energy"
        );
        kept.push(k);
    }
    let (euler, bdf2) = (kept[0], kept[1]);
    eprintln!("kept after {steps} steps: implicit Euler {euler:.4e}, BDF2 {bdf2:.4e}");
    assert!(bdf2 > 0.3, "BDF2 kept only {bdf2:.4} of the swing's energy");
    assert!(
        euler < 0.01,
        "implicit Euler kept {euler:.4} of the swing's energy"
    );
    assert!(
        bdf2 > 10.0 * euler,
        "BDF2 kept {bdf2:.4}, implicit Euler {euler:.4}: not clearly less damped"
    );
}

/// BDF2's first step has no history: it is implicit Euler's step bit for bit, and it leaves the
/// step's start as history; the second step then differs from Euler's.
#[test]
fn the_first_bdf2_step_is_implicit_euler_and_starts_the_history() {
    let h = 0.01;
    let mut euler = newton_sim(&cantilever("implicit_euler", h));
    let mut bdf2 = newton_sim(&cantilever("bdf2", h));
    let start = bdf2.state.clone();
    assert!(start.history.is_none());
    euler.step(false).unwrap();
    bdf2.step(false).unwrap();
    assert_eq!(euler.state.x, bdf2.state.x);
    assert_eq!(euler.state.v, bdf2.state.v);
    assert!(
        euler.state.history.is_none(),
        "implicit Euler keeps no history"
    );
    let hist = bdf2
        .state
        .history
        .as_ref()
        .expect("BDF2 keeps the step's start");
    assert_eq!(hist.x, start.x);
    assert_eq!(hist.v, start.v);
    euler.step(false).unwrap();
    bdf2.step(false).unwrap();
    let d = rms(&bdf2.model, &euler.state.x, &bdf2.state.x);
    assert!(
        d > 1e-7,
        "the second BDF2 step equals Euler's (RMS difference {d:e} m)"
    );
}

/// A bar whose pinned end translates at a constant velocity: under BDF2 the pinned vertices sit
/// on their script at every step and their velocity — BDF2's difference formula, exact on a
/// linear trajectory — is the script's velocity to round-off.
#[test]
fn pinned_vertices_follow_their_scripts_under_bdf2() {
    let text = CANTILEVER
        .replace("INTEGRATOR", "bdf2")
        .replace("H_STEP", "0.01")
        .replace(
            r#"script = { type = "fixed" }"#,
            r#"script = { type = "translate", velocity = [0.0, 0.2, 0.1] }"#,
        );
    let built = Scene::parse(Path::new("moving.toml"), &text)
        .unwrap()
        .build()
        .unwrap();
    let m = built.model.clone();
    let pinned: Vec<usize> = (0..m.num_vertices()).filter(|&v| m.pinned[v]).collect();
    assert_eq!(pinned.len(), 4);
    let mut sim = newton_sim(&built);
    let x0 = sim.state.x.clone();
    for _ in 0..12 {
        assert!(sim.step(false).unwrap().converged);
        let t = sim.state.t;
        for &v in &pinned {
            for (k, vel) in [0.0, 0.2, 0.1].into_iter().enumerate() {
                let want = x0[3 * v + k] + vel * t;
                assert!(
                    (sim.state.x[3 * v + k] - want).abs() < 1e-12,
                    "step {}: pinned vertex {v} off its script",
                    sim.steps
                );
                // From step 2 on the velocity is BDF2's ((x − x̂)/ĥ; step 1 is Euler's, also
                // exact on a line).
                assert!(
                    (sim.state.v[3 * v + k] - vel).abs() < 1e-9,
                    "step {}: pinned vertex {v} velocity {} vs {vel}",
                    sim.steps,
                    sim.state.v[3 * v + k]
                );
            }
        }
    }
}

#[test]
fn the_scene_key_defaults_to_implicit_euler_and_refuses_unknown_values() {
    let parse = |text: &str| Scene::parse(Path::new("bar.toml"), text).and_then(|s| s.build());
    let base = CANTILEVER.replace("H_STEP", "0.01");
    let without = base.replace("integrator = \"INTEGRATOR\"\n", "");
    assert_eq!(
        parse(&without).unwrap().model.integrator,
        Integrator::ImplicitEuler
    );
    for (name, want) in [
        ("implicit_euler", Integrator::ImplicitEuler),
        ("bdf2", Integrator::Bdf2),
    ] {
        let built = parse(&base.replace("INTEGRATOR", name)).unwrap();
        assert_eq!(built.model.integrator, want);
    }
    for bad in ["bdf3", "BDF2", "euler", ""] {
        let e = parse(&base.replace("INTEGRATOR", bad))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("bar.toml")
                && e.contains("simulation.integrator")
                && e.contains("bdf2")
                && !e.contains('\n'),
            "{e}"
        );
    }
    // A number is a type error naming the key.
    let e = parse(&base.replace("\"INTEGRATOR\"", "2"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("integrator") && !e.contains('\n'), "{e}");
    // A static solve has no time integrator.
    let e = parse(
        &base
            .replace("INTEGRATOR", "bdf2")
            .replace("steps = 1\n", "steps = 1\nstatic = true\n"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("simulation.integrator") && e.contains("static") && !e.contains('\n'),
        "{e}"
    );
    let ok = parse(
        &base
            .replace("INTEGRATOR", "implicit_euler")
            .replace("steps = 1\n", "steps = 1\nstatic = true\n"),
    );
    assert!(ok.is_ok(), "{:?}", ok.err());
}
