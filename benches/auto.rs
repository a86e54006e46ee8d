//! `--solver auto` against the measurements: every solver that takes a scene runs it on the
//! f64 CPU backend at the scene's own tolerance, from its start, for a few steps, the solvers
//! stepping in turn (one step each per round: a loaded machine slows them alike); the table
//! gives ms per step (mean and median), iterations per step and converged steps per solver, the
//! fastest solver whose steps all converged, and the solver `auto` picks
//! (`jello::runner::auto`) — so a reader can check the rule against the figures. Set-up (JGS2 subspace, DOT partition, SMS
//! basis) is not counted; a solver stops after `JELLO_AUTO_BUDGET_S` seconds of stepping
//! (default 60), its figures then over the steps it took.
//!
//! `cargo bench --bench auto`. Env: `JELLO_AUTO_CASES` (comma-separated case names, default
//! all), `JELLO_AUTO_BUDGET_S`, `JELLO_BENCH_BOOK=1` to write the book's table.

#[path = "common/report.rs"]
#[macro_use]
mod report;

use jello::gpu::Backend;
use jello::runner::auto::{self, Facts};
use jello::runner::capabilities;
use jello::scene::{BuiltScene, Scene, SolverChoice, SolverKind};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A scene of the table: a bundled file with text substitutions, and its steps.
struct Case {
    name: &'static str,
    file: &'static str,
    edits: &'static [(&'static str, &'static str)],
    steps: usize,
}

/// The twist's ends turning 10× faster: ±π rad/s, 0.08 rad per 25 ms step at each end.
const FAST: (&str, &str) = ("omega = -0.3141592653589793", "omega = -3.141592653589793");
const FAST_2: (&str, &str) = ("omega = 0.3141592653589793", "omega = 3.141592653589793");

const CASES: &[Case] = &[
    Case {
        name: "cantilever",
        file: "cantilever.toml",
        edits: &[],
        steps: 10,
    },
    Case {
        name: "twist",
        file: "twist.toml",
        edits: &[],
        steps: 10,
    },
    Case {
        name: "twist 40×8×8",
        file: "twist.toml",
        edits: &[("cells = [20, 4, 4]", "cells = [40, 8, 8]")],
        steps: 5,
    },
    Case {
        name: "twist 40×10×10, 10× ω",
        file: "twist.toml",
        edits: &[("cells = [20, 4, 4]", "cells = [40, 10, 10]"), FAST, FAST_2],
        steps: 3,
    },
    Case {
        name: "contact_stack",
        file: "contact_stack.toml",
        edits: &[],
        steps: 10,
    },
    Case {
        name: "contact_balls",
        file: "contact_balls.toml",
        edits: &[],
        steps: 20,
    },
    Case {
        name: "twist_stretch_squash",
        file: "twist_stretch_squash.toml",
        edits: &[],
        steps: 2,
    },
];

/// One solver's run of a case: its simulation and the steps it took.
struct Runner {
    sim: jello::sim::Simulation,
    wall_ms: Vec<f64>,
    stepping_s: f64,
    iterations: usize,
    converged: usize,
}

impl Runner {
    /// `built` set up with `kind` on the CPU backend.
    fn new(built: &BuiltScene, kind: SolverKind) -> Result<Self, String> {
        let mut built = built.clone();
        built.config.set_solver(SolverChoice::Named(kind));
        let sim = jello::runner::setup(&built, Backend::Cpu, None::<&Path>)
            .map_err(|e| e.to_string())?
            .sim;
        Ok(Runner {
            sim,
            wall_ms: Vec::new(),
            stepping_s: 0.0,
            iterations: 0,
            converged: 0,
        })
    }

    fn step(&mut self) -> Result<(), String> {
        let t0 = Instant::now();
        let r = self.sim.step(false).map_err(|e| e.to_string())?;
        self.stepping_s += t0.elapsed().as_secs_f64();
        self.wall_ms.push(r.wall_ms);
        self.iterations += r.iterations;
        self.converged += usize::from(r.converged);
        Ok(())
    }

    /// The mean step's wall time, ms.
    fn mean_ms(&self) -> f64 {
        self.wall_ms.iter().sum::<f64>() / self.wall_ms.len() as f64
    }

    /// The median step's wall time, ms.
    fn median_ms(&self) -> f64 {
        let mut t = self.wall_ms.clone();
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    }
}

fn build(case: &Case) -> Result<BuiltScene, String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("assets/scenes")
        .join(case.file);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut text = text;
    for (from, to) in case.edits {
        if !text.contains(from) {
            return Err(format!("{}: no `{from}` to edit", case.file));
        }
        text = text.replace(from, to);
    }
    let scene = Scene::parse(&path, &text).map_err(|e| e.to_string())?;
    scene.build().map_err(|e| e.to_string())
}

fn main() {
    let budget_s: f64 = std::env::var("JELLO_AUTO_BUDGET_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60.0);
    let only: Option<Vec<String>> = std::env::var("JELLO_AUTO_CASES")
        .ok()
        .map(|s| s.split(',').map(|c| c.trim().to_string()).collect());
    out!("## Every solver against the rule of `--solver auto`");
    out!();
    out!(
        "f64 CPU backend, each scene's own tolerance (CN 1e-5; 1e-7 with IPC), from the scene's \
         start, the solvers stepping in turn (one step each per round, so the machine's load \
         falls on all alike). Cells: ms per step (the median step's ms; iterations per step, \
         converged/run steps); `refused`: the solver does not take the scene \
         (`jello::runner::capabilities`). Set-up not counted; a solver stops after \
         {budget_s:.0} s of stepping. *fastest*: the fastest solver whose steps all converged; \
         *auto*: the rule's pick on the CPU backend."
    );
    out!();
    let names: Vec<&str> = SolverKind::ALL.iter().map(|k| k.name()).collect();
    out!(
        "| scene | vertices | steps | {} | fastest | auto |",
        names.join(" | ")
    );
    out!("|---|---|---|{}---|---|", "---|".repeat(names.len()));
    for case in CASES {
        if only
            .as_ref()
            .is_some_and(|o| !o.iter().any(|n| n == case.name))
        {
            continue;
        }
        let built = match build(case) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("{}: skipped ({e})", case.name);
                continue;
            }
        };
        // Every solver steps in turn, one step each per round, so the machine's load falls on
        // all of them alike.
        let mut runners: Vec<(SolverKind, Result<Runner, String>)> = Vec::new();
        for &kind in SolverKind::ALL {
            let mut config = built.config.clone();
            config.set_solver(SolverChoice::Named(kind));
            if capabilities::refusal(&config, &built.model).is_none() {
                runners.push((kind, Runner::new(&built, kind)));
            }
        }
        for step in 1..=case.steps {
            eprintln!("{}: step {step}", case.name);
            for (kind, runner) in &mut runners {
                if let Ok(r) = runner {
                    if r.stepping_s < budget_s {
                        if let Err(e) = r.step() {
                            eprintln!("{}: {kind}: {e}", case.name);
                            *runner = Err(e);
                        }
                    }
                }
            }
        }
        let mut cells = Vec::new();
        let mut fastest: Option<(f64, SolverKind)> = None;
        for &kind in SolverKind::ALL {
            let cell = match runners.iter().find(|(k, _)| *k == kind) {
                None => "refused".to_string(),
                Some((_, Err(_))) => "failed".to_string(),
                Some((_, Ok(r))) => {
                    let steps = r.wall_ms.len();
                    let ms = r.mean_ms();
                    if steps == case.steps
                        && r.converged == steps
                        && fastest.is_none_or(|(best, _)| ms < best)
                    {
                        fastest = Some((ms, kind));
                    }
                    format!(
                        "{ms:.1} ({:.1}; {:.1}, {}/{steps})",
                        r.median_ms(),
                        r.iterations as f64 / steps as f64,
                        r.converged
                    )
                }
            };
            cells.push(cell);
        }
        let pick = auto::pick(&Facts::of(&built.model, &built.config, Backend::Cpu));
        out!(
            "| {} | {} | {} | {} | {} | {} |",
            case.name,
            built.model.num_vertices(),
            case.steps,
            cells.join(" | "),
            fastest.map_or("—".to_string(), |(_, k)| k.name().to_string()),
            pick.solver
        );
    }
    out!();
    report::finish("auto");
}
