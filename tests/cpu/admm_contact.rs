//! ADMM-PD obstacle contact (`jello::solver::admm::contact`): no vertex ends a step inside
//! (or within d̂ of) a half-space, a sphere or a box over a short drop, with either contact
//! solve, while the factor is made once although the contact set changes (digest T7); a
//! ball resting on a plane (digest T13): Uzawa and PGS reach the same constrained solution,
//! and Newton's barrier solution approaches it as d̂ shrinks; Coulomb friction on an incline
//! (sticks for μ > tan θ, slides with a = g(sin θ − μ cos θ) below); one constrained global
//! step on its own meets the QP's KKT conditions and releases rows (λ ≥ 0); bad contact keys
//! are one-line errors naming the key.

use crate::common;

use jello::material::{Material, MaterialModel};
use jello::mesh::{ball, box_grid, TetMesh};
use jello::problem::ElasticTerms;
use jello::problem::{Model, Obstacle, State, StepProblem};
use jello::scene::Scene;
use jello::solver::admm::contact::kkt_gradient;
use jello::solver::admm::{AdmmParams, AdmmSolver, ContactParams, ContactVariant};
use jello::solver::{NewtonParams, NewtonSolver, StepReport, StepSolver, StopRule};
use nalgebra::Vector3;
use std::time::Instant;

const VARIANTS: [ContactVariant; 2] = [ContactVariant::Uzawa, ContactVariant::Pgs];

fn neo(e: f64) -> Material {
    Material::from_young_poisson(MaterialModel::NeoHookean, e, 0.3).unwrap()
}

fn params(variant: ContactVariant, eps: f64, friction: f64) -> AdmmParams {
    AdmmParams {
        stop: StopRule::Cn { eps },
        contact: ContactParams {
            variant,
            friction,
            ..ContactParams::default()
        },
        ..AdmmParams::default()
    }
}

/// One implicit-Euler step with `solver` from `state`.
fn step(solver: &mut dyn StepSolver, m: &Model, state: &State, h: f64) -> (StepReport, State) {
    let problem = StepProblem::new(m, state, h);
    let mut x = Vec::new();
    let r = solver.step(&problem, m, &mut x, false).unwrap();
    let v = x.iter().zip(&state.x).map(|(a, b)| (a - b) / h).collect();
    let next = State::new(x, v, state.t + h);
    (r, next)
}

/// Smallest distance of any vertex of `x` to any obstacle of `m`, m.
fn min_distance(m: &Model, x: &[f64]) -> f64 {
    x.chunks(3)
        .flat_map(|p| {
            let p = Vector3::new(p[0], p[1], p[2]);
            m.obstacles.iter().map(move |o| o.distance(&p).d)
        })
        .fold(f64::INFINITY, f64::min)
}

/// A 0.1 m cube of 3×3×3 cells 3 cm above the top of `obstacles` (at y = 0), falling at
/// 1.5 m/s (and moving at `vx`, m/s).
fn falling_cube(obstacles: Vec<Obstacle>, dhat: f64, vx: f64) -> (Model, State) {
    let mesh = box_grid([-0.05, 0.03, -0.05], [0.05, 0.13, 0.05], [3, 3, 3]);
    let m = common::one_body(mesh, neo(2e4), [0.0, -9.81, 0.0], vec![], obstacles, dhat);
    let s = m.initial_state(&vec![[vx, -1.5, 0.0]; m.num_vertices()]);
    (m, s)
}

/// Over 12 steps of h = 10 ms a soft cube hits a ground, a sphere and a box (each with its
/// top at y = 0; the box's edges under the cube), and a corner of the ground and a leaning
/// wall (vertices pressed on both), and bounces: after every step every vertex
/// is at least d̂ (less the contact tolerance) from the obstacle and (ground, sphere) the
/// state check finds no face penetrating, every step meets
/// the stop rule, the contact set changes from step to step (none, then a growing set, then
/// fewer as the cube rebounds), every global step meets its rows with λ ≥ 0 (digest T8), and
/// the global matrix was factored exactly once (digest T7).
/// Fails if a vertex is left inside (a row missed or a solve that does not meet its rows), if
/// contact refactors A, or if the step's KKT residual does not fall below ε.
#[test]
fn drop_never_ends_inside_and_never_refactors() {
    let dhat = 1e-3;
    let ground = Obstacle::half_space([0.0, 1.0, 0.0], 0.0);
    let obstacles = [
        ("ground", vec![ground.clone()], 0.0),
        (
            "sphere",
            vec![Obstacle::Sphere {
                center: [0.02, -0.5, 0.0],
                radius: 0.5,
            }],
            0.0,
        ),
        (
            "box",
            vec![Obstacle::Box {
                min: [-0.2, -0.3, -0.04],
                max: [0.03, 0.0, 0.2],
            }],
            0.0,
        ),
        // A corner: the ground and a wall leaning over it (normal (1, 0.5, 0)/|·|, not
        // orthogonal to the ground's) that the cube slides into: vertices of its lower edge
        // there have a row on each, and PGS must project onto both at once (one projection
        // after the other leaves a vertex at 0.4 d̂).
        (
            "corner",
            vec![ground, Obstacle::half_space([1.0, 0.5, 0.0], -0.07)],
            -1.0,
        ),
    ];
    for (name, obstacles, vx) in obstacles {
        for variant in VARIANTS {
            let (m, mut state) = falling_cube(obstacles.clone(), dhat, vx);
            let mut two_rows = 0;
            let mut solver = AdmmSolver::new(&m, params(variant, 1e-5, 0.0)).unwrap();
            let mut sets: Vec<Vec<u32>> = Vec::new();
            let mut iterations = Vec::new();
            for k in 0..12 {
                let (r, next) = step(&mut solver, &m, &state, 0.01);
                state = next;
                let d = min_distance(&m, &state.x);
                let tol = ContactParams::default().tolerance * dhat;
                assert!(
                    d >= dhat - tol,
                    "{name}, {variant:?}, step {k}: a vertex at {d:e} m (d̂ = {dhat:e})"
                );
                // Rows hold vertices only: the box's edge under the cube (x = 0.03, z = −0.04)
                // pokes into the bottom faces between their vertices (module docs), so the
                // triangle check applies to the ground and the sphere (whose bulge under a
                // 3.3 cm face, L²/8R = 0.3 mm, is less than d̂).
                if name != "box" {
                    let check = m.check_state(&state.x);
                    assert_eq!(check.total_penetrations(), 0, "{name} {variant:?} step {k}");
                }
                assert!(r.converged, "{name} {variant:?} step {k}: {}", r.residual);
                let c = solver.contact().unwrap();
                let mut per_vertex = std::collections::HashMap::new();
                for r in c.rows().iter().filter(|r| r.lambda > 0.0) {
                    *per_vertex.entry(r.vertex).or_insert(0) += 1;
                }
                two_rows += per_vertex.values().filter(|&&n| n > 1).count();
                // Digest T8: the last global step meets every row to the tolerance, with
                // λ ≥ 0.
                assert!(c.last().violation <= tol, "{name} {variant:?} step {k}");
                assert!(c.rows().iter().all(|r| r.lambda >= 0.0));
                let mut active: Vec<u32> = c
                    .rows()
                    .iter()
                    .filter(|r| r.lambda > 0.0)
                    .map(|r| r.vertex)
                    .collect();
                active.sort_unstable();
                active.dedup();
                sets.push(active);
                iterations.push(r.iterations);
            }
            let sizes: Vec<usize> = sets.iter().map(Vec::len).collect();
            eprintln!(
                "{name} {variant:?}: active vertices per step {sizes:?}, iterations {iterations:?}"
            );
            let changes = sets.windows(2).filter(|w| w[0] != w[1]).count();
            assert!(sizes[0] == 0 && sizes.iter().any(|&s| s > 0), "{sizes:?}");
            assert!(
                changes >= 3,
                "{name}: the contact set changed {changes} times"
            );
            // Rows are released as well as added (λ ≥ 0: the cube lifts off as it rebounds).
            assert!(sizes.windows(2).any(|w| w[1] < w[0]), "{name}: {sizes:?}");
            assert_eq!(
                two_rows > 0,
                name == "corner",
                "{name}: vertices pressed on two obstacles"
            );
            let sys = solver.system();
            assert_eq!(
                (sys.analyses(), sys.factorizations()),
                (1, 1),
                "{name} {variant:?}"
            );
        }
    }
}

fn m_dist_max(a: &[f64], b: &[f64]) -> f64 {
    a.chunks(3)
        .zip(b.chunks(3))
        .map(|(p, q)| {
            ((p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2) + (p[2] - q[2]).powi(2)).sqrt()
        })
        .fold(0.0, f64::max)
}

/// A soft ball (r = 5 cm) resting on a plane: the state a short settle leaves it in.
fn resting_ball(dhat: f64, h: f64) -> (Model, State) {
    let mesh: TetMesh = ball([0.0, 0.05 + 2.0 * dhat, 0.0], 0.05, 5);
    let m = common::one_body(
        mesh,
        neo(1e4),
        [0.0, -9.81, 0.0],
        vec![],
        vec![Obstacle::half_space([0.0, 1.0, 0.0], 0.0)],
        dhat,
    );
    let mut state = m.initial_state(&vec![[0.0; 3]; m.num_vertices()]);
    let mut newton = NewtonSolver::new(&m, NewtonParams::default()).unwrap();
    for _ in 0..3 {
        state = step(&mut newton, &m, &state, h).1;
    }
    (m, state)
}

/// Digest T13 (Fig. 10 centre) style: one step of h = 0.1 s of a soft ball resting on a
/// frictionless plane. Uzawa and PGS both converge (ε = 1e-9) to the same constrained
/// solution — within the sum of their KKT residuals' bounds 2h²‖g‖_{M⁻¹} on ‖x − x*‖_M —
/// and Newton's barrier solution (d̂ = 1e-3, 1e-4 m; ε = 1e-10) lies within
/// 1.5 d̂ of it, the bound the constraint offset gives (ADMM rests at distance d̂, the barrier
/// somewhere in (0, d̂), and the elastic response to that shift is of the same size), and
/// closer for the smaller d̂. Prints iterations, solves and wall time of each. Fails if the
/// variants solve different problems (a sign or an activity error), or if the contact
/// offset is not the barrier's d̂.
#[test]
fn t13_resting_ball_uzawa_pgs_and_newton_agree() {
    let h = 0.1;
    let mut gaps = Vec::new();
    for dhat in [1e-3, 1e-4] {
        let (m, state) = resting_ball(dhat, h);
        let problem = StepProblem::new(&m, &state, h);
        let mut newton_x = Vec::new();
        let r = NewtonSolver::new(
            &m,
            NewtonParams {
                stop: StopRule::Cn { eps: 1e-10 },
                max_iterations: 200,
                ..NewtonParams::default()
            },
        )
        .unwrap()
        .step(&problem, &m, &mut newton_x, false)
        .unwrap();
        assert!(r.converged);
        let mut results = Vec::new();
        for variant in VARIANTS {
            let mut s = AdmmSolver::new(
                &m,
                AdmmParams {
                    max_iterations: 5000,
                    ..params(variant, 1e-9, 0.0)
                },
            )
            .unwrap();
            let mut x = Vec::new();
            let t0 = Instant::now();
            let r = s.step(&problem, &m, &mut x, false).unwrap();
            let wall = t0.elapsed().as_secs_f64() * 1e3;
            let c = s.contact().unwrap();
            let active = c.rows().iter().filter(|r| r.lambda > 0.0).count();
            let support: f64 = c.rows().iter().map(|r| r.lambda * r.normal[1]).sum();
            let weight: f64 = m.mass.iter().sum::<f64>() * 9.81;
            eprintln!(
                "d̂ = {dhat:e}, {variant:?}: {} iterations, converged {}, residual {:.2e}, {:.0} ms, \
                 {active} active rows, support {support:.4} N for weight {weight:.4} N, \
                 min distance {:.3e}",
                r.iterations,
                r.converged,
                r.residual,
                wall,
                min_distance(&m, &x)
            );
            assert!(r.converged, "{variant:?}: {}", r.residual);
            assert!(active > 0);
            // The KKT residual's bound 2h²‖g‖_{M⁻¹} on ‖x − x*‖_M (as `tests/cpu/admm.rs` T6).
            let mut g = vec![0.0; x.len()];
            let reference = m.elastic_reference(&problem.x_start);
            kkt_gradient(&problem, &m, &reference, c.forces(), &x, &mut g);
            assert_eq!(m.char_norm.residual(&g), r.residual);
            results.push((x, 2.0 * h * h * common::g_minv(&m, &g)));
        }
        let between = common::m_dist(&m, &results[0].0, &results[1].0);
        let bound = results[0].1 + results[1].1;
        let to_newton = m_dist_max(&results[0].0, &newton_x);
        eprintln!(
            "d̂ = {dhat:e}: ‖uzawa − pgs‖_M = {between:.2e} (bound {bound:.2e}), |uzawa − newton|∞ = {to_newton:.2e} m"
        );
        assert!(between <= bound, "{between:e} > {bound:e}");
        assert!(to_newton < 1.5 * dhat, "{to_newton:e} vs d̂ {dhat:e}");
        gaps.push(to_newton);
    }
    assert!(gaps[1] < 0.5 * gaps[0], "{gaps:?}");
}

/// A 10 cm block (stiff Neo-Hookean, E = 1e6; one box cell: the block moves as a whole, and
/// a sticking block takes ADMM hundreds of iterations per step, so its size sets the test's
/// time) at rest on a plane, with gravity tilted by θ
/// (the same as a plane inclined by θ), h = 10 ms, 30 steps (0.3 s). With μ = 1.5 tan θ it
/// sticks: the centre of mass moves less than 1% of the frictionless slide. With
/// μ = 0.5 tan θ it slides with the discrete implicit-Euler motion of a = g(sin θ − μ cos θ):
/// the velocity after N steps is N h a and the displacement h² a N(N+1)/2, to 1%. Fails if
/// friction is missing, has the wrong sign, is not capped at μλ, or pushes the sliding block
/// uphill (reverses the motion).
#[test]
fn coulomb_friction_on_an_incline() {
    let theta = 0.3f64;
    let g = 9.81;
    let dhat = 1e-4;
    let h = 0.01;
    let steps = 30;
    let mesh = box_grid([-0.05, dhat, -0.05], [0.05, 0.1 + dhat, 0.05], [1, 1, 1]);
    let gravity = [g * theta.sin(), -g * theta.cos(), 0.0];
    let m = common::one_body(
        mesh,
        Material::from_young_poisson(MaterialModel::NeoHookean, 1e6, 0.3).unwrap(),
        gravity,
        vec![],
        vec![Obstacle::half_space([0.0, 1.0, 0.0], 0.0)],
        dhat,
    );
    let total: f64 = m.mass.iter().sum();
    let com_x = |x: &[f64]| -> f64 {
        x.chunks(3)
            .zip(&m.mass)
            .map(|(p, mv)| p[0] * mv)
            .sum::<f64>()
            / total
    };
    let com_vx = |v: &[f64]| -> f64 {
        v.chunks(3)
            .zip(&m.mass)
            .map(|(p, mv)| p[0] * mv)
            .sum::<f64>()
            / total
    };
    let free = h * h * g * theta.sin() * (steps * (steps + 1)) as f64 / 2.0;
    for variant in VARIANTS {
        for (factor, sticks) in [(1.5, true), (0.5, false)] {
            let mu = factor * theta.tan();
            let mut s = AdmmSolver::new(&m, params(variant, 1e-9, mu)).unwrap();
            let mut state = m.initial_state(&vec![[0.0; 3]; m.num_vertices()]);
            let x0 = com_x(&state.x);
            let mut iterations = 0;
            for k in 0..steps {
                let (r, next) = step(&mut s, &m, &state, h);
                assert!(
                    r.converged,
                    "{variant:?} μ = {mu}: step {k}: {}",
                    r.residual
                );
                iterations += r.iterations;
                state = next;
                let vx = com_vx(&state.v);
                // Kinetic friction never pushes a sliding block uphill (a sticking one may
                // rock back elastically by a little: its base is held while it shears).
                assert!(
                    sticks || vx >= 0.0,
                    "{variant:?} μ = {mu}: step {k}: slid uphill at {vx:e} m/s"
                );
            }
            let moved = com_x(&state.x) - x0;
            let vx = com_vx(&state.v);
            let a = g * (theta.sin() - mu * theta.cos());
            eprintln!(
                "{variant:?}, μ = {mu:.4}: moved {moved:.4e} m (free slide {free:.4e}), v {vx:.4e} m/s, \
                 expected {:.4e} m, {:.4e} m/s; {iterations} iterations",
                if sticks { 0.0 } else { h * h * a * (steps * (steps + 1)) as f64 / 2.0 },
                if sticks { 0.0 } else { steps as f64 * h * a }
            );
            if sticks {
                assert!(moved.abs() < 0.01 * free, "{moved:e}");
            } else {
                let want = h * h * a * (steps * (steps + 1)) as f64 / 2.0;
                assert!((moved - want).abs() < 0.01 * want, "{moved:e} vs {want:e}");
                let want_v = steps as f64 * h * a;
                assert!((vx - want_v).abs() < 0.01 * want_v, "{vx:e} vs {want_v:e}");
            }
        }
    }
}

/// The incline of [`coulomb_friction_on_an_incline`] under BDF2 (Uzawa): friction takes its
/// velocities as (y − x̂)/ĥ and its impulses as ĥ·f/m (`ContactInput`). With μ = 1.5 tan θ
/// the block sticks (moves < 1% of the frictionless slide); with μ = 0.5 tan θ it slides with
/// BDF2's discrete motion under the constant a = g(sin θ − μ cos θ): velocity N h a exactly
/// (BDF2 and its implicit-Euler first step are exact on a linear velocity) and displacement
/// ½a(Nh)² + ¾h²a(1 − 3⁻ᴺ) (the first step's ½h²a error, carried by BDF2's recurrence), to 1%.
/// (Both outcomes hold with implicit Euler's xᵗ and h in friction too: the base matters only
/// where a block comes to rest — see the contact module docs.)
#[test]
fn coulomb_friction_on_an_incline_under_bdf2() {
    use jello::problem::Integrator;
    use jello::sim::Simulation;
    let theta = 0.3f64;
    let g = 9.81;
    let dhat = 1e-4;
    let h = 0.01;
    let steps = 30;
    let mesh = box_grid([-0.05, dhat, -0.05], [0.05, 0.1 + dhat, 0.05], [1, 1, 1]);
    let gravity = [g * theta.sin(), -g * theta.cos(), 0.0];
    let m = common::one_body(
        mesh,
        Material::from_young_poisson(MaterialModel::NeoHookean, 1e6, 0.3).unwrap(),
        gravity,
        vec![],
        vec![Obstacle::half_space([0.0, 1.0, 0.0], 0.0)],
        dhat,
    )
    .with_integrator(Integrator::Bdf2);
    let total: f64 = m.mass.iter().sum();
    let com = |a: &[f64]| -> f64 {
        a.chunks(3)
            .zip(&m.mass)
            .map(|(p, mv)| p[0] * mv)
            .sum::<f64>()
            / total
    };
    let t = steps as f64 * h;
    let free = 0.5 * g * theta.sin() * t * t;
    for (factor, sticks) in [(1.5, true), (0.5, false)] {
        let mu = factor * theta.tan();
        let solver = AdmmSolver::new(&m, params(ContactVariant::Uzawa, 1e-9, mu)).unwrap();
        let state = m.initial_state(&vec![[0.0; 3]; m.num_vertices()]);
        let x0 = com(&state.x);
        let mut sim = Simulation::new(m.clone(), state, h, Box::new(solver)).unwrap();
        for k in 0..steps {
            let r = sim.step(false).unwrap();
            assert!(r.converged, "μ = {mu}: step {k}: {}", r.residual);
            assert!(
                sticks || com(&sim.state.v) >= 0.0,
                "μ = {mu}: step {k}: slid uphill"
            );
        }
        assert!(sim.state.history.is_some(), "the run was not BDF2");
        let (moved, vx) = (com(&sim.state.x) - x0, com(&sim.state.v));
        let a = g * (theta.sin() - mu * theta.cos());
        let want = 0.5 * a * t * t + 0.75 * h * h * a * (1.0 - 3f64.powi(-steps));
        eprintln!(
            "BDF2, μ = {mu:.4}: moved {moved:.4e} m (free slide {free:.4e}), v {vx:.4e} m/s, \
             expected {:.4e} m, {:.4e} m/s",
            if sticks { 0.0 } else { want },
            if sticks { 0.0 } else { t * a }
        );
        if sticks {
            assert!(moved.abs() < 0.01 * free, "{moved:e}");
        } else {
            assert!((moved - want).abs() < 0.01 * want, "{moved:e} vs {want:e}");
            assert!((vx - t * a).abs() < 0.01 * t * a, "{vx:e} vs {:e}", t * a);
        }
    }
}

fn write_scene(test: &str, extra: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("jello_admm_contact_{test}_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = format!(
        r#"
[simulation]
h = 0.01
steps = 3
gravity = [0.0, -9.81, 0.0]

[solver]
name = "admm"
{extra}

[[objects]]
name = "cube"
mesh = {{ generator = "box", min = [0.0, 0.01, 0.0], max = [0.1, 0.11, 0.1], cells = [2, 2, 2] }}
material = {{ model = "neo_hookean", youngs_modulus = 1e5, poisson_ratio = 0.3, density = 1000.0 }}
velocity = [0.0, -1.0, 0.0]

[[obstacles]]
type = "ground"
height = 0.0
"#
    );
    let path = dir.join("contact.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The contact keys select the solve and reach the solver (a run with them converges); bad
/// ones are one line naming the key, no panic. Fails if a key is ignored or a bad value
/// accepted.
#[test]
fn contact_keys_select_and_bad_ones_are_one_line_errors() {
    let path = write_scene(
        "keys",
        "contact = \"pgs\"\ncontact_iterations = 50\ncontact_tolerance = 1e-5\nsor = 1.2\nfriction = 0.4",
    );
    let built = Scene::load(&path).unwrap().build().unwrap();
    let c = built.config.admm_contact;
    assert_eq!(
        c,
        ContactParams {
            variant: ContactVariant::Pgs,
            iterations: 50,
            tolerance: 1e-5,
            sor: 1.2,
            friction: 0.4,
        }
    );
    let opts = jello::runner::RunOptions {
        out_dir: None,
        backend: jello::gpu::Backend::Cpu,
        ..Default::default()
    };
    let (_, stats) = jello::runner::run(&path, built, &opts, |_, r| assert!(r.converged)).unwrap();
    assert_eq!(stats.converged_steps, 3);
    let cases = [
        ("contact = \"nope\"", "solver.contact"),
        ("contact_iterations = 0", "solver.contact_iterations"),
        ("contact_tolerance = 0.0", "solver.contact_tolerance"),
        ("contact_tolerance = nan", "solver.contact_tolerance"),
        ("sor = 2.0", "solver.sor"),
        ("sor = 0.0", "solver.sor"),
        ("friction = -0.1", "solver.friction"),
        ("friction = inf", "solver.friction"),
    ];
    for (extra, key) in cases {
        let path = write_scene("bad", extra);
        let msg = Scene::load(&path)
            .and_then(|s| s.build())
            .err()
            .unwrap_or_else(|| panic!("{extra} accepted"))
            .to_string();
        eprintln!("{extra}: {msg}");
        assert!(msg.contains(key) && !msg.contains('\n'), "{extra}: {msg}");
    }
    // The library checks the same values (programmatic use names the same key).
    let (m, _) = falling_cube(vec![Obstacle::half_space([0.0, 1.0, 0.0], 0.0)], 1e-3, 0.0);
    let bad = AdmmParams {
        contact: ContactParams {
            friction: -1.0,
            ..ContactParams::default()
        },
        ..AdmmParams::default()
    };
    let msg = AdmmSolver::new(&m, bad).err().unwrap().to_string();
    assert!(
        msg.contains("solver.friction") && !msg.contains('\n'),
        "{msg}"
    );
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

/// One constrained global step on its own (the host routine a device loop calls): a cube
/// resting at d̂ on a ground, pushed down by b₁ (its weight, scaled up) and then pulled up by
/// b₂ with the solver's state carried over (the warm λ of b₁'s rows). For b₁ the result
/// satisfies the KKT conditions of the QP — A y − b₁ = Cᵀλ on every free vertex (A applied
/// by `GlobalSystem::apply`), λ ≥ 0, every row met, λ > 0 only on rows that are met with
/// equality; for b₂ every row is released and y is the factor's unconstrained A⁻¹b₂. With
/// either solve. Fails on a sign error in Uzawa or PGS, on rows that are never released
/// (adhesion), or on a multiplier that is not the force the constraint exerts.
#[test]
fn one_global_step_meets_the_kkt_conditions_and_releases_rows() {
    use jello::solver::admm::contact::ContactInput;
    use jello::solver::admm::ContactSolver;
    use jello::solver::pd::{GlobalOptions, GlobalSystem};
    let dhat = 1e-3;
    let mesh = box_grid([0.0, dhat, 0.0], [0.1, 0.1 + dhat, 0.1], [3, 3, 3]);
    let m = common::one_body(
        mesh,
        neo(1e4),
        [0.0, -9.81, 0.0],
        vec![],
        vec![Obstacle::half_space([0.0, 1.0, 0.0], 0.0)],
        dhat,
    );
    let nv = m.num_vertices();
    let pinned = vec![false; nv];
    let h = 0.01;
    let x: Vec<f64> = m.mesh.positions.iter().flatten().copied().collect();
    for variant in VARIANTS {
        let mut system = GlobalSystem::new(&m, GlobalOptions::default()).unwrap();
        system.prepare(&m, &pinned, 1.0 / (h * h)).unwrap();
        let input = ContactInput {
            model: &m,
            pinned: &pinned,
            mass_weight: 1.0 / (h * h),
            x_prev: &x,
            h,
        };
        let mut c = ContactSolver::new(ContactParams {
            variant,
            iterations: 5000,
            tolerance: 1e-9,
            ..ContactParams::default()
        })
        .unwrap();
        c.begin_step(nv);
        // b₁ = A x − 50·m g: A y = b₁ would sink the cube by ~50 h² g.
        let mut ax = vec![0.0; 3 * nv];
        system.apply(&m, &x, &mut ax).unwrap();
        let b1: Vec<f64> = (0..3 * nv)
            .map(|k| {
                ax[k]
                    - if k % 3 == 1 {
                        50.0 * 9.81 * m.mass[k / 3]
                    } else {
                        0.0
                    }
            })
            .collect();
        let mut y = vec![0.0; 3 * nv];
        c.global_step(&mut system, &input, &b1, &x, &mut y).unwrap();
        let mut ay = vec![0.0; 3 * nv];
        system.apply(&m, &y, &mut ay).unwrap();
        let scale = b1.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        let kkt = (0..3 * nv)
            .map(|k| (ay[k] - b1[k] - c.forces()[k]).abs())
            .fold(0.0, f64::max);
        let active = c.rows().iter().filter(|r| r.lambda > 0.0).count();
        eprintln!(
            "{variant:?}: b₁: {} rows, {active} active, KKT residual {:.2e} of {scale:.2e} N, {:?}",
            c.rows().len(),
            kkt,
            c.last()
        );
        assert!(kkt < 1e-6 * scale, "{variant:?}: {kkt:e}");
        assert!(active > 0);
        for r in c.rows() {
            let gap = r.normal.dot(&Vector3::new(
                y[3 * r.vertex as usize],
                y[3 * r.vertex as usize + 1],
                y[3 * r.vertex as usize + 2],
            )) - r.target;
            assert!(r.lambda >= 0.0 && gap >= -1e-9 * dhat, "{r:?}: gap {gap:e}");
            assert!(r.lambda == 0.0 || gap <= 1e-6 * dhat, "{r:?}: gap {gap:e}");
        }
        // b₂ = A x + 50·m g (up), from the same solver: every row released.
        let b2: Vec<f64> = (0..3 * nv)
            .map(|k| {
                ax[k]
                    + if k % 3 == 1 {
                        50.0 * 9.81 * m.mass[k / 3]
                    } else {
                        0.0
                    }
            })
            .collect();
        let mut free = b2.clone();
        system.solve(&mut free).unwrap();
        let y_prev = y.clone();
        c.global_step(&mut system, &input, &b2, &y_prev, &mut y)
            .unwrap();
        let worst = y
            .iter()
            .zip(&free)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        eprintln!(
            "{variant:?}: b₂: {:?}, |y − A⁻¹b₂|∞ = {worst:.2e} m",
            c.last()
        );
        assert!(c.rows().iter().all(|r| r.lambda == 0.0));
        assert!(worst < 1e-8 * dhat, "{variant:?}: {worst:e}");
        assert_eq!(system.factorizations(), 1);
    }
}
