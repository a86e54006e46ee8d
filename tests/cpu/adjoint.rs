//! Adjoint gradients through implicit steps (`jello::adjoint`) against central finite
//! differences of the forward map, per parameter class, on an elastic scene and a pinned scene;
//! exact zeros where the loss cannot depend on a parameter; the identity at step 0; checkpointed
//! backward passes equal to the stored one; one-line errors for bad requests.
//!
//! The loss is linear in the states, L = Σ_s cₛ·xˢ + dₛ·vˢ (random fixed cₛ, dₛ), so its seeds
//! are cₛ, dₛ and all its curvature comes from the simulation. Each class is checked along a
//! random direction δ: (L(θ + εδ) − L(θ − εδ))/2ε against ⟨dL/dθ, δ⟩.

use jello::adjoint::{stress_parameter_derivatives, young_poisson_jacobian};
use jello::adjoint::{Checkpointing, Gradients, Param, RecordOptions, Seeds, Tape, Unconverged};
use jello::material::{pk1, Material, MaterialModel};
use jello::problem::{ExternalForce, Model, Phase, Pin, Script, State};
use jello::scene::Scene;
use nalgebra::Matrix3;
use std::path::Path;

/// Forward tolerance of every run here (CN residual). What central differences measure is the
/// derivative of the computed map, Newton's last iterate as a function of the inputs: it differs
/// from the exact solution's derivative by about the error of the iterate before it (quadratic
/// convergence), ~3e-7 relative at 1e-12 on the pinned scene against 2e-9 at 1e-13.
const TOL: f64 = 1e-13;
/// Acceptance: relative error of the directional derivative.
const REL: f64 = 1e-5;
const H: f64 = 0.01;
const STEPS: usize = 3;

/// A deterministic stream of numbers in [−1, 1).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }
    fn vec(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| self.next()).collect()
    }
}

/// A scene: its model with per-tet (E, ν), the initial state.
#[derive(Clone)]
struct Case {
    model: Model,
    youngs: Vec<f64>,
    poisson: Vec<f64>,
    state: State,
    name: &'static str,
    /// Steps recorded.
    steps: usize,
    /// Acceptance of the initial-position check and of the others: [`REL`], or a measured
    /// bound where the adjoint holds lagged friction fixed and the forward's lag moves.
    rel: [f64; 2],
}

fn build(text: &str, name: &'static str) -> Case {
    let built = Scene::parse(Path::new("adjoint.toml"), text)
        .unwrap()
        .build()
        .unwrap();
    let mut model = built.model;
    let nt = model.mesh.num_tets();
    // Heterogeneous materials: E and ν vary per tet.
    let youngs: Vec<f64> = (0..nt)
        .map(|t| 2e5 * (1.0 + 0.4 * (t as f64 * 0.7).sin()))
        .collect();
    let poisson: Vec<f64> = (0..nt)
        .map(|t| 0.3 + 0.1 * (t as f64 * 1.3).cos())
        .collect();
    set_materials(&mut model, &youngs, &poisson);
    let state = model.initial_state(&built.velocity);
    Case {
        model,
        youngs,
        poisson,
        state,
        name,
        steps: STEPS,
        rel: [REL; 2],
    }
}

fn set_materials(model: &mut Model, youngs: &[f64], poisson: &[f64]) {
    for t in 0..youngs.len() {
        model.materials[t] =
            Material::from_young_poisson(MaterialModel::StableNeoHookean, youngs[t], poisson[t])
                .unwrap();
    }
}

/// A free 0.2 × 0.1 × 0.1 m block (6 × 3 × 3 cells, 324 tets) tumbling and stretching: its
/// initial velocity is a spin plus a shear, so every element deforms over the steps.
fn elastic() -> Case {
    let text = r#"[simulation]
h = 0.01
steps = 3
gravity = [0.0, -9.81, 0.0]

[[objects]]
name = "block"
mesh = { generator = "box", min = [0.0, 0.0, 0.0], max = [0.2, 0.1, 0.1], cells = [6, 3, 3] }
material = { model = "stable_neo_hookean", youngs_modulus = 2e5, poisson_ratio = 0.3, density = 1000.0 }
"#;
    let mut c = build(text, "elastic");
    let n = c.model.num_vertices();
    for v in 0..n {
        let p = &c.state.x[3 * v..3 * v + 3];
        let (x, y, z) = (p[0] - 0.1, p[1] - 0.05, p[2] - 0.05);
        c.state.v[3 * v] = -3.0 * y + 4.0 * z;
        c.state.v[3 * v + 1] = 3.0 * x + 2.0 * x * x * 20.0;
        c.state.v[3 * v + 2] = -4.0 * x + 5.0 * y;
    }
    c
}

/// A 0.3 × 0.05 × 0.05 m cantilever (10 × 2 × 2 cells, 240 tets) clamped at x = 0, released
/// from rest under gravity, with a windowed external force on its tip during the first step.
fn pinned() -> Case {
    let text = r#"[simulation]
h = 0.01
steps = 3
gravity = [0.0, -9.81, 0.0]

[[objects]]
name = "bar"
mesh = { generator = "box", min = [0.0, -0.025, -0.025], max = [0.3, 0.025, 0.025], cells = [10, 2, 2] }
material = { model = "stable_neo_hookean", youngs_modulus = 2e5, poisson_ratio = 0.3, density = 1000.0 }

[[pins]]
region = { box = { min = [-0.001, -1.0, -1.0], max = [0.001, 1.0, 1.0] } }
script = { type = "fixed" }
"#;
    let mut c = build(text, "pinned");
    let tip: Vec<u32> = (0..c.model.num_vertices() as u32)
        .filter(|&v| c.state.x[3 * v as usize] > 0.299)
        .collect();
    c.model = c
        .model
        .clone()
        .with_forces(vec![ExternalForce {
            vertices: tip,
            force: [0.0, 0.5, 0.3],
            start: 0.0,
            end: 0.5 * H,
        }])
        .unwrap();
    c
}

fn options() -> RecordOptions {
    RecordOptions {
        tolerance: TOL,
        ..RecordOptions::default()
    }
}

/// The loss's seeds: random cₛ, dₛ at steps 1 and `steps`.
fn seeds(n: usize, steps: usize, rng: &mut Rng) -> Seeds {
    let mut s = Seeds::default();
    for step in [1, steps] {
        s.x.insert(step, rng.vec(n));
        s.v.insert(step, rng.vec(n).iter().map(|v| 0.01 * v).collect());
    }
    s
}

/// L of a forward run of `model` from `state` up to its last seeded step (every step must
/// converge).
fn loss(model: &Model, state: &State, seeds: &Seeds) -> f64 {
    let mut states = vec![state.clone()];
    let mut tape = Tape::new(model.clone(), state.clone(), H, options()).unwrap();
    let last = seeds
        .x
        .keys()
        .chain(seeds.v.keys())
        .max()
        .copied()
        .unwrap_or(0);
    for _ in 0..last {
        let r = tape.step(None).unwrap();
        assert!(r.converged, "{r:?}");
        states.push(tape.state().clone());
    }
    seeds
        .x
        .iter()
        .map(|(&s, c)| dot(c, &states[s].x))
        .sum::<f64>()
        + seeds
            .v
            .iter()
            .map(|(&s, d)| dot(d, &states[s].v))
            .sum::<f64>()
}

/// Relative error of a central difference of `f` at ε against `analytic`, asserted below
/// `bound`.
fn check(
    what: &str,
    case: &str,
    analytic: f64,
    f: impl Fn(f64) -> f64,
    eps: f64,
    bound: f64,
) -> f64 {
    let fd = (f(eps) - f(-eps)) / (2.0 * eps);
    let rel = (fd - analytic).abs() / analytic.abs().max(1e-300);
    println!("{case} {what}: adjoint {analytic:.10e} fd {fd:.10e} rel {rel:.2e}");
    assert!(
        rel < bound,
        "{case} {what}: adjoint {analytic:e}, fd {fd:e}, rel {rel:e}"
    );
    rel
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(a, b)| a * b).sum()
}

/// Every class against finite differences on `case`.
fn finite_differences(case: Case) {
    let n = 3 * case.model.num_vertices();
    let nt = case.model.mesh.num_tets();
    let mut rng = Rng(7);
    let seeds = seeds(n, case.steps, &mut rng);
    let mut tape = Tape::record(
        case.model.clone(),
        case.state.clone(),
        H,
        case.steps,
        options(),
    )
    .unwrap();
    let mut wrt = vec![
        Param::InitialPositions,
        Param::InitialVelocities,
        Param::YoungsModulus,
        Param::PoissonRatio,
        Param::Mu,
        Param::Lambda,
        Param::Density,
        Param::Forces,
    ];
    let has_pins = !case.model.pins.is_empty();
    if has_pins {
        wrt.push(Param::PinTargets);
    }
    // κ is an input only when fixed; with friction its lagged normal forces scale with κ too,
    // which the adjoint holds fixed.
    let kappa = case
        .model
        .contact
        .as_ref()
        .filter(|c| c.friction.is_none())
        .and_then(|c| c.kappa);
    if kappa.is_some() {
        wrt.push(Param::ContactStiffness);
    }
    let (g, stats) = tape.backward(&seeds, &wrt, Unconverged::Refuse).unwrap();
    println!(
        "{}: forward {:.1} ms, backward {:.1} ms (ratio {:.2})",
        case.name,
        stats.forward_ms,
        stats.backward_ms,
        stats.backward_ms / stats.forward_ms
    );
    let name = case.name;
    let base = &case;

    // Initial positions: free vertices only move a little (ε·δ with |δ| ≤ 1 mm).
    let d = rng.vec(n);
    check(
        "initial_positions",
        name,
        dot(g.initial_positions.as_ref().unwrap(), &d),
        |e| {
            let mut s = base.state.clone();
            s.x.iter_mut().zip(&d).for_each(|(x, d)| *x += e * d);
            loss(&base.model, &s, &seeds)
        },
        1e-5,
        case.rel[0],
    );
    let d = rng.vec(n);
    check(
        "initial_velocities",
        name,
        dot(g.initial_velocities.as_ref().unwrap(), &d),
        |e| {
            let mut s = base.state.clone();
            s.v.iter_mut().zip(&d).for_each(|(v, d)| *v += e * d);
            loss(&base.model, &s, &seeds)
        },
        1e-4,
        case.rel[1],
    );
    // Material: δ relative to each tet's value.
    let d: Vec<f64> = rng
        .vec(nt)
        .iter()
        .zip(&base.youngs)
        .map(|(r, e)| r * e)
        .collect();
    check(
        "youngs_modulus",
        name,
        dot(g.youngs_modulus.as_ref().unwrap(), &d),
        |e| {
            let mut m = base.model.clone();
            let y: Vec<f64> = base.youngs.iter().zip(&d).map(|(y, d)| y + e * d).collect();
            set_materials(&mut m, &y, &base.poisson);
            loss(&m, &base.state, &seeds)
        },
        1e-4,
        case.rel[1],
    );
    let d = rng.vec(nt);
    check(
        "poisson_ratio",
        name,
        dot(g.poisson_ratio.as_ref().unwrap(), &d),
        |e| {
            let mut m = base.model.clone();
            let p: Vec<f64> = base
                .poisson
                .iter()
                .zip(&d)
                .map(|(p, d)| p + e * d)
                .collect();
            set_materials(&mut m, &base.youngs, &p);
            loss(&m, &base.state, &seeds)
        },
        1e-5,
        case.rel[1],
    );
    let dmu: Vec<f64> = (0..nt)
        .map(|t| rng.next() * base.model.materials[t].mu)
        .collect();
    let dla: Vec<f64> = (0..nt)
        .map(|t| rng.next() * base.model.materials[t].lambda)
        .collect();
    check(
        "mu_lambda",
        name,
        dot(g.mu.as_ref().unwrap(), &dmu) + dot(g.lambda.as_ref().unwrap(), &dla),
        |e| {
            let mut m = base.model.clone();
            for t in 0..nt {
                m.materials[t].mu += e * dmu[t];
                m.materials[t].lambda += e * dla[t];
            }
            loss(&m, &base.state, &seeds)
        },
        1e-4,
        case.rel[1],
    );
    // Density: the model rebuilt from scratch (masses recomputed by Model::new).
    let d: Vec<f64> = rng
        .vec(nt)
        .iter()
        .map(|r| r * base.model.density[0])
        .collect();
    check(
        "density",
        name,
        dot(g.density.as_ref().unwrap(), &d),
        |e| {
            let m = &base.model;
            let rho: Vec<f64> = m.density.iter().zip(&d).map(|(r, d)| r + e * d).collect();
            let rebuilt = Model::new(
                m.mesh.clone(),
                m.bodies.clone(),
                m.materials.clone(),
                rho,
                m.gravity,
                m.pins.clone(),
                m.obstacles.clone(),
                m.barrier,
            )
            .unwrap()
            .with_forces(m.forces.clone())
            .unwrap()
            .with_integrator(m.integrator);
            // The collision mesh does not depend on masses (κ is fixed in these scenes).
            let mut rebuilt = rebuilt;
            rebuilt.contact = m.contact.clone();
            loss(&rebuilt, &base.state, &seeds)
        },
        1e-4,
        case.rel[1],
    );
    // Forces per step: one single-vertex ExternalForce per (step, vertex), its window holding
    // only that step's start (independent of the tape's own per-step force path).
    let steps = base.steps;
    let d: Vec<Vec<f64>> = (0..steps).map(|_| rng.vec(n)).collect();
    let fg = g.forces.as_ref().unwrap();
    check(
        "forces",
        name,
        (0..steps).map(|s| dot(&fg[s], &d[s])).sum(),
        |e| {
            let mut forces = base.model.forces.clone();
            for (s, ds) in d.iter().enumerate() {
                let t = s as f64 * H;
                for v in 0..n / 3 {
                    forces.push(ExternalForce {
                        vertices: vec![v as u32],
                        force: [0, 1, 2].map(|k| e * ds[3 * v + k]),
                        start: t - 0.5 * H,
                        end: t + 0.5 * H,
                    });
                }
            }
            let m = base.model.clone().with_forces(forces).unwrap();
            loss(&m, &base.state, &seeds)
        },
        1e-3,
        case.rel[1],
    );
    if has_pins {
        pin_targets_fd(base, &g, &seeds, &mut rng);
    }
    if let Some(k) = kappa {
        // The barrier acts in the recorded steps (a zero would pass any relative check).
        assert!(g.contact_stiffness.unwrap().abs() > 0.0);
        check(
            "contact_stiffness",
            name,
            g.contact_stiffness.unwrap() * k,
            |e| {
                let mut m = base.model.clone();
                let mut c = (**m.contact.as_ref().unwrap()).clone();
                c.kappa = Some(k * (1.0 + e));
                m.contact = Some(std::sync::Arc::new(c));
                loss(&m, &base.state, &seeds)
            },
            1e-4,
            case.rel[1],
        );
    }
}

/// Pin targets: each pinned vertex becomes its own pin whose keyframed script adds ε·δₛ at the
/// end of step s (phase s moves it from the offset at t_{s−1} to the one at tₛ).
fn pin_targets_fd(base: &Case, g: &Gradients, seeds: &Seeds, rng: &mut Rng) {
    let vertices: Vec<(u32, [f64; 3])> = base
        .model
        .pins
        .iter()
        .flat_map(|p| p.vertices.iter().copied().zip(p.start.iter().copied()))
        .collect();
    let k = vertices.len();
    let steps = base.steps;
    let d: Vec<Vec<f64>> = (0..=steps)
        .map(|s| {
            if s == 0 {
                vec![0.0; 3 * k]
            } else {
                rng.vec(3 * k)
            }
        })
        .collect();
    let pg = g.pin_targets.as_ref().unwrap();
    assert!(pg[0].iter().all(|&v| v == 0.0));
    let analytic: f64 = (0..=steps).map(|s| dot(&pg[s], &d[s])).sum();
    check(
        "pin_targets",
        base.name,
        analytic,
        |e| {
            let mut times = vec![0.0];
            for s in 0..steps {
                times.push(times[s] + H);
            }
            let pins: Vec<Pin> = vertices
                .iter()
                .enumerate()
                .map(|(i, &(v, p0))| Pin {
                    vertices: vec![v],
                    start: vec![p0],
                    script: Script::Keyframes {
                        phases: (1..=steps)
                            .map(|s| Phase {
                                start: times[s - 1],
                                end: times[s],
                                center: [0.0; 3],
                                axis: [1.0, 0.0, 0.0],
                                angle: 0.0,
                                translation: [0, 1, 2]
                                    .map(|c| e * (d[s][3 * i + c] - d[s - 1][3 * i + c])),
                            })
                            .collect(),
                    },
                })
                .collect();
            let mut m = base.model.clone();
            m.pins = pins;
            loss(&m, &base.state, seeds)
        },
        1e-6,
        base.rel[1],
    );
}

#[test]
fn elastic_scene_matches_finite_differences() {
    finite_differences(elastic());
}

#[test]
fn pinned_scene_matches_finite_differences() {
    finite_differences(pinned());
}

/// The elastic block falling onto a half-space ground at y = 0 (d̂ = 5 mm): its bottom starts
/// 2 mm above it moving down at 0.3 m/s, so the barrier acts on the bottom vertices every step.
fn obstacle() -> Case {
    let mut c = elastic();
    c.name = "obstacle";
    c.model.obstacles = vec![jello::problem::Obstacle::half_space([0.0, 1.0, 0.0], 0.0)];
    c.model.barrier.dhat = 5e-3;
    for v in 0..c.model.num_vertices() {
        c.state.x[3 * v + 1] += 2e-3;
        c.state.v[3 * v] *= 0.1;
        c.state.v[3 * v + 1] = -0.3 + 0.1 * c.state.v[3 * v + 1];
        c.state.v[3 * v + 2] *= 0.1;
    }
    c
}

#[test]
fn obstacle_scene_matches_finite_differences() {
    finite_differences(obstacle());
}

/// Two blocks in IPC contact: a 0.2 × 0.05 × 0.1 m base clamped at its bottom and a
/// 0.1 × 0.05 × 0.05 m block 2 mm above it (d̂ = 4 mm, so pairs are active from the start),
/// thrown down and sideways with a spin: it lands, squashes the barrier and slides. A fixed
/// κ, so κ is an input too.
fn ipc() -> Case {
    let text = r#"[simulation]
h = 0.01
steps = 3
gravity = [0.0, -9.81, 0.0]

[[objects]]
name = "base"
mesh = { generator = "box", min = [0.0, -0.05, 0.0], max = [0.2, 0.0, 0.1], cells = [4, 1, 2] }
material = { model = "stable_neo_hookean", youngs_modulus = 2e5, poisson_ratio = 0.3, density = 1000.0 }

[[objects]]
name = "top"
mesh = { generator = "box", min = [0.04, 0.002, 0.025], max = [0.14, 0.052, 0.075], cells = [2, 1, 1] }
material = { model = "stable_neo_hookean", youngs_modulus = 2e5, poisson_ratio = 0.3, density = 1000.0 }

[[pins]]
region = { box = { min = [-1.0, -0.051, -1.0], max = [1.0, -0.049, 1.0] } }
script = { type = "fixed" }

[contact]
ipc = true
dhat = 0.004
ipc_kappa = 1e6
"#;
    let mut c = build(text, "ipc");
    for v in 0..c.model.num_vertices() {
        let p = &c.state.x[3 * v..3 * v + 3];
        if p[1] > 0.001 {
            let (x, z) = (p[0] - 0.09, p[2] - 0.05);
            c.state.v[3 * v] = 0.05 - 0.5 * z;
            c.state.v[3 * v + 1] = -0.15;
            c.state.v[3 * v + 2] = 0.5 * x;
        }
    }
    c
}

#[test]
fn ipc_scene_matches_finite_differences() {
    finite_differences(ipc());
}

/// [`ipc`] with friction μ = 0.5 (ε_v = 1e-3 m/s, one lagging pass): the block lands sliding
/// at 5 cm/s and spinning, so its pairs are in the Coulomb and the sticking regimes.
fn ipc_friction(steps: usize) -> Case {
    let mut c = ipc();
    c.name = "ipc-friction";
    c.steps = steps;
    use jello::contact::friction::FrictionParams;
    let bodies = c.model.contact.as_ref().unwrap().mesh.bodies.len();
    c.model = c
        .model
        .clone()
        .with_friction(FrictionParams::uniform(
            bodies,
            0.5,
            FrictionParams::DEFAULT_EPS_V,
            1,
        ))
        .unwrap();
    c
}

/// What holding the lagged friction fixed costs where the forward's lag moves: measured
/// 1.4e-2 relative on x⁰ over one step, ≤ 2.6e-2 on every class over three.
const LAG_BOUND: f64 = 5e-2;

/// One step: its friction is lagged at x⁰, which only x⁰ itself moves, so every other class is
/// exact; x⁰'s gradient leaves out the lag's own derivative (normal forces and tangent frames
/// as functions of x⁰), within [`LAG_BOUND`].
#[test]
fn ipc_friction_step_matches_finite_differences() {
    let mut c = ipc_friction(1);
    c.rel = [LAG_BOUND, REL];
    finite_differences(c);
}

/// Three steps: each step's lag moves with the states before it, which every class changes;
/// the adjoint's error is that of holding the lag fixed, within [`LAG_BOUND`].
#[test]
fn ipc_friction_run_error_is_the_lag_bound() {
    let mut c = ipc_friction(3);
    c.rel = [LAG_BOUND, LAG_BOUND];
    finite_differences(c);
}

/// The [`elastic`] block turned by 0.5 rad about a skew axis (no edge parallel to a box
/// edge), thrown down at 0.2 m/s onto `obstacle` placed under its lowest vertex, 2 mm below it.
fn bounded(name: &'static str, obstacle: impl Fn([f64; 3]) -> jello::problem::Obstacle) -> Case {
    let mut c = elastic();
    c.name = name;
    let r = nalgebra::Rotation3::from_axis_angle(
        &nalgebra::Unit::new_normalize(nalgebra::Vector3::new(0.3, 0.2, 1.0)),
        0.5,
    );
    let n = c.model.num_vertices();
    let centre = nalgebra::Vector3::new(0.1, 0.05, 0.05);
    for v in 0..n {
        let p = nalgebra::Vector3::from_column_slice(&c.state.x[3 * v..3 * v + 3]);
        let q = r * (p - centre) + centre;
        let w = r * nalgebra::Vector3::from_column_slice(&c.state.v[3 * v..3 * v + 3]);
        for k in 0..3 {
            c.state.x[3 * v + k] = q[k];
            c.state.v[3 * v + k] = 0.1 * w[k];
        }
        c.state.v[3 * v + 1] -= 0.2;
    }
    let low = (0..n)
        .min_by(|&a, &b| c.state.x[3 * a + 1].total_cmp(&c.state.x[3 * b + 1]))
        .unwrap();
    let p = [0, 1, 2].map(|k| c.state.x[3 * low + k]);
    c.model.obstacles = vec![obstacle([p[0], p[1] - 2e-3, p[2]])];
    c.model.barrier.dhat = 5e-3;
    c
}

/// A sphere of radius 5 cm whose top is 2 mm under the block's lowest vertex: the vertex
/// barrier and the triangle–sphere pairs.
#[test]
fn sphere_scene_matches_finite_differences() {
    finite_differences(bounded("sphere", |top| jello::problem::Obstacle::Sphere {
        center: [top[0], top[1] - 0.05, top[2]],
        radius: 0.05,
    }));
}

/// A box whose top edge along z runs 3 mm beside and 2 mm under the block's lowest vertex, its
/// corner 5 mm off: point–box, corner–triangle and (mollified) edge–edge pairs.
#[test]
fn box_scene_matches_finite_differences() {
    finite_differences(bounded("box", |top| jello::problem::Obstacle::Box {
        min: [top[0] + 3e-3, top[1] - 0.1, top[2] - 5e-3],
        max: [top[0] + 0.3, top[1], top[2] + 0.3],
    }));
}

#[test]
fn bdf2_pinned_scene_matches_finite_differences() {
    let mut c = pinned();
    c.name = "pinned-bdf2";
    c.model = c.model.with_integrator(jello::problem::Integrator::Bdf2);
    finite_differences(c);
}

#[test]
fn a_loss_at_step_0_is_the_identity_and_nothing_else() {
    let c = pinned();
    let n = 3 * c.model.num_vertices();
    let mut rng = Rng(3);
    let mut seeds = Seeds::default();
    seeds.x.insert(0, rng.vec(n));
    seeds.v.insert(0, rng.vec(n));
    let mut tape = Tape::record(c.model.clone(), c.state.clone(), H, 2, options()).unwrap();
    let (g, _) = tape
        .backward(&seeds, &without_contact(), Unconverged::Refuse)
        .unwrap();
    assert_eq!(g.initial_positions.as_ref(), seeds.x.get(&0));
    assert_eq!(g.initial_velocities.as_ref(), seeds.v.get(&0));
    let zero = |v: &Option<Vec<f64>>| v.as_ref().unwrap().iter().all(|&x| x == 0.0);
    assert!(zero(&g.mu) && zero(&g.lambda) && zero(&g.density));
    assert!(zero(&g.youngs_modulus) && zero(&g.poisson_ratio));
    assert!(g.forces.unwrap().iter().flatten().all(|&x| x == 0.0));
    assert!(g.pin_targets.unwrap().iter().flatten().all(|&x| x == 0.0));
}

/// A loss on the pinned vertices' positions alone: they are the pins' targets, so nothing but
/// those targets can change it — every other gradient is exactly zero; and forces after the last
/// seeded step are exactly zero in any loss.
#[test]
fn gradients_of_parameters_a_loss_does_not_depend_on_are_exactly_zero() {
    let c = pinned();
    let n = 3 * c.model.num_vertices();
    let mut rng = Rng(5);
    let mut on_pins = rng.vec(n);
    for (k, g) in on_pins.iter_mut().enumerate() {
        if !c.model.pinned[k / 3] {
            *g = 0.0;
        }
    }
    let mut seeds = Seeds::default();
    seeds.x.insert(2, on_pins.clone());
    let mut tape = Tape::record(c.model.clone(), c.state.clone(), H, 3, options()).unwrap();
    let (g, _) = tape
        .backward(&seeds, &without_contact(), Unconverged::Refuse)
        .unwrap();
    let zero = |v: &[f64]| v.iter().all(|&x| x == 0.0);
    assert!(zero(g.mu.as_ref().unwrap()) && zero(g.lambda.as_ref().unwrap()));
    assert!(zero(g.density.as_ref().unwrap()));
    assert!(zero(g.initial_velocities.as_ref().unwrap()));
    assert!(zero(g.initial_positions.as_ref().unwrap()));
    assert!(g.forces.as_ref().unwrap().iter().all(|f| zero(f)));
    // dL/dp at step 2 is the seed on the pinned vertices, in the pins' order.
    let pins = g.pin_targets.as_ref().unwrap();
    let expected: Vec<f64> = c.model.pins[0]
        .vertices
        .iter()
        .flat_map(|&v| (0..3).map(move |k| 3 * v as usize + k))
        .map(|i| on_pins[i])
        .collect();
    assert_eq!(pins[2], expected);
    assert!(zero(&pins[1]) && zero(&pins[3]));
    // The same on the contact scene: κ cannot change where the pins are either.
    let ci = ipc();
    let ni = 3 * ci.model.num_vertices();
    let mut on_pins = rng.vec(ni);
    for (k, g) in on_pins.iter_mut().enumerate() {
        if !ci.model.pinned[k / 3] {
            *g = 0.0;
        }
    }
    let mut s = Seeds::default();
    s.x.insert(2, on_pins);
    let mut t = Tape::record(ci.model.clone(), ci.state.clone(), H, 2, options()).unwrap();
    let (gi, _) = t.backward(&s, &Param::ALL, Unconverged::Refuse).unwrap();
    assert_eq!(gi.contact_stiffness, Some(0.0));
    assert!(zero(gi.density.as_ref().unwrap()));

    // A general loss at step 2: the forces of step 2 (acting after it) cannot change it.
    let mut seeds = Seeds::default();
    seeds.x.insert(2, rng.vec(n));
    let (g, _) = tape
        .backward(&seeds, &[Param::Forces], Unconverged::Refuse)
        .unwrap();
    let f = g.forces.unwrap();
    assert!(!zero(&f[1]) && zero(&f[2]));
    // Pinned vertices' forces are exactly zero (their motion is scripted).
    assert!((0..n)
        .filter(|k| c.model.pinned[k / 3])
        .all(|k| f[0][k] == 0.0 && f[1][k] == 0.0));
}

/// Recomputing states from checkpoints gives the stored run's gradients bit for bit.
#[test]
fn checkpointed_backward_passes_equal_the_stored_one() {
    let c = elastic();
    let n = 3 * c.model.num_vertices();
    let steps = 12;
    let mut rng = Rng(11);
    let mut seeds = Seeds::default();
    seeds.x.insert(steps, rng.vec(n));
    seeds.v.insert(7, rng.vec(n));
    let wrt = [Param::InitialVelocities, Param::Mu, Param::Density];
    let run = |cp: Checkpointing| {
        let options = RecordOptions {
            checkpointing: cp,
            ..options()
        };
        let mut tape = Tape::record(c.model.clone(), c.state.clone(), H, steps, options).unwrap();
        let (g, stats) = tape.backward(&seeds, &wrt, Unconverged::Refuse).unwrap();
        println!(
            "{cp:?}: {stats:?} ratio {:.2}",
            stats.backward_ms / stats.forward_ms
        );
        (g, stats)
    };
    let (all, s_all) = run(Checkpointing::All);
    assert_eq!(s_all.recomputed_steps, 0);
    assert_eq!(s_all.peak_states, steps + 1);
    for cp in [
        Checkpointing::Every(3),
        Checkpointing::Every(4),
        Checkpointing::Binomial(1),
        Checkpointing::Binomial(3),
    ] {
        let (g, s) = run(cp);
        assert_eq!(g, all, "{cp:?}");
        assert!(
            s.recomputed_steps >= steps && s.peak_states < steps + 1,
            "{cp:?}: {s:?}"
        );
    }
}

/// A tape observing a simulation ([`Tape::observing_with`], the Python `record()` path) whose
/// solver is the tape's own Newton (same stop rule and cap) records the same states as
/// [`Tape::record`], so under every checkpointing its backward pass gives the recorded tape's
/// gradients bit for bit — the observed states kept, the others re-solved from the nearest kept
/// one with the pins where the simulation held them (the pinned scene moves its pins).
#[test]
fn an_observed_simulation_gives_the_recorded_tapes_gradients() {
    use jello::sim::{ObservedStep, Simulation};
    use jello::solver::{NewtonParams, NewtonSolver, StopRule};
    use std::cell::RefCell;
    use std::rc::Rc;
    for c in [elastic(), pinned()] {
        let n = 3 * c.model.num_vertices();
        let steps = 7;
        let mut rng = Rng(23);
        let mut seeds = Seeds::default();
        seeds.x.insert(steps, rng.vec(n));
        seeds.v.insert(4, rng.vec(n));
        let wrt = [Param::InitialPositions, Param::InitialVelocities, Param::Mu];
        for cp in [
            Checkpointing::All,
            Checkpointing::Every(3),
            Checkpointing::Binomial(2),
        ] {
            let options = RecordOptions {
                checkpointing: cp,
                ..options()
            };
            let mut recorded =
                Tape::record(c.model.clone(), c.state.clone(), H, steps, options).unwrap();
            let (want, _) = recorded
                .backward(&seeds, &wrt, Unconverged::Refuse)
                .unwrap();
            let tape = Rc::new(RefCell::new(
                Tape::observing_with(c.model.clone(), c.state.clone(), H, options).unwrap(),
            ));
            let params = NewtonParams {
                stop: StopRule::Cn { eps: TOL },
                max_iterations: options.max_iterations,
                ..NewtonParams::default()
            };
            let solver = NewtonSolver::new(&c.model, params).unwrap();
            let mut sim =
                Simulation::new(c.model.clone(), c.state.clone(), H, Box::new(solver)).unwrap();
            let rec = tape.clone();
            sim.set_observer(Some(Box::new(move |s: &ObservedStep<'_>| {
                rec.borrow_mut().observe(s)
            })));
            for _ in 0..steps {
                assert!(sim.step(false).unwrap().converged);
            }
            let (got, stats) = tape
                .borrow_mut()
                .backward(&seeds, &wrt, Unconverged::Refuse)
                .unwrap();
            println!("{} {cp:?}: {stats:?}", c.name);
            assert_eq!(got, want, "{} {cp:?}", c.name);
            if cp != Checkpointing::All {
                assert!(stats.recomputed_steps > 0, "{} {cp:?}: {stats:?}", c.name);
            }
        }
    }
}

#[test]
fn bad_requests_are_one_line_errors() {
    let c = elastic();
    let n = 3 * c.model.num_vertices();
    let mut tape = Tape::record(c.model.clone(), c.state.clone(), H, 2, options()).unwrap();
    let err = |r: jello::Result<(Gradients, jello::adjoint::BackwardStats)>| {
        let e = r.unwrap_err().to_string();
        assert!(!e.contains('\n'), "{e}");
        e
    };
    let mut seeds = Seeds::default();
    seeds.x.insert(3, vec![0.0; n]);
    let e = err(tape.backward(&seeds, &[Param::Mu], Unconverged::Refuse));
    assert!(e.contains("step 3") && e.contains("0..=2"), "{e}");
    let mut seeds = Seeds::default();
    seeds.v.insert(1, vec![0.0; n - 1]);
    let e = err(tape.backward(&seeds, &[Param::Mu], Unconverged::Refuse));
    assert!(e.contains("entries"), "{e}");
    let mut seeds = Seeds::default();
    seeds.x.insert(2, vec![1.0; n]);
    let e = err(tape.backward(&seeds, &[Param::PinTargets], Unconverged::Refuse));
    assert!(e.contains("no pins"), "{e}");
    let mut arap = c.model.clone();
    arap.materials[5] = Material::from_young_poisson(MaterialModel::Arap, 1e5, 0.3).unwrap();
    let mut t = Tape::record(arap, c.state.clone(), H, 1, options()).unwrap();
    let e = err(t.backward(
        &seeds_at(1, n),
        &[Param::YoungsModulus],
        Unconverged::Refuse,
    ));
    assert!(e.contains("tet 5") && e.contains("ARAP"), "{e}");
    // One Newton iteration cannot reach 1e-12: refused, or flagged on request.
    let mut t = Tape::record(
        c.model.clone(),
        c.state.clone(),
        H,
        2,
        RecordOptions {
            max_iterations: 1,
            ..options()
        },
    )
    .unwrap();
    assert!(!t.records()[0].converged);
    let e = err(t.backward(&seeds_at(2, n), &[Param::Mu], Unconverged::Refuse));
    assert!(e.contains("step 1 did not converge"), "{e}");
    let (g, _) = t
        .backward(&seeds_at(2, n), &[Param::Mu], Unconverged::Flag)
        .unwrap();
    assert_eq!(g.unconverged_steps, vec![1, 2]);
    // Recording refusals.
    let e = Tape::new(c.model.clone(), c.state.clone(), -1.0, options())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("time step"), "{e}");
    let nt = c.model.mesh.num_tets();
    let limit = jello::problem::StrainLimit::new(0.9, 1.1).unwrap();
    let limited = c
        .model
        .clone()
        .with_strain_limits(vec![Some(limit); nt])
        .unwrap();
    let e = Tape::new(limited, c.state.clone(), H, options())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("strain limits"), "{e}");
    // κ: only with IPC contact, and only a fixed one.
    let e = err(tape.backward(
        &seeds_at(1, n),
        &[Param::ContactStiffness],
        Unconverged::Refuse,
    ));
    assert!(e.contains("no IPC contact"), "{e}");
    let mut adaptive = ipc();
    let mut contact = (**adaptive.model.contact.as_ref().unwrap()).clone();
    contact.kappa = None;
    adaptive.model.contact = Some(std::sync::Arc::new(contact));
    let na = 3 * adaptive.model.num_vertices();
    let mut t = Tape::record(adaptive.model, adaptive.state, H, 1, options()).unwrap();
    let e = err(t.backward(
        &seeds_at(1, na),
        &[Param::ContactStiffness],
        Unconverged::Refuse,
    ));
    assert!(e.contains("fixed κ"), "{e}");
}

/// Every class but IPC's κ (for the scenes without contact).
fn without_contact() -> Vec<Param> {
    Param::ALL
        .into_iter()
        .filter(|&p| p != Param::ContactStiffness)
        .collect()
}

fn seeds_at(step: usize, n: usize) -> Seeds {
    let mut s = Seeds::default();
    s.x.insert(step, vec![1.0; n]);
    s
}

/// P is linear in (μ, λ) for every model: P(aμ, bλ) = a μ P_μ + b λ P_λ at a general F.
#[test]
fn stress_is_linear_in_the_parameters() {
    let f = Matrix3::new(1.1, 0.2, -0.1, 0.05, 0.9, 0.15, -0.2, 0.1, 1.05);
    for model in MaterialModel::ALL {
        let m = Material::from_young_poisson(model, 1e5, 0.3).unwrap();
        let (pm, pl) = stress_parameter_derivatives(&m, &f);
        let (a, b) = (1.7, 0.6);
        let lambda = if model == MaterialModel::Arap {
            0.0
        } else {
            b * m.lambda
        };
        let direct = pk1(
            &Material {
                model,
                mu: a * m.mu,
                lambda,
            },
            &f,
        );
        let combined = pm * (a * m.mu) + pl * lambda;
        let err = (direct - combined).norm() / direct.norm();
        assert!(err < 1e-12, "{}: {err:e}", model.name());
    }
}

/// The (E, ν) Jacobian against the forward map's central differences.
#[test]
fn young_poisson_jacobian_matches_the_forward_map() {
    for model in MaterialModel::ALL {
        if model == MaterialModel::Arap {
            continue;
        }
        let (e, nu) = (2e5, 0.3);
        let m = Material::from_young_poisson(model, e, nu).unwrap();
        let j = young_poisson_jacobian(&m, 0).unwrap();
        let map = |e: f64, nu: f64| {
            let m = Material::from_young_poisson(model, e, nu).unwrap();
            [m.mu, m.lambda]
        };
        let (de, dn) = (1e-3 * e, 1e-6);
        let (pe, me) = (map(e + de, nu), map(e - de, nu));
        let (pn, mn) = (map(e, nu + dn), map(e, nu - dn));
        for k in 0..2 {
            let fd_e = (pe[k] - me[k]) / (2.0 * de);
            let fd_n = (pn[k] - mn[k]) / (2.0 * dn);
            assert!(
                (fd_e - j[k][0]).abs() <= 1e-8 * fd_e.abs().max(1e-3),
                "{model:?}"
            );
            assert!(
                (fd_n - j[k][1]).abs() <= 1e-6 * fd_n.abs().max(1.0),
                "{model:?}"
            );
        }
    }
}
