//! `jello compare` for every solver over the bundled scenes: each (scene, solver) pair runs on
//! the f64 CPU path and on the device in lockstep (`jello::compare::compare`, what `jello
//! compare SCENE --solver S` prints) for the first steps of the scene, and the table gives the
//! worst per-step deviation (largest vertex distance / rest bounding-box diagonal), the mean
//! deviation, both runs' iterations and the wall time — or, where the device cannot run the
//! pair, the reason `--backend gpu` gives. The bound `jello compare` applies by default is
//! [`jello::compare::DEFAULT_MAX_DEVIATION`]; a row above it is marked.
//!
//! On a software adapter (lavapipe, llvmpipe) this is a correctness table, not a speed one: the
//! wall times say only what the run cost there.
//!
//! `cargo bench --bench compare`. Env: `JELLO_BENCH_COMPARE_SCENES` (comma-separated scene
//! names, default every bundled scene below 20k tets), `JELLO_BENCH_COMPARE_SOLVERS`
//! (default every solver), `JELLO_BENCH_COMPARE_STEPS` (steps per pair, default each case's),
//! `JELLO_BENCH_COMPARE_CONTINUE=FILE[,FILE…]` (earlier runs' `compare.md`: their pairs are
//! copied, each row naming the commit of the run that measured it, except those this sitting
//! selects by name — the scenes of `JELLO_BENCH_COMPARE_SCENES` with the solvers of
//! `JELLO_BENCH_COMPARE_SOLVERS` run again; without a scene list the sitting runs only the
//! pairs no earlier run has. So a whole table can be finished over several sittings, or from
//! runs made side by side with `JELLO_BENCH_OUT` and different scenes — a full run takes
//! hours on a software adapter),
//! `JELLO_BENCH_BOOK=1` to write the book's table.

#[path = "common/report.rs"]
#[macro_use]
mod report;

use jello::compare::{compare, DEFAULT_MAX_DEVIATION};
use jello::scene::{Scene, SolverChoice, SolverKind};
use std::path::PathBuf;
use std::time::Instant;

/// A bundled scene and how many of its first steps a pair runs (enough to reach its first
/// contact or the start of its deformation: Newton's iterations jump at step 21 of the hoop
/// and step 11 of the cup, where the ball lands; the blocks hit the house of cards at step 6).
struct Case {
    name: &'static str,
    steps: usize,
}

const CASES: &[Case] = &[
    Case {
        name: "cantilever",
        steps: 10,
    },
    Case {
        name: "twist",
        steps: 10,
    },
    Case {
        name: "stiff_soft",
        steps: 10,
    },
    Case {
        name: "drop",
        steps: 20,
    },
    Case {
        name: "twist_stretch_squash",
        steps: 3,
    },
    Case {
        name: "contact_balls",
        steps: 10,
    },
    Case {
        name: "contact_stack",
        steps: 5,
    },
    Case {
        name: "contact_hoop",
        steps: 24,
    },
    Case {
        name: "contact_cup",
        steps: 16,
    },
    Case {
        name: "contact_twist",
        steps: 8,
    },
    Case {
        name: "house_of_cards",
        steps: 8,
    },
    Case {
        name: "pile_press",
        steps: 4,
    },
    Case {
        name: "ring_net",
        steps: 4,
    },
];

fn list(var: &str) -> Option<Vec<String>> {
    std::env::var(var)
        .ok()
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.split(',').map(|t| t.trim().to_string()).collect())
}

/// The rows of an earlier run's document by (scene, solver), each ending in the column that
/// names its run (the earlier document's commit, or the column it already had), and that run's
/// provenance line.
fn earlier_rows(path: &str) -> (std::collections::HashMap<(String, String), String>, String) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        eprintln!("JELLO_BENCH_COMPARE_CONTINUE: cannot read {path}: {e}");
        std::process::exit(2);
    });
    let mut provenance = text
        .lines()
        .find(|l| l.starts_with("_Measured"))
        .unwrap_or("_Measured at an unknown commit_")
        .trim_matches('_')
        .to_string();
    // A continued document names the runs it copied from: keep them.
    if let Some(before) = text
        .lines()
        .find(|l| l.starts_with("Continued from"))
        .and_then(|l| l.split_once("provenance: "))
    {
        provenance = format!("{provenance}; {}", before.1);
    }
    let commit = provenance
        .split("commit ")
        .nth(1)
        .and_then(|c| c.split(|ch: char| !ch.is_ascii_hexdigit()).next())
        .filter(|c| !c.is_empty())
        .unwrap_or("unknown")
        .to_string();
    let mut rows = std::collections::HashMap::new();
    for l in text.lines().filter(|l| l.starts_with("| ")) {
        let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
        if cells.len() < 8 || cells[0] == "scene" {
            continue;
        }
        // The run column names the document's own commit where it said "this run".
        let row = match cells.len() {
            8 => format!("{l} {commit} |"),
            _ if cells[8] == "this run" => {
                let cut = l.trim_end().trim_end_matches('|').trim_end();
                let cut = cut.strip_suffix("this run").unwrap_or(cut);
                format!("{cut}{commit} |")
            }
            _ => l.to_string(),
        };
        rows.insert((cells[0].to_string(), cells[1].to_string()), row);
    }
    (rows, provenance)
}

fn main() {
    // Several earlier documents (comma-separated) merge; a later one's row wins.
    let earlier = std::env::var("JELLO_BENCH_COMPARE_CONTINUE")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .map(|list| {
            let (mut rows, mut lines) = (std::collections::HashMap::new(), Vec::new());
            for p in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let (r, provenance) = earlier_rows(p);
                rows.extend(r);
                lines.push(provenance);
            }
            (rows, lines.join("; "))
        });
    let scenes = list("JELLO_BENCH_COMPARE_SCENES");
    let solvers = list("JELLO_BENCH_COMPARE_SOLVERS");
    let steps_override =
        std::env::var("JELLO_BENCH_COMPARE_STEPS")
            .ok()
            .map(|s| match s.parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => {
                    eprintln!("JELLO_BENCH_COMPARE_STEPS: expected a positive integer, got {s:?}");
                    std::process::exit(2);
                }
            });
    let kinds: Vec<SolverKind> = SolverKind::ALL
        .iter()
        .copied()
        .filter(|k| {
            solvers
                .as_ref()
                .is_none_or(|l| l.iter().any(|n| n == k.name()))
        })
        .collect();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets/scenes");

    out!("# GPU against CPU: every solver over the bundled scenes");
    out!();
    out!(
        "Per (scene, solver): the first steps on the f64 CPU path and on the device in lockstep \
         (`jello compare SCENE --solver S --steps N`). Deviation: largest (and mean) vertex \
         distance between the two runs / rest bounding-box diagonal, worst step; `jello \
         compare`'s default bound is {DEFAULT_MAX_DEVIATION:.0e} (rows above it marked ✗). \
         Iterations and steps that met the stop rule: summed over the steps, CPU / device. \
         \"not on the device\": what `--backend gpu` (or any backend) says for the pair."
    );
    out!();
    let planned: Vec<&str> = CASES
        .iter()
        .map(|c| c.name)
        .filter(|n| scenes.as_ref().is_none_or(|l| l.iter().any(|m| m == n)))
        .collect();
    out!(
        "Scenes, in order: {}; solvers: {}. The document is rewritten after every pair, so a run \
         stopped early publishes the pairs it finished (a last line says when the sitting ended, and \
         which pairs no run has measured).",
        planned.join(", "),
        kinds
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some((rows, provenance)) = &earlier {
        out!(
            "Continued from earlier runs ({} of their pairs copied, not rerun; the last column \
             names the commit each row was measured at, \"this run\" for the rest). Their \
             provenance: {}",
            rows.len(),
            provenance
        );
    }
    out!();
    out!("| scene | solver | steps | worst max deviation | worst mean deviation | iterations CPU / device | converged steps CPU / device | wall s | run |");
    out!("|---|---|---|---|---|---|---|---|---|");
    let mut adapter = None;
    // Pairs of the whole table that neither this sitting nor an earlier run measured.
    let mut missing: Vec<String> = Vec::new();
    for case in CASES {
        if scenes
            .as_ref()
            .is_some_and(|l| !l.iter().any(|n| n == case.name))
        {
            // Not run in this sitting: the earlier run's rows stay in the table.
            for &kind in SolverKind::ALL {
                if let Some(row) = earlier.as_ref().and_then(|(rows, _)| {
                    rows.get(&(case.name.to_string(), kind.name().to_string()))
                }) {
                    out!("{row}");
                } else {
                    missing.push(format!("{} {}", case.name, kind.name()));
                }
            }
            continue;
        }
        let path = dir.join(format!("{}.toml", case.name));
        let built = match Scene::load(&path).and_then(|s| s.build()) {
            Ok(b) => b,
            Err(e) => {
                out!(
                    "| {} | — | — | scene error: {e} | | | | | this run |",
                    case.name
                );
                continue;
            }
        };
        let steps = steps_override.unwrap_or(case.steps);
        for &kind in SolverKind::ALL {
            // A pair runs when this sitting selects it: its solver is listed (or none are) and,
            // when continuing, its scene was named (it runs again) or no earlier run has it.
            let copied = earlier
                .as_ref()
                .and_then(|(rows, _)| rows.get(&(case.name.to_string(), kind.name().to_string())));
            let selected = kinds.contains(&kind) && (scenes.is_some() || copied.is_none());
            if !selected {
                match copied {
                    Some(row) => out!("{row}"),
                    None => missing.push(format!("{} {}", case.name, kind.name())),
                }
                continue;
            }
            let mut b = built.clone();
            b.config.set_solver(SolverChoice::Named(kind));
            let t = Instant::now();
            match compare(&path, &b, steps) {
                Ok(r) => {
                    let worst = r.worst();
                    let mean = r.steps.iter().map(|s| s.mean_deviation).fold(0.0, f64::max);
                    let (ic, ig) = r.steps.iter().fold((0, 0), |(a, b), s| {
                        (a + s.iterations_cpu, b + s.iterations_gpu)
                    });
                    let (cc, cg) = r.steps.iter().fold((0, 0), |(a, b), s| {
                        (
                            a + usize::from(s.converged_cpu),
                            b + usize::from(s.converged_gpu),
                        )
                    });
                    let mark = if worst > DEFAULT_MAX_DEVIATION {
                        " ✗"
                    } else {
                        ""
                    };
                    out!(
                        "| {} | {} | {} | {:.2e}{mark} | {:.2e} | {ic} / {ig} | {cc} / {cg} | {:.1} | this run |",
                        case.name,
                        kind.name(),
                        r.steps.len(),
                        worst,
                        mean,
                        t.elapsed().as_secs_f64()
                    );
                    adapter.get_or_insert(r.adapter);
                }
                Err(e) => {
                    let msg = e.to_string().replace('|', "/").replace('\n', " ");
                    out!(
                        "| {} | {} | — | not on the device: {msg} | | | | {:.1} | this run |",
                        case.name,
                        kind.name(),
                        t.elapsed().as_secs_f64()
                    );
                }
            }
            report::finish("compare");
        }
    }
    out!();
    let adapter = adapter
        .as_deref()
        .unwrap_or("none (no pair ran on a device in this sitting)");
    if missing.is_empty() {
        out!("Every pair is in the table. Adapter of this sitting: {adapter}.");
    } else {
        out!(
            "This sitting finished; {} pairs are not in the table yet: {}. Adapter of this \
             sitting: {adapter}.",
            missing.len(),
            missing.join(", ")
        );
    }
    report::finish("compare");
}
