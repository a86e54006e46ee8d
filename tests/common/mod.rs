//! Helpers shared by integration tests.
#![allow(dead_code)]

pub mod cli;
pub mod kernels;
pub mod memo;

use rand::SeedableRng;

/// A seeded RNG; the seed comes from JELLO_TEST_SEED or the clock and is printed so a failure
/// can be replayed.
pub fn rng(test: &str) -> rand_chacha::ChaCha8Rng {
    let seed = std::env::var("JELLO_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    eprintln!("{test}: JELLO_TEST_SEED={seed}");
    rand_chacha::ChaCha8Rng::seed_from_u64(seed)
}

/// Path of a file in ../shared/meshes when present.
pub fn shared_mesh(name: &str) -> Option<std::path::PathBuf> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/meshes")
        .join(name);
    if p.exists() {
        Some(p)
    } else {
        eprintln!("note: {} not present, skipping that part", p.display());
        None
    }
}

/// A beam `[0, length] × [−0.05, 0.05]²` (m) of `cells` box cells (6 tets each), clamped at
/// x = 0, one `model` material of Young's modulus `e` (Pa) and ν = 0.3, ρ = 1000 kg/m³, gravity
/// −9.81 m/s² along y, and the given obstacles (d̂ = 1 mm, κ = 1).
pub fn clamped_beam(
    model: jello::material::MaterialModel,
    e: f64,
    length: f64,
    cells: [usize; 3],
    obstacles: Vec<jello::problem::Obstacle>,
) -> jello::problem::Model {
    use jello::problem::{BarrierParams, Body, Model, Pin, Script};
    let mesh = jello::mesh::box_grid([0.0, -0.05, -0.05], [length, 0.05, 0.05], cells);
    let (nt, nv) = (mesh.num_tets(), mesh.num_vertices());
    let pinned: Vec<u32> = (0..nv as u32)
        .filter(|&v| mesh.positions[v as usize][0] < 1e-9)
        .collect();
    let start = pinned.iter().map(|&v| mesh.positions[v as usize]).collect();
    Model::new(
        mesh,
        vec![Body {
            name: "beam".into(),
            vertices: 0..nv,
            tets: 0..nt,
        }],
        vec![jello::material::Material::from_young_poisson(model, e, 0.3).unwrap(); nt],
        vec![1000.0; nt],
        [0.0, -9.81, 0.0],
        vec![Pin {
            vertices: pinned,
            start,
            script: Script::Fixed,
        }],
        obstacles,
        BarrierParams {
            dhat: 1e-3,
            kappa: 1.0,
        },
    )
    .unwrap()
}

/// Holds `lock` while a GPU test runs on Mesa's GL stack (`WGPU_BACKEND=gl`), where concurrent
/// devices in one process slow each other down ~5× (75 s instead of 14 s for gpu_jgs2, measured
/// when it was its own binary); on Vulkan (lavapipe, hardware) it returns `None` and the tests
/// run side by side — a lock there kept one of the binary's two test threads idle while the
/// other ran a whole-scene comparison.
pub fn serial_on_gl(
    lock: &'static std::sync::Mutex<()>,
) -> Option<std::sync::MutexGuard<'static, ()>> {
    let gl = std::env::var("WGPU_BACKEND")
        .is_ok_and(|b| b.split(',').any(|b| b.trim().eq_ignore_ascii_case("gl")));
    gl.then(|| lock.lock().unwrap_or_else(|e| e.into_inner()))
}

/// A GPU device for a GPU test. Without an adapter the test FAILS (panics), unless
/// `JELLO_SKIP_GPU_TESTS=1`, when it returns `None` and the test skips with a note.
pub fn gpu_device() -> Option<jello::gpu::Device> {
    match jello::gpu::Device::new(jello::gpu::Backend::Gpu) {
        Ok(d) => Some(d),
        Err(e) => {
            if std::env::var("JELLO_SKIP_GPU_TESTS").as_deref() == Ok("1") {
                eprintln!("skipping GPU test: {e}");
                None
            } else {
                panic!("no GPU adapter ({e}); set JELLO_SKIP_GPU_TESTS=1 to skip GPU tests");
            }
        }
    }
}

/// A raw wgpu adapter, for tests that play the host application creating its own device (same
/// rules as [`gpu_device`]: `None` only when GPU tests may be skipped).
pub fn host_adapter() -> Option<wgpu::Adapter> {
    gpu_device()?;
    let instance =
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle().with_env());
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        force_fallback_adapter: false,
        ..Default::default()
    }))
    .expect("an adapter exists (gpu_device() succeeded)");
    Some(adapter)
}

/// ‖a − b‖ / ‖b‖ (f64 accumulation) after checking neither holds a NaN — a NaN in `a` is an
/// output a kernel left unwritten (tests poison outputs with NaN before a run).
pub fn rel_err(a: &[f32], b: &[f32], what: &str) -> f64 {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    if let Some(i) = a.iter().position(|v| v.is_nan()) {
        panic!("{what}: entry {i} of the result is NaN (unwritten or invalid)");
    }
    if let Some(i) = b.iter().position(|v| v.is_nan()) {
        panic!("{what}: entry {i} of the reference is NaN");
    }
    let (mut d, mut r) = (0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        d += (*x as f64 - *y as f64).powi(2);
        r += (*y as f64).powi(2);
    }
    d.sqrt() / r.sqrt().max(1e-300)
}

/// Asserts [`rel_err`] ≤ `tol`, printing the measured value.
pub fn assert_close(a: &[f32], b: &[f32], tol: f64, what: &str) {
    let e = rel_err(a, b, what);
    eprintln!("{what}: relative error {e:.2e} (tolerance {tol:.0e})");
    assert!(e <= tol, "{what}: relative error {e:.3e} > {tol:.0e}");
}

/// A one-body model of `mesh` with `mat` everywhere, density 1000 kg/m³, barrier κ = 1 and d̂
/// `dhat` (m).
pub fn one_body(
    mesh: jello::mesh::TetMesh,
    mat: jello::material::Material,
    gravity: [f64; 3],
    pins: Vec<jello::problem::Pin>,
    obstacles: Vec<jello::problem::Obstacle>,
    dhat: f64,
) -> jello::problem::Model {
    let (nv, nt) = (mesh.num_vertices(), mesh.num_tets());
    jello::problem::Model::new(
        mesh,
        vec![jello::problem::Body {
            name: "body".into(),
            vertices: 0..nv,
            tets: 0..nt,
        }],
        vec![mat; nt],
        vec![1000.0; nt],
        gravity,
        pins,
        obstacles,
        jello::problem::BarrierParams { dhat, kappa: 1.0 },
    )
    .unwrap()
}

/// A pin on every vertex of `mesh` whose rest position satisfies `pred` (there must be one).
pub fn pin_where(
    mesh: &jello::mesh::TetMesh,
    pred: impl Fn(&[f64; 3]) -> bool,
    script: jello::problem::Script,
) -> jello::problem::Pin {
    let vertices: Vec<u32> = (0..mesh.num_vertices() as u32)
        .filter(|&v| pred(&mesh.positions[v as usize]))
        .collect();
    assert!(!vertices.is_empty(), "the pin selects no vertex");
    let start = vertices
        .iter()
        .map(|&v| mesh.positions[v as usize])
        .collect();
    jello::problem::Pin {
        vertices,
        start,
        script,
    }
}

/// The bundled scenes with IPC contact between objects (`[contact] ipc = true`): they run on
/// solver newton only (the others refuse them), so the solver-against-Newton tests leave them
/// out and tests/cpu/contact_scenes.rs runs them.
pub const IPC_SCENES: [&str; 9] = [
    "contact_balls.toml",
    "contact_cup.toml",
    "contact_hetero.toml",
    "contact_hoop.toml",
    "contact_stack.toml",
    "contact_twist.toml",
    "house_of_cards.toml",
    "pile_press.toml",
    "ring_net.toml",
];

/// Newton with the direct solve to CN 1e-10 from `state` (at most 200 iterations): the
/// reference a multilevel step is measured against; computed once per test binary ([`memo`]).
pub fn newton_reference(
    m: &jello::problem::Model,
    state: &jello::problem::State,
    h: f64,
) -> Vec<f64> {
    newton_answer(m, state, h).0
}

/// [`newton_reference`] with the κ its solve ended with (J/m⁴; 0 without contact).
pub fn newton_answer(
    m: &jello::problem::Model,
    state: &jello::problem::State,
    h: f64,
) -> (Vec<f64>, f64) {
    use jello::solver::StepSolver;
    memo::once(
        memo::key(&[m, state], ("newton_reference", h.to_bits())),
        || {
            let problem = jello::problem::StepProblem::new(m, state, h);
            let mut x = Vec::new();
            let r = jello::solver::NewtonSolver::new(
                m,
                jello::solver::NewtonParams {
                    stop: jello::solver::StopRule::Cn { eps: 1e-10 },
                    max_iterations: 200,
                    ..jello::solver::NewtonParams::default()
                },
            )
            .unwrap()
            .step(&problem, m, &mut x, false)
            .unwrap();
            assert!(r.converged, "Newton reference at {:e}", r.residual);
            (x, problem.kappa())
        },
    )
}

/// Asserts that `x`, a contact step's converged point from `state`, solves the problem
/// Newton-IPC solves: that problem must be the step's as `begin_contact_step` sets it (Newton at
/// 1e-10 keeps κ and the scene lags friction once — asserted, or the check would compare with a
/// different problem), `x` must be stationary for it in f64 (CN ≤ 1e-6: a device stops at CN
/// 1e-7 on its f32 gradient, and the f32 terms' rounding adds a few 1e-7 in f64; a stiffer
/// problem, e.g. κ raised 16×, measures 6e-4), and lie within the two points' residual bounds
/// 2h²‖∇E‖_{M⁻¹} of Newton's answer in the mass norm. Returns (f64 CN, M-distance, bound).
pub fn assert_solves_newtons_problem(
    m: &jello::problem::Model,
    state: &jello::problem::State,
    h: f64,
    x: &[f64],
    what: &str,
) -> (f64, f64, f64) {
    let problem = jello::problem::StepProblem::new(m, state, h);
    assert_eq!(
        problem.begin_contact_step(m),
        0,
        "{what}: friction lagged more than once"
    );
    let (reference, kappa) = newton_answer(m, state, h);
    assert_eq!(
        kappa,
        problem.kappa(),
        "{what}: Newton raised κ: not the step's problem"
    );
    let mut g = vec![0.0; x.len()];
    problem.gradient(m, x, &mut g);
    for (gi, &fixed) in g.iter_mut().zip(&problem.fixed) {
        if fixed {
            *gi = 0.0;
        }
    }
    let cn = m.char_norm.residual(&g);
    let dist = m_dist(m, x, &reference);
    let bound = residual_bound(&problem, m, x) + residual_bound(&problem, m, &reference);
    eprintln!(
        "{what}: f64 CN for Newton's problem {cn:.2e}, ‖x − x*‖_M {dist:.2e} (bound {bound:.2e}), \
         max vertex distance {:.2e} m",
        max_dist(x, &reference)
    );
    assert!(cn <= 1e-6, "{what}: f64 CN {cn:.3e} at the converged point");
    assert!(dist <= bound, "{what}: {dist:e} > {bound:e}");
    (cn, dist, bound)
}

/// Asserts that `covered` names exactly the scenes bundled in assets/scenes (a new scene must
/// be added to the test that calls this).
pub fn assert_covers_bundled_scenes<'a>(covered: impl IntoIterator<Item = &'a str>) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes");
    let mut bundled: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".toml"))
        .collect();
    bundled.sort();
    let mut listed: Vec<String> = covered.into_iter().map(str::to_owned).collect();
    listed.sort();
    assert_eq!(
        bundled, listed,
        "bundled scenes vs the ones this test covers"
    );
}

/// The mass-weighted distance ‖a − b‖_M = √(Σ_v m_v |a_v − b_v|²) of two position vectors
/// (3n, m) of `m`, kg^½·m.
pub fn m_dist(m: &jello::problem::Model, a: &[f64], b: &[f64]) -> f64 {
    a.chunks(3)
        .zip(b.chunks(3))
        .zip(&m.mass)
        .map(|((p, q), mv)| {
            mv * ((p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2) + (p[2] - q[2]).powi(2))
        })
        .sum::<f64>()
        .sqrt()
}

/// ‖g‖_{M⁻¹} = √(Σ_v |g_v|² / m_v) of a gradient (3n, N) of `m`.
pub fn g_minv(m: &jello::problem::Model, g: &[f64]) -> f64 {
    g.chunks(3)
        .zip(&m.mass)
        .map(|(gv, mv)| (gv[0] * gv[0] + gv[1] * gv[1] + gv[2] * gv[2]) / mv)
        .sum::<f64>()
        .sqrt()
}

/// 2h²‖∇E(x)‖_{M⁻¹}: a bound on ‖x − x*‖_M near the step's minimiser x* (the inertia term
/// makes E strongly convex with modulus M/h² there), kg^½·m.
pub fn residual_bound(
    problem: &jello::problem::StepProblem,
    m: &jello::problem::Model,
    x: &[f64],
) -> f64 {
    let mut g = vec![0.0; x.len()];
    problem.gradient(m, x, &mut g);
    2.0 * problem.h * problem.h * g_minv(m, &g)
}

/// The path of a scene bundled in assets/scenes.
pub fn bundled_scene_path(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/scenes")
        .join(name)
}

/// Runs `a` and `b` in lockstep for `steps` steps of `built` from its initial state; every
/// step must converge on both. Returns the worst per-step max vertex deviation relative to the
/// bounding-box diagonal, and each run's total iterations.
pub fn lockstep_deviation(
    built: &jello::scene::BuiltScene,
    a: Box<dyn jello::solver::StepSolver>,
    b: Box<dyn jello::solver::StepSolver>,
    steps: usize,
) -> (f64, usize, usize) {
    let m = &built.model;
    let st = m.initial_state(&built.velocity);
    let h = built.config.h;
    let mut sa = jello::sim::Simulation::new(m.clone(), st.clone(), h, a).unwrap();
    let mut sb = jello::sim::Simulation::new(m.clone(), st, h, b).unwrap();
    let diag = m
        .mesh
        .bounding_box()
        .map(|(lo, hi)| ((0..3).map(|k| (hi[k] - lo[k]).powi(2)).sum::<f64>()).sqrt())
        .unwrap();
    let (mut worst, mut ia, mut ib) = (0.0f64, 0, 0);
    for step in 1..=steps {
        let ra = sa.step(false).unwrap();
        let rb = sb.step(false).unwrap();
        assert!(ra.converged && rb.converged, "step {step}");
        ia += ra.iterations;
        ib += rb.iterations;
        worst = worst.max(max_dist(&sa.state.x, &sb.state.x) / diag);
    }
    (worst, ia, ib)
}

/// A scene bundled in assets/scenes, built.
pub fn bundled_scene(name: &str) -> jello::scene::BuiltScene {
    jello::scene::Scene::load(&bundled_scene_path(name))
        .unwrap()
        .build()
        .unwrap()
}

/// The state of a built scene after `steps` projected-Newton steps from its initial state
/// (the scene's h and stop rule), computed once per test binary ([`memo`]).
pub fn state_after(built: &jello::scene::BuiltScene, steps: usize) -> jello::problem::State {
    memo::once(memo::key(&[built], ("state_after", steps)), || {
        newton_states_until(built, steps, |_| false)
    })
}

/// Projected-Newton steps of a built scene from its initial state until `stop` holds for the
/// state or `max_steps` were taken; that state.
pub fn newton_states_until(
    built: &jello::scene::BuiltScene,
    max_steps: usize,
    stop: impl Fn(&jello::problem::State) -> bool,
) -> jello::problem::State {
    let m = &built.model;
    let params = jello::solver::NewtonParams {
        stop: built.config.stop,
        ..jello::solver::NewtonParams::default()
    };
    let solver = jello::solver::NewtonSolver::new(m, params).unwrap();
    let mut sim = simulation(built, Box::new(solver));
    for _ in 0..max_steps {
        if stop(&sim.state) {
            break;
        }
        sim.step(false).unwrap();
    }
    sim.state
}

/// The drop scene's first state with a vertex within d̂ of the ground (height 0), stepped
/// with projected Newton (the ball lands after about a dozen steps); computed once per test
/// binary ([`memo`]).
pub fn drop_at_impact() -> (jello::scene::BuiltScene, jello::problem::State) {
    let built = bundled_scene("drop.toml");
    let dhat = built.model.barrier.dhat;
    let state = memo::once(memo::key(&[&built], "drop_at_impact"), || {
        newton_states_until(&built, 60, |s| s.x.chunks(3).any(|p| p[1] < 0.5 * dhat))
    });
    assert!(
        state.x.chunks(3).any(|p| p[1] < dhat),
        "drop.toml: no vertex reached the ground in 60 steps"
    );
    (built, state)
}

/// `jello compare` (GPU vs f64 CPU in lockstep) of `built` over `steps` steps: prints the worst
/// deviation and the iteration totals of both runs, and asserts the worst step deviates less
/// than 1e-3 of the diagonal (`jello compare`'s default bound).
pub fn assert_compare_within_default(
    name: &str,
    path: &std::path::Path,
    built: &jello::scene::BuiltScene,
    steps: usize,
) {
    let report = jello::compare::compare(path, built, steps).unwrap();
    let its: (usize, usize) = report.steps.iter().fold((0, 0), |a, s| {
        (a.0 + s.iterations_cpu, a.1 + s.iterations_gpu)
    });
    eprintln!(
        "{name}: worst {:.2e}, iterations cpu {} gpu {} ({})",
        report.worst(),
        its.0,
        its.1,
        report.adapter
    );
    assert!(report.worst() < 1e-3, "{name}: {:e}", report.worst());
}

/// Largest per-vertex distance between two position vectors, m.
pub fn max_dist(a: &[f64], b: &[f64]) -> f64 {
    a.chunks(3)
        .zip(b.chunks(3))
        .map(|(p, q)| {
            ((p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2) + (p[2] - q[2]).powi(2)).sqrt()
        })
        .fold(0.0, f64::max)
}

/// Runs bundled scene `name` for `steps` steps with Newton, then solves the next step with
/// Newton to ε = 1e-10 (the reference x*) and with `make(model, ε)`'s solver at the scene's ε
/// and 1e-3 of it. Each must converge, land within 2h²‖∇E(x)‖_{M⁻¹} of x* in the mass norm
/// (the inertia term makes E strongly convex with modulus M/h² near x*, so that bounds the
/// distance by the residual), and the finer run must land closer.
pub fn assert_matches_newton_on_bundled_scene(
    name: &str,
    steps: usize,
    what: &str,
    make: &mut dyn FnMut(&jello::problem::Model, f64) -> Box<dyn jello::solver::StepSolver>,
) {
    assert_matches_newton(name, &bundled_scene(name), steps, what, make);
}

/// [`assert_matches_newton_on_bundled_scene`] on a built scene (`name` for messages).
pub fn assert_matches_newton(
    name: &str,
    built: &jello::scene::BuiltScene,
    steps: usize,
    what: &str,
    make: &mut dyn FnMut(&jello::problem::Model, f64) -> Box<dyn jello::solver::StepSolver>,
) {
    use jello::solver::{NewtonParams, NewtonSolver, StopRule};
    let m = &built.model;
    let h = built.config.h;
    let eps = match built.config.stop {
        StopRule::Cn { eps } => eps,
        StopRule::Dx { .. } => panic!("{name}: bundled scenes use cn"),
    };
    // The Newton run to the step and its reference, once per test binary ([`memo`]): several
    // tests measure their solvers on the same step.
    let state = memo::once(memo::key(&[built], ("newton_cap_200", steps)), || {
        let newton = NewtonSolver::new(
            m,
            NewtonParams {
                stop: StopRule::Cn { eps },
                max_iterations: 200,
                ..NewtonParams::default()
            },
        )
        .unwrap();
        let mut sim = simulation(built, Box::new(newton));
        for _ in 0..steps {
            sim.step(false).unwrap();
        }
        sim.state
    });
    let problem = jello::problem::StepProblem::new(m, &state, h);
    // Newton to ε = 1e-10, at most 200 iterations, asserted converged.
    let reference = newton_reference(m, &state, h);
    let mut run = |eps: f64| {
        let mut s = make(m, eps);
        let mut x = Vec::new();
        let r = s.step(&problem, m, &mut x, false).unwrap();
        assert!(
            r.converged,
            "{name}: {what} at ε = {eps:e} ended at {:e}",
            r.residual
        );
        let dist = m_dist(m, &x, &reference);
        let bound = residual_bound(&problem, m, &x);
        eprintln!(
            "{name}: {what} at ε = {eps:.0e}: {} iterations, ‖x − x*‖_M = {dist:.2e}, \
             bound {bound:.2e} (max vertex distance {:.2e} m)",
            r.iterations,
            max_dist(&x, &reference)
        );
        assert!(
            dist <= bound,
            "{name}: {what} at ε = {eps:e}: {dist:e} > {bound:e}"
        );
        (dist, r.residual)
    };
    let (coarse, coarse_residual) = run(eps);
    let (fine, _) = run(eps * 1e-3);
    // Closer, unless the coarse run already met the fine rule (then both are the same run).
    assert!(
        fine < coarse || (fine == coarse && coarse_residual < eps * 1e-3),
        "{name}: {what}: {fine:e} vs {coarse:e}"
    );
}

/// A small TSS: a 1 × 0.2 × 0.2 m bar whose end caps turn ±90° about the bar axis (0–0.25 s),
/// pull apart by 0.1 m each (0.25–0.375 s) and push together by 0.2 m each (0.375–0.5 s), at
/// h = 25 ms, fixed corotated, E = 1e5 Pa, ν = 0.4, ρ = 1000 kg/m³.
pub const TSS_BAR: &str = r#"[simulation]
h = 0.025
steps = 20
gravity = [0.0, 0.0, 0.0]

[solver]
name = "newton"
stop = "cn"
tolerance = 1e-5

[[objects]]
name = "bar"
mesh = { generator = "box", min = [-0.5, -0.1, -0.1], max = [0.5, 0.1, 0.1], cells = [10, 2, 2] }
material = { model = "fixed_corotated", youngs_modulus = 1e5, poisson_ratio = 0.4, density = 1000.0 }

[[pins]]
region = { slab = { normal = [1.0, 0.0, 0.0], offset = -0.5, thickness = 0.002 } }
script = { type = "keyframes", phases = [
  { start = 0.0, end = 0.25, rotate = { center = [0.0, 0.0, 0.0], axis = [1.0, 0.0, 0.0], degrees = -90.0 } },
  { start = 0.25, end = 0.375, translate = [-0.1, 0.0, 0.0] },
  { start = 0.375, end = 0.5, translate = [0.2, 0.0, 0.0] },
] }

[[pins]]
region = { slab = { normal = [1.0, 0.0, 0.0], offset = 0.5, thickness = 0.002 } }
script = { type = "keyframes", phases = [
  { start = 0.0, end = 0.25, rotate = { center = [0.0, 0.0, 0.0], axis = [1.0, 0.0, 0.0], degrees = 90.0 } },
  { start = 0.25, end = 0.375, translate = [0.1, 0.0, 0.0] },
  { start = 0.375, end = 0.5, translate = [-0.2, 0.0, 0.0] },
] }
"#;

/// A simulation of `built` from its initial state with its time step, stepped by `solver`.
pub fn simulation(
    built: &jello::scene::BuiltScene,
    solver: Box<dyn jello::solver::StepSolver>,
) -> jello::sim::Simulation {
    let m = &built.model;
    jello::sim::Simulation::new(
        m.clone(),
        m.initial_state(&built.velocity),
        built.config.h,
        solver,
    )
    .unwrap()
}

/// A model of `meshes` as separate bodies `b0`, `b1`, … (stable neo-Hookean E = 1e5 Pa,
/// ν = 0.3, density 1000 kg/m³, no gravity, pins or obstacles; d̂ = 1 mm, κ = 1).
pub fn bodies_model(meshes: Vec<jello::mesh::TetMesh>) -> jello::problem::Model {
    let mut all = jello::mesh::TetMesh::default();
    let mut bodies = Vec::new();
    for (i, m) in meshes.into_iter().enumerate() {
        let (v0, t0) = (all.positions.len(), all.tets.len());
        all.positions.extend_from_slice(&m.positions);
        all.tets
            .extend(m.tets.iter().map(|t| t.map(|v| v + v0 as u32)));
        bodies.push(jello::problem::Body {
            name: format!("b{i}"),
            vertices: v0..all.positions.len(),
            tets: t0..all.tets.len(),
        });
    }
    let nt = all.num_tets();
    let mat = jello::material::Material::from_young_poisson(
        jello::material::MaterialModel::StableNeoHookean,
        1e5,
        0.3,
    )
    .unwrap();
    jello::problem::Model::new(
        all,
        bodies,
        vec![mat; nt],
        vec![1000.0; nt],
        [0.0; 3],
        vec![],
        vec![],
        jello::problem::BarrierParams {
            dhat: 1e-3,
            kappa: 1.0,
        },
    )
    .unwrap()
}

/// A JGS2/VBD solver whose steps return every accepted iterate (after iteration 1, 2, …,
/// through `Jgs2Solver::with_iterate_observer`).
pub struct Observed<B: jello::solver::jgs2::Jgs2Backend> {
    solver: jello::solver::jgs2::Jgs2Solver<B>,
    seen: std::sync::Arc<std::sync::Mutex<Vec<Vec<f64>>>>,
}

impl<B: jello::solver::jgs2::Jgs2Backend> Observed<B> {
    pub fn new(solver: jello::solver::jgs2::Jgs2Solver<B>) -> Self {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Vec<f64>>::new()));
        let record = seen.clone();
        let solver = solver.with_iterate_observer(move |k, x| {
            let mut v = record.lock().unwrap();
            assert_eq!(k, v.len() + 1, "iterations are observed in order");
            v.push(x.to_vec());
        });
        Observed { solver, seen }
    }

    /// One step from `problem`: its report, its iterates (one per iteration, in order) and
    /// where it ended (the last iterate, or the start when it took none).
    pub fn step(
        &mut self,
        problem: &jello::problem::StepProblem,
        model: &jello::problem::Model,
    ) -> (jello::solver::StepReport, Vec<Vec<f64>>, Vec<f64>) {
        use jello::solver::StepSolver;
        let mut x = Vec::new();
        let r = self.solver.step(problem, model, &mut x, false).unwrap();
        let seen = std::mem::take(&mut *self.seen.lock().unwrap());
        assert_eq!(
            seen.len(),
            r.iterations,
            "one observed iterate per iteration"
        );
        if let Some(last) = seen.last() {
            assert!(last == &x, "the step ends at its last observed iterate");
        }
        (r, seen, x)
    }
}

/// One step of a JGS2/VBD solver from `problem` with every accepted iterate ([`Observed`]).
pub fn step_iterates<B: jello::solver::jgs2::Jgs2Backend>(
    solver: jello::solver::jgs2::Jgs2Solver<B>,
    problem: &jello::problem::StepProblem,
    model: &jello::problem::Model,
) -> (jello::solver::StepReport, Vec<Vec<f64>>) {
    let (r, seen, _) = Observed::new(solver).step(problem, model);
    (r, seen)
}

/// Every pair of `model`'s IPC surfaces apart at `x`: no triangles cross (the exact
/// triangle–triangle check), the closest pair within d̂ at a positive distance (m, returned;
/// +∞ when no pair is within d̂).
pub fn assert_apart(model: &jello::problem::Model, x: &[f64], what: &str) -> f64 {
    let ipc = model.contact.as_ref().expect("a model with IPC contact");
    let xs = ipc.positions(x);
    jello::contact::check_intersection_free(&ipc.mesh, &xs)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let pairs = ipc.active_pairs(&xs).unwrap();
    let d = ipc.min_distance_sq(&pairs, &xs).sqrt();
    assert!(d > 0.0, "{what}: a pair touches");
    d
}
