//! What a gradient costs: the backward/forward time ratio and the peak memory of the adjoint
//! (`jello::adjoint`) for each checkpointing mode, on the kicked armadillo_18k (no contact;
//! skipped with a note when ../shared/meshes lacks it) and on an IPC contact scene (a block
//! thrown onto a clamped slab, fixed κ, so every step after the first carries barrier pairs).
//!
//! Per scene and mode: a run of `JELLO_BENCH_ADJOINT_STEPS` steps recorded with
//! [`Tape::record`] (f64 Newton to CN 1e-10, the tape's default), then one backward pass for a
//! loss on the last state (random fixed dL/dx and dL/dv) with respect to the initial velocities,
//! the per-tet Young's moduli and densities. Reported: forward and backward wall times and their
//! ratio, the steps re-solved from checkpoints, the most states held at once and their bytes
//! ([`jello::adjoint::BackwardStats`]), and the process's peak resident set over the recording
//! and the backward pass (Linux: `VmHWM` of /proc/self/status, reset through
//! /proc/self/clear_refs before each mode after glibc's `malloc_trim` has returned the previous
//! modes' freed pages, minus the resident set at that reset: what the
//! tape adds — its copy of the model, its solver with the sparse factorisation, the states —
//! over the bench's own copy of the model).
//!
//! Modes: every state kept (`All`), every k-th (`Every(k)`, k = ⌈√steps⌉: memory O(steps/k + k),
//! each step re-solved once) and Griewank's binomial schedule with k and with 3 snapshots
//! (`Binomial(s)`: memory O(s), each step re-solved about r times where C(s + r, s) ≥ steps).
//!
//! `cargo bench --bench adjoint`. Env: `JELLO_BENCH_ADJOINT_STEPS` (default 100),
//! `JELLO_BENCH_ADJOINT_ARMADILLO_STEPS` (the armadillo's, default the former: a debug build
//! takes ~5 s per armadillo step, a release build ~3 s), `JELLO_BENCH_ADJOINT_ARMADILLO_MODES`
//! (the armadillo's modes, a comma list of `all`, `every`, `binomial`, `binomial3`; default all
//! four: at 100 steps in a release build the binomial ones re-solve ~350 and ~600 steps, about
//! an hour on 2 cores), `JELLO_BENCH_ADJOINT_CELLS` (the contact scene's slab cells
//! along x, default 12: a 12 × 2 × 6-cell slab and a 6 × 2 × 3-cell block, 864 + 216 tets), `JELLO_BENCH_ADJOINT_SCENES`
//! ("armadillo,contact" by default), `JELLO_MESH_DIR` (default ../shared/meshes beside the
//! repository), `JELLO_BENCH_BOOK=1` (also write the book's page).

#[path = "common/report.rs"]
#[macro_use]
mod report;

#[path = "common/kicked_armadillo.rs"]
mod kicked_armadillo;

use jello::adjoint::{Checkpointing, Param, RecordOptions, Seeds, Tape, Unconverged};
use jello::problem::{Model, State};
use jello::scene::Scene;
use std::path::{Path, PathBuf};

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

/// A field of /proc/self/status in bytes (`VmHWM`, `VmRSS`); `None` off Linux.
fn status_bytes(field: &str) -> Option<usize> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    let kb: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Resets the peak resident set to the current one (Linux ≥ 4.0); false where it cannot.
/// glibc's allocator first hands the pages freed by the previous mode back to the system, so
/// that this mode's peak counts its own allocations rather than reusing retained ones.
fn reset_peak_rss() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free heap memory; no pointer is involved.
    unsafe {
        libc::malloc_trim(0);
    }
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// A deterministic stream of numbers in [−1, 1).
struct Rng(u64);
impl Rng {
    fn vec(&mut self, n: usize) -> Vec<f64> {
        (0..n)
            .map(|_| {
                self.0 = self
                    .0
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
            })
            .collect()
    }
}

fn mib(bytes: usize) -> String {
    format!("{:.1}", bytes as f64 / (1024.0 * 1024.0))
}

/// Records `steps` steps of `model` from `state` under each mode and differentiates them.
/// `modes`: a comma list of `all`, `every`, `binomial`, `binomial3` (`None`: all four).
fn measure(name: &str, model: &Model, state: &State, h: f64, steps: usize, modes: Option<&str>) {
    let n = 3 * model.num_vertices();
    let mut rng = Rng(7);
    let mut seeds = Seeds::default();
    seeds.x.insert(steps, rng.vec(n));
    seeds.v.insert(steps, rng.vec(n));
    let wrt = [
        Param::InitialVelocities,
        Param::YoungsModulus,
        Param::Density,
    ];
    let k = (steps as f64).sqrt().ceil().max(1.0) as usize;
    let state_bytes = 8
        * (2 * n
            + if model.integrator.keeps_history() {
                2 * n
            } else {
                0
            });
    out!(
        "### {name}: {} vertices, {} tets, {steps} steps of {} ms",
        model.num_vertices(),
        model.mesh.num_tets(),
        h * 1e3
    );
    out!();
    out!(
        "One state (positions, velocities{}): {:.1} KiB.",
        if model.integrator.keeps_history() {
            ", BDF2 history"
        } else {
            ""
        },
        state_bytes as f64 / 1024.0
    );
    out!();
    out!("| mode | forward s | backward s | backward/forward | re-solved steps | peak states | peak state MiB | peak RSS MiB added | unconverged |");
    out!("|---|---|---|---|---|---|---|---|---|");
    let all = [
        ("all", Checkpointing::All),
        ("every", Checkpointing::Every(k)),
        ("binomial", Checkpointing::Binomial(k)),
        ("binomial3", Checkpointing::Binomial(3)),
    ];
    let chosen: Vec<Checkpointing> = match modes {
        None => all.iter().map(|(_, m)| *m).collect(),
        Some(list) => list
            .split(',')
            .map(str::trim)
            .filter_map(|name| {
                let m = all.iter().find(|(n, _)| *n == name).map(|(_, m)| *m);
                if m.is_none() {
                    eprintln!("unknown mode `{name}` (all, every, binomial, binomial3): skipped");
                }
                m
            })
            .collect(),
    };
    for mode in chosen {
        let reset = reset_peak_rss();
        let base = status_bytes("VmRSS:");
        let options = RecordOptions {
            checkpointing: mode,
            ..RecordOptions::default()
        };
        let mut tape = match Tape::record(model.clone(), state.clone(), h, steps, options) {
            Ok(t) => t,
            Err(e) => {
                out!("| {mode:?} | failed: {e} | | | | | | | |");
                continue;
            }
        };
        let unconverged = tape.records().iter().filter(|r| !r.converged).count();
        let (_, stats) = match tape.backward(&seeds, &wrt, Unconverged::Flag) {
            Ok(r) => r,
            Err(e) => {
                out!("| {mode:?} | backward failed: {e} | | | | | | | |");
                continue;
            }
        };
        let peak = match (reset, base, status_bytes("VmHWM:")) {
            (true, Some(b), Some(p)) => mib(p.saturating_sub(b)),
            _ => "n/a".into(),
        };
        out!(
            "| {mode:?} | {:.2} | {:.2} | {:.2} | {} | {} | {} | {peak} | {unconverged} |",
            stats.forward_ms / 1e3,
            stats.backward_ms / 1e3,
            stats.backward_ms / stats.forward_ms,
            stats.recomputed_steps,
            stats.peak_states,
            mib(stats.peak_state_bytes)
        );
    }
    out!();
}

/// The contact scene: a clamped slab (`cells` × 2 × cells/2 cells, 0.4 × 0.05 × 0.2 m) and a
/// block (cells/2 × 2 × cells/4, 0.2 × 0.05 × 0.1 m) 2 mm above it (d̂ = 4 mm) thrown down and
/// sideways: it lands, squashes the barrier and slides. Stable neo-Hookean E = 2e5 Pa, ν = 0.3.
fn contact_scene(cells: usize) -> String {
    let c = cells.max(4);
    format!(
        r#"[simulation]
h = 0.01
steps = 1
gravity = [0.0, -9.81, 0.0]

[[objects]]
name = "slab"
mesh = {{ generator = "box", min = [0.0, -0.05, 0.0], max = [0.4, 0.0, 0.2], cells = [{c}, 2, {}] }}
material = {{ model = "stable_neo_hookean", youngs_modulus = 2e5, poisson_ratio = 0.3, density = 1000.0 }}

[[objects]]
name = "block"
mesh = {{ generator = "box", min = [0.1, 0.002, 0.05], max = [0.3, 0.052, 0.15], cells = [{}, 2, {}] }}
material = {{ model = "stable_neo_hookean", youngs_modulus = 2e5, poisson_ratio = 0.3, density = 1000.0 }}
velocity = [0.1, -0.3, 0.0]

[[pins]]
region = {{ box = {{ min = [-1.0, -0.051, -1.0], max = [1.0, -0.049, 1.0] }} }}

[contact]
ipc = true
dhat = 0.004
ipc_kappa = 1e6
"#,
        c / 2,
        c / 2,
        (c / 4).max(1)
    )
}

fn build(text: &str) -> (Model, State, f64) {
    let built = Scene::parse(Path::new("adjoint-bench.toml"), text)
        .expect("scene")
        .build()
        .expect("build");
    let state = built.model.initial_state(&built.velocity);
    (built.model, state, built.config.h)
}

fn main() {
    let steps = env_or("JELLO_BENCH_ADJOINT_STEPS", 100);
    let cells = env_or("JELLO_BENCH_ADJOINT_CELLS", 12);
    let scenes =
        std::env::var("JELLO_BENCH_ADJOINT_SCENES").unwrap_or_else(|_| "armadillo,contact".into());
    out!("# Adjoint: time and memory per checkpointing mode");
    out!();
    out!(
        "Forward: `Tape::record`, f64 Newton to CN 1e-10; backward: one pass for a loss on the \
         last state, with respect to the initial velocities and the per-tet Young's moduli and \
         densities. Peak RSS added: the process's VmHWM over recording and backward pass, reset \
         before each mode, minus the resident set at the reset (the tape's copy of the model, \
         its solver and factorisation, the states)."
    );
    out!();
    for scene in scenes.split(',').map(str::trim) {
        match scene {
            "armadillo" => {
                let mesh = std::env::var("JELLO_MESH_DIR")
                    .map(PathBuf::from)
                    .unwrap_or_else(|_| {
                        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/meshes")
                    })
                    .join("armadillo_18k.node");
                if !mesh.exists() {
                    out!("armadillo_18k: skipped, its mesh is not in ../shared/meshes");
                    out!();
                    continue;
                }
                let (model, state, h) = build(&kicked_armadillo::scene(&mesh, 1e5, 3000.0));
                let steps = env_or("JELLO_BENCH_ADJOINT_ARMADILLO_STEPS", steps);
                let modes = std::env::var("JELLO_BENCH_ADJOINT_ARMADILLO_MODES").ok();
                measure(
                    "kicked armadillo_18k",
                    &model,
                    &state,
                    h,
                    steps,
                    modes.as_deref(),
                );
            }
            "contact" => {
                let (model, state, h) = build(&contact_scene(cells));
                measure(
                    "IPC contact: block thrown onto a slab",
                    &model,
                    &state,
                    h,
                    steps,
                    None,
                );
            }
            other => out!("unknown scene `{other}` in JELLO_BENCH_ADJOINT_SCENES: skipped"),
        }
    }
    report::finish("adjoint");
}
