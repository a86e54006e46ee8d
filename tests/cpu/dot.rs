//! DOT and LBFGS-H on the f64 CPU backend: the subdomain matrices are the global projected
//! Hessian's principal submatrices, one subdomain is projected Newton's direction, converged
//! steps are Newton's steps on every bundled scene, large steps converge, and bad options and
//! caches are handled.

use crate::common;

use common::pin_where;
use jello::material::{Material, MaterialModel};
use jello::mesh::box_grid;
use jello::problem::{HessianLayout, Model, Script, StepProblem};
use jello::sim::Simulation;
use jello::solver::backend::{Backend, CpuBackend, PotentialBackend};
use jello::solver::dot::{
    load_or_build_decomposition, DecompositionOrigin, DomainInverse, DotParams, DotSolver,
};
use jello::solver::lbfgs::InitialInverse;
use jello::solver::qn::QnMode;
use jello::solver::{NewtonParams, NewtonSolver, StepSolver, StopRule};
use jello_precompute::cholesky::{Ordering, SparseCholesky};
use jello_precompute::partition::Decomposition;
use std::sync::Arc;

/// DOT's H₀ prepared for `problem` on the f64 backend (which starts the step first).
fn begin(h0: &mut DomainInverse, problem: &StepProblem, m: &Model) {
    let mut backend = CpuBackend::new(m.num_vertices());
    backend.begin_step(problem, m).unwrap();
    InitialInverse::<CpuBackend>::begin_step(h0, problem, m, &mut backend).unwrap();
}

fn dot(model: &Model, params: DotParams) -> DotSolver<CpuBackend> {
    DotSolver::new(model, CpuBackend::new(model.num_vertices()), params).unwrap()
}

/// A sagging cantilever (fixed corotated, E = 1e5 Pa, ν = 0.4) half-way into a large step:
/// its state is bent and moving, so the Hessian has indefinite element blocks to project.
fn cantilever_state() -> (Model, jello::problem::State) {
    let mesh = box_grid([0.0, -0.05, -0.05], [0.6, 0.05, 0.05], [12, 2, 2]);
    let mat = Material::new(MaterialModel::FixedCorotated, 1e5, 0.4).unwrap();
    let pin = pin_where(&mesh, |p| p[0] < 1e-9, Script::Fixed);
    let m = common::one_body(mesh, mat, [0.0, -9.81, 0.0], vec![pin], vec![], 1e-3);
    let mut sim = Simulation::new(
        m.clone(),
        m.initial_state(&vec![[0.0; 3]; m.num_vertices()]),
        0.025,
        Box::new(NewtonSolver::new(&m, NewtonParams::default()).unwrap()),
    )
    .unwrap();
    for _ in 0..6 {
        sim.step(false).unwrap();
    }
    let state = sim.state.clone();
    (m, state)
}

/// Each H_j is the global projected Hessian at x_start restricted to V_j — every entry,
/// the interface–interface off-diagonal blocks included (the paper's K_j, Eq. 9).
#[test]
fn subdomain_matrices_are_principal_submatrices_of_the_projected_hessian() {
    let (m, state) = cantilever_state();
    let problem = StepProblem::new(&m, &state, 0.025);
    let d = Decomposition::new(m.num_vertices(), &m.mesh.tets, 4).unwrap();
    let copies = d.copies.clone();
    let mut h0 = DomainInverse::new(&m, Arc::new(d), DotParams::default(), "dot").unwrap();
    begin(&mut h0, &problem, &m);
    // The reference: Newton's assembly at x_start, independently.
    let layout = HessianLayout::new(&m).unwrap();
    let mut global = layout.zeros();
    problem.hessian(&m, &problem.x_start, &layout, &mut global, &mut Vec::new());
    let mut interface_coupling = 0usize;
    for j in 0..4 {
        let (hj, dofs) = h0.subdomain_matrix(j);
        let n = dofs.len();
        for r in 0..n {
            for c in r..n {
                let (gr, gc) = (dofs[r] as usize, dofs[c] as usize);
                let want = global.get(gr, gc);
                let got = hj.get(r, c);
                assert_eq!(got, want, "H_{j}[{r}, {c}] vs H[{gr}, {gc}]");
                let (vr, vc) = (gr / 3, gc / 3);
                if vr != vc && copies[vr] > 1 && copies[vc] > 1 && want != 0.0 {
                    interface_coupling += 1;
                }
            }
        }
        // Nothing outside V_j: the dimension is 3|V_j|.
        assert_eq!(n, 3 * h0.decomposition().vertices[j].len());
    }
    assert!(
        interface_coupling > 0,
        "no interface–interface coupling was compared"
    );
}

/// With one subdomain and x₁ = x_start, DOT's first direction −D₁∇E is projected Newton's
/// direction −H⁻¹∇E (solved here with a separately analysed Cholesky), to round-off; and one
/// LBFGS-H iteration (m = 0, line search from α = 1) is one Newton iteration.
#[test]
fn one_subdomain_is_projected_newtons_direction() {
    let (m, state) = cantilever_state();
    let problem = StepProblem::new(&m, &state, 0.025);
    let d = Decomposition::new(m.num_vertices(), &m.mesh.tets, 1).unwrap();
    let mut h0 = DomainInverse::new(&m, Arc::new(d), DotParams::lbfgs_h(), "lbfgs-h").unwrap();
    begin(&mut h0, &problem, &m);
    let n = 3 * m.num_vertices();
    let mut g = vec![0.0; n];
    problem.gradient(&m, &problem.x_start, &mut g);
    let mut dir: Vec<f64> = g.iter().map(|v| -v).collect();
    InitialInverse::<CpuBackend>::apply(&mut h0, &mut dir).unwrap();
    let layout = HessianLayout::new(&m).unwrap();
    let mut global = layout.zeros();
    problem.hessian(&m, &problem.x_start, &layout, &mut global, &mut Vec::new());
    let mut newton: Vec<f64> = g.iter().map(|v| -v).collect();
    SparseCholesky::new(&global, Ordering::Amd)
        .unwrap()
        .solve_in_place(&mut newton)
        .unwrap();
    let norm = newton.iter().map(|v| v * v).sum::<f64>().sqrt();
    let diff = dir
        .iter()
        .zip(&newton)
        .map(|(a, b)| (a - b).powi(2))
        .sum::<f64>()
        .sqrt();
    eprintln!("‖d_DOT − d_Newton‖/‖d_Newton‖ = {:.2e}", diff / norm);
    assert!(norm > 1e-6, "the state is not at rest: |d| = {norm:e}");
    assert!(diff <= 1e-10 * norm, "{:e}", diff / norm);

    // The whole loop: one iteration each, both from α = 1.
    let mut x_dot = Vec::new();
    dot(
        &m,
        DotParams {
            history: 0,
            mode: QnMode::Fixed(1),
            quadratic_start: false,
            ..DotParams::lbfgs_h()
        },
    )
    .step(&problem, &m, &mut x_dot, false)
    .unwrap();
    let mut x_newton = Vec::new();
    NewtonSolver::new(
        &m,
        NewtonParams {
            max_iterations: 1,
            ..NewtonParams::default()
        },
    )
    .unwrap()
    .step(&problem, &m, &mut x_newton, false)
    .unwrap();
    let moved = common::max_dist(&x_newton, &problem.x_start);
    let gap = common::max_dist(&x_dot, &x_newton);
    eprintln!("one iteration: Newton moved {moved:.2e} m, DOT differs by {gap:.2e} m");
    assert!(moved > 1e-5);
    assert!(gap <= 1e-10 * moved, "{gap:e} m");
}

/// D₁ averages: for a q that is zero except on one interface vertex, the result there is the
/// mean of the subdomains' back-solves, and the symmetric fallback (no B) their sum — the
/// per-vertex weight 1/n_v is exactly the copy count the partition reports.
#[test]
fn the_gather_averages_interface_copies() {
    let (m, state) = cantilever_state();
    let problem = StepProblem::new(&m, &state, 0.025);
    let d = Decomposition::new(m.num_vertices(), &m.mesh.tets, 3).unwrap();
    let v = (0..m.num_vertices())
        .find(|&v| d.copies[v] > 1 && !m.pinned[v])
        .expect("an interface vertex");
    let nv = d.copies[v] as f64;
    let d = Arc::new(d);
    let mut h0 = DomainInverse::new(&m, d.clone(), DotParams::default(), "dot").unwrap();
    begin(&mut h0, &problem, &m);
    let mut q = vec![0.0; 3 * m.num_vertices()];
    q[3 * v + 1] = 1.0;
    let mut avg = q.clone();
    InitialInverse::<CpuBackend>::apply(&mut h0, &mut avg).unwrap();
    assert!(InitialInverse::<CpuBackend>::fallback(&mut h0));
    let mut sum = q.clone();
    InitialInverse::<CpuBackend>::apply(&mut h0, &mut sum).unwrap();
    // Independently: each subdomain's dense solve, summed.
    let mut want = vec![0.0; q.len()];
    for j in 0..d.len() {
        let (hj, dofs) = h0.subdomain_matrix(j);
        let n = dofs.len();
        let dense = nalgebra::DMatrix::from_fn(n, n, |r, c| hj.get(r.min(c), r.max(c)));
        let rhs = nalgebra::DVector::from_iterator(n, dofs.iter().map(|&g| q[g as usize]));
        let x = dense.cholesky().unwrap().solve(&rhs);
        for (k, &g) in dofs.iter().enumerate() {
            want[g as usize] += x[k];
        }
    }
    for k in 0..q.len() {
        let w = d.copies[k / 3].max(1) as f64;
        let tol = 1e-9 * want[k].abs().max(1e-12);
        assert!(
            (sum[k] - want[k]).abs() <= tol,
            "sum[{k}] {} vs {}",
            sum[k],
            want[k]
        );
        assert!(
            (avg[k] - want[k] / w).abs() <= tol,
            "avg[{k}] {} vs {}",
            avg[k],
            want[k] / w
        );
    }
    eprintln!("vertex {v}: {nv} copies, averaged {:.3e}", avg[3 * v + 1]);
}

/// On every bundled scene, DOT (s = 2 and 4) and LBFGS-H stopped at the scene's ε land where
/// Newton iterated to 1e-10 lands (within what their residual allows), and closer at ε/1000.
#[test]
fn converges_to_newtons_solution_on_every_bundled_scene() {
    let table = [
        ("cantilever.toml", 5),
        ("twist.toml", 20),
        ("stiff_soft.toml", 10),
        ("drop.toml", 12),
    ];
    // twist_stretch_squash.toml (the armadillo, on ../shared) is benches/solvers.rs's; its
    // small bar form runs below (every_large_step_of_a_fast_twist_and_a_tss_converges).
    common::assert_covers_bundled_scenes(
        table
            .iter()
            .map(|(n, _)| *n)
            .chain(["twist_stretch_squash.toml"])
            .chain(common::IPC_SCENES),
    );
    for (name, steps) in table {
        for s in [1, 2, 4] {
            let what = format!("dot s = {s}");
            common::assert_matches_newton_on_bundled_scene(name, steps, &what, &mut |m, eps| {
                Box::new(dot(
                    m,
                    DotParams {
                        subdomains: s,
                        stop: StopRule::Cn { eps },
                        max_iterations: 2000,
                        ..DotParams::default()
                    },
                ))
            });
        }
    }
}

/// Large steps (h = 25 ms) of a strongly twisted bar, and of the twist–stretch–squash bar
/// (keyframed caps: ±90° in 0.25 s, then apart, then together): every step reaches ε = 1e-5
/// (the paper's robustness claim) for s = 1, 3 and 6.
#[test]
fn every_large_step_of_a_fast_twist_and_a_tss_converges() {
    let mesh = box_grid([-0.5, -0.1, -0.1], [0.5, 0.1, 0.1], [16, 3, 3]);
    let mat = Material::new(MaterialModel::FixedCorotated, 1e5, 0.4).unwrap();
    // 2 rad/s per cap: 0.1 rad of relative twist per step.
    let cap = |sign: f64| Script::Rotate {
        center: [0.0; 3],
        axis: [1.0, 0.0, 0.0],
        omega: sign * 2.0,
    };
    let left = pin_where(&mesh, |p| p[0] < -0.499, cap(-1.0));
    let right = pin_where(&mesh, |p| p[0] > 0.499, cap(1.0));
    let twist = common::one_body(mesh, mat, [0.0; 3], vec![left, right], vec![], 1e-3);
    let tss = jello::scene::Scene::parse(std::path::Path::new("tss_bar.toml"), common::TSS_BAR)
        .unwrap()
        .build()
        .unwrap();
    for (what, m, steps) in [("twist", &twist, 12), ("tss", &tss.model, tss.config.steps)] {
        for s in [1, 3, 6] {
            let mut sim = Simulation::new(
                m.clone(),
                m.initial_state(&vec![[0.0; 3]; m.num_vertices()]),
                0.025,
                Box::new(dot(
                    m,
                    DotParams {
                        subdomains: s,
                        ..DotParams::default()
                    },
                )),
            )
            .unwrap();
            let mut total = 0;
            for step in 1..=steps {
                let r = sim.step(false).unwrap();
                assert!(
                    r.converged,
                    "{what}, s = {s}, step {step}: residual {:e} after {} iterations",
                    r.residual, r.iterations
                );
                total += r.iterations;
            }
            eprintln!("{what}: s = {s}: {total} iterations over {steps} steps");
        }
    }
}

/// Subdomain counts out of range are one line naming the key; a corrupt cached partition is
/// rebuilt with a warning (and the rebuilt file read back next time).
#[test]
fn bad_subdomain_counts_and_corrupt_caches() {
    let (m, _) = cantilever_state();
    let nt = m.mesh.num_tets();
    for s in [0, nt + 1] {
        let e = DotSolver::new(
            &m,
            CpuBackend::new(m.num_vertices()),
            DotParams {
                subdomains: s,
                ..DotParams::default()
            },
        )
        .err()
        .expect("refused");
        let msg = e.to_string();
        assert!(
            msg.contains("solver.subdomains") && !msg.contains('\n'),
            "{msg}"
        );
    }
    let dir = common::cli::tmp_dir("dot", "bad_subdomain_counts_and_corrupt_caches");
    let (d1, o1, w1) = load_or_build_decomposition(&m, 3, Some(&dir)).unwrap();
    let DecompositionOrigin::Built(Some(path)) = o1 else {
        panic!("not written: {o1:?}")
    };
    assert!(w1.is_empty());
    let (d2, o2, _) = load_or_build_decomposition(&m, 3, Some(&dir)).unwrap();
    assert_eq!(o2, DecompositionOrigin::Cache(path.clone()));
    assert_eq!(d1, d2);
    // Flip a byte of the payload: rebuilt, with one warning naming the file.
    let mut bytes = std::fs::read(&path).unwrap();
    let k = bytes.len() / 2;
    bytes[k] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let (d3, o3, w3) = load_or_build_decomposition(&m, 3, Some(&dir)).unwrap();
    assert_eq!(o3, DecompositionOrigin::Built(Some(path.clone())));
    assert_eq!(w3.len(), 1, "{w3:?}");
    assert!(w3[0].contains(&path.display().to_string()), "{}", w3[0]);
    assert_eq!(d3, d1);
    // A directory where the file should be: rebuilt, not cached, warned.
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    let (_, o4, w4) = load_or_build_decomposition(&m, 3, Some(&dir)).unwrap();
    assert_eq!(o4, DecompositionOrigin::Built(None));
    assert!(!w4.is_empty());
}

/// The eigenvalue filter only shapes D₁: clamp and abs at x_start (`[solver] eigen_filter`)
/// reach the same step, to within what ε = 1e-9 allows.
#[test]
fn both_filters_reach_the_same_step() {
    let (m, state) = cantilever_state();
    let problem = StepProblem::new(&m, &state, 0.025);
    let mut xs = Vec::new();
    for filter in [
        jello::material::EigenFilter::Clamp,
        jello::material::EigenFilter::Abs,
    ] {
        let mut x = Vec::new();
        let r = dot(
            &m,
            DotParams {
                subdomains: 3,
                stop: StopRule::Cn { eps: 1e-9 },
                filter,
                ..DotParams::default()
            },
        )
        .step(&problem, &m, &mut x, false)
        .unwrap();
        assert!(r.converged, "{filter:?}: residual {:e}", r.residual);
        eprintln!("{filter:?}: {} iterations", r.iterations);
        xs.push(x);
    }
    // Each lies within 2h²‖∇E‖_{M⁻¹} of the minimiser.
    let bound: f64 = xs
        .iter()
        .map(|x| common::residual_bound(&problem, &m, x))
        .sum();
    let gap = common::m_dist(&m, &xs[0], &xs[1]);
    let moved = common::m_dist(&m, &xs[0], &problem.x_start);
    eprintln!("clamp vs abs: ‖Δx‖_M = {gap:.2e} (bound {bound:.2e}) after moving {moved:.2e}");
    assert!(moved > 100.0 * bound);
    assert!(gap <= bound, "{gap:e} > {bound:e}");
}

/// `jello precompute` on a dot scene builds the partition, then finds it up to date; a
/// `subdomains` above the element count is one line naming the key and file, exit non-zero.
#[test]
fn precompute_builds_the_partition_and_bad_counts_are_one_line() {
    let dir = common::cli::tmp_dir("dot", "precompute_builds_the_partition");
    let scene = |s: usize| {
        format!(
            r#"[simulation]
h = 0.025
steps = 2
gravity = [0.0, -9.81, 0.0]

[solver]
name = "dot"
subdomains = {s}

[[objects]]
name = "bar"
mesh = {{ generator = "box", min = [0.0, 0.0, 0.0], max = [0.4, 0.1, 0.1], cells = [4, 1, 1] }}
material = {{ model = "fixed_corotated", youngs_modulus = 1e5, poisson_ratio = 0.4, density = 1000.0 }}

[[pins]]
region = {{ slab = {{ normal = [1.0, 0.0, 0.0], offset = 0.0, thickness = 0.002 }} }}
"#
        )
    };
    let ok = dir.join("ok.toml");
    std::fs::write(&ok, scene(3)).unwrap();
    let p = ok.to_str().unwrap();
    let first = common::cli::jello(&["precompute", p]);
    let out = String::from_utf8_lossy(&first.stdout);
    assert!(first.status.success(), "{out}");
    assert!(
        out.contains("built") && out.contains("3 subdomains"),
        "{out}"
    );
    let second = common::cli::jello(&["precompute", p]);
    let out = String::from_utf8_lossy(&second.stdout);
    assert!(
        second.status.success() && out.contains("up to date"),
        "{out}"
    );
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, scene(25)).unwrap();
    let r = common::cli::jello(&[
        "run",
        bad.to_str().unwrap(),
        "--out",
        dir.join("o").to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success());
    let line = err
        .lines()
        .find(|l| l.contains("subdomains"))
        .expect("names the key");
    assert!(
        line.contains("bad.toml") && line.contains("1..=24"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// The f64 backend's dᵀH(x_start)d for DOT's first trial length is the curvature of the
/// matrix Newton assembles: against dᵀ(H d) with H from an independent `StepProblem::hessian`,
/// for random directions (zero on pins) on the cantilever (pins, indefinite elements) and on
/// the drop at impact (the ground's barrier blocks).
#[test]
fn start_curvature_is_the_assembled_hessians_curvature() {
    let mut rng = common::rng("start_curvature_is_the_assembled_hessians_curvature");
    let (cm, cs) = cantilever_state();
    let (drop, ds) = common::drop_at_impact();
    for (label, m, state, h) in [
        ("cantilever", &cm, &cs, 0.025),
        ("drop at impact", &drop.model, &ds, drop.config.h),
    ] {
        let problem = StepProblem::new(m, state, h);
        let n = 3 * m.num_vertices();
        let dhat = m.barrier.dhat;
        let touching = (0..m.num_vertices())
            .filter(|&v| {
                let blk = problem.vertex_block(&problem.x_start, v);
                let mass = m.mass[v] * problem.inertia;
                !m.pinned[v] && (blk[(1, 1)] - mass).abs() > 1e-9 * mass
            })
            .count();
        eprintln!("{label}: {touching} vertices with barrier blocks (d̂ = {dhat:e} m)");
        if label.starts_with("drop") {
            assert!(touching > 0, "the drop state is not in contact");
        }
        let mut backend = CpuBackend::new(m.num_vertices());
        backend.begin_step(&problem, m).unwrap();
        backend
            .start_element_hessians(&problem, m, jello::material::EigenFilter::Clamp)
            .unwrap();
        let layout = HessianLayout::new(m).unwrap();
        let mut global = layout.zeros();
        problem.hessian(m, &problem.x_start, &layout, &mut global, &mut Vec::new());
        let (q, dv, c) = (
            backend.vector("q").unwrap(),
            backend.vector("d").unwrap(),
            backend.scalar().unwrap(),
        );
        for _ in 0..3 {
            let d: Vec<f64> = (0..n)
                .map(|k| {
                    if problem.fixed[k] {
                        0.0
                    } else {
                        rand::Rng::random_range(&mut rng, -1.0..1.0)
                    }
                })
                .collect();
            backend
                .host_solve(q, dv, &mut |v| {
                    v.copy_from_slice(&d);
                    Ok(())
                })
                .unwrap();
            backend.start_curvature(&problem, dv, c).unwrap();
            let got = backend.read(&[c]).unwrap()[0];
            let mut hd = vec![0.0; n];
            global.mul_vec(&d, &mut hd);
            let want: f64 = d.iter().zip(&hd).map(|(a, b)| a * b).sum();
            eprintln!("{label}: dᵀHd {got:.6e} vs {want:.6e}");
            assert!(want > 0.0);
            assert!(
                (got - want).abs() <= 1e-11 * want,
                "{label}: {got:e} vs {want:e}"
            );
        }
    }
}
