//! `--solver auto` against the measurements: every solver that takes a scene runs it on the
//! f64 CPU backend at the scene's own tolerance, from its start, for a few steps; the table
//! gives ms per step, iterations per step and converged steps per solver, the fastest solver
//! whose steps all converged, and the solver `auto` picks (`jello::runner::auto`) — so a
//! reader can check the rule against the figures. Set-up (JGS2 subspace, DOT partition, SMS
//! basis) is not counted; each solver's run stops after `JELLO_AUTO_BUDGET_S` seconds of
//! stepping (default 60), its figures then over the steps it took.
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

/// One solver's run of a case.
struct Outcome {
    ms_per_step: f64,
    iterations_per_step: f64,
    converged: usize,
    steps: usize,
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

/// Runs `built` with `kind` for up to `steps` steps or `budget_s` seconds of stepping.
fn run(built: &BuiltScene, kind: SolverKind, steps: usize, budget_s: f64) -> Result<Outcome, String> {
    let mut built = built.clone();
    built.config.set_solver(SolverChoice::Named(kind));
    let mut sim = jello::runner::setup(&built, Backend::Cpu, None::<&Path>)
        .map_err(|e| e.to_string())?
        .sim;
    let (mut wall, mut iterations, mut converged, mut done) = (0.0, 0, 0, 0);
    let t0 = Instant::now();
    while done < steps && t0.elapsed().as_secs_f64() < budget_s {
        let r = sim.step(false).map_err(|e| e.to_string())?;
        wall += r.wall_ms;
        iterations += r.iterations;
        converged += usize::from(r.converged);
        done += 1;
    }
    Ok(Outcome {
        ms_per_step: wall / done as f64,
        iterations_per_step: iterations as f64 / done as f64,
        converged,
        steps: done,
    })
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
         start. Cells: ms per step (iterations per step, converged/run steps); `refused`: the \
         solver does not take the scene (`jello::runner::capabilities`). Set-up not counted; \
         a run stops after {budget_s:.0} s of stepping. *fastest*: the fastest solver whose \
         steps all converged; *auto*: the rule's pick on the CPU backend."
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
        let mut cells = Vec::new();
        let mut fastest: Option<(f64, SolverKind)> = None;
        for &kind in SolverKind::ALL {
            let mut config = built.config.clone();
            config.set_solver(SolverChoice::Named(kind));
            if capabilities::refusal(&config, &built.model).is_some() {
                cells.push("refused".to_string());
                continue;
            }
            eprintln!("{}: {kind} …", case.name);
            match run(&built, kind, case.steps, budget_s) {
                Ok(o) => {
                    if o.steps == case.steps
                        && o.converged == o.steps
                        && fastest.is_none_or(|(ms, _)| o.ms_per_step < ms)
                    {
                        fastest = Some((o.ms_per_step, kind));
                    }
                    cells.push(format!(
                        "{:.1} ({:.1}, {}/{})",
                        o.ms_per_step, o.iterations_per_step, o.converged, o.steps
                    ));
                }
                Err(e) => {
                    eprintln!("{}: {kind}: {e}", case.name);
                    cells.push("failed".to_string());
                }
            }
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
