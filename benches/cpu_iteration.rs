//! Cost of one per-vertex solver iteration on the CPU backend (issue 15, part 1): VBD (coloured
//! Gauss–Seidel, no safeguard) and JGS2 (Jacobi, safeguarded, default subspace) on
//! ../shared/meshes/armadillo_18k (4,855 vertices, 17,500 tets), stable Neo-Hookean E = 1e5 Pa,
//! ν = 0.4, ρ = 1000 kg/m³, the top pinned (y > 0.45), gravity, h = 10 ms, f64.
//!
//! Per solver and thread count (1 and 2, rayon pools built here): two steps, each a fixed number
//! of iterations (the stop rule ε = 0 never fires: `JELLO_CPU_VBD_ITERS`, default 50;
//! `JELLO_CPU_JGS2_ITERS`, default 20); the figure is the second step's iteration-loop time
//! (`StepTimings::solve_ms`) over its iterations, best of `JELLO_CPU_REPEATS` (default 3)
//! simulations. The final residual is printed with all digits, so a change of the arithmetic
//! shows.
//!
//! Memory floor, measured in the same run: a stream copy (`dst.copy_from_slice(src)` over 2 ×
//! 256 MB, split in contiguous halves for 2 threads), counted as 2 × 256 MB moved per copy
//! (read + write; write-allocate traffic not counted), best of 5. Bytes an iteration must move
//! (the model; everything read or written once, no caches): per vertex x read and written,
//! x̃ and the mass read, the gradient written (13 f64 = 104 B); per tet its 4 corner indices
//! (16 B), Dm⁻¹ and volume (10 f64 = 80 B); the vertex→tet incidence list (8 B per incidence,
//! 4 per tet); JGS2 adds its per-vertex subspace rows (the precompute's `bytes_per_vertex`)
//! and a rotation per vertex (72 B) read once. "floor ms" = bytes / stream bandwidth, "% of
//! floor" = floor / measured. The working set of VBD (~2.7 MB) fits this machine's caches, so the
//! DRAM floor is a lower bound, not a target.
//!
//! `cargo bench --bench cpu_iteration`. Skipped when the mesh is absent. `JELLO_CPU_PROFILE=1`:
//! VBD only, one thread, one simulation, no stream copy and no precompute — the run to put
//! under `valgrind --tool=callgrind` (instruction counts are repeatable on a busy machine) or
//! `perf record`; `JELLO_CPU_PROFILE=2`: the same for JGS2 (after its precompute).
//! `JELLO_CPU_JGS2_MAX_SAMPLES=k`: JGS2 with the paper's NNLS cubature far field (at most k
//! weighted samples per vertex, `Jgs2Options::max_samples`) instead of the default node fits.
//!
//! Measured figures: the book's *CPU speed* page (`docs/src/benchmarks/cpu-speed.md`) includes this
//! bench's output; its record (issue 15, parts 1–6) keeps the earlier runs that stood here.

#[path = "common/report.rs"]
#[macro_use]
mod report;

use jello::mesh::VertexTets;
use jello::problem::{ElasticTerms, Model, StepProblem};
use jello::scene::Scene;
use jello::sim::Simulation;
use jello::solver::jgs2::{
    build_subspace, element_gradient_pass, element_pass, hess_vec, jgs2_system,
    rest_frame_gradients, rotations, vbd_local_system, vbd_system, vertex_gradient, ElementCache,
    Jgs2Params, Jgs2Solver, Jgs2Subspace, Safeguard, SubspaceOptions, Variant,
};
use jello::solver::{StepSolver, StopRule};
use nalgebra::{Matrix3, Vector3};
use rayon::prelude::*;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Best stream-copy bandwidth over 5 copies of 256 MB on `threads` threads, GB/s (10⁹ B/s).
fn stream_copy(threads: usize) -> f64 {
    let n = 32 << 20; // f64s: 256 MB
    let src: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let mut dst = vec![0.0f64; n];
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("pool");
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        pool.install(|| {
            dst.par_chunks_mut(n.div_ceil(threads))
                .zip(src.par_chunks(n.div_ceil(threads)))
                .for_each(|(d, s)| d.copy_from_slice(s));
        });
        best = best.min(t.elapsed().as_secs_f64());
        std::hint::black_box(&dst);
    }
    2.0 * (n * 8) as f64 / best / 1e9
}

fn scene() -> Option<String> {
    let mesh = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/meshes/armadillo_18k.node");
    if !mesh.exists() {
        return None;
    }
    Some(format!(
        r#"
[simulation]
h = 0.01
steps = 1
gravity = [0.0, -9.81, 0.0]

[[objects]]
name = "armadillo"
mesh = {{ file = "{}" }}
material = {{ model = "stable_neo_hookean", youngs_modulus = 1e5, poisson_ratio = 0.4, density = 1000.0 }}

[[pins]]
region = {{ box = {{ min = [-1.0, 0.45, -1.0], max = [1.0, 1.0, 1.0] }} }}
"#,
        mesh.display()
    ))
}

/// One measured configuration: ms per iteration (best over repeats) and the final residual.
fn measure(
    model: &Model,
    velocity: &[[f64; 3]],
    h: f64,
    threads: usize,
    repeats: usize,
    make: &(dyn Fn() -> Box<dyn StepSolver> + Sync),
) -> (f64, usize, f64) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("pool");
    let mut best = f64::INFINITY;
    let mut iters = 0;
    let mut residual = f64::NAN;
    for _ in 0..repeats {
        pool.install(|| {
            let state = model.initial_state(velocity);
            let mut sim = Simulation::new(model.clone(), state, h, make()).expect("sim");
            sim.step(false).expect("step 1");
            let r = sim.step(false).expect("step 2");
            best = best.min(r.timings.solve_ms / r.iterations as f64);
            iters = r.iterations;
            residual = r.residual;
        });
    }
    (best, iters, residual)
}

fn main() {
    run();
    report::finish("cpu_iteration");
}

fn run() {
    let Some(text) = scene() else {
        out!("skipping: armadillo_18k is not in ../shared/meshes");
        return;
    };
    let built = Scene::parse(Path::new("bench.toml"), &text)
        .expect("scene")
        .build()
        .expect("build");
    let model = &built.model;
    let h = built.config.h;
    let nv = model.num_vertices();
    let nt = model.mesh.num_tets();
    let pinned = model.pinned.iter().filter(|&&p| p).count();
    let repeats = env_or("JELLO_CPU_REPEATS", 3);
    let vbd_iters = env_or("JELLO_CPU_VBD_ITERS", 50);
    let jgs2_iters = env_or("JELLO_CPU_JGS2_ITERS", 20);
    out!(
        "armadillo_18k: {nv} vertices ({pinned} pinned), {nt} tets, stable Neo-Hookean \
         E = 1e5 Pa, ν = 0.4, h = {} ms, f64",
        h * 1e3
    );

    if env_or("JELLO_CPU_PROFILE", 0) == 1 {
        let make = || -> Box<dyn StepSolver> {
            Box::new(Jgs2Solver::vbd(
                model,
                Jgs2Params {
                    stop: StopRule::Cn { eps: 0.0 },
                    max_iterations: vbd_iters,
                    variant: Variant::GaussSeidel,
                    safeguard: Safeguard::Off,
                },
            ))
        };
        let (ms, iters, residual) = measure(model, &built.velocity, h, 1, 1, &make);
        out!("vbd, 1 thread: {ms:.2} ms/iteration, {iters} iterations, residual {residual:.15e}");
        return;
    }
    let profile_jgs2 = env_or("JELLO_CPU_PROFILE", 0) == 2;
    let bw = if profile_jgs2 {
        [f64::NAN; 2]
    } else {
        [stream_copy(1), stream_copy(2)]
    };
    out!(
        "stream copy (2 × 256 MB): 1 thread {:.1} GB/s, 2 threads {:.1} GB/s",
        bw[0],
        bw[1]
    );

    let t = Instant::now();
    // `JELLO_CPU_JGS2_MAX_SAMPLES=k`: the paper's NNLS cubature far field (at most k weighted
    // samples per vertex) instead of the default node fits.
    let mut sub_opts = SubspaceOptions::default();
    sub_opts.precompute.max_samples = env_or("JELLO_CPU_JGS2_MAX_SAMPLES", 0usize);
    let sub = Arc::new(build_subspace(model, h, &sub_opts).expect("precompute"));
    out!(
        "jgs2 precompute: {:.1} s, {:.0} B/vertex",
        t.elapsed().as_secs_f64(),
        sub.stats.bytes_per_vertex
    );

    let vbd_bytes = (nv * 104 + nt * (16 + 80) + 4 * nt * 8) as f64;
    let jgs2_bytes = vbd_bytes + nv as f64 * (sub.stats.bytes_per_vertex + 72.0);
    let stop = StopRule::Cn { eps: 0.0 };
    let vbd = move || -> Box<dyn StepSolver> {
        Box::new(Jgs2Solver::vbd(
            model,
            Jgs2Params {
                stop,
                max_iterations: vbd_iters,
                variant: Variant::GaussSeidel,
                safeguard: Safeguard::Off,
            },
        ))
    };
    let jgs2 = || -> Box<dyn StepSolver> {
        Box::new(
            Jgs2Solver::jgs2(
                model,
                Jgs2Params {
                    stop,
                    max_iterations: jgs2_iters,
                    variant: Variant::Jacobi,
                    safeguard: Safeguard::Cut,
                },
                sub.clone(),
            )
            .expect("jgs2"),
        )
    };
    if profile_jgs2 {
        let (ms, iters, residual) = measure(model, &built.velocity, h, 1, 1, &jgs2);
        out!(
            "jgs2-jacobi, 1 thread: {ms:.2} ms/iteration, {iters} iterations, residual \
             {residual:.15e}"
        );
        return;
    }
    out!(
        "\n| solver | threads | ms/iteration | iterations | final residual | MB moved (model) | \
         floor ms | % of floor |"
    );
    out!("|---|---|---|---|---|---|---|---|");
    let mut vbd_ms = [0.0; 2];
    let mut jgs2_ms = [0.0; 2];
    for (k, threads) in [1usize, 2].into_iter().enumerate() {
        for (name, bytes, make, out) in [
            (
                "vbd",
                vbd_bytes,
                &vbd as &(dyn Fn() -> _ + Sync),
                &mut vbd_ms,
            ),
            (
                "jgs2-jacobi",
                jgs2_bytes,
                &jgs2 as &(dyn Fn() -> _ + Sync),
                &mut jgs2_ms,
            ),
        ] {
            let (ms, iters, residual) = measure(model, &built.velocity, h, threads, repeats, make);
            out[k] = ms;
            let floor = bytes / (bw[k] * 1e9) * 1e3;
            out!(
                "| {name} | {threads} | {ms:.2} | {iters} | {residual:.15e} | {:.1} | {floor:.3} \
                 | {:.1} |",
                bytes / 1e6,
                100.0 * floor / ms
            );
        }
    }
    out!(
        "\nspeed-up 1 → 2 threads: vbd {:.2}×, jgs2 {:.2}×; jgs2 / vbd per iteration: 1 thread \
         {:.2}, 2 threads {:.2}",
        vbd_ms[0] / vbd_ms[1],
        jgs2_ms[0] / jgs2_ms[1],
        jgs2_ms[0] / vbd_ms[0],
        jgs2_ms[1] / vbd_ms[1]
    );
    phases(model, &built.velocity, h, &sub, vbd_ms[1], jgs2_ms[1]);
}

/// Best of 5 wall times of `f`, ms.
fn best_ms(mut f: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .fold(f64::INFINITY, f64::min)
}

/// Why a JGS2 iteration costs what it does: each pass of one safeguarded Jacobi iteration
/// (`Jgs2Solver::step`) and of one plain VBD sweep timed alone with the public pieces they are
/// made of, at the start of the second step (2 threads, best of 5), next to the measured
/// iterations. A safeguarded JGS2 iteration runs: the JGS2 direction (frames, tree sums, local
/// systems), the VBD direction, 2–3 Hessian-vector products, ≥ 1 energy, then the element pass
/// and gather at the new x.
fn phases(
    model: &Model,
    velocity: &[[f64; 3]],
    h: f64,
    sub: &Jgs2Subspace,
    vbd_it: f64,
    jgs2_it: f64,
) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .expect("pool");
    pool.install(|| {
        let mut sim = Simulation::new(
            model.clone(),
            model.initial_state(velocity),
            h,
            Box::new(Jgs2Solver::vbd(model, Jgs2Params::default())),
        )
        .expect("sim");
        sim.step(false).expect("step 1");
        let problem = StepProblem::new(model, &sim.state, h);
        let x = problem.x_start.clone();
        let vt = VertexTets::new(&model.mesh);
        let free: Vec<usize> = (0..model.num_vertices())
            .filter(|&i| !model.pinned[i])
            .collect();
        let mut cache = ElementCache::default();
        element_pass(model, &x, &mut cache, None);
        let gather = |cache: &ElementCache| -> Vec<f64> {
            (0..model.num_vertices())
                .into_par_iter()
                .flat_map_iter(|v| {
                    let g = vertex_gradient(&problem, cache, &vt, &x, v);
                    [g.x, g.y, g.z]
                })
                .collect()
        };
        let g = gather(&cache);
        let rot = rotations(model, &x, &vt);
        let frame = rest_frame_gradients(&g, Some(&rot), &sub.tree, &sub.rest);
        let d: Vec<f64> = x.iter().map(|v| 1e-3 * v).collect();
        let mut rows: Vec<(&str, f64)> = Vec::new();
        let mut c2 = ElementCache::default();
        rows.push((
            "element pass, projected 12×12 Hessians",
            best_ms(|| element_pass(model, &x, &mut c2, None)),
        ));
        rows.push((
            "element pass, gradients only (invariants)",
            best_ms(|| element_gradient_pass(model, &x, &mut c2)),
        ));
        rows.push((
            "gradient gather (per vertex over its tets)",
            best_ms(|| {
                std::hint::black_box(gather(&cache));
            }),
        ));
        rows.push((
            "JGS2 frames: per-vertex rotations",
            best_ms(|| {
                std::hint::black_box(rotations(model, &x, &vt));
            }),
        ));
        rows.push((
            "JGS2 frames: rotated gradients and cluster-tree sums",
            best_ms(|| {
                std::hint::black_box(rest_frame_gradients(&g, Some(&rot), &sub.tree, &sub.rest));
            }),
        ));
        // Every free vertex's 3×3 system from `system` and its Cholesky solve, in parallel.
        type System<'a> = dyn Fn(usize) -> (Matrix3<f64>, Vector3<f64>) + Sync + 'a;
        let solve_all = |system: &System<'_>| {
            let s: Vec<_> = free
                .par_iter()
                .map(|&i| {
                    let (a, r) = system(i);
                    a.cholesky().map(|c| c.solve(&r))
                })
                .collect();
            std::hint::black_box(s);
        };
        rows.push((
            "JGS2 local systems (subspace rows, incident Ūᵀ H_e Ū) and 3×3 solves",
            best_ms(|| {
                solve_all(&|i| {
                    jgs2_system(
                        &problem,
                        &cache,
                        &vt,
                        &x,
                        &g,
                        Some(&rot),
                        &frame,
                        i,
                        &sub.vertices[i],
                    )
                })
            }),
        ));
        rows.push((
            "VBD systems from the cache (the safeguard's 2nd direction) and solves",
            best_ms(|| solve_all(&|i| vbd_system(&problem, &cache, &vt, &x, &g, i))),
        ));
        rows.push((
            "one Hessian-vector product (cached 12×12 blocks)",
            best_ms(|| {
                std::hint::black_box(hess_vec(&problem, &cache, &vt, &x, &d));
            }),
        ));
        rows.push((
            "one energy (line search trial)",
            best_ms(|| {
                std::hint::black_box(problem.energy_change(model as &dyn ElasticTerms, &x));
            }),
        ));
        rows.push((
            "plain VBD: every vertex's exact corner system and solve (one sweep's work)",
            best_ms(|| solve_all(&|i| vbd_local_system(&problem, &vt, &x, i))),
        ));
        out!(
            "\nPasses of one iteration timed alone (2 threads, best of 5, at the second step's \
             start; measured iterations: VBD {vbd_it:.2} ms, JGS2 {jgs2_it:.2} ms):\n"
        );
        out!("| pass | ms | × VBD iteration |\n|---|---|---|");
        for (name, ms) in rows {
            out!("| {name} | {ms:.2} | {:.2} |", ms / vbd_it);
        }
    });
}
