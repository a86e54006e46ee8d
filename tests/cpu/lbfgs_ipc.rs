//! IPC contact on the L-BFGS family (qn, dot, lbfgs-h) on the f64 CPU backend
//! (src/solver/lbfgs/contact.rs): on the bundled contact scenes every position the line
//! search evaluates is intersection-free (the exact triangle–triangle check), every step ends
//! converged at a positive minimum distance, a step in contact lands within the residual bound
//! of Newton's IPC answer under the same κ, and the runner sends these scenes to the CPU (one
//! line under `--backend gpu`, a fallback under `auto`) while ADMM refuses them.

use crate::common;

use jello::contact::check_intersection_free;
use jello::gpu::{Backend, BackendChoice};
use jello::material::EigenFilter;
use jello::problem::{ElasticReference, ElasticTerms, Model, StepProblem};
use jello::scene::BuiltScene;
use jello::solver::StopRule;
use std::sync::{Arc, Mutex};

const FAMILY: [&str; 3] = ["qn", "dot", "lbfgs-h"];

/// The model's f64 elastic terms, recording every position they are evaluated at (each
/// line-search trial's gradient and energy pass).
struct Recorder {
    model: Model,
    seen: Arc<Mutex<Vec<Vec<f64>>>>,
}

impl Recorder {
    fn note(&self, x: &[f64]) {
        self.seen.lock().unwrap().push(x.to_vec());
    }
}

impl ElasticTerms for Recorder {
    fn elastic_energy(&self, x: &[f64]) -> f64 {
        self.note(x);
        self.model.elastic_energy(x)
    }
    fn elastic_gradient(&self, x: &[f64], g: &mut [f64]) -> f64 {
        self.note(x);
        self.model.elastic_gradient(x, g)
    }
    fn elastic_element_hessians_filtered(
        &self,
        x: &[f64],
        filter: EigenFilter,
        out: &mut Vec<[f64; 144]>,
    ) {
        self.model.elastic_element_hessians_filtered(x, filter, out)
    }
    fn elastic_reference(&self, x: &[f64]) -> ElasticReference {
        self.model.elastic_reference(x)
    }
    fn elastic_energy_change(&self, x: &[f64], reference: &ElasticReference) -> f64 {
        self.note(x);
        self.model.elastic_energy_change(x, reference)
    }
    fn elastic_gradient_and_change(
        &self,
        x: &[f64],
        g: &mut [f64],
        reference: &ElasticReference,
    ) -> (f64, f64) {
        self.note(x);
        self.model.elastic_gradient_and_change(x, g, reference)
    }
}

/// `built` with solver `kind` and CN ε.
fn config_for(built: &BuiltScene, kind: &str, eps: f64) -> jello::scene::RunConfig {
    let mut c = built.config.clone();
    c.solver = kind.parse().unwrap();
    c.stop = StopRule::Cn { eps };
    c
}

/// The scene's ε (CN).
fn scene_eps(built: &BuiltScene) -> f64 {
    match built.config.stop {
        StopRule::Cn { eps } => eps,
        StopRule::Dx { .. } => panic!("bundled scenes use cn"),
    }
}

/// Bundled scene `name`, with contact_balls.toml's balls coarser (resolution 4 instead of 6):
/// the same impact, at a size where checking every trial position stays cheap.
fn scene(name: &str) -> BuiltScene {
    if name != "contact_balls.toml" {
        return common::bundled_scene(name);
    }
    let path = common::bundled_scene_path(name);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.matches("resolution = 6").count(), 2, "{name} changed");
    let text = text.replace("resolution = 6", "resolution = 4");
    jello::scene::Scene::parse(&path, &text)
        .unwrap()
        .build()
        .unwrap()
}

/// Runs `steps` steps of `name` ([`scene`]) with `kind` at the scene's ε: every evaluated
/// position intersection-free, every step converged with a positive minimum distance. Returns
/// the iterations per step.
fn run_checked(name: &str, kind: &str, steps: usize) -> f64 {
    let built = scene(name);
    let m = built.model.clone();
    let ipc = m.contact.clone().expect("IPC scene");
    let config = config_for(&built, kind, scene_eps(&built));
    let solver = jello::runner::make_solver(&config, &m, None).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let options = jello::sim::SimOptions {
        elastic: Some(Box::new(Recorder {
            model: m.clone(),
            seen: seen.clone(),
        })),
        ..jello::sim::SimOptions::default()
    };
    let mut sim = jello::sim::Simulation::with_options(
        m.clone(),
        m.initial_state(&built.velocity),
        built.config.h,
        solver,
        options,
    )
    .unwrap();
    let (mut iterations, mut trials, mut closest) = (0, 0, f64::INFINITY);
    for step in 0..steps {
        let r = sim.step(false).unwrap();
        assert!(
            r.converged,
            "{name} {kind}: step {step} ended at {:e}: {:?}",
            r.residual, r.failure
        );
        iterations += r.iterations;
        let mut evaluated = std::mem::take(&mut *seen.lock().unwrap());
        assert!(!evaluated.is_empty(), "{name} {kind}: nothing recorded");
        // A position is often evaluated twice in a row (energy, then gradient): check it once.
        evaluated.dedup();
        trials += evaluated.len();
        for x in &evaluated {
            let xs = ipc.positions(x);
            check_intersection_free(&ipc.mesh, &xs)
                .unwrap_or_else(|e| panic!("{name} {kind}: step {step}: {e}"));
        }
        let xs = ipc.positions(&sim.state.x);
        let pairs = ipc.active_pairs(&xs).unwrap();
        let d = ipc.min_distance_sq(&pairs, &xs).sqrt();
        assert!(d > 0.0, "{name} {kind}: step {step}: a pair touches");
        closest = closest.min(d);
    }
    assert!(
        closest < ipc.dhat,
        "{name}: the run must reach contact (closest pair {closest:e} m, d̂ {:e} m)",
        ipc.dhat
    );
    let per_step = iterations as f64 / steps as f64;
    eprintln!(
        "{name} {kind}: {steps} steps, {per_step:.1} iterations per step, {trials} positions \
         checked, closest pair {closest:.3e} m (d̂ {:.3e} m)",
        ipc.dhat
    );
    per_step
}

#[test]
fn lbfgs_family_ipc_trials_are_intersection_free_on_the_contact_scenes() {
    // Balls: they meet after ~25 ms (step 5) and squash; stack: the cubes land on the ground
    // and on each other with friction μ = 0.5 (lagging passes at converged points). The stack
    // stops at 6 steps: as it comes to rest lbfgs-h's iterations grow (the pairs' curvature is
    // not in its H₀) until step 7 reaches the 1000-iteration cap at residual 3.4e-7
    // (docs/src/solvers/dot.md, known limits).
    for (name, steps) in [("contact_balls.toml", 10), ("contact_stack.toml", 6)] {
        for kind in FAMILY {
            run_checked(name, kind, steps);
        }
    }
}

#[test]
fn lbfgs_family_ipc_step_matches_newton_within_the_residual_bound() {
    // contact_balls.toml's impact step (step 5, after 5 Newton steps: the balls meet): the step
    // by Newton to ε = 1e-10 (x*) and by each solver at the scene's ε. With the same κ at the end
    // (the same sequence of potentials: the balls have no friction), each lands within
    // 2h²‖∇E(x)‖_{M⁻¹} of x* in the mass norm.
    let name = "contact_balls.toml";
    let built = common::bundled_scene(name);
    let m = &built.model;
    let ipc = m.contact.clone().unwrap();
    let h = built.config.h;
    let eps = scene_eps(&built);
    let newton = |eps: f64| jello::runner::make_solver(&config_for(&built, "newton", eps), m, None);
    let mut sim = common::simulation(&built, newton(eps).unwrap());
    for _ in 0..5 {
        assert!(sim.step(false).unwrap().converged);
    }
    let problem = StepProblem::new(m, &sim.state, h);
    let mut reference = Vec::new();
    let r = newton(1e-10)
        .unwrap()
        .step(&problem, m, &mut reference, false)
        .unwrap();
    assert!(r.converged, "Newton reference at {:e}", r.residual);
    let kappa = problem.kappa();
    let xs = ipc.positions(&reference);
    let gap = ipc
        .min_distance_sq(&ipc.active_pairs(&xs).unwrap(), &xs)
        .sqrt();
    assert!(gap < ipc.dhat, "in contact: {gap:e} vs d̂ {:e}", ipc.dhat);
    eprintln!(
        "{name}: Newton to 1e-10: {} iterations, κ {kappa:.3e}",
        r.iterations
    );
    for kind in FAMILY {
        let mut s = jello::runner::make_solver(&config_for(&built, kind, eps), m, None).unwrap();
        let mut x = Vec::new();
        let r = s.step(&problem, m, &mut x, false).unwrap();
        assert!(r.converged, "{kind} ended at {:e}", r.residual);
        assert_eq!(problem.kappa(), kappa, "{kind}: κ");
        let dist = common::m_dist(m, &x, &reference);
        let bound = common::residual_bound(&problem, m, &x);
        eprintln!(
            "{name}: {kind} at ε = {eps:.0e}: {} iterations, ‖x − x*‖_M = {dist:.2e}, \
             bound {bound:.2e} (max vertex distance {:.2e} m)",
            r.iterations,
            common::max_dist(&x, &reference)
        );
        assert!(dist <= bound, "{kind}: {dist:e} > {bound:e}");
    }
}

#[test]
fn ipc_scenes_run_the_lbfgs_family_on_the_cpu_and_admm_refuses_them() {
    let built = common::bundled_scene("contact_balls.toml");
    let gpu = |requested| BackendChoice {
        requested,
        backend: Backend::Gpu,
        adapter: None,
        reason: "test".into(),
    };
    for kind in FAMILY {
        let mut b = common::bundled_scene("contact_balls.toml");
        b.config.solver = kind.parse().unwrap();
        // A GPU request: one line saying the device path cannot, before any device is asked.
        let msg = jello::runner::setup_on(&b, gpu(Backend::Gpu), None)
            .err()
            .unwrap()
            .to_string();
        eprintln!("{kind} --backend gpu: {msg}");
        assert!(
            msg.contains(kind) && msg.contains("IPC") && msg.contains("CPU") && !msg.contains('\n'),
            "{msg}"
        );
        // auto: the CPU, saying why; a step runs and converges.
        let mut s = jello::runner::setup_on(&b, gpu(Backend::Auto), None).unwrap();
        assert_eq!(s.choice.backend, Backend::Cpu);
        assert!(s.choice.reason.contains(&msg), "{}", s.choice.reason);
        assert_eq!(s.sim.solver_name(), kind);
        assert!(s.sim.step(false).unwrap().converged);
    }
    // ADMM: refused on any backend, one line naming the key, the solver and why.
    let mut b = built;
    b.config.solver = "admm".parse().unwrap();
    for choice in [gpu(Backend::Auto), BackendChoice::cpu(Backend::Cpu, "test")] {
        let msg = jello::runner::setup_on(&b, choice, None)
            .err()
            .unwrap()
            .to_string();
        eprintln!("admm: {msg}");
        assert!(
            msg.contains("contact.ipc")
                && msg.contains("admm")
                && msg.contains("qn")
                && !msg.contains('\n'),
            "{msg}"
        );
    }
}
