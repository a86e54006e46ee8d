//! The solver bench of issue 40 with its cost model: every solver that runs on the device
//! (jgs2, vbd, qn, dot, lbfgs-h, admm, newton with device elastic terms) on the device backend
//! and on the f64 CPU backend of the same machine, contact-free.
//!
//! `cargo bench --bench gpu_bench [-- --quick] [-- --out DIR]`; env `JELLO_BENCH_QUICK=1`,
//! `JELLO_BENCH_OUT=DIR` (default `target/gpu-bench/`), `JELLO_MESH_DIR` (default
//! `../shared/meshes` next to the crate; the device bundle sets it), `JELLO_BENCH_SOLVERS`
//! (comma list), `JELLO_BENCH_CASES` (comma list of case names: `box`, `armadillo_18k`,
//! `armadillo_114k`, `box_1m`), `JELLO_BENCH_BACKENDS` (`device`, `cpu` or both). Writes `gpu-bench.md` (with its provenance line) and `gpu-bench.json` (the tables, and every row's figures under `data`) there and prints
//! the markdown. Docs: `docs/src/benchmarks/gpu.md`.
//!
//! A bench target rather than a `jello bench` subcommand: the CLI is being reworked in
//! parallel, and a bench binary builds standalone (`cargo bench --no-run`), so the device
//! bundle is that one stripped binary.
//!
//! # Protocol
//! Per case, solver and backend: one warm-up step (pipelines, bind groups, factorisations),
//! then `fixed` steps of exactly N iterations (N = 10, quick 4: the stop rule set unreachable,
//! or QN/ADMM's fixed mode; inversion allowed, so no step is retried strictly) — ms per
//! iteration is the median over those steps of step ms / N —
//! then, on a fresh solver after its own warm-up step, `converged` steps to the shared stop
//! rule (CN, ε = 1e-5): iterations per step and ms per step (means). The device counters ([`jello::gpu::DeviceCounters`]) are differenced
//! over the fixed steps and divided by their iterations, so each step's setup (uploads of the
//! step's start and targets) and final readback are spread over its N iterations.
//!
//! # Cost model
//! * dispatches, submits and host synchronisations per iteration, counted by the device;
//! * kernel bytes per iteration (the kernel table's bindings: see `DeviceCounters`) against
//!   the compulsory minimum: positions read once and written once (vec4 f32: 32 B per vertex)
//!   plus the rest data an elastic iteration cannot avoid reading once (per element its
//!   `GpuTet`, `GpuMat3` and `ElemParams`);
//! * achieved GB/s = kernel bytes / device time per iteration, against a streaming reference
//!   measured in the same run on the same adapter: the `copy_vec4` kernel (32 B per item: one
//!   read, one write) over 4 Mi vec4s;
//! * for the solvers with a host Cholesky (qn, dot, lbfgs-h, admm) the split of a step between
//!   the device work, the transfers (with the waits for the device) and the host solve
//!   (`DeviceBackend::host_solve_stats`), and the bus bytes per iteration;
//! * a per-kernel time split from timestamp queries (`Device::set_kernel_timing`; the
//!   optional `TIMESTAMP_QUERY` feature, requested when the adapter has it): a separate run per
//!   device row, one step of the fixed iterations with each dispatch in its own compute pass —
//!   timing changes the submission, so its wall time is reported beside, not instead of, the
//!   counted run's — giving each kernel's µs per iteration and share; stated as absent, with
//!   the reason, where the adapter lacks the feature.
//!
//! On a software adapter (lavapipe) the f32 kernels run on the CPU: its times say nothing about
//! a GPU's; the counts and bytes are the adapter-independent part of the model.

#[path = "common/report.rs"]
#[macro_use]
mod report;

#[path = "common/kicked_armadillo.rs"]
mod kicked_armadillo;

use jello::gpu::{Backend, CounterHandle, Device, DeviceCounters, GpuVec4, Kernel, Params, Plan};
use jello::material::{Material, MaterialModel};
use jello::mesh::box_grid;
use jello::problem::{
    BarrierParams, Body, DeviceElastic, ElasticTerms, InversionPolicy, Model, Pin, Script,
    StepProblem,
};
use jello::scene::Scene;
use jello::sim::{SimOptions, Simulation};
use jello::solver::admm::{AdmmParams, AdmmSolver};
use jello::solver::backend::{CpuBackend, DeviceBackend, HostSolveStats};
use jello::solver::dot::{DotParams, DotSolver};
use jello::solver::jgs2::{
    build_subspace, DeviceJgs2, Jgs2Params, Jgs2Solver, Safeguard, SubspaceOptions, Variant,
};
use jello::solver::qn::{QnMode, QnParams, QnSolver};
use jello::solver::{NewtonParams, NewtonSolver, StepReport, StepSolver, StopRule};
use serde_json::{json, Value};
use std::borrow::Cow;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

const SOLVERS: [&str; 7] = ["jgs2", "vbd", "qn", "dot", "lbfgs-h", "admm", "newton"];

struct Case {
    name: String,
    model: Model,
    velocity: Vec<[f64; 3]>,
    h: f64,
}

struct Opts {
    quick: bool,
    fixed_iterations: usize,
    fixed_steps: usize,
    converged_steps: usize,
    cap: usize,
    solvers: Vec<String>,
    cases: Option<Vec<String>>,
    /// Which backends get rows: `device`, `cpu` or both (`JELLO_BENCH_BACKENDS`).
    backends: Vec<String>,
    out: PathBuf,
    mesh_dir: PathBuf,
}

fn opts() -> Opts {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick")
        || std::env::var("JELLO_BENCH_QUICK").is_ok_and(|v| v != "0" && !v.is_empty());
    let out = args
        .iter()
        .position(|a| a == "--out")
        .and_then(|i| args.get(i + 1).cloned())
        .or_else(|| std::env::var("JELLO_BENCH_OUT").ok())
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/gpu-bench"));
    let mesh_dir = std::env::var("JELLO_MESH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/meshes"));
    let list = |k: &str| {
        std::env::var(k).ok().map(|v| {
            v.split(',')
                .map(|s| s.trim().to_string())
                .collect::<Vec<_>>()
        })
    };
    Opts {
        quick,
        fixed_iterations: if quick { 4 } else { 10 },
        fixed_steps: if quick { 2 } else { 3 },
        converged_steps: if quick { 1 } else { 3 },
        cap: if quick { 100 } else { 500 },
        solvers: list("JELLO_BENCH_SOLVERS")
            .unwrap_or_else(|| SOLVERS.iter().map(|s| s.to_string()).collect()),
        cases: list("JELLO_BENCH_CASES"),
        backends: list("JELLO_BENCH_BACKENDS")
            .unwrap_or_else(|| vec!["device".into(), "cpu".into()]),
        out,
        mesh_dir,
    }
}

/// A bar of `cells` Kuhn cells (6 tets each), 4 × 1 × 1 m, fixed corotated E = 1e5 Pa,
/// ν = 0.4, caps twisting at ±0.1π rad/s (the solvers bench's `iterations` case), h = 25 ms.
fn twist_box(name: &str, cells: [usize; 3]) -> Case {
    let mat = Material::from_young_poisson(MaterialModel::FixedCorotated, 1e5, 0.4).unwrap();
    let half = [2.0, 0.5, 0.5];
    let mesh = box_grid([-half[0], -half[1], -half[2]], half, cells);
    let (nt, nv) = (mesh.num_tets(), mesh.num_vertices());
    let cap = |sign: f64| {
        let vertices: Vec<u32> = (0..nv as u32)
            .filter(|&v| sign * mesh.positions[v as usize][0] > half[0] - 1e-9)
            .collect();
        let start = vertices
            .iter()
            .map(|&v| mesh.positions[v as usize])
            .collect();
        Pin {
            vertices,
            start,
            script: Script::Rotate {
                center: [0.0; 3],
                axis: [1.0, 0.0, 0.0],
                omega: sign * 0.1 * std::f64::consts::PI,
            },
        }
    };
    let pins = vec![cap(-1.0), cap(1.0)];
    let model = Model::new(
        mesh,
        vec![Body {
            name: "bar".into(),
            vertices: 0..nv,
            tets: 0..nt,
        }],
        vec![mat; nt],
        vec![1000.0; nt],
        [0.0; 3],
        pins,
        vec![],
        BarrierParams {
            dhat: 1e-3,
            kappa: 1.0,
        },
    )
    .expect("model");
    Case {
        name: format!("{name} ({nv} vertices, {nt} tets, twist)"),
        velocity: vec![[0.0; 3]; nv],
        h: 0.025,
        model,
    }
}

/// The convergence bench's kicked armadillo on `mesh` (stable Neo-Hookean E = 1e5, left hand
/// pinned, 3 kN on the right foot for 20 ms, h = 10 ms), or `None` with a note when absent.
fn armadillo(dir: &Path, mesh: &str, notes: &mut Vec<String>) -> Option<Case> {
    let path = dir.join(format!("{mesh}.node"));
    if !path.exists() {
        notes.push(format!("{mesh}: {} not found, skipped", path.display()));
        return None;
    }
    let scene = kicked_armadillo::scene(&path, 1e5, 3000.0);
    let built = match Scene::parse(Path::new("armadillo.toml"), &scene).and_then(|s| s.build()) {
        Ok(b) => b,
        Err(e) => {
            notes.push(format!("{mesh}: {e}; skipped"));
            return None;
        }
    };
    Some(Case {
        name: format!(
            "{mesh} ({} vertices, {} tets, kicked foot)",
            built.model.num_vertices(),
            built.model.mesh.num_tets()
        ),
        velocity: built.velocity.clone(),
        h: built.config.h,
        model: built.model,
    })
}

/// A solver shared with the bench, so its backend's statistics stay readable after the
/// simulation owns it.
struct Shared<S>(Rc<RefCell<S>>);

impl<S: StepSolver> StepSolver for Shared<S> {
    fn name(&self) -> String {
        self.0.borrow().name()
    }
    fn step(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn jello::problem::ElasticTerms,
        x: &mut Vec<f64>,
        trace: bool,
    ) -> jello::Result<StepReport> {
        self.0.borrow_mut().step(problem, elastic, x, trace)
    }
}

type Stats = Box<dyn Fn() -> HostSolveStats>;

/// What a built solver gives the bench: the simulation, the device's counters (device runs)
/// and the host-solve statistics (device runs of solvers with a host Cholesky).
struct Built {
    sim: Simulation,
    counters: Option<CounterHandle>,
    host: Option<Stats>,
}

fn stop_params(fixed: Option<usize>, cap: usize) -> (StopRule, usize, QnMode) {
    match fixed {
        // ε = 0 is never met: exactly `n` iterations.
        Some(n) => (StopRule::Cn { eps: 0.0 }, n, QnMode::Fixed(n)),
        None => (StopRule::Cn { eps: 1e-5 }, cap, QnMode::Rule),
    }
}

#[allow(clippy::too_many_arguments)]
fn build(
    case: &Case,
    solver: &str,
    device: bool,
    fixed: Option<usize>,
    cap: usize,
    sub: &mut Option<Arc<jello::solver::jgs2::Jgs2Subspace>>,
    timed: bool,
) -> jello::Result<Built> {
    // Fixed iterations allow inversion (both materials are finite through it): an unconverged
    // step may end with inverted elements, and under forbid the simulation would retry it
    // strictly (a different iteration: the device's has no inversion filter and backtracks,
    // measured 3.3 trials per iteration on armadillo_18k, 15 on 114k), so the fixed steps would
    // not time ordinary iterations. Converged steps keep forbid, as a scene does.
    let model = if fixed.is_some() {
        let mut m = case.model.clone();
        m.inversion = InversionPolicy::Allow;
        Cow::Owned(m)
    } else {
        Cow::Borrowed(&case.model)
    };
    let m: &Model = &model;
    let (stop, max_iterations, mode) = stop_params(fixed, cap);
    let mut strict_solver: Option<Box<dyn StepSolver>> = None;
    let dev = if device {
        let mut d = Device::new(Backend::Gpu)?;
        if timed {
            d.set_kernel_timing(true)?;
        }
        Some(d)
    } else {
        None
    };
    let counters = dev.as_ref().map(|d| d.counter_handle());
    let mut host: Option<Stats> = None;
    let mut elastic = None;
    let boxed: Box<dyn StepSolver> = match solver {
        "jgs2" | "vbd" => {
            let jgs2 = solver == "jgs2";
            let params = Jgs2Params {
                stop,
                max_iterations,
                variant: if jgs2 {
                    Variant::Jacobi
                } else {
                    Variant::GaussSeidel
                },
                safeguard: if jgs2 { Safeguard::Cut } else { Safeguard::Off },
            };
            let subspace = if jgs2 {
                if sub.is_none() {
                    // The precompute runs on the CPU and can take minutes at 1M tets: say so.
                    eprintln!("  building the JGS2 subspace ({} tets)…", m.mesh.num_tets());
                    let t0 = Instant::now();
                    *sub = Some(Arc::new(build_subspace(
                        m,
                        case.h,
                        &SubspaceOptions::default(),
                    )?));
                    eprintln!("  subspace built in {:.1} s", t0.elapsed().as_secs_f64());
                }
                sub.clone()
            } else {
                None
            };
            match (dev, subspace) {
                (Some(d), s) => {
                    // As the runner: forbid's strict retries on the f64 reference (only the
                    // converged steps keep forbid).
                    if fixed.is_none() {
                        strict_solver = Some(match &s {
                            Some(s) => Box::new(Jgs2Solver::jgs2(m, params, s.clone())?),
                            None => Box::new(Jgs2Solver::vbd(m, params)),
                        });
                    }
                    Box::new(DeviceJgs2::new(d, m, params, s)?)
                }
                (None, Some(s)) => Box::new(Jgs2Solver::jgs2(m, params, s)?),
                (None, None) => Box::new(Jgs2Solver::vbd(m, params)),
            }
        }
        "qn" | "dot" | "lbfgs-h" => {
            let threads = rayon::current_num_threads();
            let dp = DotParams {
                subdomains: if solver == "dot" { threads } else { 1 },
                stop,
                max_iterations,
                mode,
                ..DotParams::default()
            };
            let qp = QnParams {
                stop,
                max_iterations,
                mode,
                ..QnParams::default()
            };
            match dev {
                Some(d) => {
                    let b = DeviceBackend::new(d, m)?;
                    if solver == "qn" {
                        let s = Rc::new(RefCell::new(QnSolver::new(m, b, qp)?));
                        let r = s.clone();
                        host = Some(Box::new(move || r.borrow().backend().host_solve_stats()));
                        Box::new(Shared(s))
                    } else {
                        let s = Rc::new(RefCell::new(DotSolver::new(m, b, dp)?));
                        let r = s.clone();
                        host = Some(Box::new(move || r.borrow().backend().host_solve_stats()));
                        Box::new(Shared(s))
                    }
                }
                None => {
                    let b = CpuBackend::new(m.num_vertices());
                    if solver == "qn" {
                        Box::new(QnSolver::new(m, b, qp)?)
                    } else {
                        Box::new(DotSolver::new(m, b, dp)?)
                    }
                }
            }
        }
        "admm" => {
            let p = AdmmParams {
                stop,
                max_iterations,
                mode,
                ..AdmmParams::default()
            };
            match dev {
                Some(d) => {
                    let b = DeviceBackend::new(d, m)?;
                    let s = Rc::new(RefCell::new(AdmmSolver::with_backend(m, b, p)?));
                    let r = s.clone();
                    host = Some(Box::new(move || r.borrow().backend().host_solve_stats()));
                    Box::new(Shared(s))
                }
                None => Box::new(AdmmSolver::new(m, p)?),
            }
        }
        "newton" => {
            let p = NewtonParams {
                stop,
                max_iterations,
                ..NewtonParams::default()
            };
            if let Some(d) = dev {
                elastic = Some(DeviceElastic::on_device(m, d)?);
            }
            Box::new(NewtonSolver::new(m, p)?)
        }
        other => {
            return Err(jello::JelloError::Invalid(format!(
                "JELLO_BENCH_SOLVERS: unknown solver `{other}`"
            )))
        }
    };
    let options = SimOptions {
        elastic: elastic.map(|e| Box::new(e) as Box<dyn ElasticTerms + Send>),
        strict_solver,
        ..SimOptions::default()
    };
    let sim = Simulation::with_options(
        m.clone(),
        m.initial_state(&case.velocity),
        case.h,
        boxed,
        options,
    )?;
    Ok(Built {
        sim,
        counters,
        host,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// Bytes an iteration cannot avoid moving (see the module docs).
fn compulsory_bytes(m: &Model) -> u64 {
    use jello::gpu::{ElemParams, GpuMat3, GpuTet};
    use std::mem::size_of;
    let per_elem = size_of::<GpuTet>() + size_of::<GpuMat3>() + size_of::<ElemParams>();
    (32 * m.num_vertices() + per_elem * m.mesh.num_tets()) as u64
}

/// The streaming reference: `copy_vec4` over 4 Mi vec4s (64 MiB each way; 32 B per item, one
/// read and one write), 8 dispatches in one submit, best of 4, in GB/s; `None` on the CPU
/// backend.
fn streaming_reference() -> Option<f64> {
    let mut d = Device::new(Backend::Gpu).ok()?;
    let n = 4 << 20;
    let x = d.alloc::<GpuVec4>("ref x", n).ok()?;
    let y = d.alloc::<GpuVec4>("ref y", n).ok()?;
    let mut p = Plan::new();
    for _ in 0..8 {
        p.dispatch(Kernel::CopyVec4, &[x.id(), y.id()], Params::new(), n as u32);
    }
    let mut best = f64::INFINITY;
    for _ in 0..4 {
        d.wait_idle().ok()?;
        let c0 = d.counters();
        let t0 = Instant::now();
        d.submit(&p).ok()?;
        d.wait_idle().ok()?;
        let s = t0.elapsed().as_secs_f64();
        let bytes = d.counters().since(&c0).device_bytes() as f64;
        best = best.min(s / bytes);
    }
    Some(1e-9 / best)
}

#[derive(Default)]
struct Row {
    case: String,
    solver: String,
    backend: String,
    ms_per_iteration: f64,
    fixed_iterations: usize,
    converged_iterations: f64,
    converged_ms_per_step: f64,
    converged: String,
    counts: Option<DeviceCounters>,
    counted_iterations: usize,
    /// Line-search trials (trial points evaluated) over the fixed steps, from the step reports.
    trials: usize,
    host: Option<(HostSolveStats, f64)>,
    /// The timed run (device rows): its counters with per-kernel times, its iterations and
    /// its ms per iteration — or why there is none.
    timed: Option<(DeviceCounters, usize, f64)>,
    timing_absent: Option<String>,
    error: Option<String>,
}

fn run_row(
    case: &Case,
    solver: &str,
    device: bool,
    o: &Opts,
    sub: &mut Option<Arc<jello::solver::jgs2::Jgs2Subspace>>,
) -> Row {
    let mut row = Row {
        case: case.name.clone(),
        solver: solver.to_string(),
        backend: if device { "device" } else { "cpu-f64" }.to_string(),
        fixed_iterations: o.fixed_iterations,
        ..Row::default()
    };
    let r = (|| -> jello::Result<()> {
        // Fixed iterations: a warm-up step, then the measured steps.
        let mut b = build(
            case,
            solver,
            device,
            Some(o.fixed_iterations),
            o.cap,
            sub,
            false,
        )?;
        b.sim.step(false)?;
        let c0 = b.counters.as_ref().map(|c| c.snapshot());
        let h0 = b.host.as_ref().map(|h| h());
        let mut per_it = Vec::new();
        let mut its = 0;
        let t_all = Instant::now();
        for _ in 0..o.fixed_steps {
            let t0 = Instant::now();
            let r = b.sim.step(false)?;
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            its += r.iterations;
            row.trials += r.work.line_search_trials;
            per_it.push(ms / r.iterations.max(1) as f64);
        }
        let wall = t_all.elapsed().as_secs_f64() * 1e3;
        row.ms_per_iteration = median(per_it);
        row.counted_iterations = its;
        if let (Some(c), Some(c0)) = (&b.counters, &c0) {
            row.counts = Some(c.snapshot().since(c0));
        }
        if let (Some(h), Some(h0)) = (&b.host, &h0) {
            let h1 = h();
            row.host = Some((
                HostSolveStats {
                    calls: h1.calls - h0.calls,
                    bytes: h1.bytes - h0.bytes,
                    transfer_ms: h1.transfer_ms - h0.transfer_ms,
                    wait_ms: h1.wait_ms - h0.wait_ms,
                    host_ms: h1.host_ms - h0.host_ms,
                },
                wall,
            ));
        }
        drop(b);
        // Timed: the per-kernel split from timestamp queries, on a fresh solver, one step of
        // the fixed iterations (no warm-up needed: pipelines and bind groups are made before a
        // plan's timestamps start, and uploads are not kernels).
        if device {
            match build(
                case,
                solver,
                true,
                Some(o.fixed_iterations),
                o.cap,
                sub,
                true,
            ) {
                Ok(mut b) => {
                    let c0 = b.counters.as_ref().map(|c| c.snapshot());
                    let t0 = Instant::now();
                    let r = b.sim.step(false)?;
                    let ms = t0.elapsed().as_secs_f64() * 1e3;
                    if let (Some(c), Some(c0)) = (&b.counters, &c0) {
                        let its = r.iterations.max(1);
                        row.timed = Some((c.snapshot().since(c0), its, ms / its as f64));
                    }
                }
                Err(e) => row.timing_absent = Some(e.to_string()),
            }
        }
        // Converged: the shared stop rule.
        // A warm-up step first (pipelines, bind groups, factorisations), as above: the
        // converged steps start from the state after it.
        let mut b = build(case, solver, device, None, o.cap, sub, false)?;
        b.sim.step(false)?;
        let (mut its, mut ms, mut ok) = (0, 0.0, 0);
        for _ in 0..o.converged_steps {
            let t0 = Instant::now();
            let r = b.sim.step(false)?;
            ms += t0.elapsed().as_secs_f64() * 1e3;
            its += r.iterations;
            ok += r.converged as usize;
        }
        let n = o.converged_steps.max(1) as f64;
        row.converged_iterations = its as f64 / n;
        row.converged_ms_per_step = ms / n;
        row.converged = format!("{ok}/{}", o.converged_steps);
        Ok(())
    })();
    if let Err(e) = r {
        row.error = Some(e.to_string());
    }
    row
}

/// One row of the markdown table (with its trailing newline) and its JSON object.
fn row_output(r: &Row, model: &Model, reference: Option<f64>) -> (String, Value) {
    let mut line = String::new();
    let min = compulsory_bytes(model) as f64;
    let its = r.counted_iterations.max(1) as f64;
    let (disp, subm, syncs, kb, bus) =
        r.counts
            .as_ref()
            .map_or((f64::NAN, f64::NAN, f64::NAN, f64::NAN, f64::NAN), |c| {
                (
                    c.dispatches as f64 / its,
                    c.submits as f64 / its,
                    c.syncs as f64 / its,
                    c.device_bytes() as f64 / its,
                    c.bus_bytes() as f64 / its,
                )
            });
    let gbs = kb / (r.ms_per_iteration * 1e6);
    let split = r.host.as_ref().map(|(h, wall)| {
        let t = h.transfer_ms / wall * 100.0;
        let hs = h.host_ms / wall * 100.0;
        (100.0 - t - hs, t, hs, h.calls as f64 / its)
    });
    if let Some(e) = &r.error {
        line.push_str(&format!(
            "| {} | {} | {} | error: {} |\n",
            r.case,
            r.solver,
            r.backend,
            e.replace('|', "/")
        ));
    } else {
        line.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.case,
            r.solver,
            r.backend,
            fmt(r.ms_per_iteration, 2),
            fmt(r.converged_iterations, 1),
            fmt(r.converged_ms_per_step, 1),
            r.converged,
            fmt(r.trials as f64 / its, 2),
            fmt(disp, 1),
            fmt(subm, 2),
            fmt(syncs, 2),
            fmt(kb / 1e6, 2),
            if r.counts.is_some() { fmt(min / 1e6, 2) } else { "—".into() },
            fmt(kb / min, 1),
            fmt(gbs, 2),
            reference.map_or("—".into(), |rf| fmt(100.0 * gbs / rf, 0)),
            fmt(bus / 1e3, 1),
            split.map_or("—".into(), |(d, t, h, calls)| format!("{d:.0} / {t:.0} / {h:.0} ({calls:.1} solves/it)")),
        ));
    }
    let kernels: Vec<Value> = r.counts.as_ref().map_or(Vec::new(), |c| {
        c.kernel_counts()
            .map(|(k, n)| {
                // The timed run's time for this kernel, per iteration of that run.
                let time = r.timed.as_ref().and_then(|(t, tits, _)| {
                    t.kernels
                        .get(k.index())
                        .filter(|kc| kc.timed > 0)
                        .map(|kc| kc.time_ns as f64 * 1e-3 / *tits as f64)
                });
                json!({
                    "kernel": k.desc().name,
                    "dispatches_per_iteration": n.dispatches as f64 / its,
                    "bytes_per_iteration": (n.read_bytes + n.write_bytes) as f64 / its,
                    "time_us_per_iteration": time,
                })
            })
            .collect()
    });
    let json = json!({
        "case": r.case,
        "solver": r.solver,
        "backend": r.backend,
        "error": r.error,
        "ms_per_iteration": r.ms_per_iteration,
        "fixed_iterations_per_step": r.fixed_iterations,
        "line_search_trials_per_iteration": r.trials as f64 / its,
        "converged_iterations_per_step": r.converged_iterations,
        "converged_ms_per_step": r.converged_ms_per_step,
        "converged": r.converged,
        "counts": r.counts.as_ref().map(|c| json!({
            "iterations": r.counted_iterations,
            "dispatches": c.dispatches,
            "submits": c.submits,
            "syncs": c.syncs,
            "copies": c.copies,
            "upload_bytes": c.upload_bytes,
            "param_bytes": c.param_bytes,
            "readback_bytes": c.readback_bytes,
            "kernel_read_bytes": c.kernel_read_bytes,
            "kernel_write_bytes": c.kernel_write_bytes,
            "copy_bytes": c.copy_bytes,
            "compulsory_bytes_per_iteration": min,
            "kernels": kernels,
        })),
        "timed_ms_per_iteration": r.timed.as_ref().map(|t| t.2),
        "host_solve": r.host.as_ref().map(|(h, wall)| json!({
            "calls": h.calls, "bytes": h.bytes, "transfer_ms": h.transfer_ms,
            "wait_ms": h.wait_ms, "host_ms": h.host_ms, "wall_ms": wall,
        })),
    });
    (line, json)
}

fn fmt(v: f64, digits: usize) -> String {
    if v.is_finite() {
        format!("{v:.digits$}")
    } else {
        "—".into()
    }
}

fn main() {
    let o = opts();
    let t_start = Instant::now();
    let mut notes = Vec::new();
    let want = |name: &str| o.cases.as_ref().is_none_or(|c| c.iter().any(|x| x == name));
    let mut cases = Vec::new();
    if want("box") {
        cases.push(if o.quick {
            twist_box("box", [12, 3, 3])
        } else {
            twist_box("box", [24, 6, 6])
        });
    }
    if !o.quick {
        for mesh in ["armadillo_18k", "armadillo_114k"] {
            if want(mesh) {
                if let Some(c) = armadillo(&o.mesh_dir, mesh, &mut notes) {
                    cases.push(c);
                }
            }
        }
        if want("box_1m") {
            // 100 × 40 × 42 cells × 6 = 1,008,000 tets.
            cases.push(twist_box("box_1m", [100, 40, 42]));
        }
    } else {
        notes.push("quick mode: the small box only".into());
    }
    let adapter = Device::new(Backend::Gpu).map(|d| d.info().to_string());
    let adapter_name = match &adapter {
        Ok(a) => a.clone(),
        Err(e) => {
            notes.push(format!("no GPU adapter ({e}): device rows fail"));
            "none".into()
        }
    };
    let reference = streaming_reference();
    let mut rows = Vec::new();
    for case in &cases {
        let big = case.model.mesh.num_tets() > 500_000;
        let mut sub = None;
        for solver in &o.solvers {
            for device in [true, false] {
                if !o
                    .backends
                    .iter()
                    .any(|b| b == if device { "device" } else { "cpu" })
                {
                    continue;
                }
                if big && solver == "newton" && !device {
                    notes.push(format!(
                        "{}: newton on the CPU skipped (a 3n Cholesky per iteration)",
                        case.name
                    ));
                    continue;
                }
                eprintln!(
                    "{} / {solver} / {}",
                    case.name,
                    if device { "device" } else { "cpu" }
                );
                let row = run_row(case, solver, device, &o, &mut sub);
                // Each row on stderr as it finishes, so a run stopped early keeps what it measured.
                eprint!("row: {}", row_output(&row, &case.model, reference).0);
                rows.push(row);
            }
        }
    }
    // Markdown.
    let mut md = String::new();
    md.push_str(&format!(
        "# GPU bench ({})\n\nadapter: {adapter_name}; streaming reference (copy_vec4, 32 B/item): {} GB/s; \
         {} fixed iterations per step × {} steps (median ms/iteration), {} converged steps (CN, ε = 1e-5)\n\n",
        if o.quick { "quick" } else { "full" },
        reference.map_or("—".into(), |r| fmt(r, 2)),
        o.fixed_iterations,
        o.fixed_steps,
        o.converged_steps
    ));
    md.push_str("| case | solver | backend | ms/it | its/step (conv.) | ms/step (conv.) | converged | trials/it | dispatches/it | submits/it | syncs/it | kernel MB/it | min MB/it | ratio | GB/s | % ref | bus KB/it | host solve split (device / transfer / host %) |\n");
    md.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    let mut json_rows = Vec::new();
    for r in &rows {
        let model = &cases.iter().find(|c| c.name == r.case).expect("case").model;
        let (line, json) = row_output(r, model, reference);
        md.push_str(&line);
        json_rows.push(json);
    }
    md.push('\n');
    // Per-kernel time split from the timed runs.
    let timed_rows: Vec<&Row> = rows.iter().filter(|r| r.timed.is_some()).collect();
    let absent: Vec<String> = rows
        .iter()
        .filter_map(|r| r.timing_absent.clone())
        .collect();
    if !timed_rows.is_empty() {
        md.push_str(&format!(
            "Per-kernel time split (timestamp queries at the start and end of each dispatch, in a \
             separate run of one {}-iteration step with each dispatch in its own pass): kernel \
             time per iteration, the timed run's wall ms per iteration, and the kernels taking \
             the most time (µs per iteration, share of the kernel time).\n\n",
            o.fixed_iterations
        ));
        md.push_str("| case | solver | kernel ms/it | wall ms/it (timed run) | kernels by time (µs/it, %) |\n");
        md.push_str("|---|---|---|---|---|\n");
        for r in &timed_rows {
            let (c, its, wall) = r.timed.as_ref().expect("filtered");
            let its = *its as f64;
            let mut ks: Vec<(Kernel, u64)> =
                c.kernel_counts().map(|(k, n)| (k, n.time_ns)).collect();
            ks.sort_by_key(|k| std::cmp::Reverse(k.1));
            let total: u64 = ks.iter().map(|k| k.1).sum();
            let top: Vec<String> = ks
                .iter()
                .take(6)
                .map(|(k, ns)| {
                    format!(
                        "{} {:.0} ({:.0}%)",
                        k.desc().name,
                        *ns as f64 * 1e-3 / its,
                        100.0 * *ns as f64 / total.max(1) as f64
                    )
                })
                .collect();
            md.push_str(&format!(
                "| {} | {} | {} | {} | {}{} |\n",
                r.case,
                r.solver,
                fmt(total as f64 * 1e-6 / its, 2),
                fmt(*wall, 2),
                top.join(", "),
                if ks.len() > 6 {
                    format!(", {} more", ks.len() - 6)
                } else {
                    String::new()
                }
            ));
        }
        md.push('\n');
    }
    if let Some(why) = absent.first() {
        notes.push(format!("per-kernel time split: absent ({why})"));
    }
    for n in &notes {
        md.push_str(&format!("- {n}\n"));
    }
    let wall = t_start.elapsed().as_secs_f64();
    md.push_str(&format!("- wall time {wall:.1} s\n"));
    out!("{md}");
    let doc = json!({
        "mode": if o.quick { "quick" } else { "full" },
        "adapter": adapter_name,
        "streaming_reference_gb_s": reference,
        "timestamp_query": if rows.iter().any(|r| r.timed.is_some()) {
            "present".to_string()
        } else {
            format!("absent: {}", rows.iter().find_map(|r| r.timing_absent.clone()).unwrap_or_else(|| "no device row".into()))
        },
        "fixed_iterations": o.fixed_iterations,
        "notes": notes,
        "wall_s": wall,
        "rows": json_rows,
    });
    report::finish_to("gpu-bench", Some(&o.out), doc);
}
