//! IPC contact on projected Newton, per step: collision candidates, CCD time, barrier
//! assembly, Newton iterations and the whole step, on three scenes at several sizes — a stack of
//! three cubes resting on each other under gravity with friction μ = 0.5 between them (3·6n³
//! tets for n³-cell cubes), two balls pressed together head-on, and a soft ball (E = 2e4 Pa)
//! pressed by gravity into a pinned hoop's narrower hole with friction μ = 0.5
//! (contact_hoop.toml's setting, started at the hole's rim) — then the exponent of each cost in
//! the surface size (least squares in log–log over the sizes of each scene).
//!
//! The scenes start in contact (gaps of d̂/2 between the bodies) so every measured step has
//! active pairs. Per step, after Newton's step from xᵗ to xᵗ⁺¹ (wall time and iterations from
//! its report): at xᵗ⁺¹ the broad phase with d̂ (`candidates`, the pairs it finds) and the
//! exact filter to pairs closer than d̂ (`active`); CCD over the step's displacement
//! (`IpcContact::max_step` from xᵗ along xᵗ⁺¹ − xᵗ: the swept broad phase and additive CCD, what
//! one line-search filter costs); and the barrier assembly at xᵗ⁺¹ (energy, gradient and the
//! PSD-projected pair Hessians, what one Newton iteration adds). Newton's own split of the step
//! follows (its `StepReport::timings`: assembly — elastic and contact energy, gradient and
//! Hessian —, numeric factorisation, triangular solves, and the line search with its CCD filter
//! and trial energies). Times are means over the
//! measured steps, ms, release build on rayon's default pool; Newton stops at CN 1e-7 as the
//! bundled contact scenes do.
//!
//! `cargo bench --bench ipc`. Env: `JELLO_BENCH_IPC_STACK` (cube cells per side, default
//! "6,10,14,18": 3.9k, 18k, 49k, 105k tets), `JELLO_BENCH_IPC_BALLS` (ball resolutions, default
//! "8,12,16,20": 6k, 21k, 49k, 96k tets), `JELLO_BENCH_IPC_HOOP` (ball resolutions, default
//! "8,14,19,26": 3.4k, 17k, 48k, 106k tets with the hoop's 576; 32 gives 197k), `JELLO_BENCH_IPC_STEPS` (default 5).
//!
//! Measured figures: the book's *IPC contact benchmark* page (`docs/src/benchmarks/ipc.md`)
//! includes this bench's output, and keeps the earlier 5-step run that stood here.

#[path = "common/report.rs"]
#[macro_use]
mod report;

use jello::contact::friction::FrictionParams;
use jello::contact::IpcContact;
use jello::material::{Material, MaterialModel};
use jello::mesh::{ball, box_grid, ring, TetMesh};
use jello::problem::{BarrierParams, Body, Model, Obstacle, Pin, Script};
use jello::sim::Simulation;
use jello::solver::{NewtonParams, NewtonSolver, StopRule};
use std::time::Instant;

fn env_list(name: &str, default: &str) -> Vec<usize> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

/// Bodies of `meshes` (stable neo-Hookean E = 1e5 Pa, ν = 0.4, 1000 kg/m³) with IPC contact at
/// `dhat` (m), gravity `g` and `obstacles`.
fn model(meshes: Vec<TetMesh>, dhat: f64, g: [f64; 3], obstacles: Vec<Obstacle>) -> Model {
    model_with(meshes, dhat, g, obstacles, 1e5, None)
}

/// [`model`] with Young's modulus `youngs` (Pa) and, when `pin_last`, the last body pinned
/// whole.
fn model_with(
    meshes: Vec<TetMesh>,
    dhat: f64,
    g: [f64; 3],
    obstacles: Vec<Obstacle>,
    youngs: f64,
    pin_last: Option<()>,
) -> Model {
    let mut all = TetMesh::default();
    let mut bodies = Vec::new();
    for (i, m) in meshes.into_iter().enumerate() {
        let (v0, t0) = (all.positions.len(), all.tets.len());
        all.positions.extend_from_slice(&m.positions);
        all.tets
            .extend(m.tets.iter().map(|t| t.map(|v| v + v0 as u32)));
        bodies.push(Body {
            name: format!("body{i}"),
            vertices: v0..all.positions.len(),
            tets: t0..all.tets.len(),
        });
    }
    let nt = all.num_tets();
    let nb = bodies.len();
    let mat = Material::from_young_poisson(MaterialModel::StableNeoHookean, youngs, 0.4).unwrap();
    let pins = match (pin_last, bodies.last()) {
        (Some(()), Some(b)) => vec![Pin {
            vertices: b.vertices.clone().map(|v| v as u32).collect(),
            start: all.positions[b.vertices.clone()].to_vec(),
            script: Script::Fixed,
        }],
        _ => vec![],
    };
    Model::new(
        all,
        bodies,
        vec![mat; nt],
        vec![1000.0; nt],
        g,
        pins,
        obstacles,
        BarrierParams { dhat, kappa: 1.0 },
    )
    .unwrap()
    .with_contact(dhat, &vec![true; nb], None)
    .unwrap()
}

#[derive(Default)]
struct Row {
    scene: String,
    tets: usize,
    faces: usize,
    newton_ms: f64,
    iterations: f64,
    candidates: f64,
    active: f64,
    broad_ms: f64,
    ccd_ms: f64,
    assembly_ms: f64,
    /// Newton's own split of its step (StepReport::timings), ms per step.
    newton_assembly_ms: f64,
    factor_ms: f64,
    solve_ms: f64,
    line_search_ms: f64,
    /// Steps that did not meet the stop rule.
    unconverged: usize,
}

fn measure(scene: &str, m: Model, velocity: Vec<[f64; 3]>, h: f64, steps: usize) -> Row {
    let ipc: IpcContact = (**m.contact.as_ref().unwrap()).clone();
    // The bundled contact scenes' stop (CN 1e-7): at the default 1e-5 a contact step can stop
    // millimetres from its minimiser and a sliding friction contact freezes.
    let params = NewtonParams {
        stop: StopRule::Cn { eps: 1e-7 },
        ..NewtonParams::default()
    };
    let solver = NewtonSolver::new(&m, params).unwrap();
    let state = m.initial_state(&velocity);
    let mut sim = Simulation::new(m.clone(), state, h, Box::new(solver)).unwrap();
    let mut row = Row {
        scene: scene.into(),
        tets: m.mesh.num_tets(),
        faces: ipc.mesh.faces.len(),
        ..Row::default()
    };
    let k = 1e9;
    for _ in 0..steps {
        let x0 = sim.state.x.clone();
        let t0 = Instant::now();
        let r = sim.step(false).unwrap();
        row.newton_ms += t0.elapsed().as_secs_f64() * 1e3;
        row.iterations += r.iterations as f64;
        row.newton_assembly_ms += r.timings.assembly_ms;
        row.factor_ms += r.timings.factor_ms;
        row.solve_ms += r.timings.solve_ms;
        row.line_search_ms += r.timings.line_search_ms;
        row.unconverged += usize::from(!r.converged);
        let x1 = sim.state.x.clone();
        let xs = ipc.positions(&x1);
        let t0 = Instant::now();
        let c = jello::contact::candidates(&ipc.mesh, &xs, None, ipc.dhat).unwrap();
        row.broad_ms += t0.elapsed().as_secs_f64() * 1e3;
        row.candidates += (c.pt.len() + c.ee.len()) as f64;
        let dx: Vec<f64> = x1.iter().zip(&x0).map(|(a, b)| a - b).collect();
        let t0 = Instant::now();
        let alpha = ipc.max_step(&x0, &dx, 1.0).unwrap();
        row.ccd_ms += t0.elapsed().as_secs_f64() * 1e3;
        assert!(alpha > 0.0);
        let t0 = Instant::now();
        let pairs = ipc.active_pairs(&xs).unwrap();
        let mut g = vec![0.0; x1.len()];
        let e = ipc.add_gradient(&pairs, &xs, k, &mut g);
        let blocks = ipc.hessian_blocks(&pairs, &xs, k);
        row.assembly_ms += t0.elapsed().as_secs_f64() * 1e3;
        assert!(e.is_finite() && blocks.len() == pairs.len());
        row.active += pairs.len() as f64;
    }
    let s = steps as f64;
    for v in [
        &mut row.newton_ms,
        &mut row.iterations,
        &mut row.candidates,
        &mut row.active,
        &mut row.broad_ms,
        &mut row.ccd_ms,
        &mut row.assembly_ms,
        &mut row.newton_assembly_ms,
        &mut row.factor_ms,
        &mut row.solve_ms,
        &mut row.line_search_ms,
    ] {
        *v /= s;
    }
    eprintln!(
        "{:<8} {:>7} tets {:>6} faces: step {:>9.1} ms, {:>5.1} its, candidates {:>8.0} (active \
         {:>7.0}), broad {:>7.2} ms, ccd {:>7.2} ms, barrier {:>7.2} ms; newton: assembly \
         {:>8.1}, factor {:>8.1}, solve {:>7.1}, line search {:>7.1} ms; {} unconverged",
        row.scene,
        row.tets,
        row.faces,
        row.newton_ms,
        row.iterations,
        row.candidates,
        row.active,
        row.broad_ms,
        row.ccd_ms,
        row.assembly_ms,
        row.newton_assembly_ms,
        row.factor_ms,
        row.solve_ms,
        row.line_search_ms,
        row.unconverged
    );
    row
}

/// Least-squares slope of log y against log x.
fn exponent(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    let (lx, ly): (Vec<f64>, Vec<f64>) = x.iter().zip(y).map(|(a, b)| (a.ln(), b.ln())).unzip();
    let (mx, my) = (lx.iter().sum::<f64>() / n, ly.iter().sum::<f64>() / n);
    let sxy: f64 = lx.iter().zip(&ly).map(|(a, b)| (a - mx) * (b - my)).sum();
    let sxx: f64 = lx.iter().map(|a| (a - mx).powi(2)).sum();
    sxy / sxx
}

fn main() {
    run();
    report::finish("ipc");
}

fn run() {
    let steps = env_list("JELLO_BENCH_IPC_STEPS", "5")[0].max(1);
    let dhat = 1e-3;
    let mut rows: Vec<Row> = Vec::new();
    for n in env_list("JELLO_BENCH_IPC_STACK", "6,10,14,18") {
        // Three 0.1 m cubes d̂/2 apart, the bottom one d̂/2 above the ground.
        let s = 0.1;
        let gap = 0.5 * dhat;
        let cubes = (0..3)
            .map(|i| {
                let y0 = gap + i as f64 * (s + gap);
                box_grid([-s / 2.0, y0, -s / 2.0], [s / 2.0, y0 + s, s / 2.0], [n; 3])
            })
            .collect();
        let m = model(
            cubes,
            dhat,
            [0.0, -9.81, 0.0],
            vec![Obstacle::half_space([0.0, 1.0, 0.0], 0.0)],
        );
        // μ = 0.5 between the cubes, as in contact_stack.toml (frictionless, the squashed
        // cubes slide off each other).
        let friction = FrictionParams::uniform(3, 0.5, FrictionParams::DEFAULT_EPS_V, 1);
        let m = m.with_friction(friction).unwrap();
        let nv = m.num_vertices();
        rows.push(measure("stack", m, vec![[0.0; 3]; nv], 0.01, steps));
    }
    for n in env_list("JELLO_BENCH_IPC_BALLS", "8,12,16,20") {
        // Two 0.1 m balls d̂/2 apart at ±0.5 m/s.
        let r = 0.1;
        let a = ball([-r - dhat / 4.0, 0.0, 0.0], r, n);
        let b = ball([r + dhat / 4.0, 0.0, 0.0], r, n);
        let na = a.num_vertices();
        let m = model(vec![a, b], dhat, [0.0; 3], vec![]);
        let nv = m.num_vertices();
        let v = (0..nv)
            .map(|i| {
                if i < na {
                    [0.5, 0.0, 0.0]
                } else {
                    [-0.5, 0.0, 0.0]
                }
            })
            .collect();
        rows.push(measure("balls", m, v, 0.005, steps));
    }
    for n in env_list("JELLO_BENCH_IPC_HOOP", "8,14,19,26") {
        // A 0.1 m ball over a pinned hoop (hole radius 0.08 m, top at y = 0.02 m): its centre
        // where the sphere clears the hole's rim polygon (edge midpoints at 0.08·cos(π/24) m)
        // by d̂/2.
        let (r, inner, top) = (0.1, 0.08, 0.02);
        let rim = inner * (std::f64::consts::PI / 24.0).cos();
        let y = top + ((r + 0.5 * dhat).powi(2) - rim * rim).sqrt();
        let b = ball([0.0, y, 0.0], r, n);
        let hoop = ring([0.0, 0.0, 0.0], inner, 0.13, 2.0 * top, [24, 2, 1]);
        let m = model_with(
            vec![b, hoop],
            dhat,
            [0.0, -9.81, 0.0],
            vec![],
            2e4,
            Some(()),
        );
        let mut friction = FrictionParams::uniform(2, 0.0, FrictionParams::DEFAULT_EPS_V, 1);
        friction.set(0, 1, 0.5);
        let m = m.with_friction(friction).unwrap();
        let nv = m.num_vertices();
        rows.push(measure("hoop", m, vec![[0.0; 3]; nv], 0.01, steps));
    }
    out!(
        "\n| scene | tets | faces | step ms | Newton its | candidates | active | broad ms | CCD ms | barrier ms | \
         assembly ms | factor ms | solve ms | line search ms | unconverged |"
    );
    out!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        out!(
            "| {} | {} | {} | {:.1} | {:.1} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} | \
             {:.1} | {:.1} | {} |",
            r.scene,
            r.tets,
            r.faces,
            r.newton_ms,
            r.iterations,
            r.candidates,
            r.active,
            r.broad_ms,
            r.ccd_ms,
            r.assembly_ms,
            r.newton_assembly_ms,
            r.factor_ms,
            r.solve_ms,
            r.line_search_ms,
            r.unconverged
        );
    }
    for scene in ["stack", "balls", "hoop"] {
        let sel: Vec<&Row> = rows.iter().filter(|r| r.scene == scene).collect();
        if sel.len() < 2 {
            continue;
        }
        let f: Vec<f64> = sel.iter().map(|r| r.faces as f64).collect();
        let col = |g: fn(&Row) -> f64| exponent(&f, &sel.iter().map(|r| g(r)).collect::<Vec<_>>());
        out!(
            "{scene}: exponent in surface faces — broad phase {:.2}, CCD {:.2}, barrier {:.2}, \
             candidates {:.2}, Newton step {:.2} (assembly {:.2}, factor {:.2})",
            col(|r| r.broad_ms),
            col(|r| r.ccd_ms),
            col(|r| r.assembly_ms),
            col(|r| r.candidates),
            col(|r| r.newton_ms),
            col(|r| r.newton_assembly_ms),
            col(|r| r.factor_ms)
        );
    }
}
