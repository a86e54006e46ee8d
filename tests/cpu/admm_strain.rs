//! Hard strain limits in ADMM-PD (`material.strain_limit`, [`jello::problem::StrainLimit`]):
//! the limited prox is the constrained minimum, z holds the limits after every z-step, a
//! converged step holds them in x, and bad limits are one-line errors naming the key.

use crate::common;

use common::pin_where;
use jello::material::{sigma_derivatives, Material, MaterialModel};
use jello::mesh::box_grid;
use jello::problem::{Model, Script, State, StepProblem, StrainLimit};
use jello::scene::Scene;
use jello::solver::admm::prox::{prox_hyperelastic_within, prox_pd_within};
use jello::solver::admm::{AdmmParams, AdmmSolver, ProxKind};
use jello::solver::qn::QnMode;
use jello::solver::StepSolver;
use nalgebra::{Matrix3, Rotation3, Vector3};
use rand::Rng;

const LIMIT: StrainLimit = StrainLimit { lo: 0.95, hi: 1.05 };

fn random_rotation(rng: &mut impl Rng) -> Matrix3<f64> {
    let axis = Vector3::new(
        rng.random_range(-1.0..1.0),
        rng.random_range(-1.0..1.0),
        rng.random_range(-1.0..1.0),
    );
    let angle = rng.random_range(0.0..std::f64::consts::PI);
    *Rotation3::from_scaled_axis(axis.normalize() * angle).matrix()
}

/// The isotropic materials (strain limits need a function of σ).
fn materials() -> Vec<Material> {
    [
        MaterialModel::StableNeoHookean,
        MaterialModel::NeoHookean,
        MaterialModel::FixedCorotated,
        MaterialModel::StVk,
        MaterialModel::Arap,
    ]
    .into_iter()
    .map(|m| Material::from_young_poisson(m, 1e5, 0.35).unwrap())
    .collect()
}

/// The limited hyperelastic prox of v = U diag(σ̃) Vᵀ (U, V random rotations, σ̃ random, some
/// with σ̃₃ < 0) is U diag(σ) Vᵀ with σ the constrained minimum of φ(σ) = ψ̂(σ) + τ/2‖σ − σ̃‖²
/// over [lo, hi]³: UᵀzV is diagonal (the reduction to singular values), σ lies in the box, the
/// KKT conditions hold per component (zero gradient inside, the sign that pushes out of the
/// box at a bound), and no random feasible point has lower φ. Checked with U, V and σ̃ as
/// constructed here, not through the prox's own SVD.
#[test]
fn limited_prox_is_the_constrained_minimum() {
    let mut rng = common::rng("limited_prox_is_the_constrained_minimum");
    let volume = 1e-4;
    let (mut at_bound, mut inside) = (0, 0);
    for mat in materials() {
        let k = 2.0 * mat.mu + mat.lambda;
        for case in 0..40 {
            let (u, v) = (random_rotation(&mut rng), random_rotation(&mut rng));
            let mut target = Vector3::from_fn(|_, _| rng.random_range(0.85..1.2));
            if case % 8 == 0 {
                target[2] = -rng.random_range(0.05..0.4);
            }
            let w2 = volume * k * rng.random_range(0.5..4.0);
            let tau = w2 / volume;
            let vm = u * Matrix3::from_diagonal(&target) * v.transpose();
            let z = prox_hyperelastic_within(&mat, volume, &vm, w2, Some(LIMIT));
            let d = u.transpose() * z * v;
            let off = (d - Matrix3::from_diagonal(&d.diagonal())).norm();
            assert!(
                off < 1e-10,
                "{}: UᵀzV off-diagonal {off:e}",
                mat.model.name()
            );
            let s = d.diagonal();
            let phi = |s: &Vector3<f64>| {
                sigma_derivatives(&mat, s).psi + 0.5 * tau * (s - target).norm_squared()
            };
            let g = sigma_derivatives(&mat, &s).grad + (s - target) * tau;
            let tol = 1e-8 * tau * (1.0 + target.norm());
            for i in 0..3 {
                assert!(
                    s[i] >= LIMIT.lo - 1e-12 && s[i] <= LIMIT.hi + 1e-12,
                    "{}: σ = {s:?} outside the limit",
                    mat.model.name()
                );
                if (s[i] - LIMIT.lo).abs() < 1e-12 {
                    at_bound += 1;
                    assert!(g[i] >= -tol, "{}: at lo, ∂φ = {:e}", mat.model.name(), g[i]);
                } else if (s[i] - LIMIT.hi).abs() < 1e-12 {
                    at_bound += 1;
                    assert!(g[i] <= tol, "{}: at hi, ∂φ = {:e}", mat.model.name(), g[i]);
                } else {
                    inside += 1;
                    assert!(
                        g[i].abs() <= tol,
                        "{}: inside, ∂φ = {:e} (σ = {s:?})",
                        mat.model.name(),
                        g[i]
                    );
                }
            }
            let best = phi(&s);
            for _ in 0..200 {
                let p = Vector3::from_fn(|_, _| rng.random_range(LIMIT.lo..=LIMIT.hi));
                assert!(
                    phi(&p) >= best - 1e-12 * best.abs().max(tau),
                    "{}: a feasible point beats the prox",
                    mat.model.name()
                );
            }
        }
    }
    eprintln!("components at a bound: {at_bound}, inside: {inside}");
    assert!(
        at_bound > 50 && inside > 50,
        "the cases must exercise both ({at_bound}, {inside})"
    );
}

/// On ARAP the PD prox with limits (closed form: the PD average's σ clamped) and the
/// hyperelastic prox with limits (projected Newton) are the same operator.
#[test]
fn limited_pd_and_hyperelastic_proxes_agree_on_arap() {
    let mut rng = common::rng("limited_pd_and_hyperelastic_proxes_agree_on_arap");
    let mat = Material::new(MaterialModel::Arap, 3e4, 0.0).unwrap();
    let volume = 2e-4;
    let mut worst = 0.0f64;
    for case in 0..200 {
        let stretch = Vector3::from_fn(|_, _| rng.random_range(0.7..1.4));
        let mut vm = random_rotation(&mut rng) * Matrix3::from_diagonal(&stretch);
        if case % 5 == 0 {
            vm.column_mut(0).neg_mut();
        }
        let w2 = 2.0 * mat.mu * volume * rng.random_range(0.25..4.0);
        let a = prox_pd_within(&mat, volume, &vm, w2, Some(LIMIT)).unwrap();
        let b = prox_hyperelastic_within(&mat, volume, &vm, w2, Some(LIMIT));
        worst = worst.max((a - b).norm() / (1.0 + vm.norm()));
    }
    eprintln!("max ‖z_pd − z_hyper‖ / (1 + ‖v‖) = {worst:.2e}");
    assert!(worst < 1e-9, "{worst:e}");
}

/// A soft bar hanging from its top face, limited to [0.95, 1.05] (its free fall stretches it
/// well past 1.05 without the limit).
fn hanging_bar(limit: Option<StrainLimit>) -> Model {
    let mesh = box_grid([-0.05, -0.5, -0.05], [0.05, 0.0, 0.05], [2, 6, 2]);
    let pin = pin_where(&mesh, |p| p[1] > -1e-9, Script::Fixed);
    let mat = Material::from_young_poisson(MaterialModel::StableNeoHookean, 2e4, 0.3).unwrap();
    let nt = mesh.num_tets();
    common::one_body(mesh, mat, [0.0, -9.81, 0.0], vec![pin], vec![], 1e-3)
        .with_strain_limits(vec![limit; nt])
        .unwrap()
}

/// Signed-free singular values of every element's F at `x` (nalgebra's SVD, not jello's).
fn stretches(m: &Model, x: &[f64]) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for (e, tet) in m.mesh.tets.iter().enumerate() {
        let g = m.rest[e].shape_gradients();
        let mut f = Matrix3::zeros();
        for (a, &v) in tet.iter().enumerate() {
            let v = v as usize;
            f += Vector3::new(x[3 * v], x[3 * v + 1], x[3 * v + 2]) * g[a].transpose();
        }
        for s in f.singular_values().iter() {
            lo = lo.min(*s);
            hi = hi.max(*s);
        }
    }
    (lo, hi)
}

fn run(m: &Model, params: AdmmParams, steps: usize) -> (State, usize, bool) {
    let mut solver = AdmmSolver::new(m, params).unwrap();
    let mut state = m.initial_state(&vec![[0.0; 3]; m.num_vertices()]);
    let h = 0.02;
    let (mut iterations, mut converged) = (0, true);
    for _ in 0..steps {
        let problem = StepProblem::new(m, &state, h);
        let mut x = Vec::new();
        let r = solver.step(&problem, m, &mut x, false).unwrap();
        iterations += r.iterations;
        converged &= r.converged;
        let v = x.iter().zip(&state.x).map(|(a, b)| (a - b) / h).collect();
        state = State::new(x, v, state.t + h);
    }
    (state, iterations, converged)
}

/// z holds the limits after every z-step (N = 1…6 iterations of the same step, both proxes on
/// ARAP and the hyperelastic prox on stable Neo-Hookean), in the middle of a fall that
/// stretches the unlimited bar past them.
#[test]
fn limits_hold_after_every_z_step() {
    let limited = hanging_bar(Some(LIMIT));
    let free = hanging_bar(None);
    // The start of step 6 of the unlimited fall, the bar already stretched past 1.05.
    let (state, _, _) = run(&free, AdmmParams::default(), 5);
    let (_, hi) = stretches(&free, &state.x);
    eprintln!("unlimited bar after 5 steps: largest stretch {hi:.4}");
    assert!(hi > 1.08, "the fall must exceed the limit ({hi})");
    let arap = {
        let mut m = limited.clone();
        let mat = Material::new(MaterialModel::Arap, 7e3, 0.0).unwrap();
        m.materials.iter_mut().for_each(|x| *x = mat);
        m
    };
    for (m, prox) in [
        (&limited, ProxKind::Hyperelastic),
        (&arap, ProxKind::Hyperelastic),
        (&arap, ProxKind::Pd),
    ] {
        let problem = StepProblem::new(m, &state, 0.02);
        let mut worst = 0.0f64;
        let mut bound = 0;
        for n in 1..=6 {
            let mut s = AdmmSolver::new(
                m,
                AdmmParams {
                    prox,
                    mode: QnMode::Fixed(n),
                    ..AdmmParams::default()
                },
            )
            .unwrap();
            let mut x = Vec::new();
            s.step(&problem, m, &mut x, false).unwrap();
            let (z, _, _) = s.local_state();
            for ze in z {
                for sv in ze.singular_values().iter() {
                    worst = worst.max(LIMIT.lo - sv).max(sv - LIMIT.hi);
                    if (sv - LIMIT.hi).abs() < 1e-9 || (sv - LIMIT.lo).abs() < 1e-9 {
                        bound += 1;
                    }
                }
                assert!(ze.determinant() > 0.0, "an inverted z");
            }
        }
        eprintln!(
            "{} / {}: worst violation {worst:.2e}, singular values at a bound: {bound}",
            m.materials[0].model.name(),
            prox.name()
        );
        assert!(worst <= 1e-12, "z violates the limit by {worst:e}");
        assert!(bound > 10, "the limit must be active ({bound})");
    }
}

/// Whole steps to the stop rule (the KKT residual: ∇E plus the limits' forces): every step
/// converges, x ends within the limit up to what the residual allows, and the limit changes
/// the motion (the unlimited bar stretches past it).
#[test]
fn converged_steps_hold_the_limit_in_x() {
    let limited = hanging_bar(Some(LIMIT));
    let free = hanging_bar(None);
    let (sl, it_l, conv_l) = run(&limited, AdmmParams::default(), 8);
    let (sf, it_f, conv_f) = run(&free, AdmmParams::default(), 8);
    let (lo_l, hi_l) = stretches(&limited, &sl.x);
    let (lo_f, hi_f) = stretches(&free, &sf.x);
    eprintln!(
        "8 steps: limited σ ∈ [{lo_l:.4}, {hi_l:.4}] in {it_l} iterations (converged {conv_l}); \
         unlimited σ ∈ [{lo_f:.4}, {hi_f:.4}] in {it_f} (converged {conv_f})"
    );
    assert!(conv_l, "the KKT rule must be met on every limited step");
    assert!(hi_f > 1.08, "unlimited bar must exceed the limit ({hi_f})");
    assert!(
        hi_l < LIMIT.hi + 2e-3 && lo_l > LIMIT.lo - 2e-3,
        "x leaves the limit: [{lo_l}, {hi_l}]"
    );
}

fn scene_with(test: &str, solver: &str, material: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("jello_strain_{test}_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = format!(
        r#"
[simulation]
h = 0.01
steps = 2

[solver]
name = "{solver}"

[[objects]]
mesh = {{ generator = "box", min = [0.0, -0.05, -0.05], max = [0.5, 0.05, 0.05], cells = [4, 1, 1] }}
material = {{ {material} }}

[[pins]]
region = {{ box = {{ min = [-0.001, -1.0, -1.0], max = [0.001, 1.0, 1.0] }} }}
"#
    );
    let path = dir.join("s.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Bad limits and limits under a solver that cannot hold them: one line naming the key.
#[test]
fn bad_strain_limits_are_one_line_errors() {
    let nh = "model = \"neo_hookean\", youngs_modulus = 1e5, poisson_ratio = 0.3, density = 1000.0";
    let cases = [
        (
            "admm",
            format!("{nh}, strain_limit = [1.05, 0.95]"),
            "empty",
        ),
        ("admm", format!("{nh}, strain_limit = [0.0, 1.05]"), "lo"),
        ("admm", format!("{nh}, strain_limit = [0.9, 0.99]"), "hi"),
        (
            "admm",
            format!("{nh}, strain_limit = [nan, 1.05]"),
            "finite",
        ),
        (
            "admm",
            "model = \"linear\", youngs_modulus = 1e5, poisson_ratio = 0.3, density = 1000.0, \
             strain_limit = [0.95, 1.05]"
                .to_string(),
            "isotropic",
        ),
        (
            "newton",
            format!("{nh}, strain_limit = [0.95, 1.05]"),
            "admm",
        ),
        ("qn", format!("{nh}, strain_limit = [0.95, 1.05]"), "admm"),
    ];
    for (solver, material, what) in cases {
        let path = scene_with("bad", solver, &material);
        let msg = Scene::load(&path)
            .and_then(|s| s.build())
            .err()
            .unwrap_or_else(|| panic!("{material} with {solver} accepted"))
            .to_string();
        eprintln!("{solver} / {material}: {msg}");
        assert!(
            msg.contains("objects[0].material.strain_limit")
                && msg.contains(what)
                && !msg.contains('\n'),
            "{msg}"
        );
    }
    // A valid limit runs under admm; a solver switched after the scene was built (the CLI's
    // --solver) is refused at setup.
    let path = scene_with("ok", "admm", &format!("{nh}, strain_limit = [0.95, 1.05]"));
    let built = Scene::load(&path).unwrap().build().unwrap();
    assert!(!built.model.strain_limits.is_empty());
    let mut other = built.clone();
    other.config.solver = "jgs2".parse().unwrap();
    let msg = jello::runner::setup(&other, jello::gpu::Backend::Cpu, None)
        .err()
        .expect("jgs2 with strain limits accepted")
        .to_string();
    eprintln!("jgs2 at setup: {msg}");
    assert!(msg.contains("strain_limit") && msg.contains("admm") && !msg.contains('\n'));
    assert!(jello::runner::setup(&built, jello::gpu::Backend::Cpu, None).is_ok());
    // The limited z-step is f64 CPU work: a GPU request is one line, `auto` runs on the CPU.
    use jello::gpu::{Backend, BackendChoice};
    let gpu = |requested| BackendChoice {
        requested,
        backend: Backend::Gpu,
        adapter: None,
        reason: "test".into(),
    };
    let msg = jello::runner::setup_on(&built, gpu(Backend::Gpu), None)
        .err()
        .expect("a GPU request with strain limits accepted")
        .to_string();
    eprintln!("gpu: {msg}");
    assert!(msg.contains("strain_limit") && msg.contains("CPU") && !msg.contains('\n'));
    let auto = jello::runner::setup_on(&built, gpu(Backend::Auto), None).unwrap();
    assert_eq!(auto.choice.backend, Backend::Cpu);
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}
