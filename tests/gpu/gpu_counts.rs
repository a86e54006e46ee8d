//! The cost model of the device solvers (issue 40), counted by the device layer
//! ([`jello::gpu::DeviceCounters`]) on the software adapter: dispatches, submits and host
//! synchronisations per iteration of plain VBD, plain JGS2, the safeguarded JGS2 and QN on a
//! small generated twisting bar, against the numbers the recorded plans imply.
//!
//! Per-iteration counts are marginal: the same step from the same start with N₁ and N₂ fixed
//! iterations (the stop rule set unreachable), differenced and divided by N₂ − N₁, so each
//! step's setup (uploads, the start's evaluation) and final readback cancel.
//!
//! GPU test: FAILS without an adapter. Software Vulkan:
//!   WGPU_BACKEND=vulkan cargo test --test gpu gpu_counts::

use crate::common;

use common::{gpu_device, one_body, pin_where};
use jello::gpu::{DeviceCounters, ElemParams, GpuMat3, GpuTet};
use jello::material::{Material, MaterialModel};
use jello::mesh::box_grid;
use jello::problem::{Model, Script, StepProblem};
use jello::solver::backend::DeviceBackend;
use jello::solver::jgs2::{
    build_subspace, DeviceJgs2, Jgs2Params, Safeguard, SubspaceOptions, Variant,
};
use jello::solver::qn::{QnMode, QnParams, QnSolver};
use jello::solver::{StepSolver, StopRule};
use std::mem::size_of;
use std::sync::Arc;

const H: f64 = 0.025;
const N1: usize = 3;
const N2: usize = 7;

/// A 2 × 0.5 × 0.5 m bar (8 × 2 × 2 Kuhn cells), fixed corotated E = 1e5 Pa, its −x cap
/// pinned and its +x cap twisting at 0.5 rad/s about x: no obstacles, so no contact kernels.
fn bar() -> Model {
    let mesh = box_grid([-1.0, -0.25, -0.25], [1.0, 0.25, 0.25], [8, 2, 2]);
    let mat = Material::from_young_poisson(MaterialModel::FixedCorotated, 1e5, 0.4).unwrap();
    let fixed = pin_where(&mesh, |p| p[0] < -1.0 + 1e-9, Script::Fixed);
    let twist = pin_where(
        &mesh,
        |p| p[0] > 1.0 - 1e-9,
        Script::Rotate {
            center: [0.0; 3],
            axis: [1.0, 0.0, 0.0],
            omega: 0.5,
        },
    );
    one_body(
        mesh,
        mat,
        [0.0, -9.81, 0.0],
        vec![fixed, twist],
        vec![],
        1e-3,
    )
}

/// Bytes an iteration cannot avoid: positions read and written once (vec4 f32) and every
/// element's rest data (`GpuTet`, `GpuMat3`, `ElemParams`) read once.
fn compulsory(m: &Model) -> u64 {
    let per_elem = size_of::<GpuTet>() + size_of::<GpuMat3>() + size_of::<ElemParams>();
    (32 * m.num_vertices() + per_elem * m.mesh.num_tets()) as u64
}

/// One step with exactly `n` iterations on a fresh JGS2/VBD device solver; its counters, and the
/// solver's colour count.
fn jgs2_step(
    m: &Model,
    n: usize,
    variant: Variant,
    safeguard: Safeguard,
    subspace: bool,
) -> Option<(DeviceCounters, usize)> {
    let dev = gpu_device()?;
    let counters = dev.counter_handle();
    let params = Jgs2Params {
        stop: StopRule::Cn { eps: 0.0 },
        max_iterations: n,
        variant,
        safeguard,
    };
    let sub =
        subspace.then(|| Arc::new(build_subspace(m, H, &SubspaceOptions::default()).unwrap()));
    if let Some(s) = &sub {
        // The plain JGS2 count below assumes the H-matrix far field (3 dispatches per frame).
        assert!(
            s.far_hmatrix.is_some(),
            "the default subspace has the H-matrix far field"
        );
    }
    let mut solver = DeviceJgs2::new(dev, m, params, sub).unwrap();
    let colours = solver.num_colours();
    let state = m.initial_state(&vec![[0.0; 3]; m.num_vertices()]);
    let p = StepProblem::new(m, &state, H);
    let mut x = Vec::new();
    let c0 = counters.snapshot();
    let r = solver.step(&p, m, &mut x, false).unwrap();
    assert_eq!(r.iterations, n, "ε = 0 runs the cap");
    Some((counters.snapshot().since(&c0), colours))
}

/// Per-iteration differences of two runs.
struct Marginal {
    dispatches: f64,
    submits: f64,
    syncs: f64,
    bytes: f64,
}

fn marginal(a: &DeviceCounters, b: &DeviceCounters, its: usize) -> Marginal {
    let d = |x: u64, y: u64| (y as f64 - x as f64) / its as f64;
    Marginal {
        dispatches: d(a.dispatches, b.dispatches),
        submits: d(a.submits, b.submits),
        syncs: d(a.syncs, b.syncs),
        bytes: d(a.device_bytes(), b.device_bytes()),
    }
}

fn report(what: &str, m: &Marginal, min: u64) {
    eprintln!(
        "{what}: {:.2} dispatches, {:.2} submits, {:.2} syncs per iteration; {:.3} MB moved by the \
         kernels against {:.3} MB compulsory ({:.1}×)",
        m.dispatches,
        m.submits,
        m.syncs,
        m.bytes / 1e6,
        min as f64 / 1e6,
        m.bytes / min as f64
    );
}

/// Plain VBD (Gauss–Seidel, no safeguard, no subspace): one plan and one readback per
/// iteration. The plan (`rec_sweep`, `rec_dots(false)`, `rec_energy`) is, per colour, the
/// local systems and solves (`vbd_system`, `vertex_solve`), the update (`jgs2_apply`), the
/// touched elements (`elastic_list`) and the gradient refresh (`gather_gradient`,
/// `jgs2_vertex_terms`; no obstacles, so no face terms): 6 dispatches; then `jgs2_dots` and the
/// two energy partials and the move maximum into the readback: 4.
#[test]
fn vbd_counts() {
    let m = bar();
    let Some((a, colours)) = jgs2_step(&m, N1, Variant::GaussSeidel, Safeguard::Off, false) else {
        return;
    };
    let (b, _) = jgs2_step(&m, N2, Variant::GaussSeidel, Safeguard::Off, false).unwrap();
    let mg = marginal(&a, &b, N2 - N1);
    let min = compulsory(&m);
    report(&format!("vbd ({colours} colours)"), &mg, min);
    assert_eq!(mg.dispatches, (6 * colours + 4) as f64);
    assert_eq!(mg.submits, 1.0);
    assert_eq!(mg.syncs, 1.0);
    // Every iteration evaluates every element once and writes the positions: the compulsory
    // bytes are a floor of what the counters may report.
    assert!(mg.bytes >= min as f64, "{} < {min}", mg.bytes);
}

/// Plain JGS2 (Jacobi, no safeguard): one plan and one readback per iteration. The plan: the
/// update (`jgs2_apply`), the state (`elastic`, `gather_gradient`, `jgs2_vertex_terms`), the
/// local steps with the frame rotated (`deformation_gradient`, `jgs2_rotation`, the H-matrix
/// far field's forward, coupling and backward passes, `jgs2_system`, `vertex_solve`), then
/// `jgs2_dots` and the three reductions into the readback: 1 + 3 + 7 + 4 = 15.
#[test]
fn jgs2_plain_counts() {
    let m = bar();
    let Some((a, _)) = jgs2_step(&m, N1, Variant::Jacobi, Safeguard::Off, true) else {
        return;
    };
    let (b, _) = jgs2_step(&m, N2, Variant::Jacobi, Safeguard::Off, true).unwrap();
    let mg = marginal(&a, &b, N2 - N1);
    let min = compulsory(&m);
    report("jgs2 (plain Jacobi)", &mg, min);
    assert_eq!(mg.dispatches, 15.0);
    assert_eq!(mg.submits, 1.0);
    assert_eq!(mg.syncs, 1.0);
    assert!(mg.bytes >= min as f64, "{} < {min}", mg.bytes);
}

/// The safeguarded JGS2 (the default, cut safeguard): every device round trip is one plan
/// followed by exactly one readback (`DeviceJgs2::run`), so syncs equal submits, and an
/// iteration takes at least one (an accepted plain trial) — rejected trials and backtracking
/// add pairs, never a sync without a plan.
#[test]
fn jgs2_safeguarded_syncs_pair_with_submits() {
    let m = bar();
    let Some((a, _)) = jgs2_step(&m, N1, Variant::Jacobi, Safeguard::Cut, true) else {
        return;
    };
    let (b, _) = jgs2_step(&m, N2, Variant::Jacobi, Safeguard::Cut, true).unwrap();
    let mg = marginal(&a, &b, N2 - N1);
    report("jgs2 (safeguarded)", &mg, compulsory(&m));
    assert_eq!(mg.syncs, mg.submits);
    assert!(mg.syncs >= 1.0);
}

/// QN on the device backend: per iteration one host solve (the prefactored Cholesky: q read
/// back, r written, 16 B per vertex each way), one readback of nine scalars per line-search
/// trial, and at most two more readbacks per host solve (H₀'s start length; the obstacle bound
/// when it is shorter). So over the iterations N₂ − N₁:
/// solves + trials ≤ syncs ≤ 3·solves + trials, and the host solve's bus bytes are 16 B per
/// vertex each way per solve.
#[test]
fn qn_counts() {
    let m = bar();
    let run = |n: usize| {
        let dev = gpu_device()?;
        let counters = dev.counter_handle();
        let backend = DeviceBackend::new(dev, &m).unwrap();
        let params = QnParams {
            mode: QnMode::Fixed(n),
            ..QnParams::default()
        };
        let mut s = QnSolver::new(&m, backend, params).unwrap();
        let state = m.initial_state(&vec![[0.0; 3]; m.num_vertices()]);
        let p = StepProblem::new(&m, &state, H);
        let mut x = Vec::new();
        let c0 = counters.snapshot();
        let r = s.step(&p, &m, &mut x, false).unwrap();
        assert_eq!(r.iterations, n);
        Some((
            counters.snapshot().since(&c0),
            s.backend().host_solve_stats().calls,
            s.phases().trials,
        ))
    };
    let Some((a, solves_a, trials_a)) = run(N1) else {
        return;
    };
    let (b, solves_b, trials_b) = run(N2).unwrap();
    let (solves, trials) = (solves_b - solves_a, trials_b - trials_a);
    let syncs = b.syncs - a.syncs;
    let mg = marginal(&a, &b, N2 - N1);
    report("qn", &mg, compulsory(&m));
    eprintln!(
        "qn: {:.2} host solves and {:.2} line-search trials per iteration",
        solves as f64 / (N2 - N1) as f64,
        trials as f64 / (N2 - N1) as f64
    );
    assert!(solves >= N2 - N1, "one host solve per iteration at least");
    assert!(trials >= N2 - N1, "one trial per iteration at least");
    assert!(
        (solves + trials) as u64 <= syncs,
        "{solves} + {trials} > {syncs}"
    );
    assert!(
        syncs <= (3 * solves + trials) as u64,
        "{syncs} > 3·{solves} + {trials}"
    );
    let per_solve = 16 * m.num_vertices() as u64;
    assert!(b.readback_bytes - a.readback_bytes >= solves as u64 * per_solve);
    assert!(b.upload_bytes - a.upload_bytes >= solves as u64 * per_solve);
}
