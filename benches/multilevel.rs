//! The multilevel solver's stiffness sweep (issue 13; the paper's Fig. 14): a ball dropped on
//! a plane (assets/scenes/drop.toml, Neo-Hookean, ν = 0.4) with Young's modulus E from 1e6 to
//! 1e10 Pa; the step on which the ball first touches the ground (a vertex within d̂), solved
//! to the scene's CN rule from the same state by
//! - multilevel (affine + SMS levels, N_cg Jacobi-PCG iterations, the paper's defaults; jello's
//!   stall rescue off, as when the tables below were measured),
//! - Newton with Jacobi PCG (the same loop with no subspace level and the PCG on the current
//!   Hessian to relative 1e-4, the paper's "IPC-PCG"),
//! - Newton with the sparse Cholesky (jello's reference),
//! - beyond the paper (issue 13): multilevel with the JGS2 smoother and Newton-PCG
//!   preconditioned by JGS2 (`Preconditioner::Jgs2`, flexible PCG; the JGS2 subspace with the
//!   default options, its precompute time printed apart; the Newton-PCG solves capped at 2,000
//!   iterations),
//!
//! reporting Newton iterations, total CG iterations of the step and wall time, all from one
//! run of this binary (so the times are comparable with each other, not across machines).
//!
//! `cargo bench --bench multilevel`. Env: `JELLO_BENCH_ML_RESOLUTION` (ball resolution,
//! default 8 as bundled), `JELLO_BENCH_ML_MODULI` (comma-separated Pa, default
//! 1e6,1e7,1e8,1e9,1e10), `JELLO_BENCH_ML_SPEED` (initial downward speed, default 5 m/s: the
//! bundled 1 m/s lands so softly that a stiff ball's first-contact step is one iteration),
//! `JELLO_BENCH_ML_EPS` (the CN rule's ε for every solver, default 1e-8: the scene's 1e-5 is
//! met after one iteration at E ≥ 1e7, the CN scale growing with E),
//! `JELLO_BENCH_ML_TARGETS=affine` (cubature fitted to φ·(x − o) too),
//! `JELLO_BENCH_ML_LAG` (`iteration` or `step`; default the adaptive rule),
//! `JELLO_BENCH_ML_HANDLES` and `JELLO_BENCH_ML_NCG` (overrides), `JELLO_BENCH_ML_NO_COARSE`
//! (block Jacobi alone in the SMS solve, the paper's preconditioner), `JELLO_BENCH_ML_HOLLOW`
//! (f in (0, 1): a shell, the ball without the tets whose centroid is within f·r of its
//! centre), `JELLO_BENCH_ML_NO_JGS2`
//! (leave out the two JGS2 rows and their precompute: they stagnate from E = 1e7, minutes per
//! step on larger balls).
//!
//! Measured figures: the book's *Multilevel benchmarks* page (`docs/src/benchmarks/multilevel.md`)
//! includes this bench's output; the tables of earlier runs that stood here are in its record.

#[path = "common/report.rs"]
#[macro_use]
mod report;

use jello::problem::{State, StepProblem};
use jello::scene::{BuiltScene, Scene};
use jello::sim::Simulation;
use jello::solver::jgs2::{load_or_build, SubspaceOptions};
use jello::solver::multilevel::{
    build_solver, LagRefresh, MultilevelParams, MultilevelStop, Preconditioner,
};
use jello::solver::{NewtonParams, NewtonSolver, StepSolver, StopRule};
use jello_precompute::sms::CubatureTargets;
use std::path::Path;
use std::time::Instant;

/// The bundled ball (centre (0, 0.3, 0), r = 0.1 m) at `resolution` with every tet whose
/// centroid lies within `fraction`·r of the centre removed — a shell (the paper's basketball
/// is one) — written as a TetGen pair under the target directory for the scene to load.
fn hollow_ball_file(resolution: usize, fraction: f64) -> std::path::PathBuf {
    let (c, r) = ([0.0, 0.3, 0.0], 0.1);
    let full = jello::mesh::ball(c, r, resolution);
    let kept: Vec<[u32; 4]> = full
        .tets
        .iter()
        .copied()
        .filter(|t| {
            let g: Vec<f64> = (0..3)
                .map(|k| {
                    t.iter()
                        .map(|&v| full.positions[v as usize][k])
                        .sum::<f64>()
                        / 4.0
                        - c[k]
                })
                .collect();
            (g[0] * g[0] + g[1] * g[1] + g[2] * g[2]).sqrt() >= fraction * r
        })
        .collect();
    let mut index = vec![u32::MAX; full.positions.len()];
    let mut positions = Vec::new();
    let tets = kept
        .iter()
        .map(|t| {
            t.map(|v| {
                if index[v as usize] == u32::MAX {
                    index[v as usize] = positions.len() as u32;
                    positions.push(full.positions[v as usize]);
                }
                index[v as usize]
            })
        })
        .collect();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-cache");
    std::fs::create_dir_all(&dir).expect("bench cache directory");
    let path = dir.join(format!("hollow-ball-{resolution}-{fraction}.node"));
    jello::mesh::write_mesh(&path, &jello::mesh::TetMesh { positions, tets }).expect("write");
    path
}

fn drop_scene(e: f64, resolution: usize, speed: f64) -> BuiltScene {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes/drop.toml");
    let mut text = std::fs::read_to_string(&path).expect("drop.toml");
    if let Some(f) = std::env::var("JELLO_BENCH_ML_HOLLOW")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
    {
        let file = hollow_ball_file(resolution, f);
        text = text.replace(
            "mesh = { generator = \"ball\", center = [0.0, 0.3, 0.0], radius = 0.1, resolution = 8 }",
            &format!("mesh = {{ file = {:?} }}", file.display().to_string()),
        );
        assert!(
            text.contains("hollow-ball"),
            "drop.toml's mesh line changed"
        );
    }
    let text = text
        .replace("youngs_modulus = 5e4", &format!("youngs_modulus = {e:e}"))
        .replace("resolution = 8", &format!("resolution = {resolution}"))
        .replace(
            "velocity = [0.0, -1.0, 0.0]",
            &format!("velocity = [0.0, {:e}, 0.0]", -speed),
        );
    Scene::parse(&path, &text)
        .and_then(|s| s.build())
        .expect("drop scene")
}

/// Newton steps until a vertex is within d̂ of the ground: the first-contact step's start.
fn first_contact(built: &BuiltScene) -> (State, usize) {
    let m = &built.model;
    let dhat = m.barrier.dhat;
    let params = NewtonParams {
        stop: built.config.stop,
        ..NewtonParams::default()
    };
    let mut sim = Simulation::new(
        m.clone(),
        m.initial_state(&built.velocity),
        built.config.h,
        Box::new(NewtonSolver::new(m, params).unwrap()),
    )
    .unwrap();
    for step in 0..200 {
        // The step that brings a vertex within d̂: stop at its start.
        let mut probe = Simulation::new(
            m.clone(),
            sim.state.clone(),
            built.config.h,
            Box::new(NewtonSolver::new(m, params).unwrap()),
        )
        .unwrap();
        probe.step(false).unwrap();
        if probe.state.x.chunks(3).any(|p| p[1] < dhat) {
            return (sim.state.clone(), step);
        }
        sim.step(false).unwrap();
    }
    panic!("no contact in 200 steps");
}

fn env_opt(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

fn env_f64(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn main() {
    run();
    // Another ball resolution is its own document (`multilevel_r24.md`), so the book can show
    // the bundled ball and a larger one side by side.
    match std::env::var("JELLO_BENCH_ML_RESOLUTION") {
        Ok(r) if r.trim() != "8" => {
            report::finish_as("multilevel", &format!("multilevel_r{}", r.trim()))
        }
        _ => report::finish("multilevel"),
    }
}

fn run() {
    let resolution: usize = std::env::var("JELLO_BENCH_ML_RESOLUTION")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let moduli: Vec<f64> = std::env::var("JELLO_BENCH_ML_MODULI")
        .ok()
        .map(|s| s.split(',').filter_map(|v| v.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1e6, 1e7, 1e8, 1e9, 1e10]);
    let speed = env_f64("JELLO_BENCH_ML_SPEED", 5.0);
    let eps = env_f64("JELLO_BENCH_ML_EPS", 1e-8);
    out!(
        "ball resolution {resolution}, thrown down at {speed} m/s, CN rule ε = {eps:e} for \
             every solver"
    );
    out!(
        "| E (Pa) | step | solver | converged | Newton its | CG its (affine + SMS + full) | CG per Newton its | wall (ms) | residual |"
    );
    out!("|---|---|---|---|---|---|---|---|---|");
    for &e in &moduli {
        let mut built = drop_scene(e, resolution, speed);
        built.config.stop = StopRule::Cn { eps };
        let m = &built.model;
        let (state, step) = first_contact(&built);
        let h = built.config.h;
        let stop = MultilevelStop::Shared(built.config.stop);
        let t0 = Instant::now();
        let targets = match std::env::var("JELLO_BENCH_ML_TARGETS").as_deref() {
            Ok("affine") => CubatureTargets::WeightsAffine,
            _ => CubatureTargets::Weights,
        };
        let lag = match std::env::var("JELLO_BENCH_ML_LAG").as_deref() {
            Ok("iteration") => LagRefresh::Iteration,
            Ok("step") => LagRefresh::Step,
            _ => LagRefresh::default(),
        };
        let ml_params = MultilevelParams {
            stop,
            lag,
            cubature: targets,
            handles: env_opt("JELLO_BENCH_ML_HANDLES"),
            n_cg: env_opt("JELLO_BENCH_ML_NCG"),
            sms_coarse: std::env::var("JELLO_BENCH_ML_NO_COARSE").is_err(),
            // The paper's loop: jello's stall rescue (on by default) would turn every
            // iteration past the tenth into Newton-PCG and blur the comparison.
            rescue: None,
            ..MultilevelParams::default()
        };
        let (ml, _) = build_solver(m, ml_params, None).unwrap();
        let precompute_ms = t0.elapsed().as_secs_f64() * 1e3;
        if e == moduli[0] {
            let b = ml.basis().unwrap();
            eprintln!(
                "ball: {} vertices, {} tets; SMS: {} handles, {} cubature samples, N_cg {}, \
                 precompute {precompute_ms:.0} ms (geodesic {:.0}, partition {:.0}, weights \
                 {:.0}, storage {:.0}, cubature {:.0} ms), {:.0} + {:.0} bytes/vertex",
                m.num_vertices(),
                m.mesh.num_tets(),
                b.n_handles(),
                b.cubature.n_samples(),
                ml.n_cg(),
                1e3 * b.stats.geodesic_factor_s,
                1e3 * b.stats.partition_s,
                1e3 * b.stats.weights_s,
                1e3 * b.stats.storage_s,
                1e3 * b.stats.cubature_s,
                b.stats.bytes as f64 / m.num_vertices() as f64,
                b.stats.cubature_bytes as f64 / m.num_vertices() as f64,
            );
        }
        let (pcg, _) = build_solver(
            m,
            MultilevelParams {
                stop,
                ..MultilevelParams::newton_pcg(1e-4, 100_000)
            },
            None,
        )
        .unwrap();
        let jgs2_rows = std::env::var("JELLO_BENCH_ML_NO_JGS2").is_err();
        let (ml_jgs2, pcg_jgs2) = if jgs2_rows {
            // The JGS2 subspace for the JGS2-preconditioned rows (the `--solver jgs2` default
            // options, built at the steady inertia weight as the runner does), timed apart.
            let t0 = Instant::now();
            let (sub, _, _) = load_or_build(
                m,
                m.integrator.steady_h(h),
                &SubspaceOptions::default(),
                None,
            )
            .unwrap();
            let jgs2_ms = t0.elapsed().as_secs_f64() * 1e3;
            eprintln!(
                "E = {e:e}: JGS2 precompute {jgs2_ms:.0} ms ({:.0} B/vertex)",
                sub.stats.bytes_per_vertex
            );
            let (mut ml_jgs2, _) = build_solver(
                m,
                MultilevelParams {
                    smoother: Preconditioner::Jgs2,
                    ..ml_params
                },
                None,
            )
            .unwrap();
            let sub = std::sync::Arc::new(sub);
            ml_jgs2.set_jgs2_subspace(m, sub.clone()).unwrap();
            let (mut pcg_jgs2, _) = build_solver(
                m,
                MultilevelParams {
                    stop,
                    smoother: Preconditioner::Jgs2,
                    // Capped: where the JGS2 map stagnates (see the module docs) an uncapped
                    // solve runs for minutes.
                    ..MultilevelParams::newton_pcg(1e-4, 2_000)
                },
                None,
            )
            .unwrap();
            pcg_jgs2.set_jgs2_subspace(m, sub).unwrap();
            (Some(ml_jgs2), Some(pcg_jgs2))
        } else {
            (None, None)
        };
        let mut newton = NewtonSolver::new(
            m,
            NewtonParams {
                stop: built.config.stop,
                ..NewtonParams::default()
            },
        )
        .unwrap();
        let row = |name: &str, s: &mut dyn StepSolver| {
            let problem = StepProblem::new(m, &state, h);
            let mut x = Vec::new();
            let t0 = Instant::now();
            let r = s.step(&problem, m, &mut x, false).unwrap();
            (name.to_string(), r, t0.elapsed().as_secs_f64() * 1e3)
        };
        let mut rows = Vec::new();
        let mut solvers = vec![("multilevel", ml), ("newton-jacobi-pcg", pcg)];
        if let (Some(a), Some(b)) = (ml_jgs2, pcg_jgs2) {
            solvers.insert(1, ("multilevel-jgs2", a));
            solvers.push(("newton-jgs2-pcg", b));
        }
        for (name, mut s) in solvers {
            let (name, r, wall) = row(name, &mut s);
            let st = s.last_stats();
            let cg = format!(
                "{} ({} + {} + {})",
                st.total_cg(),
                st.affine_cg,
                st.sms_cg,
                st.full_cg
            );
            // The paper's Fig. 14 metric: CG iterations averaged over the step's Newton solves.
            let per_solve = format!("{:.0}", st.total_cg() as f64 / r.iterations.max(1) as f64);
            rows.push((name, r, wall, cg, per_solve));
        }
        let (name, r, wall) = row("newton-cholesky", &mut newton);
        rows.push((name, r, wall, "—".into(), "—".into()));
        for (name, r, wall, cg, per_solve) in rows {
            out!(
                "| {e:.0e} | {step} | {name} | {} | {} | {cg} | {per_solve} | {wall:.1} | {:.1e} |",
                r.converged,
                r.iterations,
                r.residual
            );
        }
    }
}
