//! The multilevel solver against Newton with the sparse Cholesky on a heterogeneous contact
//! scene (issue 13's speed bench; the paper's 7–13× over direct-solve IPC): a ball with a soft
//! core (E = 1e5 Pa) in a stiff shell (1e8 Pa) thrown at 3 m/s into a stiffer clamped hoop
//! (1e10 Pa), friction μ = 0.5 (assets/scenes/contact_hetero.toml, the ball's resolution
//! raised). Every solver runs the same steps from the same start under the scene's stop rule
//! (CN 1e-7); per solver: time per step and in total, Newton iterations, CG iterations per level
//! (multilevel), unconverged steps, and its trajectory's largest vertex deviation from Newton's
//! over the run, relative to the bounding-box diagonal. All rows come from one run of this
//! binary (ratios, not absolute times, carry across machines).
//!
//! `cargo bench --bench multilevel_hetero`. Env: `JELLO_BENCH_HET_RESOLUTION` (ball
//! resolution, default 26: 105k tets with the hoop's 576; 6 as bundled), `JELLO_BENCH_HET_STEPS`
//! (default 30), `JELLO_BENCH_HET_SOLVERS` (comma-separated, default `newton,multilevel`;
//! `multilevel-direct` solves the subspace levels by a dense Cholesky of their assembled
//! Galerkin matrices — `MultilevelParams::subspace_direct` —, `multilevel-gpu` runs the
//! multilevel direction on a wgpu adapter —
//! [`jello::solver::multilevel::MultilevelSolver::attach_device`] — and `multilevel-twins` on
//! the device path's CPU twins; a `-hostls` suffix on either keeps the line search's energies
//! f64 on the host — `MultilevelParams::device_line_search` off), `JELLO_BENCH_HET_MAX_ITERATIONS` (the multilevel Newton
//! cap, default the solver's 100).
//!
//! Measured: see the tables in `src/solver/multilevel/mod.rs` ("Heterogeneous contact").

#[path = "common/report.rs"]
#[macro_use]
mod report;

use jello::gpu::{Backend, Device};
use jello::problem::{ElasticTerms, StepProblem};
use jello::scene::{BuiltScene, Scene};
use jello::sim::Simulation;
use jello::solver::multilevel::{build_solver, MultilevelParams, MultilevelSolver, MultilevelStop};
use jello::solver::{NewtonParams, NewtonSolver, StepReport, StepSolver};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

fn scene(resolution: usize) -> BuiltScene {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes/contact_hetero.toml");
    let text = std::fs::read_to_string(&path)
        .expect("contact_hetero.toml")
        .replace("resolution = 6", &format!("resolution = {resolution}"));
    Scene::parse(&path, &text)
        .and_then(|s| s.build())
        .expect("contact_hetero scene")
}

/// The multilevel solver shared with the bench, so that its per-step CG counts can be read
/// after each [`Simulation::step`].
struct Shared(Arc<Mutex<MultilevelSolver>>);

impl StepSolver for Shared {
    fn name(&self) -> String {
        self.0.lock().unwrap().name()
    }
    fn step(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        x: &mut Vec<f64>,
        trace: bool,
    ) -> jello::Result<StepReport> {
        self.0.lock().unwrap().step(problem, elastic, x, trace)
    }
}

#[derive(Default)]
struct Run {
    name: String,
    wall_ms: Vec<f64>,
    iterations: Vec<usize>,
    unconverged: Vec<usize>,
    /// (affine, SMS, full) CG iterations per step.
    cg: Vec<[usize; 3]>,
    /// Line-search time, ms, and trials decided on the device and on the host, summed.
    ls_ms: f64,
    ls_trials: [usize; 2],
    /// Positions at the end of each step.
    frames: Vec<Vec<f64>>,
    setup_ms: f64,
}

fn main() {
    run();
    report::finish("multilevel_hetero");
}

fn run() {
    let env = |k: &str| std::env::var(k).ok();
    let resolution: usize = env("JELLO_BENCH_HET_RESOLUTION")
        .and_then(|s| s.parse().ok())
        .unwrap_or(26);
    let steps: usize = env("JELLO_BENCH_HET_STEPS")
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let solvers = env("JELLO_BENCH_HET_SOLVERS").unwrap_or_else(|| "newton,multilevel".into());
    let built = scene(resolution);
    let m = &built.model;
    let h = built.config.h;
    let (lo, hi) = m.mesh.bounding_box().expect("a mesh");
    let diag = (0..3).map(|k| (hi[k] - lo[k]).powi(2)).sum::<f64>().sqrt();
    eprintln!(
        "contact_hetero at ball resolution {resolution}: {} vertices, {} tets, {steps} steps of \
         {h} s, stop {:?}",
        m.num_vertices(),
        m.mesh.num_tets(),
        built.config.stop
    );
    let mut runs: Vec<Run> = Vec::new();
    for name in solvers.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let t0 = Instant::now();
        let mut shared = None;
        let solver: Box<dyn StepSolver> = match name {
            "newton" => Box::new(
                NewtonSolver::new(
                    m,
                    NewtonParams {
                        stop: built.config.stop,
                        ..NewtonParams::default()
                    },
                )
                .expect("newton"),
            ),
            "multilevel"
            | "multilevel-direct"
            | "multilevel-gpu"
            | "multilevel-twins"
            | "multilevel-gpu-hostls"
            | "multilevel-twins-hostls" => {
                let mut params = MultilevelParams {
                    stop: MultilevelStop::Shared(built.config.stop),
                    subspace_direct: name == "multilevel-direct",
                    device_line_search: !name.ends_with("-hostls"),
                    ..MultilevelParams::default()
                };
                if let Some(n) = env("JELLO_BENCH_HET_MAX_ITERATIONS").and_then(|s| s.parse().ok())
                {
                    params.max_iterations = n;
                }
                // Cached (as `jello precompute` does): the basis is built once per mesh size and
                // the later rows, and reruns, load it; the setup column says which.
                let cache = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-cache");
                let (mut ml, _) = build_solver(m, params, Some(&cache)).expect("multilevel");
                if let Some(b) = ml.basis() {
                    eprintln!(
                        "{name}: {} handles, {} cubature samples, N_cg {}; set-up {:.0} ms (the \
                         basis's precompute, when built: geodesic {:.0}, partition {:.0}, weights \
                         {:.0}, storage {:.0}, cubature {:.0} ms), {:.0} + {:.0} bytes/vertex",
                        b.n_handles(),
                        b.cubature.n_samples(),
                        ml.n_cg(),
                        t0.elapsed().as_secs_f64() * 1e3,
                        1e3 * b.stats.geodesic_factor_s,
                        1e3 * b.stats.partition_s,
                        1e3 * b.stats.weights_s,
                        1e3 * b.stats.storage_s,
                        1e3 * b.stats.cubature_s,
                        b.stats.bytes as f64 / m.num_vertices() as f64,
                        b.stats.cubature_bytes as f64 / m.num_vertices() as f64,
                    );
                }
                match name.trim_end_matches("-hostls") {
                    "multilevel-gpu" => {
                        let d = Device::new(Backend::Gpu).expect("a wgpu adapter");
                        eprintln!("{name}: adapter {}", d.info());
                        ml.attach_device(d, m).expect("attach the device");
                    }
                    "multilevel-twins" => ml.attach_device(Device::cpu(), m).expect("twins"),
                    _ => {}
                }
                let s = Arc::new(Mutex::new(ml));
                shared = Some(s.clone());
                Box::new(Shared(s))
            }
            other => panic!("JELLO_BENCH_HET_SOLVERS: unknown solver `{other}`"),
        };
        let mut run = Run {
            name: name.to_string(),
            setup_ms: t0.elapsed().as_secs_f64() * 1e3,
            ..Run::default()
        };
        let mut sim =
            Simulation::new(m.clone(), m.initial_state(&built.velocity), h, solver).unwrap();
        for k in 0..steps {
            let r = sim.step(false).expect("step");
            let st = shared
                .as_ref()
                .map(|s| s.lock().unwrap().last_stats())
                .unwrap_or_default();
            let cg = [st.affine_cg, st.sms_cg, st.full_cg];
            run.ls_trials[0] += st.ls_device_trials;
            run.ls_trials[1] += st.ls_host_trials;
            run.ls_ms += r.timings.line_search_ms;
            let t = &r.timings;
            eprintln!(
                "{name} step {}/{steps}: {} its{}, CG {:?}, {:.0} ms (assembly {:.0}, factor {:.0}, \
                 solve {:.0}, line search {:.0})",
                k + 1,
                r.iterations,
                if r.converged { "" } else { " (NOT converged)" },
                cg,
                r.wall_ms,
                t.assembly_ms,
                t.factor_ms,
                t.solve_ms,
                t.line_search_ms
            );
            run.wall_ms.push(r.wall_ms);
            run.iterations.push(r.iterations);
            if !r.converged {
                run.unconverged.push(k + 1);
            }
            run.cg.push(cg);
            run.frames.push(sim.state.x.clone());
        }
        runs.push(run);
    }
    let newton = runs.iter().position(|r| r.name == "newton");
    out!(
        "\ncontact_hetero, ball resolution {resolution}: {} vertices, {} tets, {steps} steps\n",
        m.num_vertices(),
        m.mesh.num_tets()
    );
    out!(
        "| solver | setup ms | ms/step (mean) | ms/step (max) | total s | Newton its | CG (affine + SMS + full) | line search s | LS trials device / host | unconverged steps | max deviation from Newton / diag | time vs Newton |"
    );
    out!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in &runs {
        let total: f64 = r.wall_ms.iter().sum();
        let max = r.wall_ms.iter().cloned().fold(0.0, f64::max);
        let its: usize = r.iterations.iter().sum();
        let cg =
            r.cg.iter()
                .fold([0; 3], |a, c| [a[0] + c[0], a[1] + c[1], a[2] + c[2]]);
        let (dev, ratio) = match newton {
            Some(i) if runs[i].name != r.name => {
                let dev = r
                    .frames
                    .iter()
                    .zip(&runs[i].frames)
                    .map(|(a, b)| {
                        a.chunks(3)
                            .zip(b.chunks(3))
                            .map(|(p, q)| {
                                ((p[0] - q[0]).powi(2)
                                    + (p[1] - q[1]).powi(2)
                                    + (p[2] - q[2]).powi(2))
                                .sqrt()
                            })
                            .fold(0.0, f64::max)
                    })
                    .fold(0.0, f64::max);
                let tn: f64 = runs[i].wall_ms.iter().sum();
                (format!("{:.2e}", dev / diag), format!("{:.2}×", total / tn))
            }
            _ => ("—".into(), "1×".into()),
        };
        let unconverged = if r.unconverged.is_empty() {
            "0".to_string()
        } else {
            format!(
                "{} ({})",
                r.unconverged.len(),
                r.unconverged
                    .iter()
                    .map(|k| k.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        out!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.1} | {its} | {} ({} + {} + {}) | {:.1} | {} / {} | {unconverged} | {dev} | {ratio} |",
            r.name,
            r.setup_ms,
            total / r.wall_ms.len().max(1) as f64,
            max,
            total / 1e3,
            cg[0] + cg[1] + cg[2],
            cg[0],
            cg[1],
            cg[2],
            r.ls_ms / 1e3,
            r.ls_trials[0],
            r.ls_trials[1],
        );
    }
}
