//! IPC contact across the solvers that take it on both backends: Newton-IPC (f64, the
//! reference), JGS2 (with the partners of a contacting vertex held, the default, and with the
//! paper's §7 coupling, `contact_coupling = "extended"`) and VBD on the f64 CPU backend, and JGS2
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
//! `cargo bench --bench ipc_solvers`. Env: `JELLO_BENCH_IPC_CELLS` (the stack's cells per cube
//! side, default "3,6": 486 and 3,888 tets; 10 gives 18k, 18 gives 105k),
//! `JELLO_BENCH_IPC_CARDS` (the house of cards' cell multiplier, default "1,2"),
//! `JELLO_BENCH_STEPS` (default 3), `JELLO_BENCH_BUDGET_S`, `JELLO_BENCH_DEVICE=0` to leave the
//! device rows out, `JELLO_BENCH_BOOK=1` to write the book's table.

#[path = "common/report.rs"]
#[macro_use]
mod report;

use jello::gpu::{Backend, Device};
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
    stepping_s: f64,
    iterations: usize,
    converged: usize,
}

impl Runner {
    fn new(case: &Case, (kind, backend, coupling): Entry, start: &State) -> Self {
        let mut built = case.built.clone();
        built.config.set_solver(SolverChoice::Named(kind));
        built.config.contact_coupling = coupling;
        let sim = jello::runner::setup(&built, backend, None)
            .map_err(|e| e.to_string())
            .map(|s| {
                let mut sim = s.sim;
                sim.state = start.clone();
                sim
            });
        Runner {
            label: label((kind, backend, coupling)),
            sim,
            wall_ms: Vec::new(),
            stepping_s: 0.0,
            iterations: 0,
            converged: 0,
        }
    }

    fn step(&mut self, budget_s: f64) {
        if self.stepping_s >= budget_s {
            return;
        }
        let Ok(sim) = &mut self.sim else { return };
        let t0 = Instant::now();
        match sim.step(false) {
            Ok(r) => {
                self.wall_ms.push(r.wall_ms);
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
        ContactCoupling::Held => format!("{} ({on})", kind.name()),
    }
}

/// `file` with every `cells = [a, b, c]` multiplied by `k` (each at least 1), or with the
/// stack's `cells = [3, 3, 3]` set to `n` per side.
fn scaled(file: &str, edit: impl Fn(&str) -> String) -> Result<BuiltScene, String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("assets/scenes")
        .join(file);
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
                warm_up: 10,
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
                warm_up: 6,
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
        "Each scene's own tolerance (CN 1e-7), {steps} steps in contact (from the state Newton-IPC \
         reaches in 10 steps for the stack, 6 for the house of cards), the solvers \
         stepping in turn; cells: mean ms per step (iterations per step, converged/run steps), \
         and ×: that mean over Newton-IPC's. Set-up not counted; a solver stops after \
         {budget_s:.0} s of stepping. Device: {}.",
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
    let solvers: Vec<Entry> = [
        (SolverKind::Newton, Backend::Cpu, held),
        (SolverKind::Jgs2, Backend::Cpu, held),
        (SolverKind::Jgs2, Backend::Cpu, ContactCoupling::Extended),
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
    let labels: Vec<String> = solvers.iter().map(|&e| label(e)).collect();
    out!("| scene | tets | vertices | {} |", labels.join(" | "));
    out!("|---|---|---|{}", "---|".repeat(labels.len()));
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
                r.step(budget_s);
            }
        }
        let newton = runners[0].mean_ms();
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
                    format!(
                        "{ms:.0} ({:.1}, {}/{n}) ×{:.2}",
                        r.iterations as f64 / n as f64,
                        r.converged,
                        newton.map_or(f64::NAN, |t| ms / t)
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
    }
    out!();
    report::finish("ipc_solvers");
}
