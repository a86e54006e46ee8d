//! IPC contact across the solvers that take it on both backends: Newton-IPC (f64, the
//! reference), JGS2 (with the partners of a contacting vertex held, the default, and with the
//! paper's §7 coupling, `contact_coupling = "extended"`, and with the coarse correction,
//! `"coarse"`) and VBD on the f64 CPU backend, and JGS2
//! and VBD on the device (issue 39's bench), on the bundled stack of three cubes (friction
//! μ = 0.5, scaled by its cubes' cells) and the house of cards (a mesh floor, thin stiff plates,
//! two heavy blocks; scaled by every object's cells), at the scenes' own tolerance (CN 1e-7), from their start, for a few steps.
//! Per solver and backend: ms per step (mean), iterations per step, converged steps, and the
//! ratio of its mean step to Newton-IPC's measured in the same run. The solvers step in turn
//! (one step each per round) so the machine's load falls on all alike. Set-up (JGS2's subspace,
//! pipelines) is not counted; a solver stops after `JELLO_BENCH_BUDGET_S` seconds of stepping
//! (default 120), its figures then over the steps it took.
//!
//! Device rows run on the first adapter (`WGPU_BACKEND` picks the API); on a software adapter
//! (lavapipe, llvmpipe) their times say nothing about a GPU's — the table says so.
//!
//! A second table gives each solver's ms per iteration and µs per vertex-iteration (its step
//! time over its iterations, set-up excluded), the figure the JGS2 paper's GPU timing compares
//! with: 31 ms per iteration on the 394K-vertex house of cards on an RTX 3090, 0.079 µs per
//! vertex-iteration. Each step's time and iterations are also printed to stderr as the step
//! finishes (`step:` lines), so a run stopped by a time limit keeps what it measured.
//!
//! `cargo bench --bench ipc_solvers`. Env: `JELLO_BENCH_IPC_CELLS` (the stack's cells per cube
//! side, default "3,6": 486 and 3,888 tets; 10 gives 18k, 18 gives 105k),
//! `JELLO_BENCH_IPC_CARDS` (the house of cards' cell multiplier, default "1,2"),
//! `JELLO_BENCH_STEPS` (default 3), `JELLO_BENCH_BUDGET_S`, `JELLO_BENCH_DEVICE=0` to leave the
//! device rows out, `JELLO_BENCH_IPC_SOLVERS` (a comma list of columns to run, as `solver:on`
//! with on `cpu` or `device` and solver `newton`, `jgs2`, `jgs2-extended`, `jgs2-coarse` or
//! `vbd`; default
//! all; the × column needs `newton:cpu`), `JELLO_BENCH_IPC_WARMUP` (Newton-IPC steps before the
//! measured ones, for every case: 0 measures from the scene's start, for sizes where Newton's
//! warm-up would take longer than the run), `JELLO_SCENE_DIR` (the bundled scenes' folder,
//! default `assets/scenes` of the crate; the device bundle sets it), `JELLO_BENCH_BOOK=1` to
//! write the book's table.

#[path = "common/report.rs"]
#[macro_use]
mod report;

use jello::gpu::{Backend, CounterHandle, Device};
use jello::problem::State;
use jello::scene::{BuiltScene, Scene, SolverChoice, SolverKind};
use jello::sim::Simulation;
use jello::solver::jgs2::ContactCoupling;
use std::path::PathBuf;
use std::time::Instant;

/// One scene at one size, and the Newton steps that bring it into contact first.
struct Case {
    name: String,
    built: BuiltScene,
    warm_up: usize,
}

/// A solver on a backend, stepping.
struct Runner {
    label: String,
    sim: Result<Simulation, String>,
    wall_ms: Vec<f64>,
    /// Iterations of each step taken.
    step_iterations: Vec<usize>,
    stepping_s: f64,
    iterations: usize,
    converged: usize,
    /// Device columns: the device's counters, and what they counted over the steps taken.
    counters: Option<CounterHandle>,
    cost: DeviceCost,
}

/// What a device column's steps cost the host (sums over the steps taken).
#[derive(Default)]
struct DeviceCost {
    dispatches: u64,
    submits: u64,
    syncs: u64,
    upload_bytes: u64,
    readback_bytes: u64,
}

impl Runner {
    fn new(case: &Case, (kind, backend, coupling): Entry, start: &State) -> Self {
        let mut built = case.built.clone();
        built.config.set_solver(SolverChoice::Named(kind));
        built.config.contact_coupling = coupling;
        // A device column holds its device, so the bench can read its counters.
        let mut counters = None;
        let sim = match backend {
            Backend::Gpu => Device::new(Backend::Gpu).and_then(|dev| {
                counters = Some(dev.counter_handle());
                jello::runner::setup_with_device(&built, dev, None)
            }),
            _ => jello::runner::setup(&built, backend, None),
        };
        let sim = sim.map_err(|e| e.to_string()).map(|s| {
            let mut sim = s.sim;
            sim.state = start.clone();
            sim
        });
        Runner {
            label: label((kind, backend, coupling)),
            sim,
            wall_ms: Vec::new(),
            step_iterations: Vec::new(),
            stepping_s: 0.0,
            iterations: 0,
            converged: 0,
            counters,
            cost: DeviceCost::default(),
        }
    }

    fn step(&mut self, case: &str, budget_s: f64) {
        if self.stepping_s >= budget_s {
            return;
        }
        let Ok(sim) = &mut self.sim else { return };
        let t0 = Instant::now();
        let c0 = self.counters.as_ref().map(CounterHandle::snapshot);
        match sim.step(false) {
            Ok(r) => {
                eprintln!(
                    "step: {case} | {} | {:.1} ms | {} iterations | {}",
                    self.label,
                    r.wall_ms,
                    r.iterations,
                    if r.converged {
                        "converged"
                    } else {
                        "not converged"
                    }
                );
                if let (Some(h), Some(c0)) = (&self.counters, &c0) {
                    let d = h.snapshot().since(c0);
                    let c = &mut self.cost;
                    c.dispatches += d.dispatches;
                    c.submits += d.submits;
                    c.syncs += d.syncs;
                    c.upload_bytes += d.upload_bytes;
                    c.readback_bytes += d.readback_bytes;
                }
                self.wall_ms.push(r.wall_ms);
                self.step_iterations.push(r.iterations);
                self.iterations += r.iterations;
                self.converged += usize::from(r.converged);
            }
            Err(e) => self.sim = Err(e.to_string()),
        }
        self.stepping_s += t0.elapsed().as_secs_f64();
    }

    fn mean_ms(&self) -> Option<f64> {
        (!self.wall_ms.is_empty())
            .then(|| self.wall_ms.iter().sum::<f64>() / self.wall_ms.len() as f64)
    }

    /// ms per iteration: the steps' summed time over their summed iterations, without the
    /// first step when there are more (a device solver creates its pipelines in its first).
    fn ms_per_iteration(&self) -> Option<f64> {
        let skip = usize::from(self.wall_ms.len() > 1);
        let its: usize = self.step_iterations[skip..].iter().sum();
        (its > 0).then(|| self.wall_ms[skip..].iter().sum::<f64>() / its as f64)
    }
}

/// The entry a `JELLO_BENCH_IPC_SOLVERS` item names (`solver:on`, module docs).
fn parse_entry(item: &str) -> Option<Entry> {
    let (solver, on) = item.trim().split_once(':')?;
    let backend = match on {
        "cpu" => Backend::Cpu,
        "device" => Backend::Gpu,
        _ => return None,
    };
    let (kind, coupling) = match solver {
        "newton" => (SolverKind::Newton, ContactCoupling::Held),
        "jgs2" => (SolverKind::Jgs2, ContactCoupling::Held),
        "jgs2-extended" => (SolverKind::Jgs2, ContactCoupling::Extended),
        "jgs2-coarse" => (SolverKind::Jgs2, ContactCoupling::Coarse),
        "vbd" => (SolverKind::Vbd, ContactCoupling::Held),
        _ => return None,
    };
    // Newton and the device keep the partners held (extended and coarse are the f64 JGS2's
    // options).
    let valid = match (kind, coupling) {
        (SolverKind::Newton, _) => backend == Backend::Cpu,
        (_, ContactCoupling::Extended | ContactCoupling::Coarse) => backend == Backend::Cpu,
        _ => true,
    };
    valid.then_some((kind, backend, coupling))
}

/// A solver, the backend it runs on and JGS2's contact coupling (CPU).
type Entry = (SolverKind, Backend, ContactCoupling);

/// The column label of an entry: `jgs2 (cpu)`, `jgs2 extended (cpu)`, `vbd (device)`.
fn label((kind, backend, coupling): Entry) -> String {
    let on = match backend {
        Backend::Gpu => "device",
        _ => "cpu",
    };
    match coupling {
        ContactCoupling::Extended => format!("{} extended ({on})", kind.name()),
        ContactCoupling::Coarse => format!("{} coarse ({on})", kind.name()),
        ContactCoupling::Held => format!("{} ({on})", kind.name()),
    }
}

/// `file` with every `cells = [a, b, c]` multiplied by `k` (each at least 1), or with the
/// stack's `cells = [3, 3, 3]` set to `n` per side.
fn scaled(file: &str, edit: impl Fn(&str) -> String) -> Result<BuiltScene, String> {
    let dir = std::env::var_os("JELLO_SCENE_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets/scenes"),
        PathBuf::from,
    );
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let text = edit(&text);
    let scene = Scene::parse(&path, &text).map_err(|e| e.to_string())?;
    scene.build().map_err(|e| e.to_string())
}

/// Multiplies the three integers of every `cells = [..]` in `text` by `k`.
fn times_cells(text: &str, k: usize) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("cells = [") {
        let j = i + "cells = [".len();
        let end = j + rest[j..].find(']').unwrap_or(0);
        out.push_str(&rest[..j]);
        let scaled: Vec<String> = rest[j..end]
            .split(',')
            .map(|c| (c.trim().parse::<usize>().unwrap_or(1) * k).to_string())
            .collect();
        out.push_str(&scaled.join(", "));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

fn list(var: &str, default: &str) -> Vec<usize> {
    std::env::var(var)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

fn main() {
    let steps = list("JELLO_BENCH_STEPS", "3").first().copied().unwrap_or(3);
    let budget_s: f64 = std::env::var("JELLO_BENCH_BUDGET_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120.0);
    let warm_up: Option<usize> = std::env::var("JELLO_BENCH_IPC_WARMUP")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    let mut cases = Vec::new();
    for n in list("JELLO_BENCH_IPC_CELLS", "3,6") {
        let cells = format!("cells = [{n}, {n}, {n}]");
        match scaled("contact_stack.toml", |t| {
            t.replace("cells = [3, 3, 3]", &cells)
        }) {
            Ok(built) => cases.push(Case {
                name: format!("stack, {n}³ cells per cube"),
                built,
                // The cubes have landed and rest on each other by step 10.
                warm_up: warm_up.unwrap_or(10),
            }),
            Err(e) => eprintln!("stack {n}: skipped ({e})"),
        }
    }
    for k in list("JELLO_BENCH_IPC_CARDS", "1,2") {
        match scaled("house_of_cards.toml", |t| times_cells(t, k)) {
            Ok(built) => cases.push(Case {
                name: format!("house of cards, cells ×{k}"),
                built,
                // The blocks land on the roof at t ≈ 0.06 s.
                warm_up: warm_up.unwrap_or(6),
            }),
            Err(e) => eprintln!("house of cards ×{k}: skipped ({e})"),
        }
    }
    // `JELLO_BENCH_DEVICE=0` leaves the device rows out (a software adapter takes minutes per
    // contact step).
    let device = std::env::var("JELLO_BENCH_DEVICE").map_or(true, |v| v != "0");
    let adapter = device
        .then(|| Device::new(Backend::Gpu).ok().map(|d| d.info().clone()))
        .flatten();
    out!("## IPC contact: JGS2 and VBD against Newton-IPC, CPU and device");
    out!();
    out!(
        "Each scene's own tolerance (CN 1e-7), {steps} steps {}, the solvers \
         stepping in turn; cells: mean ms per step (iterations per step, converged/run steps), \
         and ×: that mean over Newton-IPC's. Set-up not counted; a solver stops after \
         {budget_s:.0} s of stepping. Device: {}.",
        match warm_up {
            None => "in contact (from the state Newton-IPC reaches in 10 steps for the stack, 6 \
                     for the house of cards)"
                .to_string(),
            Some(0) => "from the scene's start".to_string(),
            Some(w) => format!("from the state Newton-IPC reaches in {w} steps"),
        },
        match &adapter {
            Some(a) if a.is_software() => format!(
                "{} ({}), a software adapter — its times are correctness-only, not a GPU's",
                a.name, a.backend
            ),
            Some(a) => format!("{} ({}, {})", a.name, a.backend, a.device_type),
            None if device => "no adapter found, device rows skipped".into(),
            None => "not run (JELLO_BENCH_DEVICE=0)".into(),
        }
    );
    out!();
    let held = ContactCoupling::Held;
    let chosen: Option<Vec<Entry>> = std::env::var("JELLO_BENCH_IPC_SOLVERS").ok().map(|v| {
        v.split(',')
            .filter(|i| !i.trim().is_empty())
            .filter_map(|i| {
                let e = parse_entry(i);
                if e.is_none() {
                    eprintln!("JELLO_BENCH_IPC_SOLVERS: {i:?} is not solver:cpu|device; left out");
                }
                e
            })
            .collect()
    });
    let all: Vec<Entry> = [
        (SolverKind::Newton, Backend::Cpu, held),
        (SolverKind::Jgs2, Backend::Cpu, held),
        (SolverKind::Jgs2, Backend::Cpu, ContactCoupling::Extended),
        (SolverKind::Jgs2, Backend::Cpu, ContactCoupling::Coarse),
        (SolverKind::Vbd, Backend::Cpu, held),
    ]
    .into_iter()
    .chain(adapter.iter().flat_map(|_| {
        [
            (SolverKind::Jgs2, Backend::Gpu, held),
            (SolverKind::Vbd, Backend::Gpu, held),
        ]
    }))
    .collect();
    let solvers: Vec<Entry> = match &chosen {
        Some(c) => all.into_iter().filter(|e| c.contains(e)).collect(),
        None => all,
    };
    // The × column is over Newton-IPC's mean, when it runs (the first column).
    let newton_first = solvers.first().map(|e| e.0) == Some(SolverKind::Newton);
    let labels: Vec<String> = solvers.iter().map(|&e| label(e)).collect();
    out!("| scene | tets | vertices | {} |", labels.join(" | "));
    out!("|---|---|---|{}", "---|".repeat(labels.len()));
    let mut per_iteration = Vec::new();
    let mut device_cost = Vec::new();
    for case in &cases {
        // Newton brings the scene into contact; every solver starts from that state.
        let start = {
            // The bundled scenes name newton.
            let mut sim = jello::runner::setup(&case.built, Backend::Cpu, None)
                .expect("the scene sets up")
                .sim;
            for _ in 0..case.warm_up {
                sim.step(false).expect("newton's warm-up step");
            }
            sim.state
        };
        let mut runners: Vec<Runner> = solvers
            .iter()
            .map(|&e| Runner::new(case, e, &start))
            .collect();
        for step in 1..=steps {
            eprintln!("{}: step {step}", case.name);
            for r in &mut runners {
                r.step(&case.name, budget_s);
            }
        }
        let newton = runners
            .first()
            .filter(|_| newton_first)
            .and_then(Runner::mean_ms);
        let cells: Vec<String> = runners
            .iter()
            .map(|r| match (&r.sim, r.mean_ms()) {
                (Err(e), None) => {
                    eprintln!("{}: {}: {e}", case.name, r.label);
                    "failed".into()
                }
                (_, None) => "—".into(),
                (_, Some(ms)) => {
                    let n = r.wall_ms.len();
                    let ratio = newton.map_or(String::new(), |t| format!(" ×{:.2}", ms / t));
                    format!(
                        "{ms:.0} ({:.1}, {}/{n}){ratio}",
                        r.iterations as f64 / n as f64,
                        r.converged,
                    )
                }
            })
            .collect();
        out!(
            "| {} | {} | {} | {} |",
            case.name,
            case.built.model.mesh.num_tets(),
            case.built.model.num_vertices(),
            cells.join(" | ")
        );
        let nv = case.built.model.num_vertices();
        let its: Vec<String> = runners
            .iter()
            .map(|r| {
                r.ms_per_iteration().map_or("—".into(), |ms| {
                    format!("{ms:.2} ({:.3})", 1e3 * ms / nv as f64)
                })
            })
            .collect();
        for r in runners
            .iter()
            .filter(|r| r.counters.is_some() && r.iterations > 0)
        {
            let (c, its) = (&r.cost, r.iterations as f64);
            let steps = r.wall_ms.len() as f64;
            device_cost.push(format!(
                "| {} | {} | {:.2} | {:.2} | {:.1} | {:.1} | {:.0} | {:.0} |",
                case.name,
                r.label,
                c.syncs as f64 / its,
                c.submits as f64 / its,
                c.dispatches as f64 / its,
                c.readback_bytes as f64 / its,
                c.upload_bytes as f64 / 1024.0 / steps,
                c.readback_bytes as f64 / 1024.0 / steps,
            ));
        }
        per_iteration.push(format!(
            "| {} | {} | {nv} | {} |",
            case.name,
            case.built.model.mesh.num_tets(),
            its.join(" | ")
        ));
    }
    out!();
    out!(
        "Per iteration: ms (µs per vertex-iteration), each solver's step time over its \
         iterations, without its first step when it took more (a device solver creates its \
         pipelines in its first). The JGS2 paper: 31 ms per iteration on its 394K-vertex house of cards on \
         an RTX 3090, 0.079 µs per vertex-iteration."
    );
    out!();
    out!("| scene | tets | vertices | {} |", labels.join(" | "));
    out!("|---|---|---|{}", "---|".repeat(labels.len()));
    for row in &per_iteration {
        out!("{row}");
    }
    out!();
    if !device_cost.is_empty() {
        out!(
            "Device columns' host traffic, counted by the device over the steps above, each \
             step's start (the candidate list's broad phase, readback and upload; the lagged \
             friction) included: synchronisations (readbacks and waits), queue submissions, \
             dispatches and readback bytes per iteration; uploads and readbacks per step."
        );
        out!();
        out!("| scene | solver | syncs/it | submits/it | dispatches/it | readback B/it | upload KB/step | readback KB/step |");
        out!("|---|---|---|---|---|---|---|---|");
        for row in &device_cost {
            out!("{row}");
        }
        out!();
    }
    report::finish("ipc_solvers");
}
