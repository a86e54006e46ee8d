//! Projected Newton per-step cost: the twist bar (assets/scenes/twist.toml) and the
//! armadillo_114k swinging from its top under gravity (skipped when ../shared/meshes is absent),
//! with the assembly / factorisation / solve / line-search split, the Cholesky fill, and METIS
//! nested dissection against AMD on the armadillo.
//!
//! Then the eigenvalue-filter comparison (`jello::solver::HessianFilter`: clamp, abs, adaptive)
//! on the twist bar (as bundled and with the caps ten times faster) and on a sagging cantilever solved statically (no inertia: the regime where
//! projected Newton's convergence is linear), iterations and wall time per step or increment.
//!
//! Then, on the armadillo, the assembly by phase (element Hessians, matrix gather, gradient) with
//! the element Hessians' reference route and the sequential scatter timed in the same run.
//!
//! `cargo bench --bench newton`. Env: `JELLO_BENCH_ASSEMBLY_REPS` (default 5), `JELLO_BENCH_TWIST_STEPS` (default 40),
//! `JELLO_BENCH_SAG_INCREMENTS` (default 5), `JELLO_BENCH_FILTERS_ONLY=1` (only the filters),
//! `JELLO_BENCH_ASSEMBLY_ONLY=1` (only the armadillo's assembly phases, e.g. under `perf`),
//! `JELLO_BENCH_ASSEMBLY_STEPS` (Newton steps from rest before the phases are timed, default 3),
//! `JELLO_BENCH_ARMADILLO_STEPS` (default 5), `JELLO_BENCH_ARMADILLO` (path of the .node file,
//! default ../shared/meshes/armadillo_114k.node beside the repository root).
//!
//! Documents: `newton.md`, `newton_filters.md` (`JELLO_BENCH_FILTERS_ONLY=1`) and
//! `newton_assembly.md` (`JELLO_BENCH_ASSEMBLY_ONLY=1`), each its own, so a run of one mode
//! never overwrites another's table in the book.

#[path = "common/report.rs"]
#[macro_use]
mod report;

use jello::material::{Material, MaterialModel};
use jello::mesh::read_mesh;
use jello::problem::{
    pack_element_hessians, BarrierParams, Body, HessianLayout, Model, Pin, Script, StepProblem,
};
use jello::scene::Scene;
use jello::sim::{SimOptions, Simulation};
use jello::solver::{HessianFilter, NewtonParams, NewtonSolver, StepTimings, StopRule};
use jello_precompute::cholesky::{Ordering, SparseCholesky};
use jello_precompute::sparse::{tet_dofs, GatherMap, ScatterMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// One table row.
struct Row {
    case: String,
    ordering: &'static str,
    vertices: usize,
    tets: usize,
    steps: usize,
    converged: usize,
    iterations: Vec<usize>,
    analyse_ms: f64,
    factor_nnz: usize,
    step_ms: f64,
    split: StepTimings,
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn ordering_name(o: Ordering) -> &'static str {
    match o {
        Ordering::NestedDissection { .. } => "metis-nd(3)",
        Ordering::Amd => "amd",
        Ordering::Identity => "identity",
    }
}

/// Runs `steps` Newton steps of `model` from rest (velocity `vel`) and collects the figures.
fn bench_model(
    case: &str,
    model: Model,
    vel: &[[f64; 3]],
    h: f64,
    steps: usize,
    params: NewtonParams,
) -> Row {
    bench_run(case, model, vel, h, steps, params, false)
}

/// [`bench_model`], or with `statics` a static solve in `steps` load increments.
fn bench_run(
    case: &str,
    model: Model,
    vel: &[[f64; 3]],
    h: f64,
    steps: usize,
    params: NewtonParams,
    statics: bool,
) -> Row {
    let t0 = Instant::now();
    let solver = NewtonSolver::new(&model, params).expect("symbolic analysis");
    let analyse_ms = t0.elapsed().as_secs_f64() * 1e3;
    let factor_nnz = solver.factor_nnz();
    let (vertices, tets) = (model.num_vertices(), model.mesh.num_tets());
    let state = model.initial_state(vel);
    let options = SimOptions {
        static_increments: statics.then_some(steps),
        ..SimOptions::default()
    };
    let mut sim =
        Simulation::with_options(model, state, h, Box::new(solver), options).expect("simulation");
    let mut row = Row {
        case: case.into(),
        ordering: ordering_name(params.ordering),
        vertices,
        tets,
        steps,
        converged: 0,
        iterations: Vec::with_capacity(steps),
        analyse_ms,
        factor_nnz,
        step_ms: 0.0,
        split: StepTimings::default(),
    };
    for _ in 0..steps {
        let r = sim.step(false).expect("step");
        row.converged += r.converged as usize;
        row.iterations.push(r.iterations);
        row.step_ms += r.wall_ms;
        row.split.assembly_ms += r.timings.assembly_ms;
        row.split.factor_ms += r.timings.factor_ms;
        row.split.solve_ms += r.timings.solve_ms;
        row.split.line_search_ms += r.timings.line_search_ms;
    }
    assert!(
        sim.model.min_volume_ratio(&sim.state.x) > 0.0,
        "{case}: an element inverted"
    );
    row
}

fn twist(steps: usize) -> Row {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes/twist.toml");
    let built = Scene::load(&path)
        .and_then(|s| s.build())
        .expect("twist scene");
    let params = NewtonParams {
        stop: built.config.stop,
        ..NewtonParams::default()
    };
    bench_model(
        "twist bar",
        built.model,
        &built.velocity,
        built.config.h,
        steps,
        params,
    )
}

/// The armadillo hanging from the vertices within 2% of its bounding-box top (+y), released
/// from rest under gravity: stable Neo-Hookean, E = 5e5 Pa, ν = 0.4, ρ = 1000 kg/m³, h = 0.02 s.
fn armadillo_model(node: &Path) -> Option<Model> {
    let mesh = match read_mesh(node) {
        Ok(m) => m.mesh,
        Err(e) => {
            eprintln!("skipping the armadillo: {e}");
            return None;
        }
    };
    let (lo, hi) = mesh.bounding_box().expect("non-empty mesh");
    let y_cut = hi[1] - 0.02 * (hi[1] - lo[1]);
    let vertices: Vec<u32> = (0..mesh.num_vertices() as u32)
        .filter(|&v| mesh.positions[v as usize][1] >= y_cut)
        .collect();
    let start = vertices
        .iter()
        .map(|&v| mesh.positions[v as usize])
        .collect();
    let (nv, nt) = (mesh.num_vertices(), mesh.num_tets());
    let mat = Material::from_young_poisson(MaterialModel::StableNeoHookean, 5e5, 0.4).unwrap();
    let model = Model::new(
        mesh,
        vec![Body {
            name: "armadillo".into(),
            vertices: 0..nv,
            tets: 0..nt,
        }],
        vec![mat; nt],
        vec![1000.0; nt],
        [0.0, -9.81, 0.0],
        vec![Pin {
            vertices,
            start,
            script: Script::Fixed,
        }],
        vec![],
        BarrierParams {
            dhat: 1e-3,
            kappa: 1.0,
        },
    )
    .expect("armadillo model");
    Some(model)
}

/// The orderings on one and the same matrix: the projected Hessian of the armadillo's first step
/// at its inertial start, factorised and solved `reps` times per ordering, alternating, keeping
/// the fastest run of each (robust to other load on the machine).
fn ordering_comparison(model: &Model, reps: usize) {
    let vel = vec![[0.0; 3]; model.num_vertices()];
    let state = model.initial_state(&vel);
    let problem = StepProblem::new(model, &state, 0.02);
    let layout = HessianLayout::new(model).expect("layout");
    let mut matrix = layout.zeros();
    let mut scratch = Vec::new();
    let t0 = Instant::now();
    problem.hessian(model, &problem.x_start, &layout, &mut matrix, &mut scratch);
    let assemble_ms = t0.elapsed().as_secs_f64() * 1e3;
    let mut g = vec![0.0; problem.x_start.len()];
    problem.gradient(model, &problem.x_start, &mut g);
    let orderings = [Ordering::NestedDissection { block: 3 }, Ordering::Amd];
    let mut factors = Vec::new();
    let mut analyse = Vec::new();
    for o in orderings {
        let t0 = Instant::now();
        factors.push(SparseCholesky::analyze(layout.pattern.clone(), o).expect("analyse"));
        analyse.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    let mut best = vec![(f64::INFINITY, f64::INFINITY); orderings.len()];
    let mut solutions: Vec<Vec<f64>> = vec![Vec::new(); orderings.len()];
    for _ in 0..reps {
        for (k, f) in factors.iter_mut().enumerate() {
            let t0 = Instant::now();
            f.refactor(&matrix).expect("refactor");
            let fac = t0.elapsed().as_secs_f64() * 1e3;
            let mut x: Vec<f64> = g.iter().map(|v| -v).collect();
            let t0 = Instant::now();
            f.solve_in_place(&mut x).expect("solve");
            let sol = t0.elapsed().as_secs_f64() * 1e3;
            best[k] = (best[k].0.min(fac), best[k].1.min(sol));
            solutions[k] = x;
        }
    }
    // Both orderings solve the same system: their Newton directions must agree.
    let diff = solutions[0]
        .iter()
        .zip(&solutions[1])
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    let scale = solutions[0].iter().map(|v| v.abs()).fold(0.0, f64::max);
    out!(
        "\narmadillo_114k, one projected Hessian ({} DOFs, {} stored upper entries, assembled in {:.0} ms), best of {reps}:",
        g.len(),
        matrix.values().len(),
        assemble_ms
    );
    // faer's dense Cholesky on this machine in the same run: the rate a supernodal
    // factorisation (dense blocks) approaches at best.
    let dense_n = env_usize("JELLO_BENCH_DENSE_N", 3000);
    let b = faer::Mat::<f64>::from_fn(dense_n, dense_n, |i, j| {
        ((i * 7 + j * 13) % 17) as f64 / 17.0 - 0.5
    });
    let spd = &b * b.transpose() + faer::Mat::<f64>::identity(dense_n, dense_n) * dense_n as f64;
    let dense_ms = best_ms(reps, || {
        std::hint::black_box(spd.llt(faer::Side::Lower).expect("dense SPD"));
    });
    let dense_gflops = (dense_n as f64).powi(3) / 3.0 / dense_ms / 1e6;
    out!(
        "| ordering | analyse ms | factor nnz | factor ms | solve ms | factor GFLOP | GFLOP/s | % of faer dense |"
    );
    out!("|---|---|---|---|---|---|---|---|");
    for (k, o) in orderings.iter().enumerate() {
        let flops = factors[k].factor_flops().unwrap_or(f64::NAN);
        let rate = flops / best[k].0 / 1e6;
        out!(
            "| {} | {:.0} | {} | {:.1} | {:.1} | {:.2} | {:.1} | {:.0}% |",
            ordering_name(*o),
            analyse[k],
            factors[k].factor_nnz(),
            best[k].0,
            best[k].1,
            flops / 1e9,
            rate,
            100.0 * rate / dense_gflops
        );
    }
    out!(
        "(faer's dense Cholesky, n = {dense_n}, same run: {dense_ms:.1} ms, {dense_gflops:.1} GFLOP/s)"
    );
    out!(
        "(max |dx_nd − dx_amd| / max |dx| = {:.1e})",
        diff / scale.max(1e-300)
    );
}

/// Best of `reps` wall times of `f`, ms.
fn best_ms(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..reps.max(1))
        .map(|_| {
            let t0 = Instant::now();
            f();
            t0.elapsed().as_secs_f64() * 1e3
        })
        .fold(f64::INFINITY, f64::min)
}

/// Newton's assembly on the armadillo by phase, at the first step's inertial start, each phase
/// the best of `reps` with warm buffers: the element Hessians by the fast route (cyclic-Jacobi
/// SVD, rank-one mode updates) and by the reference route (nalgebra's SVD and eigen-solver, the
/// 9×9 ∂P/∂F contracted twice: what Newton ran before), the sparse matrix by the parallel
/// gather and by the sequential scatter, the inertia/pin terms, and the gradient — all in one
/// run. Asserts that both routes build the same matrix (round-off).
fn assembly_phases(model: &Model, reps: usize) {
    use jello::material::{element_hessian_reference, EigenFilter};
    use jello::problem::ElasticTerms;
    use nalgebra::Vector3;
    use rayon::prelude::*;
    // At the state after a few Newton steps from rest (swinging under gravity), not at rest:
    // there F = I, the 3×3 SVD converges at once and no scaling mode is clamped, which made
    // an element Hessian pass look ~30% cheaper than inside a step.
    let vel = vec![[0.0; 3]; model.num_vertices()];
    let mut sim = Simulation::new(
        model.clone(),
        model.initial_state(&vel),
        0.02,
        Box::new(NewtonSolver::new(model, NewtonParams::default()).expect("symbolic analysis")),
    )
    .expect("simulation");
    let warm_steps = env_usize("JELLO_BENCH_ASSEMBLY_STEPS", 3);
    for _ in 0..warm_steps {
        sim.step(false).expect("step");
    }
    let state = sim.state.clone();
    drop(sim);
    let problem = StepProblem::new(model, &state, 0.02);
    let x = &problem.x_start;
    let layout = HessianLayout::new(model).expect("layout");
    // The value-by-value routes the block gather replaced, for comparison.
    let fixed: Vec<bool> = (0..x.len()).map(|k| model.pinned[k / 3]).collect();
    let scatter_map = ScatterMap::new(
        &layout.pattern,
        12,
        &tet_dofs(&model.mesh.tets),
        Some(&fixed),
    )
    .expect("scatter map");
    let gather_map = GatherMap::new(&scatter_map, layout.pattern.nnz()).expect("gather map");
    let mut fast = layout.zeros();
    let mut slow = layout.zeros();
    let mut elem = Vec::new();
    let mut packed = Vec::new();
    let mut reference: Vec<[f64; 144]> = vec![[0.0; 144]; model.mesh.num_tets()];
    let mut g = vec![0.0; x.len()];
    // Warm every buffer once.
    model.elastic_element_hessians_filtered(x, EigenFilter::Clamp, &mut elem);
    model.elastic_element_hessian_blocks(x, EigenFilter::Clamp, &model.mesh.tets, &mut packed);
    let reference_hessians = |out: &mut Vec<[f64; 144]>| {
        out.par_iter_mut().enumerate().for_each(|(t, o)| {
            let c = model.mesh.tets[t]
                .map(|i| Vector3::from_column_slice(&x[3 * i as usize..3 * i as usize + 3]));
            let h = element_hessian_reference(
                &model.materials[t],
                &model.rest[t],
                &c,
                Some(EigenFilter::Clamp),
            );
            for p in 0..12 {
                for q in 0..12 {
                    o[12 * p + q] = h[(p, q)];
                }
            }
        })
    };
    let elem_fast = best_ms(reps, || {
        model.elastic_element_hessians_filtered(x, EigenFilter::Clamp, &mut elem)
    });
    let elem_packed = best_ms(reps, || {
        model.elastic_element_hessian_blocks(x, EigenFilter::Clamp, &model.mesh.tets, &mut packed)
    });
    let elem_ref = best_ms(reps, || reference_hessians(&mut reference));
    let gather = best_ms(reps, || fast.gather(&gather_map, elem.as_flattened()));
    let block_gather = best_ms(reps, || {
        fast.gather_blocks(&layout.block_gather, packed.as_flattened())
    });
    let scatter = best_ms(reps, || {
        slow.clear();
        for (t, h) in reference.iter().enumerate() {
            slow.scatter_add(&scatter_map, t, h);
        }
    });
    let vertex_terms = best_ms(reps, || problem.add_vertex_hessian(&layout, x, &mut fast));
    let mut newton_matrix = layout.zeros();
    let now = best_ms(reps, || {
        problem.hessian(model, x, &layout, &mut newton_matrix, &mut packed);
    });
    let gradient = best_ms(reps, || {
        g.iter_mut().for_each(|v| *v = 0.0);
        problem.gradient(model, x, &mut g);
    });
    let mut reference_packed = Vec::new();
    pack_element_hessians(&model.mesh.tets, &reference, &mut reference_packed);
    problem.assemble(&layout, &reference_packed, x, &mut slow);
    let diff = newton_matrix
        .values()
        .iter()
        .zip(slow.values())
        .map(|(a, b)| (a - b) * (a - b))
        .sum::<f64>()
        .sqrt();
    let norm = slow.values().iter().map(|v| v * v).sum::<f64>().sqrt();
    let rel = diff / norm.max(1e-300);
    assert!(
        rel < 1e-10,
        "Hessian differs from the reference route's: {rel:e}"
    );
    let (nt, nnz) = (model.mesh.num_tets(), newton_matrix.values().len());
    let before = elem_ref + scatter + vertex_terms;
    out!(
        "\narmadillo_114k, Newton's assembly by phase, at the state after {warm_steps} steps \
         ({nt} tets, {nnz} stored upper entries, {} rayon threads, best of {reps}, ms; relative \
         difference from the reference route's matrix: {rel:.1e}):",
        rayon::current_num_threads()
    );
    out!("| phase | ms |");
    out!("|---|---|");
    out!("| element Hessians into a buffer, fast route (cyclic-Jacobi SVD, rank-one modes), full 12×12 | {elem_fast:.1} |");
    out!("| the same, packed upper blocks (90 values, Newton's path) | {elem_packed:.1} |");
    out!("| element Hessians into a buffer, reference route (nalgebra SVD + eigen, 9×9 ∂P/∂F) | {elem_ref:.1} |");
    out!("| matrix from the buffer, parallel gather by values | {gather:.1} |");
    out!("| matrix from the packed buffer, parallel gather by 3×3 blocks (Newton's path) | {block_gather:.1} |");
    out!("| matrix from the buffer, sequential scatter | {scatter:.1} |");
    out!("| inertia, barrier, pins | {vertex_terms:.1} |");
    out!("| **one Hessian, now** (Newton's path): packed element Hessians, fast route + block gather + inertia | {now:.1} |");
    out!(
        "| **one Hessian, before**: reference route + sequential scatter + inertia | {before:.1} |"
    );
    out!("| ratio before / now | {:.2} |", before / now);
    out!("| gradient (energy + gradient, all terms; closed-form P) | {gradient:.1} |");
}

fn print_table(rows: &[Row]) {
    out!(
        "\n| case | ordering | verts | tets | steps (conv.) | Newton it/step (min–max) | ms/step | assembly | factor | solve | line search | analyse ms | factor nnz |"
    );
    out!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let n = r.steps.max(1) as f64;
        let it: usize = r.iterations.iter().sum();
        out!(
            "| {} | {} | {} | {} | {} ({}) | {:.2} ({}–{}) | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.0} | {} |",
            r.case,
            r.ordering,
            r.vertices,
            r.tets,
            r.steps,
            r.converged,
            it as f64 / n,
            r.iterations.iter().min().unwrap_or(&0),
            r.iterations.iter().max().unwrap_or(&0),
            r.step_ms / n,
            r.split.assembly_ms / n,
            r.split.factor_ms / n,
            r.split.solve_ms / n,
            r.split.line_search_ms / n,
            r.analyse_ms,
            r.factor_nnz
        );
    }
    out!("(times are means per step, ms; 'analyse' is the one-off symbolic factorisation)");
}

/// A cantilever 1 m × 0.1 m × 0.1 m of `cells`, clamped at x = 0, sagging under gravity:
/// stable Neo-Hookean, E = 1e6 Pa, ν = 0.3, ρ = 1000 kg/m³.
fn sagging_cantilever(cells: [usize; 3]) -> Model {
    let mesh = jello::mesh::box_grid([0.0, -0.05, -0.05], [1.0, 0.05, 0.05], cells);
    let (nt, nv) = (mesh.num_tets(), mesh.num_vertices());
    let pinned: Vec<u32> = (0..nv as u32)
        .filter(|&v| mesh.positions[v as usize][0] < 1e-9)
        .collect();
    let start = pinned.iter().map(|&v| mesh.positions[v as usize]).collect();
    let mat = Material::from_young_poisson(MaterialModel::StableNeoHookean, 1e6, 0.3).unwrap();
    Model::new(
        mesh,
        vec![Body {
            name: "beam".into(),
            vertices: 0..nv,
            tets: 0..nt,
        }],
        vec![mat; nt],
        vec![1000.0; nt],
        [0.0, -9.81, 0.0],
        vec![Pin {
            vertices: pinned,
            start,
            script: Script::Fixed,
        }],
        vec![],
        BarrierParams {
            dhat: 1e-3,
            kappa: 1.0,
        },
    )
    .expect("cantilever model")
}

/// The filter comparison: every [`HessianFilter`] on the twist bar (dynamic, CN ε = 1e-5) and
/// on the sagging cantilever solved statically in `increments` load increments (CN ε tied to the
/// load, [`Model::static_tolerance`]).
fn filter_comparison(twist_steps: usize, increments: usize) -> Vec<Row> {
    let mut rows = Vec::new();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes/twist.toml");
    let text = std::fs::read_to_string(&path).expect("twist scene");
    // As bundled (caps at ±0.1π rad/s: Newton needs one iteration a step), and ten times
    // faster (±π rad/s: a large step every step).
    for (speed, omega) in [("", "0.3141592653589793"), (" ×10", "3.141592653589793")] {
        let built = Scene::parse(&path, &text.replace("0.3141592653589793", omega))
            .and_then(|s| s.build())
            .expect("twist scene");
        for filter in HessianFilter::ALL {
            let params = NewtonParams {
                stop: built.config.stop,
                filter,
                ..NewtonParams::default()
            };
            let case = format!("twist bar{speed}, {}", filter.name());
            let row = bench_model(
                &case,
                built.model.clone(),
                &built.velocity,
                built.config.h,
                twist_steps,
                params,
            );
            out!("{case}: iterations {:?}", row.iterations);
            rows.push(row);
        }
    }
    for cells in [[20, 2, 2], [40, 4, 4]] {
        let model = sagging_cantilever(cells);
        let eps = model.static_tolerance(1e-5);
        let vel = vec![[0.0; 3]; model.num_vertices()];
        for filter in HessianFilter::ALL {
            let params = NewtonParams {
                stop: StopRule::Cn { eps },
                max_iterations: 200,
                filter,
                ..NewtonParams::default()
            };
            let case = format!(
                "static sag {}×{}×{}, {}",
                cells[0],
                cells[1],
                cells[2],
                filter.name()
            );
            let row = bench_run(&case, model.clone(), &vel, 0.01, increments, params, true);
            out!("{case}: iterations {:?}", row.iterations);
            rows.push(row);
        }
    }
    rows
}

fn main() {
    run();
    // Each mode is its own document, so the book's pages can include each.
    let on = |k: &str| std::env::var(k).as_deref() == Ok("1");
    report::finish_as(
        "newton",
        if on("JELLO_BENCH_FILTERS_ONLY") {
            "newton_filters"
        } else if on("JELLO_BENCH_ASSEMBLY_ONLY") {
            "newton_assembly"
        } else {
            "newton"
        },
    );
}

fn run() {
    if std::env::var("JELLO_BENCH_FILTERS_ONLY").as_deref() == Ok("1") {
        let rows = filter_comparison(
            env_usize("JELLO_BENCH_TWIST_STEPS", 40),
            env_usize("JELLO_BENCH_SAG_INCREMENTS", 5),
        );
        print_table(&rows);
        return;
    }
    let node = std::env::var("JELLO_BENCH_ARMADILLO")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/meshes/armadillo_114k.node")
        });
    if std::env::var("JELLO_BENCH_ASSEMBLY_ONLY").as_deref() == Ok("1") {
        // For a profiler: the assembly phases alone.
        if let Some(model) = armadillo_model(&node) {
            assembly_phases(&model, env_usize("JELLO_BENCH_ASSEMBLY_REPS", 5));
        }
        return;
    }
    let twist_steps = env_usize("JELLO_BENCH_TWIST_STEPS", 40);
    let arm_steps = env_usize("JELLO_BENCH_ARMADILLO_STEPS", 5);
    out!(
        "projected Newton (f64, CN ε = 1e-5), {} rayon threads",
        rayon::current_num_threads()
    );
    let mut rows = vec![twist(twist_steps)];
    out!("twist per-step iterations: {:?}", rows[0].iterations);
    if node.exists() {
        for ordering in [Ordering::NestedDissection { block: 3 }, Ordering::Amd] {
            let Some(model) = armadillo_model(&node) else {
                break;
            };
            let vel = vec![[0.0; 3]; model.num_vertices()];
            let params = NewtonParams {
                ordering,
                ..NewtonParams::default()
            };
            let row = bench_model("armadillo_114k", model, &vel, 0.02, arm_steps, params);
            out!(
                "armadillo ({}) per-step iterations: {:?}",
                row.ordering,
                row.iterations
            );
            rows.push(row);
        }
    } else {
        out!("skipping the armadillo: {} not found", node.display());
    }
    print_table(&rows);
    out!("\n## eigenvalue filters (clamp, abs, adaptive)");
    let rows = filter_comparison(twist_steps, env_usize("JELLO_BENCH_SAG_INCREMENTS", 5));
    print_table(&rows);
    if node.exists() {
        if let Some(model) = armadillo_model(&node) {
            assembly_phases(&model, env_usize("JELLO_BENCH_ASSEMBLY_REPS", 5));
            ordering_comparison(&model, env_usize("JELLO_BENCH_ORDERING_REPS", 3));
        }
    }
}
