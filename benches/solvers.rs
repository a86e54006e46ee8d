//! The projective-dynamics family against Newton and JGS2 (issue 10, step 1: quasi-Newton
//! L-BFGS-PD). All figures from one run of `cargo bench --bench solvers`.
//!
//! Cases (`JELLO_SOLVERS_CASES`, comma list; default
//! `table1,orderings,iterations,split,admm_split,contact,admm_contact`):
//! - `table1` — the paper's Table I on a twisting Neo-Hookean bar of 3,321 vertices / 15,360 tets
//!   (1 × 0.2 × 0.2 m, 40×8×8 cells, E = 1e5 Pa and, softer, 1e4 Pa, ν = 0.4, ρ = 1000 kg/m³,
//!   caps rotating in opposite directions at π rad/s about the bar's axis; the paper does not
//!   give its bar's parameters), h = 1/30 s: per frame, from the state
//!   of Newton's converged trajectory, the relative error e_k = (E(x_k) − E(x*)) /
//!   (E(x_0) − E(x*)) (QN Eq. 12; x_0 = the step's start, x* = Newton to ε = 1e-10) after 10 QN
//!   iterations (m = 5, and m = 0, 2, 10 for the history sweep) and after one Newton iteration,
//!   with the wall time of each per frame. `JELLO_SOLVERS_FRAMES` (default 6).
//! - `orderings` — the global matrix A of the Table I bar and of the 17k twist bar factored with
//!   METIS nested dissection and with AMD: fill, factor time, three-column solve time.
//! - `iterations` — iterations and wall time per step to the shared stop rule (CN, ε = 1e-5)
//!   for Newton, QN (m = 5) and JGS2 on a 4×1×1 twist bar (largest extent 1, E = 1e5, ν = 0.4,
//!   fixed corotated, h = 25 ms, caps at ±0.1π rad/s as `twist.toml`): by default at 1,225
//!   vertices (24×6×6 cells); `JELLO_SOLVERS_BIG=1` adds the 15,616-vertex bar (60×15×15 cells)
//!   and armadillo_18k (the convergence bench's kicked armadillo: stable Neo-Hookean E = 1e5,
//!   left hand pinned, 3 kN on the right foot for 20 ms, h = 10 ms). `JELLO_SOLVERS_STEPS`
//!   (default 5).
//! - `split` — QN's per-iteration cost split (gradient, two-loop, triangular solve, line
//!   search; the host solve's bus share) with every phase synchronised, on the f64 CPU backend
//!   and on the device backend: the software GPU adapter when one is found (lavapipe: f32 on the
//!   CPU — correctness only, its speed means nothing for a GPU) and the kernels' CPU twins.
//! - `admm_split` — ADMM's time per iteration (10 fixed iterations per frame) on the Table I
//!   bar on the f64 CPU backend and the device backend (software GPU adapter when found, the
//!   CPU twins), with the x-step's bus transfers (right-hand side and positions, 32·n bytes),
//!   its f64 host solve and the wait for the local step before it.
//! - `dot` (opt-in; issue 11) — every jello solver on the large-step comparison scenes (a
//!   16,640-vertex twisted bar, twist–stretch–squash on armadillo_18k and bunny_20k): see
//!   `dot_comparison` for the protocol; DOT's phase split and the subdomain sweep.
//! - `dot_hard` (opt-in) — the same comparison in the paper's large-deformation, high-speed
//!   regime, where projected Newton needs many iterations per step: TSS on armadillo_18k and
//!   bunny_20k with E = 1e4 Pa, the script 4× faster and its translations 1.6× larger (see
//!   `dot_hard`; about 14 minutes with all seven solvers on 2 cores, 4 with the default four).
//! - `armadillo_114k` (opt-in) — cost per iteration of QN and Newton on armadillo_114k (the
//!   kicked-foot scene on the 28,310-vertex mesh), `JELLO_SOLVERS_STEPS` steps: the issue's
//!   goal is a QN iteration at ≤ 1/20 of a Newton iteration there.
//! - `contact` — `drop.toml`'s first 20 steps (the ball's impact): QN iterations with the
//!   contact curvature in the initial inverse Hessian (the default) and without (the paper's
//!   rule; 1000-iteration cap per step).
//! - `admm_contact` — ADMM's constrained global step (`src/solver/admm/contact.rs`): the
//!   whole of `drop.toml` (80 steps, ε = 1e-5) with Uzawa CG and with projected Gauss–Seidel
//!   (ADMM iterations, inner iterations and factor solves per global step, wall time; Newton
//!   alongside), and digest T13 (the paper's Fig. 10 centre): one step of h = 0.2 s of
//!   drop.toml's ball resting on the ground, the error ‖x_N − x*‖_M / ‖x_0 − x*‖_M after N
//!   ADMM iterations against wall time, for Uzawa (CG cap 200 and the paper's UCG(10)) and PGS
//!   (200 sweeps and the paper's PGS(30)); x* is Uzawa to ε = 1e-11.
//!
//! - `admm_twist` (opt-in; issue 42) — ADMM plain, with Anderson alone, the penalty update
//!   alone and both (the defaults) on the bundled twist–stretch–squash from Newton's states
//!   mid-twist, mid-stretch and mid-squash, at CN 1e-5 and 1e-7: iterations, ms per step,
//!   converged steps, where unconverged steps stopped, factorisations (see `admm_twist`).
//! - `large_deformation` (opt-in; issue 42) — every CPU solver (Newton, multilevel, LBFGS-H,
//!   DOT, QN, ADMM, JGS2, VBD) at its defaults on the bundled and the hard twist–stretch–squash
//!   of armadillo_18k, at CN 1e-5 and 1e-7: iterations, ms per step, converged steps and the
//!   distance to Newton's answer (see `large_deformation`).
//!
//! Every set of cases writes its own document: the default set `solvers.md`, any other
//! `solvers_CASE_CASE….md` (`JELLO_SOLVERS_CASES=admm_twist` writes `solvers_admm_twist.md`,
//! the table of the book's ADMM page).
//!
//! Peak memory (`dot`, `dot_hard`): the bench's global allocator counts every Rust heap
//! allocation (module `heap`). Per solver and case, "build MB" is the peak heap above the
//! baseline (what was live before the solver was built: the model, Newton's start states)
//! while the solver is constructed — QN's and ADMM's factored global matrix, DOT's partition
//! and symbolic factorisations, and JGS2's subspace are built in this window — and "run MB" the
//! peak above the same baseline while it runs the measured steps: what it kept from
//! construction plus every per-step allocation (projected Hessians, numeric factors, L-BFGS
//! history, line-search vectors, the output positions). C allocations (METIS) and thread stacks
//! are not counted; the process's max RSS (getrusage) is printed after each case. The counter
//! costs two relaxed atomics per allocation, in every case of this bench.
//!
//! Measured figures: the book's *Solver comparisons* page (`docs/src/benchmarks/solvers.md`)
//! includes each case's output; its record keeps the earlier runs.

#[path = "common/distance.rs"]
mod distance;
use distance::max_distance;

#[path = "common/report.rs"]
#[macro_use]
mod report;

#[path = "common/kicked_armadillo.rs"]
mod kicked_armadillo;

use jello::gpu::{Backend, Device};
use jello::material::{Material, MaterialModel};
use jello::mesh::box_grid;
use jello::output::plot::{write_plot, PlotSpec, Series};
use jello::problem::{BarrierParams, Body, Model, Pin, Script, State, StepProblem};
use jello::scene::Scene;
use jello::sim::Simulation;
use jello::solver::admm::{AdmmParams, AdmmSolver, ContactParams, ContactVariant, PenaltyParams};
use jello::solver::backend::{CpuBackend, DeviceBackend, PotentialBackend};
use jello::solver::dot::{DotParams, DotSolver};
use jello::solver::jgs2::{
    build_subspace, Jgs2Params, Jgs2Solver, Jgs2Subspace, Safeguard, SubspaceOptions, Variant,
};
use jello::solver::multilevel::{build_solver, MultilevelParams, MultilevelStop};
use jello::solver::pd::{GlobalOptions, GlobalSystem};
use jello::solver::qn::{QnMode, QnParams, QnSolver};
use jello::solver::{NewtonParams, NewtonSolver, StepSolver, StopRule};
use jello_precompute::cholesky::Ordering;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// Heap accounting for the comparison's peak-memory columns: every Rust allocation of the
/// process (all threads) goes through [`heap::Counting`], a wrapper of the system allocator
/// that keeps the bytes live now and their high-water mark in two atomics. Memory allocated by
/// C code (METIS's partitioner) and thread stacks are not seen; the process's max RSS
/// ([`max_rss_mb`]) covers them.
mod heap {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    /// The counting allocator (installed as the bench's global allocator).
    pub struct Counting;

    static CURRENT: AtomicUsize = AtomicUsize::new(0);
    static PEAK: AtomicUsize = AtomicUsize::new(0);

    fn grow(n: usize) {
        let now = CURRENT.fetch_add(n, Relaxed) + n;
        PEAK.fetch_max(now, Relaxed);
    }

    fn shrink(n: usize) {
        CURRENT.fetch_sub(n, Relaxed);
    }

    // SAFETY: every call forwards to `System` with the caller's arguments unchanged; the
    // counters only observe sizes.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let p = unsafe { System.alloc(layout) };
            if !p.is_null() {
                grow(layout.size());
            }
            p
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            let p = unsafe { System.alloc_zeroed(layout) };
            if !p.is_null() {
                grow(layout.size());
            }
            p
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            unsafe { System.dealloc(ptr, layout) };
            shrink(layout.size());
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            let p = unsafe { System.realloc(ptr, layout, new_size) };
            if !p.is_null() {
                if new_size > layout.size() {
                    grow(new_size - layout.size());
                } else {
                    shrink(layout.size() - new_size);
                }
            }
            p
        }
    }

    /// Starts a new high-water window: the peak drops to the bytes live now, which it returns
    /// (the baseline for [`peak_since`]).
    pub fn reset_peak() -> usize {
        let now = CURRENT.load(Relaxed);
        PEAK.store(now, Relaxed);
        now
    }

    /// The high-water mark since the last [`reset_peak`] above `baseline`, bytes.
    pub fn peak_since(baseline: usize) -> usize {
        PEAK.load(Relaxed).saturating_sub(baseline)
    }
}

#[global_allocator]
static ALLOCATOR: heap::Counting = heap::Counting;

/// The process's peak resident set so far (getrusage's ru_maxrss, KiB on Linux), MB; NaN
/// where it cannot be read.
fn max_rss_mb() -> f64 {
    #[cfg(unix)]
    {
        // SAFETY: getrusage only writes the zeroed struct it is given.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } == 0 {
            return usage.ru_maxrss as f64 * 1024.0 * 1e-6;
        }
    }
    f64::NAN
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// A bar `[-L/2, L/2] × [-w/2, w/2]²` whose end caps rotate about x at ±ω.
fn twist_bar(cells: [usize; 3], size: [f64; 3], mat: Material, omega: f64) -> Model {
    let half = size.map(|s| s / 2.0);
    let mesh = box_grid([-half[0], -half[1], -half[2]], half, cells);
    let (nt, nv) = (mesh.num_tets(), mesh.num_vertices());
    let cap = |sign: f64| {
        let vertices: Vec<u32> = (0..nv as u32)
            .filter(|&v| sign * mesh.positions[v as usize][0] > half[0] - 1e-9)
            .collect();
        let start = vertices
            .iter()
            .map(|&v| mesh.positions[v as usize])
            .collect();
        Pin {
            vertices,
            start,
            script: Script::Rotate {
                center: [0.0; 3],
                axis: [1.0, 0.0, 0.0],
                omega: sign * omega,
            },
        }
    };
    let pins = vec![cap(-1.0), cap(1.0)];
    Model::new(
        mesh,
        vec![Body {
            name: "bar".into(),
            vertices: 0..nv,
            tets: 0..nt,
        }],
        vec![mat; nt],
        vec![1000.0; nt],
        [0.0; 3],
        pins,
        vec![],
        BarrierParams {
            dhat: 1e-3,
            kappa: 1.0,
        },
    )
    .expect("model")
}

fn qn(model: &Model, params: QnParams) -> QnSolver<CpuBackend> {
    QnSolver::new(model, CpuBackend::new(model.num_vertices()), params).expect("qn")
}

fn newton(model: &Model, eps: f64, max_iterations: usize) -> NewtonSolver {
    NewtonSolver::new(
        model,
        NewtonParams {
            stop: StopRule::Cn { eps },
            max_iterations,
            ..NewtonParams::default()
        },
    )
    .expect("newton")
}

fn advance(state: &State, x: Vec<f64>, h: f64) -> State {
    let v = x.iter().zip(&state.x).map(|(a, b)| (a - b) / h).collect();
    State::new(x, v, state.t + h)
}

// ---------------------------------------------------------------- Table I

fn table1() {
    for e in [1e5, 1e4] {
        table1_for(e);
    }
}

fn table1_for(young: f64) {
    let frames: usize = env_or("JELLO_SOLVERS_FRAMES", 6);
    let mat = Material::from_young_poisson(MaterialModel::NeoHookean, young, 0.4).unwrap();
    let model = twist_bar([40, 8, 8], [1.0, 0.2, 0.2], mat, std::f64::consts::PI);
    let h = 1.0 / 30.0;
    out!(
        "\n## Table I — twisting Neo-Hookean bar (E = {young:.0e} Pa, ν = 0.4), {} vertices, {} tets, h = 1/30 s, {frames} frames\n",
        model.num_vertices(),
        model.mesh.num_tets()
    );
    let mut state = model.initial_state(&vec![[0.0; 3]; model.num_vertices()]);
    let mut reference = newton(&model, 1e-10, 100);
    let mut one_newton = newton(&model, 1e-10, 1);
    let histories = [5usize, 0, 2, 10];
    let mut qns: Vec<QnSolver<CpuBackend>> = histories
        .iter()
        .map(|&m| {
            qn(
                &model,
                QnParams {
                    history: m,
                    mode: QnMode::Fixed(10),
                    ..QnParams::default()
                },
            )
        })
        .collect();
    // Per solver: Σ e, Σ log e (geometric mean), Σ ms (the first frame's factorisation apart).
    let mut err = vec![(0.0f64, 0.0f64, 0.0f64, 0usize); histories.len() + 1];
    let mut ref_its = 0;
    let mut factor_ms = 0.0;
    for frame in 1..=frames {
        let p = StepProblem::new(&model, &state, h);
        let mut xs = Vec::new();
        let r = reference
            .step(&p, &model, &mut xs, false)
            .expect("reference");
        ref_its += r.iterations;
        let e_star = p.energy_change(&model, &xs);
        let rel = |x: &[f64]| (p.energy_change(&model, x) - e_star) / (0.0 - e_star);
        let mut x = Vec::new();
        let t0 = Instant::now();
        one_newton.step(&p, &model, &mut x, false).expect("newton");
        let t = ms(t0);
        let e = rel(&x);
        let slot = &mut err[histories.len()];
        *slot = (
            slot.0 + e,
            slot.1 + e.max(1e-300).ln(),
            slot.2 + t,
            slot.3 + 1,
        );
        for (k, s) in qns.iter_mut().enumerate() {
            let before = s.system().factor_ms();
            let t0 = Instant::now();
            s.step(&p, &model, &mut x, false).expect("qn");
            let f = s.system().factor_ms() - before;
            let t = ms(t0) - f;
            if k == 0 {
                factor_ms += f;
            }
            let e = rel(&x);
            err[k] = (
                err[k].0 + e,
                err[k].1 + e.max(1e-300).ln(),
                err[k].2 + t,
                err[k].3 + 1,
            );
        }
        out!(
            "  frame {frame}: e(Newton×1) {:.2e}, e(QN m=5 ×10) {:.2e}; reference {} Newton iterations",
            err[histories.len()].0 / frame as f64,
            err[0].0 / frame as f64,
            r.iterations
        );
        state = advance(&state, xs, h);
    }
    out!(
        "\nReference: Newton to ε = 1e-10, {:.1} iterations per frame. QN's one-time factorisation \
         of A: {factor_ms:.1} ms (not in the per-frame times).\n",
        ref_its as f64 / frames as f64
    );
    out!("| method | relative error e (mean) | e (geometric mean) | ms / frame |");
    out!("|---|---|---|---|");
    let newton_ms = err[histories.len()].2 / frames as f64;
    let row = |name: String, e: &(f64, f64, f64, usize)| {
        let n = e.3 as f64;
        out!(
            "| {name} | {:.2e} | {:.2e} | {:.1} ({:.3}× Newton) |",
            e.0 / n,
            (e.1 / n).exp(),
            e.2 / n,
            e.2 / n / newton_ms
        );
    };
    for (k, m) in histories.iter().enumerate() {
        row(format!("QN, m = {m}, 10 iterations"), &err[k]);
    }
    row("Newton, 1 iteration".into(), &err[histories.len()]);
}

// ---------------------------------------------------------------- orderings

fn orderings() {
    out!("\n## The global matrix A: METIS nested dissection vs AMD\n");
    out!("| mesh | free vertices | ordering | analysis ms | factor ms | nnz(L) | 3-column solve ms |");
    out!("|---|---|---|---|---|---|---|");
    let mat = Material::from_young_poisson(MaterialModel::NeoHookean, 1e5, 0.4).unwrap();
    let mut cases = vec![(
        "Table I bar",
        twist_bar([40, 8, 8], [1.0, 0.2, 0.2], mat, 1.0),
    )];
    cases.push((
        "twist 60×15×15",
        twist_bar([60, 15, 15], [1.0, 0.25, 0.25], mat, 1.0),
    ));
    for (name, model) in cases {
        for (oname, ordering) in [
            ("metis-nd", Ordering::NestedDissection { block: 1 }),
            ("amd", Ordering::Amd),
        ] {
            let mut sys = GlobalSystem::new(
                &model,
                GlobalOptions {
                    ordering,
                    ..GlobalOptions::default()
                },
            )
            .unwrap();
            let t0 = Instant::now();
            sys.prepare(&model, &model.pinned, 900.0).unwrap();
            let first = ms(t0);
            // A second mass weight: the numeric factorisation alone.
            let t0 = Instant::now();
            sys.prepare(&model, &model.pinned, 1600.0).unwrap();
            let factor = ms(t0);
            let mut rhs: Vec<f64> = (0..3 * model.num_vertices())
                .map(|k| ((k * 7919) % 1000) as f64 / 1000.0)
                .collect();
            let reps = 20;
            let t0 = Instant::now();
            for _ in 0..reps {
                sys.solve(&mut rhs).unwrap();
            }
            let solve = ms(t0) / reps as f64;
            out!(
                "| {name} | {} | {oname} | {:.1} | {factor:.1} | {} | {solve:.2} |",
                sys.free_vertices(),
                first - factor,
                sys.factor_nnz()
            );
        }
    }
}

// ---------------------------------------------------------------- iterations to the stop rule

struct Case {
    name: String,
    model: Model,
    velocity: Vec<[f64; 3]>,
    h: f64,
}

fn armadillo() -> Option<Case> {
    armadillo_mesh("armadillo_18k")
}

fn armadillo_mesh(name: &str) -> Option<Case> {
    let mesh = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../shared/meshes/{name}.node"));
    if !mesh.exists() {
        out!("  ({name} not in ../shared/meshes: skipped)");
        return None;
    }
    let scene = kicked_armadillo::scene(&mesh, 1e5, 3000.0);
    let built = Scene::parse(Path::new("armadillo.toml"), &scene)
        .expect("scene")
        .build()
        .expect("build");
    Some(Case {
        name: format!(
            "{name} ({} vertices, kicked foot, h = 10 ms)",
            built.model.num_vertices()
        ),
        velocity: built.velocity.clone(),
        h: built.config.h,
        model: built.model,
    })
}

fn iterations() {
    let steps: usize = env_or("JELLO_SOLVERS_STEPS", 5);
    let big = env_or("JELLO_SOLVERS_BIG", 0usize) != 0;
    let fc = Material::from_young_poisson(MaterialModel::FixedCorotated, 1e5, 0.4).unwrap();
    let w = 0.1 * std::f64::consts::PI;
    let mut cases = vec![Case {
        name: "twist 4×1×1, 24×6×6 cells".into(),
        model: twist_bar([24, 6, 6], [1.0, 0.25, 0.25], fc, w),
        velocity: Vec::new(),
        h: 0.025,
    }];
    if big {
        cases.push(Case {
            name: "twist 4×1×1, 60×15×15 cells".into(),
            model: twist_bar([60, 15, 15], [1.0, 0.25, 0.25], fc, w),
            velocity: Vec::new(),
            h: 0.025,
        });
        cases.extend(armadillo());
    }
    out!("\n## Iterations and time per step to CN ε = 1e-5 ({steps} steps)\n");
    out!("| case | vertices | solver | iterations per step | mean | ms / step | ms / iteration | precompute s |");
    out!("|---|---|---|---|---|---|---|---|");
    let stop = StopRule::Cn { eps: 1e-5 };
    for case in cases {
        let m = &case.model;
        let vel = if case.velocity.is_empty() {
            vec![[0.0; 3]; m.num_vertices()]
        } else {
            case.velocity.clone()
        };
        for name in ["newton", "qn", "admm", "jgs2"] {
            let t0 = Instant::now();
            let solver: Box<dyn StepSolver> = match name {
                "newton" => Box::new(newton(m, 1e-5, 1000)),
                "admm" => match AdmmSolver::new(
                    m,
                    AdmmParams {
                        stop,
                        ..AdmmParams::default()
                    },
                ) {
                    Ok(s) => Box::new(s),
                    Err(e) => {
                        out!(
                            "| {} | {} | admm | {e} | | | | |",
                            case.name,
                            m.num_vertices()
                        );
                        continue;
                    }
                },
                "qn" => Box::new(qn(
                    m,
                    QnParams {
                        stop,
                        ..QnParams::default()
                    },
                )),
                _ => {
                    let sub = build_subspace(m, case.h, &SubspaceOptions::default()).expect("jgs2");
                    Box::new(
                        Jgs2Solver::jgs2(
                            m,
                            Jgs2Params {
                                stop,
                                max_iterations: 1000,
                                variant: Variant::Jacobi,
                                safeguard: Safeguard::Cut,
                            },
                            Arc::new(sub),
                        )
                        .expect("jgs2"),
                    )
                }
            };
            let pre = t0.elapsed().as_secs_f64();
            let mut sim =
                Simulation::new(m.clone(), m.initial_state(&vel), case.h, solver).expect("sim");
            let mut its = Vec::new();
            let mut wall = 0.0;
            let mut conv = 0;
            for _ in 0..steps {
                let r = sim.step(false).expect("step");
                its.push(r.iterations);
                wall += r.wall_ms;
                conv += r.converged as usize;
            }
            let total: usize = its.iter().sum();
            out!(
                "| {} | {} | {name} | {:?}{} | {:.1} | {:.1} | {:.2} | {:.2} |",
                case.name,
                m.num_vertices(),
                its,
                if conv < steps {
                    format!(" ({}/{steps} converged)", conv)
                } else {
                    String::new()
                },
                total as f64 / steps as f64,
                wall / steps as f64,
                wall / total.max(1) as f64,
                pre
            );
        }
    }
}

fn armadillo_114k() {
    let Some(case) = armadillo_mesh("armadillo_114k") else {
        return;
    };
    let steps: usize = env_or("JELLO_SOLVERS_STEPS", 2);
    let m = &case.model;
    out!(
        "\n## Cost per iteration on {} ({steps} steps, ε = 1e-5)\n",
        case.name
    );
    out!("| solver | iterations | ms / iteration |");
    out!("|---|---|---|");
    let mut per = Vec::new();
    for name in ["newton", "qn"] {
        let solver: Box<dyn StepSolver> = if name == "newton" {
            Box::new(newton(m, 1e-5, 1000))
        } else {
            Box::new(qn(m, QnParams::default()))
        };
        let mut sim = Simulation::new(m.clone(), m.initial_state(&case.velocity), case.h, solver)
            .expect("sim");
        let (mut its, mut wall) = (0, 0.0);
        for _ in 0..steps {
            let r = sim.step(false).expect("step");
            its += r.iterations;
            wall += r.wall_ms;
        }
        per.push(wall / its.max(1) as f64);
        out!("| {name} | {its} | {:.1} |", wall / its.max(1) as f64);
    }
    out!(
        "\nQN iteration / Newton iteration: 1/{:.1}",
        per[0] / per[1]
    );
}

// ---------------------------------------------------------------- per-iteration split

fn split_on<B: PotentialBackend>(label: &str, model: &Model, backend: B, h: f64, steps: usize) {
    let mut s = QnSolver::new(
        model,
        backend,
        QnParams {
            mode: QnMode::Fixed(10),
            profile: true,
            ..QnParams::default()
        },
    )
    .expect("qn");
    let mut state = model.initial_state(&vec![[0.0; 3]; model.num_vertices()]);
    let t0 = Instant::now();
    for _ in 0..steps {
        let p = StepProblem::new(model, &state, h);
        let mut x = Vec::new();
        s.step(&p, model, &mut x, false).expect("qn step");
        state = advance(&state, x, h);
    }
    let wall = ms(t0);
    let ph = s.phases();
    let n = ph.iterations.max(1) as f64;
    let total = ph.gradient_ms + ph.two_loop_ms + ph.solve_ms + ph.line_search_ms;
    let pct = |v: f64| 100.0 * v / total;
    out!(
        "| {label} | {:.3} ({:.0}%) | {:.3} ({:.0}%) | {:.3} ({:.0}%) | {:.3} ({:.0}%) | {:.3} | {:.1} |",
        ph.gradient_ms / n,
        pct(ph.gradient_ms),
        ph.two_loop_ms / n,
        pct(ph.two_loop_ms),
        ph.solve_ms / n,
        pct(ph.solve_ms),
        ph.line_search_ms / n,
        pct(ph.line_search_ms),
        total / n,
        wall
    );
}

fn split() {
    let steps: usize = env_or("JELLO_SOLVERS_STEPS", 5);
    let mat = Material::from_young_poisson(MaterialModel::NeoHookean, 1e5, 0.4).unwrap();
    let model = twist_bar([40, 8, 8], [1.0, 0.2, 0.2], mat, std::f64::consts::PI);
    let h = 1.0 / 30.0;
    out!(
        "\n## QN per-iteration cost split — Table I bar ({} vertices), {steps} frames × 10 iterations, every phase synchronised\n",
        model.num_vertices()
    );
    out!("| backend | gradient ms | two-loop ms | triangular solve ms | line search ms | ms / iteration | wall ms |");
    out!("|---|---|---|---|---|---|---|");
    split_on(
        "cpu-f64",
        &model,
        CpuBackend::new(model.num_vertices()),
        h,
        steps,
    );
    let bus = |label: &str, dev: Device| {
        let b = DeviceBackend::new(dev, &model).expect("device backend");
        let mut s = QnSolver::new(
            &model,
            b,
            QnParams {
                mode: QnMode::Fixed(10),
                ..QnParams::default()
            },
        )
        .expect("qn");
        let state = model.initial_state(&vec![[0.0; 3]; model.num_vertices()]);
        let p = StepProblem::new(&model, &state, h);
        let mut x = Vec::new();
        let t0 = Instant::now();
        s.step(&p, &model, &mut x, false).expect("qn step");
        let wall = ms(t0);
        let st = s.backend().host_solve_stats();
        out!(
            "  {label}, unsynchronised step of 10 iterations: {wall:.1} ms; host solve {} calls, \
             {:.1} KB over the bus per solve, transfer {:.2} ms + solve {:.2} ms per call ({:.0}% of the step)",
            st.calls,
            st.bytes as f64 / st.calls.max(1) as f64 / 1024.0,
            st.transfer_ms / st.calls.max(1) as f64,
            st.host_ms / st.calls.max(1) as f64,
            100.0 * (st.transfer_ms + st.host_ms) / wall
        );
    };
    match Device::new(Backend::Gpu) {
        Ok(dev) => {
            let name = dev.info().to_string();
            split_on(
                &format!("device: {name}"),
                &model,
                DeviceBackend::new(dev, &model).expect("device backend"),
                h,
                steps,
            );
            if let Ok(dev) = Device::new(Backend::Gpu) {
                bus(&name, dev);
            }
        }
        Err(e) => out!("  (no GPU adapter: {e})"),
    }
    split_on(
        "device: CPU twins (f32)",
        &model,
        DeviceBackend::new(Device::cpu(), &model).expect("twins"),
        h,
        steps,
    );
    bus("CPU twins", Device::cpu());
    out!(
        "\nA software adapter (lavapipe/llvmpipe) runs the f32 kernels on the CPU: its times say \
         nothing about a GPU's, only that the device path runs."
    );
}

// ---------------------------------------------------------------- admm split

/// ADMM on the Table I bar: per-iteration time on each backend and, on the device ones, the
/// x-step's share (transfers of the right-hand side and the positions, the f64 host solve) and
/// the wait for the local step before it.
fn admm_split() {
    let steps: usize = env_or("JELLO_SOLVERS_STEPS", 5);
    let mat = Material::from_young_poisson(MaterialModel::NeoHookean, 1e5, 0.4).unwrap();
    let model = twist_bar([40, 8, 8], [1.0, 0.2, 0.2], mat, std::f64::consts::PI);
    let h = 1.0 / 30.0;
    out!(
        "\n## ADMM per-iteration cost — Table I bar ({} vertices), {steps} frames × 10 iterations (fixed count)\n",
        model.num_vertices()
    );
    out!("| backend | ms / iteration | bus KB / iteration | transfers ms (%) | host solve ms (%) | wait for the local step ms (%) | residual reads ms (%) | per-step work ms / iteration (%) |");
    out!("|---|---|---|---|---|---|---|---|");
    let params = AdmmParams {
        mode: QnMode::Fixed(10),
        ..AdmmParams::default()
    };
    fn run<B: jello::solver::admm::AdmmBackend>(
        model: &Model,
        s: &mut AdmmSolver<B>,
        h: f64,
        steps: usize,
    ) -> (f64, usize, f64, f64) {
        let mut state = model.initial_state(&vec![[0.0; 3]; model.num_vertices()]);
        let (mut wall, mut its, mut local, mut global) = (0.0, 0, 0.0, 0.0);
        for _ in 0..steps {
            let p = StepProblem::new(model, &state, h);
            let mut x = Vec::new();
            let t0 = Instant::now();
            let r = s.step(&p, model, &mut x, false).expect("admm step");
            wall += ms(t0);
            its += r.iterations;
            local += r.timings.assembly_ms;
            global += r.timings.solve_ms;
            state.v = x.iter().zip(&state.x).map(|(a, b)| (a - b) / h).collect();
            state.x = x;
        }
        (wall, its, local, global)
    }
    let mut cpu = AdmmSolver::new(&model, params).expect("admm");
    let (wall, its, local, global) = run(&model, &mut cpu, h, steps);
    let n = its as f64;
    let rest = wall - local - global;
    out!(
        "| cpu-f64 | {:.2} | 0 | – | {:.2} ({:.0}%) | local step {:.2} ({:.0}%) | – | {:.2} ({:.0}%) |",
        wall / n,
        global / n,
        100.0 * global / wall,
        local / n,
        100.0 * local / wall,
        rest / n,
        100.0 * rest / wall
    );
    let device = |label: String, dev: Device| {
        let b = DeviceBackend::new(dev, &model).expect("device backend");
        let mut s = AdmmSolver::with_backend(&model, b, params).expect("admm");
        let (wall, its, local, global) = run(&model, &mut s, h, steps);
        let st = s.backend().host_solve_stats();
        let n = its as f64;
        let moved = st.transfer_ms - st.wait_ms;
        let rest = wall - local - global;
        out!(
            "| {label} | {:.2} | {:.1} | {:.2} ({:.1}%) | {:.2} ({:.0}%) | {:.2} ({:.0}%) | {:.2} ({:.0}%) | {:.2} ({:.0}%) |",
            wall / n,
            st.bytes as f64 / n / 1024.0,
            moved / n,
            100.0 * moved / wall,
            st.host_ms / n,
            100.0 * st.host_ms / wall,
            st.wait_ms / n,
            100.0 * st.wait_ms / wall,
            local / n,
            100.0 * local / wall,
            rest / n,
            100.0 * rest / wall
        );
    };
    match Device::new(Backend::Gpu) {
        Ok(dev) => device(format!("device: {}", dev.info()), dev),
        Err(e) => out!("  (no GPU adapter: {e})"),
    }
    device("device: CPU twins (f32)".into(), Device::cpu());
}

// ---------------------------------------------------------------- admm_twist (issue 42)

/// An ADMM configuration of the `admm_twist` table: a base (`plain`, `anderson`, `penalty`,
/// `both`) and `+`-joined overrides (`m=N` Anderson depth, `range=R`, `updates=N`,
/// `interval=N`, `stall=F`, `band=F`, `factor=F`, `cap=N` iteration cap).
fn admm_variant(spec: &str, stop: StopRule) -> AdmmParams {
    let mut parts = spec.split('+');
    let base = parts.next().unwrap_or_default();
    let plain = AdmmParams::plain();
    let mut p = AdmmParams {
        stop,
        ..match base {
            "plain" => plain,
            "anderson" => AdmmParams {
                anderson: AdmmParams::default().anderson,
                ..plain
            },
            "penalty" => AdmmParams {
                penalty: PenaltyParams::default(),
                ..plain
            },
            "both" => AdmmParams::default(),
            other => panic!("JELLO_ADMM_VARIANTS: unknown base `{other}` in `{spec}`"),
        }
    };
    for kv in parts {
        let (k, v) = kv
            .split_once('=')
            .unwrap_or_else(|| panic!("JELLO_ADMM_VARIANTS: `{kv}` in `{spec}` is not key=value"));
        let num = |v: &str| -> f64 {
            v.parse()
                .unwrap_or_else(|_| panic!("JELLO_ADMM_VARIANTS: `{kv}` in `{spec}`"))
        };
        let pp = &mut p.penalty;
        match k {
            "m" => p.anderson = num(v) as usize,
            "cap" => p.max_iterations = num(v) as usize,
            "range" => pp.range = num(v),
            "updates" => pp.max_updates = num(v) as usize,
            "interval" => pp.interval = num(v) as usize,
            "stall" => pp.stall = num(v),
            "band" => pp.band = num(v),
            "factor" => pp.factor = num(v),
            other => panic!("JELLO_ADMM_VARIANTS: unknown key `{other}` in `{spec}`"),
        }
    }
    p
}

/// Issue 42: ADMM at its defaults and with each addition alone on the large-deformation
/// twists — twist–stretch–squash on armadillo_18k (the bundled scene, E = 2.5e4 Pa) and on
/// bunny_20k (E = 1e5 Pa, the DOT comparison's), fixed corotated, h = 25 ms — from Newton's
/// states at `JELLO_ADMM_STARTS` (steps, default `20,60,100`: mid-twist with the handles 90°
/// apart, mid-stretch, mid-squash; the DOT comparison's starts), `JELLO_ADMM_STEPS` (default 1)
/// steps from each, at CN ε of `JELLO_ADMM_EPS` (default
/// `1e-5,1e-7`), for the variants of `JELLO_ADMM_VARIANTS` (default
/// `plain,anderson,penalty,both`; see [`admm_variant`] for overrides) and the scenes of
/// `JELLO_ADMM_MESHES` (default `armadillo_18k`; `bunny_20k` the other), or the variants of
/// `JELLO_ADMM_TSS` (`;`-separated `mesh,E,speed,stretch,degrees` as `JELLO_DOT_HARD_TSS`, from
/// Newton's states half-way through each phase unless `JELLO_ADMM_STARTS` is set). Per variant: iterations per step,
/// ms per step, converged steps, the residual where unconverged steps stopped, factorisations
/// (the first step's initial one included), penalty updates, ρ at the end, rejected Anderson
/// mixes. `JELLO_ADMM_TRACE=1` prints every 50th iteration of every step (stderr).
/// Run alone (`JELLO_SOLVERS_CASES=admm_twist`) the bench's document is
/// `solvers_admm_twist.md`, the one the book's ADMM page includes.
fn admm_twist() {
    let k: usize = env_or("JELLO_ADMM_STEPS", 1);
    let list = |name: &str, default: &str| -> Vec<String> {
        std::env::var(name)
            .unwrap_or_else(|_| default.into())
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    };
    let starts_given = std::env::var("JELLO_ADMM_STARTS").is_ok();
    let at: Vec<usize> = list("JELLO_ADMM_STARTS", "20,60,100")
        .iter()
        .map(|s| s.parse().expect("JELLO_ADMM_STARTS: steps"))
        .collect();
    // The scenes: `JELLO_ADMM_TSS` variants (as `JELLO_DOT_HARD_TSS`), else the bundled script
    // on each of `JELLO_ADMM_MESHES`.
    let variants_tss: Vec<Tss> = match std::env::var("JELLO_ADMM_TSS") {
        Ok(spec) => spec
            .split(';')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(|v| Tss::parse(v, "JELLO_ADMM_TSS"))
            .collect(),
        Err(_) => list("JELLO_ADMM_MESHES", "armadillo_18k")
            .iter()
            .map(|mesh| {
                let young = if mesh.starts_with("armadillo") {
                    2.5e4
                } else {
                    1e5
                };
                Tss::bundled(mesh, young)
            })
            .collect(),
    };
    let eps: Vec<f64> = list("JELLO_ADMM_EPS", "1e-5,1e-7")
        .iter()
        .map(|s| s.parse().expect("JELLO_ADMM_EPS: numbers"))
        .collect();
    let variants = list("JELLO_ADMM_VARIANTS", "plain,anderson,penalty,both");
    let trace = env_or("JELLO_ADMM_TRACE", 0) == 1;
    out!(
        "\n## ADMM on the large-deformation twists: {k} steps from Newton's states at steps {at:?} (a variant's phase mid-points unless given; h = 25 ms)\n"
    );
    out!(
        "f64 CPU backend. *iterations*: per step; *stopped at*: the residual (characteristic \
         norm) where unconverged steps ended; *factorisations*: of the x-step's matrix over the \
         steps (the run's first one included); *updates*: penalty changes; *ρ*: the penalty \
         factor after the last step; *rejected*: Anderson mixes the safeguard discarded. \
         `plain` is the paper's Algorithm 1 (`anderson = 0`, `penalty = \"fixed\"`), `both` the \
         defaults (Anderson depth {}, residual balancing within [1/{r}, {r}], at most {u} \
         updates per step), cap {} iterations per step.\n",
        AdmmParams::default().anderson,
        AdmmParams::default().max_iterations,
        r = PenaltyParams::default().range,
        u = PenaltyParams::default().max_updates,
    );
    out!("| scene | ε | variant | iterations | ms / step | converged | stopped at | factorisations | updates | ρ | rejected |");
    out!("|---|---|---|---|---|---|---|---|---|---|---|");
    for tss in &variants_tss {
        let Some(case) = tss_case(tss) else {
            continue;
        };
        // A variant's own phases unless the starts were given.
        let at = if starts_given || tss.speed == 1.0 {
            at.clone()
        } else {
            tss.phase_points(case.h, 1)
        };
        let (starts, traj) = newton_states(&case, &at);
        eprintln!(
            "{}: Newton to the starts, {:.2} iterations per step, {:.0} s",
            case.name,
            traj.iterations.iter().sum::<usize>() as f64 / traj.iterations.len().max(1) as f64,
            traj.secs
        );
        let m = &case.model;
        for &e in &eps {
            for spec in &variants {
                let params = admm_variant(spec, StopRule::Cn { eps: e });
                let mut s = AdmmSolver::new(m, params).expect("admm");
                let (mut its, mut wall, mut conv, mut facts) = (Vec::new(), 0.0, 0, 0);
                let (mut stopped, mut rejected) = (Vec::new(), 0);
                for (si, start) in starts.iter().enumerate() {
                    let mut state = start.clone();
                    for step in 0..k {
                        let problem = StepProblem::new(m, &state, case.h);
                        let mut x = Vec::new();
                        let r = s.step(&problem, m, &mut x, false).expect("admm step");
                        its.push(r.iterations);
                        wall += r.wall_ms;
                        conv += usize::from(r.converged);
                        facts += r.work.refactorisations;
                        if !r.converged {
                            stopped.push(format!("{:.1e}", r.residual));
                        }
                        let log = s.last_step();
                        rejected += log.iter().filter(|i| i.accelerated == Some(false)).count();
                        if trace {
                            for (i, it) in log.iter().enumerate().filter(|(i, _)| i % 50 == 49) {
                                eprintln!(
                                    "  {spec} ε {e:.0e} start {} step {step} it {}: residual {:.3e} primal {:.3e} combined {:.3e} ρ {} {:?}",
                                    at[si],
                                    i + 1,
                                    it.residual,
                                    it.primal,
                                    it.combined,
                                    it.rho,
                                    it.accelerated
                                );
                            }
                        }
                        state = advance(&state, x, case.h);
                    }
                }
                let n = its.len();
                out!(
                    "| {} | {e:.0e} | {spec} | {:.1} {its:?} | {:.0} | {conv}/{n} | {} | {facts} | {} | {} | {rejected} |",
                    case.name,
                    its.iter().sum::<usize>() as f64 / n as f64,
                    wall / n as f64,
                    if stopped.is_empty() { "—".into() } else { stopped.join(", ") },
                    s.penalty_updates(),
                    s.rho(),
                );
            }
        }
    }
    out!();
}

// ---------------------------------------------------------------- every solver, large deformation

/// `v` as a comma list in two-digit scientific notation.
fn sci(v: &[f64]) -> String {
    v.iter()
        .map(|d| format!("{d:.1e}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Issue 42's table: every CPU solver on the large-deformation twists at CN ε = 1e-5 and 1e-7,
/// one step from each of Newton's states, against Newton's answer to CN 1e-10 from the same
/// state. Cases (`JELLO_LARGE_CASES`, comma list of `bundled` and `hard`, default both): the
/// bundled twist–stretch–squash on armadillo_18k (E = 2.5e4 Pa; starts at steps 20, 60, 100:
/// mid-twist, mid-stretch, mid-squash) and the hard variant of [`dot_hard`] (E = 1e4 Pa, the
/// script 4× faster, translations 1.6×; starts half-way through each phase). Per solver and
/// ε: iterations per step, ms per step (and relative to Newton at the same ε), converged steps,
/// the distance to the reference (the largest vertex distance, as a fraction of the rest
/// bounding-box diagonal; the largest over the starts, then per start) and the step energy
/// above the reference's, E(x) − E(x*) per start (negative: a lower stationary point than
/// Newton's; the reference's own drop from the start is printed above the table). Iteration cap `JELLO_LARGE_CAP` (default 1000)
/// for every solver but Newton (200); `JELLO_LARGE_SOLVERS` (default all eight) and
/// `JELLO_LARGE_EPS` (default `1e-5,1e-7`) bound the run. Run alone
/// (`JELLO_SOLVERS_CASES=large_deformation`) it writes `solvers_large_deformation.md`.
fn large_deformation() {
    let cap: usize = env_or("JELLO_LARGE_CAP", 1000);
    let solvers = std::env::var("JELLO_LARGE_SOLVERS")
        .unwrap_or_else(|_| "newton,multilevel,lbfgs-h,dot,qn,admm,jgs2,vbd".into());
    let eps: Vec<f64> = std::env::var("JELLO_LARGE_EPS")
        .unwrap_or_else(|_| "1e-5,1e-7".into())
        .split(',')
        .map(|s| s.trim().parse().expect("JELLO_LARGE_EPS: numbers"))
        .collect();
    let which = std::env::var("JELLO_LARGE_CASES").unwrap_or_else(|_| "bundled,hard".into());
    let threads = rayon::current_num_threads();
    out!("\n## Every solver on the large-deformation twists\n");
    out!(
        "f64 CPU backend, {threads} threads, h = 25 ms, fixed corotated (ν = 0.4, ρ = 1000 \
         kg/m³), each solver at its defaults but the stop rule (CN ε) and the cap ({cap} \
         iterations; Newton 200). One step from each of Newton's states. *iterations*: per step \
         [per start]; *× newton*: ms per step over Newton's at the same ε; *converged*: steps that \
         met the rule; *distance*: the largest vertex distance to Newton's answer x* at CN \
         1e-10 from the same state, as a fraction of the rest bounding-box diagonal (the \
         largest over the starts, then per start); *E − E(x*)*: the step energy above x*'s \
         (negative: a lower stationary point than Newton's). \
         DOT with s = {threads} subdomains; multilevel with its SMS basis (built outside the \
         timed steps)."
    );
    let mut cases = Vec::new();
    for w in which.split(',').map(str::trim) {
        let tss = match w {
            "bundled" => Tss::bundled("armadillo_18k", 2.5e4),
            "hard" => Tss {
                mesh: "armadillo_18k".into(),
                young: 1e4,
                speed: 4.0,
                stretch: 1.6,
                degrees: 90.0,
            },
            other => panic!("JELLO_LARGE_CASES: unknown case `{other}` (bundled, hard)"),
        };
        if let Some(c) = tss_case(&tss) {
            let at = if w == "bundled" {
                vec![20, 60, 100]
            } else {
                tss.phase_points(c.h, 1)
            };
            cases.push((c, at));
        }
    }
    for (case, at) in &cases {
        let m = &case.model;
        let (starts, traj) = newton_states(case, at);
        out!();
        print_trajectory(case, &traj);
        let (lo, hi) = m.mesh.bounding_box().expect("box");
        let diag = (0..3).map(|i| (hi[i] - lo[i]).powi(2)).sum::<f64>().sqrt();
        // The reference: Newton to CN 1e-10 from every start.
        let mut reference = newton(m, 1e-10, 400);
        let refs: Vec<Vec<f64>> = starts
            .iter()
            .map(|s| {
                let problem = StepProblem::new(m, s, case.h);
                let mut x = Vec::new();
                let r = reference
                    .step(&problem, m, &mut x, false)
                    .expect("reference");
                assert!(r.converged, "{}: the reference did not converge", case.name);
                x
            })
            .collect();
        let sub = solvers.split(',').any(|s| s.trim() == "jgs2").then(|| {
            Arc::new(build_subspace(m, case.h, &SubspaceOptions::default()).expect("jgs2"))
        });
        let drop: Vec<f64> = starts
            .iter()
            .zip(&refs)
            .map(|(s, xr)| StepProblem::new(m, s, case.h).energy_change(m, xr))
            .collect();
        out!("reference: E(x*) − E(x_start) per start [{}] J", sci(&drop));
        out!();
        out!("| case | ε | solver | iterations | ms / step | × newton | converged | distance [per start] | E − E(x*) per start, J |");
        out!("|---|---|---|---|---|---|---|---|---|");
        for &e in &eps {
            let stop = StopRule::Cn { eps: e };
            let mut newton_ms = f64::NAN;
            for name in solvers.split(',').map(str::trim) {
                let mut solver = named_solver(m, name, stop, cap, threads, &|| {
                    sub.clone().expect("jgs2 subspace")
                });
                let (mut its, mut wall, mut conv) = (Vec::new(), 0.0, 0);
                let (mut dist, mut de) = (Vec::new(), Vec::new());
                for (start, xr) in starts.iter().zip(&refs) {
                    let problem = StepProblem::new(m, start, case.h);
                    let mut x = Vec::new();
                    let r = solver.step(&problem, m, &mut x, false).expect("step");
                    its.push(r.iterations);
                    wall += r.wall_ms;
                    conv += usize::from(r.converged);
                    dist.push(max_distance(&x, xr) / diag);
                    de.push(problem.energy_difference(m, xr, &x));
                }
                let n = its.len();
                let ms = wall / n as f64;
                if name == "newton" {
                    newton_ms = ms;
                }
                out!(
                    "| {} | {e:.0e} | {name} | {:.1} {its:?} | {ms:.0} | {:.2} | {conv}/{n} | {:.1e} [{}] | {} |",
                    case.name,
                    its.iter().sum::<usize>() as f64 / n as f64,
                    ms / newton_ms,
                    dist.iter().copied().fold(0.0, f64::max),
                    sci(&dist),
                    sci(&de),
                );
            }
        }
    }
    out!("\nprocess max RSS: {:.0} MB", max_rss_mb());
}

// ---------------------------------------------------------------- contact

fn contact() {
    let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes/drop.toml");
    let built = Scene::load(&path).expect("scene").build().expect("build");
    let m = &built.model;
    let steps = 20;
    out!("\n## Contact: drop.toml, first {steps} steps (impact at step 13), CN ε = 1e-5\n");
    out!("| initial inverse Hessian | iterations per step | total | converged | wall s |");
    out!("|---|---|---|---|---|");
    for (label, on) in [
        ("(A + B_contact)⁻¹ (default)", true),
        ("A⁻¹ (paper)", false),
    ] {
        let solver = qn(
            m,
            QnParams {
                contact_correction: on,
                ..QnParams::default()
            },
        );
        let mut sim = Simulation::new(
            m.clone(),
            m.initial_state(&built.velocity),
            built.config.h,
            Box::new(solver),
        )
        .expect("sim");
        let t0 = Instant::now();
        let mut its = Vec::new();
        let mut conv = 0;
        for _ in 0..steps {
            match sim.step(false) {
                Ok(r) => {
                    its.push(r.iterations);
                    conv += r.converged as usize;
                }
                Err(e) => {
                    out!("  {label}: {e}");
                    break;
                }
            }
        }
        out!(
            "| {label} | {:?} | {} | {conv}/{steps} | {:.1} |",
            its,
            its.iter().sum::<usize>(),
            t0.elapsed().as_secs_f64()
        );
    }
}

// ---------------------------------------------------------------- admm_contact

fn admm_contact() {
    let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes/drop.toml");
    let built = Scene::load(&path).expect("scene").build().expect("build");
    let m = &built.model;
    let h = built.config.h;
    let steps = built.config.steps;
    out!("\n## ADMM contact: drop.toml, {steps} steps, CN ε = 1e-5\n");
    out!(
        "| solve | ADMM iterations (total) | converged | per global step: inner, solves | \
         factorisations | wall s |"
    );
    out!("|---|---|---|---|---|---|");
    for variant in [ContactVariant::Uzawa, ContactVariant::Pgs] {
        let mut s = AdmmSolver::new(
            m,
            AdmmParams {
                contact: ContactParams {
                    variant,
                    ..ContactParams::default()
                },
                ..AdmmParams::default()
            },
        )
        .expect("admm");
        let mut state = m.initial_state(&built.velocity);
        let (mut its, mut conv) = (0, 0);
        let t0 = Instant::now();
        for _ in 0..steps {
            let problem = StepProblem::new(m, &state, h);
            let mut x = Vec::new();
            let r = s.step(&problem, m, &mut x, false).expect("step");
            its += r.iterations;
            conv += r.converged as usize;
            state = advance(&state, x, h);
        }
        let t = s.contact().expect("contact").totals();
        let (inner, solves, globals) = (t.inner, t.solves, t.global_steps.max(1));
        out!(
            "| {} | {its} | {conv}/{steps} | {:.1}, {:.1} | {} | {:.2} |",
            variant.name(),
            inner as f64 / globals as f64,
            solves as f64 / globals as f64,
            s.system().factorizations(),
            t0.elapsed().as_secs_f64()
        );
    }
    let mut sim = Simulation::new(
        m.clone(),
        m.initial_state(&built.velocity),
        h,
        Box::new(newton(m, 1e-5, 100)),
    )
    .expect("sim");
    let t0 = Instant::now();
    let mut its = 0;
    for _ in 0..steps {
        its += sim.step(false).expect("newton").iterations;
    }
    out!(
        "| (newton, barrier) | {its} | | | | {:.2} |",
        t0.elapsed().as_secs_f64()
    );

    // T13: the ball resting on the ground, one step of h = 0.2 s.
    let h = 0.2;
    let dhat = m.barrier.dhat;
    let lowest = m
        .mesh
        .positions
        .iter()
        .map(|p| p[1])
        .fold(f64::INFINITY, f64::min);
    let mut state = m.initial_state(&vec![[0.0; 3]; m.num_vertices()]);
    for v in 0..m.num_vertices() {
        state.x[3 * v + 1] += dhat - lowest;
    }
    let problem = StepProblem::new(m, &state, h);
    let run = |variant, cap: usize, mode: QnMode| {
        let mut s = AdmmSolver::new(
            m,
            AdmmParams {
                mode,
                stop: StopRule::Cn { eps: 1e-11 },
                max_iterations: 20000,
                contact: ContactParams {
                    variant,
                    iterations: cap,
                    ..ContactParams::default()
                },
                ..AdmmParams::default()
            },
        )
        .expect("admm");
        let mut x = Vec::new();
        let t0 = Instant::now();
        let r = s.step(&problem, m, &mut x, false).expect("step");
        (x, ms(t0), r)
    };
    let (reference, _, r) = run(ContactVariant::Uzawa, 200, QnMode::Rule);
    let m_norm = |a: &[f64]| -> f64 {
        a.chunks(3)
            .zip(&reference.chunks(3).collect::<Vec<_>>())
            .zip(&m.mass)
            .map(|((p, q), mv)| mv * (0..3).map(|k| (p[k] - q[k]).powi(2)).sum::<f64>())
            .sum::<f64>()
            .sqrt()
    };
    let e0 = m_norm(&problem.x_start);
    out!(
        "\n## ADMM contact, T13: drop.toml's ball resting on the ground, one step of h = 0.2 s\n\n\
         x*: Uzawa to ε = 1e-11 ({} iterations, residual {:.1e}); ‖x_0 − x*‖_M = {e0:.3e}\n",
        r.iterations,
        r.residual
    );
    out!("| solve | N | relative error | wall ms |");
    out!("|---|---|---|---|");
    for (label, variant, cap) in [
        ("uzawa (CG ≤ 200)", ContactVariant::Uzawa, 200),
        ("UCG(10)", ContactVariant::Uzawa, 10),
        ("pgs (≤ 200 sweeps)", ContactVariant::Pgs, 200),
        ("PGS(30)", ContactVariant::Pgs, 30),
    ] {
        for n in [5, 10, 20, 40, 80, 160, 320] {
            let (x, wall, _) = run(variant, cap, QnMode::Fixed(n));
            out!("| {label} | {n} | {:.2e} | {wall:.1} |", m_norm(&x) / e0);
        }
    }
}

// ---------------------------------------------------------------- DOT: the large-step comparison

/// A twist–stretch–squash script: the bundled scene's (`twist_stretch_squash.toml`) with its
/// mesh and E swapped, its timeline compressed by `speed` (phases end at 1, 2, 3 s ÷ speed),
/// its translations scaled by `stretch` and each handle's turn set to ±`degrees`.
#[derive(Clone)]
struct Tss {
    mesh: String,
    young: f64,
    speed: f64,
    stretch: f64,
    degrees: f64,
}

impl Tss {
    /// A variant from `mesh,E,speed,stretch,degrees` (the spec of `var`, named in the panic).
    fn parse(v: &str, var: &str) -> Self {
        let f: Vec<&str> = v.split(',').map(str::trim).collect();
        let num = |i: usize| -> f64 {
            f.get(i)
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("{var}: `{v}` is not mesh,E,speed,stretch,degrees"))
        };
        Tss {
            mesh: f[0].into(),
            young: num(1),
            speed: num(2),
            stretch: num(3),
            degrees: num(4),
        }
    }

    /// The bundled scene's script on `mesh` with Young's modulus `young`, Pa.
    fn bundled(mesh: &str, young: f64) -> Self {
        Tss {
            mesh: mesh.into(),
            young,
            speed: 1.0,
            stretch: 1.0,
            degrees: 90.0,
        }
    }

    /// Steps (at `h`) at (i + ½)/n of the twist, the stretch and the squash, i = 0 … n − 1
    /// (n = 1: half-way through each phase).
    fn phase_points(&self, h: f64, n: usize) -> Vec<usize> {
        let mut at: Vec<usize> = (0..3 * n)
            .map(|i| ((i as f64 + 0.5) / n as f64 / self.speed / h).round() as usize)
            .collect();
        at.dedup();
        at
    }
}

/// A twist–stretch–squash case on a shared mesh (`tss`), the handles re-derived from the
/// fitted bounding box (bottom and top 6% of the height, rotation axis through the box's
/// centre).
fn tss_case(tss: &Tss) -> Option<Case> {
    let mesh = tss.mesh.as_str();
    let scene_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenes");
    let path = scene_dir.join("twist_stretch_squash.toml");
    if !Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../shared/meshes/{mesh}.node"))
        .exists()
    {
        out!("  ({mesh} not in ../shared/meshes: skipped)");
        return None;
    }
    let text = std::fs::read_to_string(&path).expect("bundled TSS scene");
    let text = text.replace("armadillo_18k", mesh).replace(
        "youngs_modulus = 2.5e4",
        &format!("youngs_modulus = {:e}", tss.young),
    );
    // First pass: the fitted box (pins removed).
    let no_pins = text
        .split("[[pins]]")
        .next()
        .expect("scene head")
        .to_string();
    let probe = Scene::parse(&path, &no_pins)
        .expect("scene")
        .build()
        .expect("build");
    let (lo, hi) = probe.model.mesh.bounding_box().expect("box");
    let (y0, hgt) = (lo[1], hi[1] - lo[1]);
    let (cx, cz) = (0.5 * (lo[0] + hi[0]), 0.5 * (lo[2] + hi[2]));
    let [t1, t2, t3] = [1.0, 2.0, 3.0].map(|t| t / tss.speed);
    let pin = |offset: f64, sign: f64, moves: [f64; 2]| {
        format!(
            r#"
[[pins]]
region = {{ slab = {{ normal = [0.0, 1.0, 0.0], offset = {offset}, thickness = {t} }} }}
script = {{ type = "keyframes", phases = [
  {{ start = 0.0, end = {t1}, rotate = {{ center = [{cx}, 0.0, {cz}], axis = [0.0, 1.0, 0.0], degrees = {deg} }} }},
  {{ start = {t1}, end = {t2}, translate = [0.0, {m0}, 0.0] }},
  {{ start = {t2}, end = {t3}, translate = [0.0, {m1}, 0.0] }},
] }}
"#,
            t = 0.06 * hgt,
            deg = sign * tss.degrees,
            m0 = moves[0] * tss.stretch * hgt,
            m1 = moves[1] * tss.stretch * hgt,
        )
    };
    let full = format!(
        "{no_pins}{}{}",
        pin(y0 + 0.03 * hgt, -1.0, [-0.25, 0.3]),
        pin(y0 + 0.97 * hgt, 1.0, [0.25, -0.3])
    );
    let built = Scene::parse(&path, &full)
        .expect("scene")
        .build()
        .expect("build");
    let bundled = tss.speed == 1.0 && tss.stretch == 1.0 && tss.degrees == 90.0;
    Some(Case {
        name: if bundled {
            format!("TSS {mesh}, E = {:.1e}", tss.young)
        } else {
            format!(
                "TSS {mesh}, E {:.0e}, speed x{}, stretch x{}, {} deg",
                tss.young, tss.speed, tss.stretch, tss.degrees
            )
        },
        velocity: built.velocity.clone(),
        h: built.config.h,
        model: built.model,
    })
}

/// Newton's trajectory to the start states: the iterations of every step, the steps that end
/// with inverted elements (fixed corotated is finite through inversion, and the comparison
/// solves the free problem: no inversion filter beyond the solvers' own trust region), the most
/// inverted elements at a step's end, and the wall time, s.
struct Trajectory {
    iterations: Vec<usize>,
    inverted_steps: usize,
    max_inverted: usize,
    secs: f64,
}

/// Newton's trajectory from rest to the last of `at`: the states at `at` and the trajectory.
fn newton_states(case: &Case, at: &[usize]) -> (Vec<State>, Trajectory) {
    let m = &case.model;
    let vel = if case.velocity.is_empty() {
        vec![[0.0; 3]; m.num_vertices()]
    } else {
        case.velocity.clone()
    };
    let t0 = Instant::now();
    let mut state = m.initial_state(&vel);
    let mut s = newton(m, 1e-5, 200);
    let mut out = Vec::new();
    let mut traj = Trajectory {
        iterations: Vec::new(),
        inverted_steps: 0,
        max_inverted: 0,
        secs: 0.0,
    };
    let last = at.iter().copied().max().unwrap_or(0);
    for step in 0..=last {
        if at.contains(&step) {
            out.push(state.clone());
        }
        if step == last {
            break;
        }
        let problem = StepProblem::new(m, &state, case.h);
        let mut x = Vec::new();
        let r = s.step(&problem, m, &mut x, false).expect("newton");
        traj.iterations.push(r.iterations);
        let inverted = m.check_state(&x).total_inverted();
        traj.inverted_steps += (inverted > 0) as usize;
        traj.max_inverted = traj.max_inverted.max(inverted);
        state = advance(&state, x, case.h);
    }
    traj.secs = t0.elapsed().as_secs_f64();
    (out, traj)
}

/// One line on Newton's trajectory to the start states (how hard the case is).
fn print_trajectory(case: &Case, t: &Trajectory) {
    let its = &t.iterations;
    out!(
        "{}: Newton from rest, {} steps: {:.2} iterations per step (max {}); {} steps end with \
         inverted elements (at most {}); {:.0} s",
        case.name,
        its.len(),
        its.iter().sum::<usize>() as f64 / its.len().max(1) as f64,
        its.iter().max().copied().unwrap_or(0),
        t.inverted_steps,
        t.max_inverted,
        t.secs
    );
}

/// What one solver did over the compared steps.
#[derive(Default)]
struct Run {
    iterations: Vec<usize>,
    converged: usize,
    wall_ms: f64,
    /// Per-step work outside the iterations (factorisations), ms.
    factor_ms: f64,
    /// The first compared step's residual per iteration and its time axis (ms).
    trace: Vec<(f64, f64)>,
}

/// `k` steps from each start state with `solver`.
fn run_from(solver: &mut dyn StepSolver, case: &Case, starts: &[State], k: usize) -> Run {
    let m = &case.model;
    let mut run = Run::default();
    for (si, start) in starts.iter().enumerate() {
        let mut state = start.clone();
        for step in 0..k {
            let problem = StepProblem::new(m, &state, case.h);
            let mut x = Vec::new();
            let trace = si == 0 && step == 0;
            let r = solver.step(&problem, m, &mut x, trace).expect("step");
            run.iterations.push(r.iterations);
            run.converged += r.converged as usize;
            run.wall_ms += r.wall_ms;
            run.factor_ms += r.timings.factor_ms;
            if let Some(t) = r.trace.filter(|_| trace) {
                // Time axis: the step's per-step work (set-up, factorisations) first, then its
                // iterations at their mean cost (iterations are not timed one by one).
                let pre = r.timings.setup_ms + r.timings.factor_ms;
                let per = (r.wall_ms - pre).max(0.0) / (t.len().max(2) - 1) as f64;
                run.trace = t
                    .iter()
                    .enumerate()
                    .map(|(i, rec)| {
                        (
                            rec.residual,
                            if i == 0 { 0.0 } else { pre + per * i as f64 },
                        )
                    })
                    .collect();
            }
            state = advance(&state, x, case.h);
        }
    }
    run
}

/// The issue-11 comparison: every jello solver on large-step, strongly non-uniform scenes at
/// the same CN ε = 1e-5 and h = 25 ms (fixed corotated, ν = 0.4, ρ = 1000 kg/m³):
/// - a 4×1×1 bar of 16,640 vertices (64×15×15 cells, E = 1e5 Pa) whose caps twist at ±π rad/s,
///   compared from Newton's states at steps 8 and 24;
/// - twist–stretch–squash on armadillo_18k (E = 2.5e4 Pa) and bunny_20k (E = 1e5 Pa), from
///   Newton's states mid-twist (t = 0.5 s), mid-stretch (1.5 s) and mid-squash (2.5 s).
///
/// `JELLO_DOT_STEPS` (default 2) steps from each state. Table: iterations per step, time per
/// step and per iteration, Cholesky factor storage, peak heap (see [`compare`]); DOT's and
/// LBFGS-H's phase split; the subdomain sweep (s = 1 … 64); residual-versus-iteration and
/// versus-time PNGs of the first compared step in `target/bench-plots/`. `JELLO_DOT_SOLVERS`
/// (comma list, default all seven) and `JELLO_DOT_CAP` (iteration cap of the first-order
/// methods, default 500) bound the run.
fn dot_comparison() {
    let k: usize = env_or("JELLO_DOT_STEPS", 2);
    let solvers = std::env::var("JELLO_DOT_SOLVERS")
        .unwrap_or_else(|_| "newton,lbfgs-h,dot,qn,admm,jgs2,vbd".into());
    let fc = Material::from_young_poisson(MaterialModel::FixedCorotated, 1e5, 0.4).unwrap();
    let mut cases = vec![(
        Case {
            name: "twist bar 64x15x15".into(),
            model: twist_bar([64, 15, 15], [1.0, 0.25, 0.25], fc, std::f64::consts::PI),
            velocity: Vec::new(),
            h: 0.025,
        },
        vec![8, 24],
    )];
    for (mesh, young) in [("armadillo_18k", 2.5e4), ("bunny_20k", 1e5)] {
        if let Some(c) = tss_case(&Tss::bundled(mesh, young)) {
            cases.push((c, vec![20, 60, 100]));
        }
    }
    out!("\n## DOT comparison: CN ε = 1e-5, h = 25 ms, {k} steps from each start state\n");
    let mut sweep = None;
    for (i, (case, at)) in cases.iter().enumerate() {
        let (starts, traj) = newton_states(case, at);
        print_trajectory(case, &traj);
        compare(case, &starts, k, &solvers, true);
        if i == 0 {
            sweep = Some(starts);
        }
    }
    if let Some(starts) = sweep {
        subdomain_sweep(&cases[0].0, &starts, k);
    }
    out!("\nprocess max RSS: {:.0} MB", max_rss_mb());
}

/// The hard regime (opt-in, `JELLO_SOLVERS_CASES=dot_hard`): the comparison on scenes where
/// projected Newton needs many iterations per step at h = 25 ms and CN ε = 1e-5, as in the
/// paper's "large-deformation, high-speed" examples (its Tables 1–3 with the speeds and moduli
/// are in the missing supplemental; §5.6 says all methods but DOT slow down for softer
/// materials). The bundled TSS takes Newton 1.0–1.3 iterations per compared step, so DOT's
/// Newton-quality direction has nothing to win over QN's cheap ones there.
///
/// Default variants (`HARD_TSS`): TSS on armadillo_18k and bunny_20k (fixed corotated, ν = 0.4,
/// ρ = 1000 kg/m³) with E = 1e4 Pa (softer: the paper's §5.6 direction), the script 4× faster
/// (handles turn ±90° in 0.25 s, i.e. ±9° per step; pull apart by 0.4 of the height each in
/// 0.25 s; push together by 0.48 each in 0.25 s) and its translations 1.6× the bundled ones.
/// Newton's trajectory: 15.4 (armadillo) and 18.9 (bunny) iterations per step; the squash
/// inverts up to 137 and 343 elements (fixed corotated is finite there; the solvers solve the
/// free problem, as the paper does — `jello run` under the default `inversion = "forbid"`
/// would retry and fail such steps). Start states: Newton's at (i + ½)/3 of each phase, i = 0,
/// 1, 2 (9 per variant; `JELLO_DOT_HARD_STARTS` per phase), `JELLO_DOT_STEPS` (default 1) steps
/// from each. Probed and not kept: 4× speed with the bundled stretch (E = 2.5e4: 6.9 Newton
/// iterations per step), 2× speed (4.7), ±180° twists (31), the 64×15×15 twist bar at
/// ±4π rad/s (3 iterations per step for 20 steps, then 6 and 141; 1.1 s per Newton iteration:
/// too slow for this machine's budget).
///
/// `JELLO_DOT_HARD_TSS` overrides the variants (`;`-separated `mesh,E,speed,stretch,degrees`);
/// `JELLO_DOT_HARD_BAR` adds twist bars (comma list of cap speeds ω, rad/s; the comparison's
/// 64×15×15 bar, E = 1e5 Pa, from Newton's states at steps 8 and 24). `JELLO_DOT_HARD_PROBE=1`
/// runs Newton's trajectories only (iterations per step, and at the start states), to choose
/// variants. `JELLO_DOT_SOLVERS` defaults to `newton,lbfgs-h,dot,qn`; `JELLO_DOT_HARD_SPLIT=1`
/// adds DOT's phase split.
fn dot_hard() {
    // armadillo_18k and bunny_20k, E = 1e4 Pa: the bundled script 4× faster (the twist in
    // 0.25 s), translations 1.6× (apart by 0.4 of the height each), handles turned ±90°.
    const HARD_TSS: &str = "armadillo_18k,1e4,4,1.6,90;bunny_20k,1e4,4,1.6,90";
    let k: usize = env_or("JELLO_DOT_STEPS", 1);
    let solvers =
        std::env::var("JELLO_DOT_SOLVERS").unwrap_or_else(|_| "newton,lbfgs-h,dot,qn".into());
    let probe = env_or("JELLO_DOT_HARD_PROBE", 0) == 1;
    let per_phase: usize = env_or("JELLO_DOT_HARD_STARTS", 3).max(1);
    let spec = std::env::var("JELLO_DOT_HARD_TSS").unwrap_or_else(|_| HARD_TSS.into());
    let mut cases = Vec::new();
    for v in spec.split(';').map(str::trim).filter(|v| !v.is_empty()) {
        let tss = Tss::parse(v, "JELLO_DOT_HARD_TSS");
        if let Some(c) = tss_case(&tss) {
            let at = tss.phase_points(c.h, per_phase);
            cases.push((c, at));
        }
    }
    let fc = Material::from_young_poisson(MaterialModel::FixedCorotated, 1e5, 0.4).unwrap();
    let bars = std::env::var("JELLO_DOT_HARD_BAR").unwrap_or_default();
    for w in bars.split(',').filter_map(|w| w.trim().parse::<f64>().ok()) {
        cases.push((
            Case {
                name: format!("twist bar 64x15x15, omega = +-{w} rad/s"),
                model: twist_bar([64, 15, 15], [1.0, 0.25, 0.25], fc, w),
                velocity: Vec::new(),
                h: 0.025,
            },
            vec![8, 24],
        ));
    }
    out!(
        "\n## DOT comparison, hard regime: CN ε = 1e-5, h = 25 ms, {k} steps from each start state\n"
    );
    for (case, at) in &cases {
        if probe {
            // One step past the last start: Newton's iterations at every start state.
            let last = at.iter().max().copied().unwrap_or(0);
            let (_, traj) = newton_states(case, &[last + 1]);
            print_trajectory(case, &traj);
            let its = &traj.iterations;
            let at_starts: Vec<usize> = at.iter().map(|&s| its[s]).collect();
            out!(
                "  iterations per step: {its:?}\n  start steps {at:?}: {at_starts:?}, mean {:.2}",
                at_starts.iter().sum::<usize>() as f64 / at.len().max(1) as f64
            );
            continue;
        }
        let (starts, traj) = newton_states(case, at);
        print_trajectory(case, &traj);
        compare(
            case,
            &starts,
            k,
            &solvers,
            env_or("JELLO_DOT_HARD_SPLIT", 0) == 1,
        );
    }
    out!("\nprocess max RSS: {:.0} MB", max_rss_mb());
}

/// The comparisons' solver `name` on `m` at its defaults but the stop rule `stop` and the
/// iteration cap `cap` (Newton: 200): DOT with `threads` subdomains (LBFGS-H: one), JGS2 on
/// `subspace()` (called only for JGS2, so a caller can build it inside its timed window), VBD
/// as `jello run` has it (Gauss–Seidel, no safeguard), multilevel with its SMS basis built here.
fn named_solver(
    m: &Model,
    name: &str,
    stop: StopRule,
    cap: usize,
    threads: usize,
    subspace: &dyn Fn() -> Arc<Jgs2Subspace>,
) -> Box<dyn StepSolver> {
    let StopRule::Cn { eps } = stop else {
        panic!("the comparisons use the CN rule")
    };
    match name {
        "newton" => Box::new(newton(m, eps, 200)),
        "multilevel" => {
            let params = MultilevelParams {
                stop: MultilevelStop::Shared(stop),
                max_iterations: cap,
                ..MultilevelParams::default()
            };
            Box::new(build_solver(m, params, None).expect("multilevel").0)
        }
        "lbfgs-h" | "dot" => Box::new(
            DotSolver::new(
                m,
                CpuBackend::new(m.num_vertices()),
                DotParams {
                    subdomains: if name == "dot" { threads } else { 1 },
                    stop,
                    max_iterations: cap,
                    ..DotParams::default()
                },
            )
            .expect("dot"),
        ),
        "qn" => Box::new(qn(
            m,
            QnParams {
                stop,
                max_iterations: cap,
                ..QnParams::default()
            },
        )),
        "admm" => Box::new(
            AdmmSolver::new(
                m,
                AdmmParams {
                    stop,
                    max_iterations: cap,
                    ..AdmmParams::default()
                },
            )
            .expect("admm"),
        ),
        "jgs2" => {
            let params = Jgs2Params {
                stop,
                max_iterations: cap,
                ..Jgs2Params::default()
            };
            Box::new(Jgs2Solver::jgs2(m, params, subspace()).expect("jgs2"))
        }
        "vbd" => Box::new(Jgs2Solver::vbd(
            m,
            Jgs2Params {
                stop,
                max_iterations: cap,
                variant: Variant::GaussSeidel,
                safeguard: Safeguard::Off,
            },
        )),
        other => panic!("unknown solver {other}"),
    }
}

/// Every solver of the comma list `solvers` on `case`, `k` steps from each of `starts`: one
/// table row per solver, DOT's speed-up over each, then (with `split`) DOT's phase split and
/// the residual plots.
///
/// Memory columns (the counting allocator, [`heap`]): the baseline is the heap live before the
/// solver is built (the model, the start states); "build MB" is the peak above it while the
/// solver is constructed (everything its constructor precomputes: QN's and ADMM's factored
/// global matrix, DOT's partition and symbolic factorisations, JGS2's subspace, built inside
/// this window), "run MB" the peak above it while the solver runs its measured steps: what it
/// kept from construction plus every per-step allocation (projected Hessians, numeric factors,
/// L-BFGS history, line-search vectors, the step's output positions).
fn compare(case: &Case, starts: &[State], k: usize, solvers: &str, split: bool) {
    let cap: usize = env_or("JELLO_DOT_CAP", 500);
    let stop = StopRule::Cn { eps: 1e-5 };
    let threads = rayon::current_num_threads();
    let m = &case.model;
    out!("\n| case | vertices | solver | iterations per step | mean | converged | ms / step | ms / iteration | per-step factor ms | factor MB | build MB | run MB |");
    out!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut curves: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    let mut per_step = Vec::new();
    for name in solvers.split(',').map(str::trim) {
        let dot_params = |s: usize| DotParams {
            subdomains: s,
            stop,
            ..DotParams::default()
        };
        let baseline = heap::reset_peak();
        let t0 = Instant::now();
        let typed_dot = match name {
            "dot" => Some(threads),
            "lbfgs-h" => Some(1),
            _ => None,
        };
        let mut solver = named_solver(m, name, stop, cap, threads, &|| {
            Arc::new(build_subspace(m, case.h, &SubspaceOptions::default()).expect("jgs2"))
        });
        let pre = t0.elapsed().as_secs_f64();
        let build_mb = heap::peak_since(baseline) as f64 * 1e-6;
        heap::reset_peak();
        let run = run_from(solver.as_mut(), case, starts, k);
        let run_mb = heap::peak_since(baseline) as f64 * 1e-6;
        drop(solver);
        let n = run.iterations.len();
        let total: usize = run.iterations.iter().sum();
        let factor_mb = match (name, typed_dot) {
            ("newton", _) => newton(m, 1e-5, 1).factor_nnz() as f64 * 8e-6,
            (_, Some(s)) => {
                DotSolver::new(m, CpuBackend::new(m.num_vertices()), dot_params(s))
                    .expect("dot")
                    .initial()
                    .factor_nnz() as f64
                    * 8e-6
            }
            _ => f64::NAN,
        };
        out!(
            "| {} | {} | {name} | {:?} | {:.1} | {}/{n} | {:.0} | {:.1} | {:.0} | {} | {build_mb:.0} | {run_mb:.0} | (built in {pre:.1} s)",
            case.name,
            m.num_vertices(),
            run.iterations,
            total as f64 / n as f64,
            run.converged,
            run.wall_ms / n as f64,
            run.wall_ms / total.max(1) as f64,
            run.factor_ms / n as f64,
            if factor_mb.is_finite() { format!("{factor_mb:.0}") } else { "—".into() },
        );
        per_step.push((name.to_string(), run.wall_ms / n as f64));
        curves.push((name.to_string(), run.trace));
    }
    if let Some(&(_, dot_ms)) = per_step.iter().find(|(n, _)| n == "dot") {
        let ratios: Vec<String> = per_step
            .iter()
            .filter(|(n, _)| n != "dot")
            .map(|(n, t)| format!("{n} {:.2}×", t / dot_ms))
            .collect();
        out!(
            "\n{}: time per step relative to dot (> 1: dot faster): {}\n",
            case.name,
            ratios.join(", ")
        );
    }
    out!("process max RSS so far: {:.0} MB", max_rss_mb());
    if split {
        dot_split(case, starts, k, threads);
    }
    plot_curves(&case.name, &curves);
}

/// DOT's, LBFGS-H's and QN's per-phase time over the compared steps (every phase synchronised),
/// with their line-search trials per iteration.
fn dot_split(case: &Case, starts: &[State], k: usize, threads: usize) {
    let m = &case.model;
    for s in [1, threads] {
        let mut d = DotSolver::new(
            m,
            CpuBackend::new(m.num_vertices()),
            DotParams {
                subdomains: s,
                profile: true,
                ..DotParams::default()
            },
        )
        .expect("dot");
        let run = run_from(&mut d, case, starts, k);
        let (ph, st) = (d.phases(), d.initial().stats());
        let n = run.iterations.len() as f64;
        out!(
            "{} s = {s}: per step {:.0} ms = Hessian at x_start {:.0} + subdomain factorisations \
             {:.0} + back-solves {:.0} + gradients/trials {:.0} + two-loop {:.1} + line search \
             {:.1} (dᵀHd {:.1}); {:.1} iterations, {:.2} line-search trials per iteration, {} \
             contact refactors",
            case.name,
            run.wall_ms / n,
            st.hessian_ms / n,
            (st.factor_ms) / n,
            ph.solve_ms / n,
            ph.gradient_ms / n,
            ph.two_loop_ms / n,
            ph.line_search_ms / n,
            st.curvature_ms / n,
            run.iterations.iter().sum::<usize>() as f64 / n,
            ph.trials as f64 / ph.iterations.max(1) as f64,
            st.contact_refactors
        );
    }
    // QN's split on the same steps: its iterations are cheap only while its line search takes
    // the first trial (α = 1); DOT's start length −pᵀg/pᵀH(xᵗ)p usually is accepted at once.
    let mut q = qn(
        m,
        QnParams {
            profile: true,
            ..QnParams::default()
        },
    );
    let run = run_from(&mut q, case, starts, k);
    let ph = q.phases();
    let n = run.iterations.len() as f64;
    out!(
        "{} qn: per step {:.0} ms = Laplacian factor {:.0} + back-solves {:.0} + gradients/trials \
         {:.0} + two-loop {:.1} + line search {:.1}; {:.1} iterations, {:.2} line-search trials \
         per iteration",
        case.name,
        run.wall_ms / n,
        ph.factor_ms / n,
        ph.solve_ms / n,
        ph.gradient_ms / n,
        ph.two_loop_ms / n,
        ph.line_search_ms / n,
        run.iterations.iter().sum::<usize>() as f64 / n,
        ph.trials as f64 / ph.iterations.max(1) as f64,
    );
}

/// Iterations and time per step against the subdomain count (the paper: sublinear growth).
fn subdomain_sweep(case: &Case, starts: &[State], k: usize) {
    out!("\n{}: subdomain sweep\n", case.name);
    out!("| s | iterations per step | ms / step | factor MB | run MB | interface vertices |");
    out!("|---|---|---|---|---|---|");
    let m = &case.model;
    for s in [1, 2, 4, 8, 16, 32, 64] {
        let baseline = heap::reset_peak();
        let mut d = DotSolver::new(
            m,
            CpuBackend::new(m.num_vertices()),
            DotParams {
                subdomains: s,
                ..DotParams::default()
            },
        )
        .expect("dot");
        heap::reset_peak();
        let run = run_from(&mut d, case, starts, k);
        let run_mb = heap::peak_since(baseline) as f64 * 1e-6;
        let n = run.iterations.len() as f64;
        out!(
            "| {s} | {:.1} | {:.0} | {:.0} | {run_mb:.0} | {} |",
            run.iterations.iter().sum::<usize>() as f64 / n,
            run.wall_ms / n,
            d.initial().factor_nnz() as f64 * 8e-6,
            d.initial().decomposition().stats().interface_vertices
        );
    }
}

/// Residual versus iteration and versus (estimated) wall time, one curve per solver.
fn plot_curves(case: &str, curves: &[(String, Vec<(f64, f64)>)]) {
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-plots");
    let slug: String = case
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let by_iteration: Vec<Series> = curves
        .iter()
        .map(|(n, t)| Series::new(n.clone(), t.iter().map(|p| p.0).collect()))
        .collect();
    // Time on a uniform grid of 200 bins up to the slowest solver's end, but at most 4× the
    // median end (one slow first-order solver would squash every other curve into the first
    // bins): each bin holds the residual of the last iteration finished by then.
    let mut ends: Vec<f64> = curves
        .iter()
        .filter_map(|(_, t)| t.last().map(|p| p.1))
        .collect();
    ends.sort_by(f64::total_cmp);
    let median = ends.get(ends.len() / 2).copied().unwrap_or(1.0);
    let t_end = ends
        .last()
        .copied()
        .unwrap_or(1.0)
        .min(4.0 * median)
        .max(1e-3);
    let by_time: Vec<Series> = curves
        .iter()
        .map(|(n, t)| {
            let y = (0..200)
                .map(|b| {
                    let tb = t_end * b as f64 / 199.0;
                    t.iter()
                        .take_while(|p| p.1 <= tb)
                        .last()
                        .map_or(f64::NAN, |p| p.0)
                })
                .collect();
            Series::new(n.clone(), y)
        })
        .collect();
    let hl = [(1e-5, "CN eps = 1e-5")];
    let x_time = format!("wall time [bins of {:.1} ms]", t_end / 199.0);
    for (suffix, series, x_label) in [
        ("iteration", &by_iteration, "iteration"),
        ("time", &by_time, x_time.as_str()),
    ] {
        let title = format!("{}: first compared step", case.replace('×', "x"));
        let spec = PlotSpec {
            title: &title,
            x_label,
            y_label: "CN residual (dimensionless)",
            log_y: true,
            hlines: &hl,
            ..PlotSpec::default()
        };
        let path = out.join(format!("dot_{slug}_{suffix}.png"));
        match std::fs::create_dir_all(&out)
            .map_err(|e| e.to_string())
            .and_then(|_| write_plot(&path, &spec, series).map_err(|e| e.to_string()))
        {
            Ok(()) => out!("plot: {}", path.display()),
            Err(e) => out!("plot not written: {e}"),
        }
    }
}

/// The cases a plain `cargo bench --bench solvers` runs.
const DEFAULT_CASES: &str = "table1,orderings,iterations,split,admm_split,contact,admm_contact";

fn main() {
    let cases = std::env::var("JELLO_SOLVERS_CASES").unwrap_or_else(|_| DEFAULT_CASES.into());
    run(&cases);
    // Each set of cases is its own document (`solvers_CASE_CASE.md`; the default set
    // `solvers.md`), so a run of some cases never overwrites the book's table of others.
    let cases: Vec<&str> = cases.split(',').map(str::trim).collect();
    let doc = if cases.join(",") == DEFAULT_CASES {
        "solvers".to_string()
    } else {
        format!("solvers_{}", cases.join("_"))
    };
    report::finish_as("solvers", &doc);
}

fn run(cases: &str) {
    out!(
        "threads: {}; `cargo bench --bench solvers` (CPU f64 unless marked)",
        rayon::current_num_threads()
    );
    for c in cases.split(',') {
        match c.trim() {
            "table1" => table1(),
            "orderings" => orderings(),
            "iterations" => iterations(),
            "split" => split(),
            "contact" => contact(),
            "admm_split" => admm_split(),
            "admm_contact" => admm_contact(),
            "armadillo_114k" => armadillo_114k(),
            "dot" => dot_comparison(),
            "dot_hard" => dot_hard(),
            "admm_twist" => admm_twist(),
            "large_deformation" => large_deformation(),
            other => panic!("unknown case {other}"),
        }
    }
}
