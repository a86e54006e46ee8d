//! QN's line search (issue 43): how many trials — each one element pass for E and ∇E — the
//! quasi-Newton solver spends per iteration under each [`TrialRule`], on the f64 CPU backend,
//! with the same stop rule and the same converged answers.
//!
//! Cases (fixed corotated, h = 25 ms, CN ε = 1e-5):
//! - `twist` — the bundled `twist.toml` (20×4×4 cells, caps at ±0.1π rad/s);
//! - `twist big` — the same bar at `JELLO_LS_CELLS` (default `40,10,10`; the DOT comparison's
//!   `64,15,15` is the 16,640-vertex bar) with the caps at ±π rad/s, over its first 24 steps;
//! - `tss` — the bundled `twist_stretch_squash.toml` (armadillo_18k, E = 2.5e4 Pa);
//! - `hard tss` — the same with `benches/solvers.rs`'s hard regime (E = 1e4 Pa, the script 4×
//!   faster, its translations 1.6× larger: 30 steps), where QN's α = 1 fails about every other
//!   iteration.
//!
//! Protocol: Newton's trajectory (CN 1e-5) gives `JELLO_LS_STARTS` (default 4) start states
//! spread over each case's steps; from each, every rule takes one step, the rules in turn (a
//! loaded machine slows them alike; which goes first rotates), and Newton at CN 1e-7 gives the reference answer. Per
//! rule: QN iterations per step, line-search trials per iteration, element passes (E and ∇E)
//! per step — the start's gradient plus every trial: the deterministic measure of the step's
//! cost —, the share of iterations whose first trial was accepted, ms per step (mean; noisy on
//! a shared machine), and the largest vertex distance to Newton's CN 1e-7 answer. Meshes from
//! `JELLO_MESHES` (default `../shared/meshes` beside the repository, then `/work/shared/meshes`);
//! cases whose mesh is absent are skipped. `JELLO_LS_CASES` (comma list of case names);
//! `JELLO_LS_TRACE=1` prints every iteration (trials, α, the filter's bound, the carried
//! start, slope, residual) to stderr.
//!
//! `cargo bench --bench qn_line_search` (`--profile dev` is enough for the counts).

#[path = "common/distance.rs"]
mod distance;
use distance::max_distance;

#[path = "common/report.rs"]
#[macro_use]
mod report;

use jello::problem::{Model, State, StepProblem};
use jello::scene::Scene;
use jello::solver::backend::CpuBackend;
use jello::solver::qn::{QnParams, QnSolver, TrialRule};
use jello::solver::{NewtonParams, NewtonSolver, StepSolver, StopRule};
use std::path::{Path, PathBuf};

/// A scene of the table: its model, step and the steps its start states spread over.
struct Case {
    name: &'static str,
    model: Model,
    velocity: Vec<[f64; 3]>,
    h: f64,
    horizon: usize,
}

/// The rules compared, the papers' first.
const RULES: [(TrialRule, &str); 3] = [
    (TrialRule::Halving, "halving (before)"),
    (TrialRule::Interpolate, "interpolate"),
    (TrialRule::Carry, "carry (default)"),
];

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The shared meshes' folder, if any.
fn meshes() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::env::var("JELLO_MESHES")
        .ok()
        .map(PathBuf::from)
        .into_iter()
        .chain([root.join("../shared/meshes"), "/work/shared/meshes".into()])
        .find(|p| p.join("armadillo_18k.node").exists())
}

/// A bundled scene with text substitutions.
fn scene(name: &'static str, file: &str, edits: &[(&str, String)], horizon: usize) -> Option<Case> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("assets/scenes")
        .join(file);
    let mut text = std::fs::read_to_string(&path).expect("bundled scene");
    for (from, to) in edits {
        assert!(text.contains(from), "{file}: no `{from}` to edit");
        text = text.replace(from, to);
    }
    let built = match Scene::parse(&path, &text)
        .map_err(|e| e.to_string())
        .and_then(|s| s.build().map_err(|e| e.to_string()))
    {
        Ok(b) => b,
        Err(e) => {
            out!("  ({name}: skipped, {e})");
            return None;
        }
    };
    Some(Case {
        name,
        velocity: built.velocity.clone(),
        h: built.config.h,
        model: built.model,
        horizon,
    })
}

fn cases() -> Vec<Case> {
    let only: Option<Vec<String>> = std::env::var("JELLO_LS_CASES")
        .ok()
        .map(|s| s.split(',').map(|c| c.trim().to_string()).collect());
    let wanted = |n: &str| only.as_ref().is_none_or(|o| o.iter().any(|c| c == n));
    let mut out = Vec::new();
    if wanted("twist") {
        out.extend(scene("twist", "twist.toml", &[], 80));
    }
    if wanted("twist big") {
        let cells = std::env::var("JELLO_LS_CELLS").unwrap_or_else(|_| "40,10,10".into());
        let edits = [
            ("cells = [20, 4, 4]", format!("cells = [{cells}]")),
            (
                "omega = -0.3141592653589793",
                "omega = -3.141592653589793".into(),
            ),
            (
                "omega = 0.3141592653589793",
                "omega = 3.141592653589793".into(),
            ),
        ];
        out.extend(scene("twist big", "twist.toml", &edits, 24));
    }
    let Some(dir) = meshes() else {
        out!("  (no ../shared/meshes: the TSS cases skipped)");
        return out;
    };
    let mesh = ("../../../shared/meshes", dir.display().to_string());
    if wanted("tss") {
        out.extend(scene(
            "tss",
            "twist_stretch_squash.toml",
            std::slice::from_ref(&mesh),
            120,
        ));
    }
    if wanted("hard tss") {
        // benches/solvers.rs's hard regime: E = 1e4 Pa, phases 4× shorter, translations ×1.6.
        let mut edits = vec![mesh];
        for (from, to) in [
            ("youngs_modulus = 2.5e4", "youngs_modulus = 1e4"),
            ("start = 0.0, end = 1.0", "start = 0.0, end = 0.25"),
            ("start = 1.0, end = 2.0", "start = 0.25, end = 0.5"),
            ("start = 2.0, end = 3.0", "start = 0.5, end = 0.75"),
            ("[0.0, -0.25, 0.0]", "[0.0, -0.4, 0.0]"),
            ("[0.0, 0.3, 0.0]", "[0.0, 0.48, 0.0]"),
            ("[0.0, 0.25, 0.0]", "[0.0, 0.4, 0.0]"),
            ("[0.0, -0.3, 0.0]", "[0.0, -0.48, 0.0]"),
        ] {
            edits.push((from, to.to_string()));
        }
        out.extend(scene("hard tss", "twist_stretch_squash.toml", &edits, 30));
    }
    out
}

fn newton(model: &Model, eps: f64) -> NewtonSolver {
    NewtonSolver::new(
        model,
        NewtonParams {
            stop: StopRule::Cn { eps },
            max_iterations: 200,
            ..NewtonParams::default()
        },
    )
    .expect("newton")
}

fn advance(state: &State, x: Vec<f64>, h: f64) -> State {
    let v = x.iter().zip(&state.x).map(|(a, b)| (a - b) / h).collect();
    State::new(x, v, state.t + h)
}

/// Newton's (CN 1e-5) states at `starts` points spread over the case's steps.
fn start_states(case: &Case, starts: usize) -> Vec<State> {
    let m = &case.model;
    let at: Vec<usize> = (0..starts)
        .map(|i| ((i as f64 + 0.5) / starts as f64 * case.horizon as f64) as usize)
        .collect();
    let vel = if case.velocity.is_empty() {
        vec![[0.0; 3]; m.num_vertices()]
    } else {
        case.velocity.clone()
    };
    let mut state = m.initial_state(&vel);
    let mut solver = newton(m, 1e-5);
    let mut out = Vec::new();
    for step in 0..=at.last().copied().unwrap_or(0) {
        if at.contains(&step) {
            out.push(state.clone());
        }
        let problem = StepProblem::new(m, &state, case.h);
        let mut x = Vec::new();
        solver.step(&problem, m, &mut x, false).expect("newton");
        state = advance(&state, x, case.h);
    }
    out
}

/// What one rule did over a case's starts.
#[derive(Default)]
struct Tally {
    steps: usize,
    converged: usize,
    iterations: usize,
    trials: usize,
    first_accepted: usize,
    wall_ms: f64,
    /// Largest vertex distance to Newton's CN 1e-7 answer, m.
    distance: f64,
}

fn main() {
    let starts: usize = env_or("JELLO_LS_STARTS", 4).max(1);
    let trace = env_or("JELLO_LS_TRACE", 0) == 1;
    out!("## QN's line search: trials per iteration by rule");
    out!();
    out!(
        "f64 CPU backend, QN (m = 5, Armijo γ = 0.3), CN ε = 1e-5; one step from each of \
         {starts} of Newton's states per case, the rules in turn. its/step: QN iterations; \
         trials/it: line-search trials per iteration; passes/step: element passes for E and ∇E \
         per step (the start's gradient and every trial); 1st ok: iterations whose first trial \
         was accepted; ms/step: mean wall time (a shared machine: compare within a row group); \
         Newton mm: the largest vertex distance to Newton's CN 1e-7 answer from the same state."
    );
    out!();
    out!("| case | vertices | rule | steps conv. | its/step | trials/it | passes/step | 1st ok | ms/step | Newton mm |");
    out!("|---|---|---|---|---|---|---|---|---|---|");
    let mut phases = Vec::new();
    for case in cases() {
        let m = &case.model;
        eprintln!("{}: Newton's trajectory", case.name);
        let states = start_states(&case, starts);
        let mut solvers: Vec<QnSolver<CpuBackend>> = RULES
            .iter()
            .map(|&(trials, _)| {
                QnSolver::new(
                    m,
                    CpuBackend::new(m.num_vertices()),
                    QnParams {
                        trials,
                        ..QnParams::default()
                    },
                )
                .expect("qn")
            })
            .collect();
        let mut tallies: Vec<Tally> = RULES.iter().map(|_| Tally::default()).collect();
        let mut reference = newton(m, 1e-7);
        for (si, state) in states.iter().enumerate() {
            eprintln!("{}: start {si}", case.name);
            let problem = StepProblem::new(m, state, case.h);
            let mut x_ref = Vec::new();
            reference
                .step(&problem, m, &mut x_ref, false)
                .expect("newton 1e-7");
            // The rules in turn, the first one rotating (the step after Newton's reference
            // runs on a warmer or colder machine).
            for k in 0..RULES.len() {
                let i = (si + k) % RULES.len();
                let (solver, tally) = (&mut solvers[i], &mut tallies[i]);
                let mut x = Vec::new();
                let r = solver.step(&problem, m, &mut x, false).expect("qn step");
                tally.steps += 1;
                tally.converged += usize::from(r.converged);
                tally.iterations += r.iterations;
                tally.wall_ms += r.wall_ms;
                for it in solver.last_step() {
                    if trace {
                        eprintln!(
                            "{} start {si}: trials {} α {:.4e} bound {:.4e} start {:.3e} \
                             slope {:.3e} residual {:.2e}",
                            case.name,
                            it.trials,
                            it.alpha,
                            it.bound,
                            it.start_length,
                            it.slope,
                            it.residual
                        );
                    }
                    tally.trials += it.trials;
                    tally.first_accepted += usize::from(it.trials == 1 && !it.reset);
                }
                tally.distance = tally.distance.max(max_distance(&x, &x_ref));
            }
        }
        for (((_, label), t), solver) in RULES.iter().zip(&tallies).zip(&solvers) {
            phases.push((case.name, *label, solver.phases(), t.steps));
            let its = t.iterations.max(1) as f64;
            out!(
                "| {} | {} | {label} | {}/{} | {:.2} | {:.3} | {:.2} | {:.0}% | {:.0} | {:.3} |",
                case.name,
                m.num_vertices(),
                t.converged,
                t.steps,
                t.iterations as f64 / t.steps as f64,
                t.trials as f64 / its,
                (t.steps + t.trials) as f64 / t.steps as f64,
                100.0 * t.first_accepted as f64 / its,
                t.wall_ms / t.steps as f64,
                1e3 * t.distance
            );
        }
    }
    out!();
    out!("### Where the time went (the solver's phase timers, ms per step)");
    out!();
    out!(
        "The same runs, `QnSolver::phases` (the f64 backend's phases are synchronous, so exact): \
         element passes (E and ∇E at the start and at every trial), the two-loop recursion, \
         the A⁻¹ solves, the step filter and line-search reads, the factorisation. The element \
         passes are the hot spot; the rules change how many there are, not what one costs."
    );
    out!();
    out!("| case | rule | passes | two-loop | solves | filter + reads | factor | passes' share | ms per pass |");
    out!("|---|---|---|---|---|---|---|---|---|");
    for (case, label, p, steps) in &phases {
        let n = *steps as f64;
        let total = p.gradient_ms + p.two_loop_ms + p.solve_ms + p.line_search_ms + p.factor_ms;
        out!(
            "| {case} | {label} | {:.0} | {:.1} | {:.1} | {:.1} | {:.1} | {:.0}% | {:.1} |",
            p.gradient_ms / n,
            p.two_loop_ms / n,
            p.solve_ms / n,
            p.line_search_ms / n,
            p.factor_ms / n,
            100.0 * p.gradient_ms / total.max(1e-12),
            p.gradient_ms / (*steps + p.trials).max(1) as f64
        );
    }
    out!();
    report::finish("qn_line_search");
}
