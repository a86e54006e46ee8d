//! JGS2 as a preconditioner (issue 13, "Beyond the paper: JGS2 as the smoother"): at rest with
//! exact subspace rows the map is H̄⁻¹ and flexible PCG converges at once; on a deformed
//! contact state it converges to the direct solution in fewer iterations than Jacobi-PCG; the
//! multilevel solver with it as its full-space smoother (and Newton-PCG with it alone)
//! converges to Newton's solution; the scene key is checked.

use crate::common;

use jello::material::MaterialModel;
use jello::problem::{HessianLayout, Model, StepProblem};
use jello::scene::Scene;
use jello::solver::jgs2::{build_subspace, Jgs2Preconditioner, SubspaceOptions};
use jello::solver::multilevel::{build_solver, MultilevelParams, MultilevelStop, Preconditioner};
use jello::solver::pcg::{pcg_with, Beta};
use jello::solver::{NewtonParams, NewtonSolver, StopRule};
use nalgebra::{DMatrix, DVector};
use rand::Rng;
use std::sync::Arc;

/// The dense Hessian (col-major `3n × 3n`) of `problem` at `x`: Newton's assembly (inertia,
/// clamp-projected elements, obstacle barrier, identity on pinned rows) plus the IPC
/// stencils' blocks between free vertices (zero on pinned rows and columns).
fn dense_hessian(problem: &StepProblem, m: &Model, x: &[f64]) -> DMatrix<f64> {
    let layout = HessianLayout::new(m).unwrap();
    let mut hs = layout.zeros();
    let mut scratch = Vec::new();
    problem.hessian(m, x, &layout, &mut hs, &mut scratch);
    let n = x.len();
    let mut h = DMatrix::from_column_slice(n, n, &hs.to_dense());
    let nv = m.num_vertices();
    for (ids, b) in problem.contact_hessian_blocks(x) {
        for (a, &va) in ids.iter().enumerate() {
            for (c, &vc) in ids.iter().enumerate() {
                let (va, vc) = (va as usize, vc as usize);
                if va >= nv || vc >= nv || m.pinned[va] || m.pinned[vc] {
                    continue;
                }
                for i in 0..3 {
                    for j in 0..3 {
                        h[(3 * va + i, 3 * vc + j)] += b[(3 * a + i, 3 * c + j)];
                    }
                }
            }
        }
    }
    h
}

/// A random right-hand side (N), zero at pinned vertices.
fn random_rhs(m: &Model, rng: &mut impl Rng) -> Vec<f64> {
    (0..3 * m.num_vertices())
        .map(|k| {
            if m.pinned[k / 3] {
                0.0
            } else {
                rng.random_range(-1.0..1.0)
            }
        })
        .collect()
}

fn rel(a: &[f64], b: &DVector<f64>) -> f64 {
    let d: f64 = a
        .iter()
        .zip(b.iter())
        .map(|(x, y)| (x - y).powi(2))
        .sum::<f64>()
        .sqrt();
    d / b.norm()
}

/// PCG on the dense `h` with preconditioner `precond` from zero to relative `tol`: (solution,
/// iterations, final relative residual).
fn solve(
    h: &DMatrix<f64>,
    b: &[f64],
    precond: &dyn Fn(&[f64], &mut [f64]),
    beta: Beta,
    tol: f64,
) -> (Vec<f64>, usize, f64) {
    let mut x = vec![0.0; b.len()];
    let out = pcg_with(
        &mut |v: &[f64], o: &mut [f64]| {
            let y = h * DVector::from_column_slice(v);
            o.copy_from_slice(y.as_slice());
        },
        precond,
        b,
        &mut x,
        tol,
        5_000,
        beta,
    );
    assert!(!out.breakdown, "PCG broke down");
    (x, out.iterations, out.relative_residual)
}

/// At rest with every subspace row kept (node fits, far tolerance 0), each `A_i` is the Schur
/// complement of H̄ and the map is H̄⁻¹ itself: applied once it is the direct solve, and
/// flexible PCG with it converges in one or two iterations (round-off) to the direct solution.
#[test]
fn at_rest_with_exact_rows_the_jgs2_preconditioner_is_the_inverse() {
    let mut rng = common::rng("at_rest_with_exact_rows_the_jgs2_preconditioner_is_the_inverse");
    let m = common::clamped_beam(MaterialModel::StableNeoHookean, 1e6, 0.5, [6, 2, 2], vec![]);
    let st = m.initial_state(&vec![[0.0; 3]; m.num_vertices()]);
    let h = 0.01;
    let problem = StepProblem::new(&m, &st, h);
    let x = st.x.clone();
    let mut exact = SubspaceOptions::node_fits();
    exact.precompute.far_tolerance = 0.0;
    let sub = Arc::new(build_subspace(&m, h, &exact).unwrap());
    let frozen = Jgs2Preconditioner::new(&m, sub)
        .unwrap()
        .freeze(&problem, &x, &[]);
    let hd = dense_hessian(&problem, &m, &x);
    let lu = hd.clone().lu();
    let b = random_rhs(&m, &mut rng);
    let direct = lu.solve(&DVector::from_column_slice(&b)).unwrap();
    // The map itself.
    let mut z = vec![0.0; b.len()];
    frozen.apply(&b, &mut z);
    let map_err = rel(&z, &direct);
    // Flexible PCG with it, against Jacobi-PCG on the same system.
    let (xs, its, res) = solve(
        &hd,
        &b,
        &|r: &[f64], z: &mut [f64]| frozen.apply(r, z),
        Beta::PolakRibiere,
        1e-10,
    );
    let diag: Vec<f64> = (0..b.len()).map(|k| hd[(k, k)]).collect();
    let (_, its_jacobi, _) = solve(
        &hd,
        &b,
        &|r: &[f64], z: &mut [f64]| {
            for k in 0..r.len() {
                z[k] = r[k] / diag[k];
            }
        },
        Beta::FletcherReeves,
        1e-10,
    );
    let err = rel(&xs, &direct);
    eprintln!(
        "at rest, exact rows: ‖P b − H̄⁻¹b‖/‖H̄⁻¹b‖ = {map_err:.2e}; JGS2-PCG {its} iterations \
         (residual {res:.1e}, error {err:.2e}), Jacobi-PCG {its_jacobi}"
    );
    assert!(map_err < 1e-9, "the map is not H̄⁻¹ at rest: {map_err:e}");
    assert!((1..=2).contains(&its), "{its} iterations");
    assert!(err < 1e-9, "PCG solution off the direct one by {err:e}");
}

/// On a deformed contact state (the bundled drop: the ball three steps into the ground's
/// barrier, squashed), with the default (H-matrix) far field: the JGS2-preconditioned flexible
/// PCG converges to the direct solution (relative residual 1e-10), and to relative 1e-6 (the
/// regime of a Newton-PCG solve) it needs fewer iterations in total than Jacobi-PCG, over the
/// step's own right-hand side −g and two random ones. (To 1e-10 the two are close: the JGS2
/// map's advantage is on the smooth, global part of the error.)
#[test]
fn on_a_deformed_contact_state_jgs2_pcg_beats_jacobi_pcg() {
    let mut rng = common::rng("on_a_deformed_contact_state_jgs2_pcg_beats_jacobi_pcg");
    let (built, impact) = common::drop_at_impact();
    let m = &built.model;
    let h = built.config.h;
    let mut sim = common::simulation(
        &built,
        Box::new(
            NewtonSolver::new(
                m,
                NewtonParams {
                    stop: built.config.stop,
                    ..NewtonParams::default()
                },
            )
            .unwrap(),
        ),
    );
    sim.state = impact;
    for _ in 0..3 {
        sim.step(false).unwrap();
    }
    let state = sim.state.clone();
    let problem = StepProblem::new(m, &state, h);
    problem.begin_contact_step(m);
    let x = state.x.clone();
    let dhat = m.barrier.dhat;
    assert!(
        x.chunks(3).any(|p| p[1] < dhat),
        "no vertex within d̂ of the ground"
    );
    let sub =
        Arc::new(build_subspace(m, m.integrator.steady_h(h), &SubspaceOptions::default()).unwrap());
    let contact = problem.contact_hessian_blocks(&x);
    let frozen = Jgs2Preconditioner::new(m, sub)
        .unwrap()
        .freeze(&problem, &x, &contact);
    let hd = dense_hessian(&problem, m, &x);
    let diag: Vec<f64> = (0..x.len()).map(|k| hd[(k, k)]).collect();
    let chol = hd.clone().cholesky().expect("the projected Hessian is SPD");
    let tol = 1e-10;
    let mut g = vec![0.0; x.len()];
    problem.gradient(m, &x, &mut g);
    let rhs = [
        g.iter().map(|v| -v).collect::<Vec<f64>>(),
        random_rhs(m, &mut rng),
        random_rhs(m, &mut rng),
    ];
    let (mut total_jgs2, mut total_jacobi) = (0, 0);
    for b in &rhs {
        let direct = chol.solve(&DVector::from_column_slice(b));
        let (xj, its_jgs2, res) = solve(
            &hd,
            b,
            &|r: &[f64], z: &mut [f64]| frozen.apply(r, z),
            Beta::PolakRibiere,
            tol,
        );
        let (xa, its_jacobi, res_a) = solve(
            &hd,
            b,
            &|r: &[f64], z: &mut [f64]| {
                for k in 0..r.len() {
                    z[k] = r[k] / diag[k];
                }
            },
            Beta::FletcherReeves,
            tol,
        );
        let (err, err_a) = (rel(&xj, &direct), rel(&xa, &direct));
        eprintln!(
            "drop, 3 steps into contact: JGS2-PCG {its_jgs2} iterations (residual {res:.1e}, \
             error {err:.2e}), Jacobi-PCG {its_jacobi} ({res_a:.1e}, {err_a:.2e})"
        );
        assert!(res <= tol, "JGS2-PCG stopped at {res:e}");
        // Both stop at the same residual; JGS2's solution must be as close to the direct one
        // as Jacobi's (up to a factor for the different error directions).
        assert!(
            err <= 10.0 * err_a.max(1e-12),
            "JGS2-PCG lands {err:e} from the direct solution, Jacobi-PCG {err_a:e}"
        );
        let loose = 1e-6;
        let (_, its_jgs2, _) = solve(
            &hd,
            b,
            &|r: &[f64], z: &mut [f64]| frozen.apply(r, z),
            Beta::PolakRibiere,
            loose,
        );
        let (_, its_jacobi, _) = solve(
            &hd,
            b,
            &|r: &[f64], z: &mut [f64]| {
                for k in 0..r.len() {
                    z[k] = r[k] / diag[k];
                }
            },
            Beta::FletcherReeves,
            loose,
        );
        eprintln!("  to {loose:e}: JGS2-PCG {its_jgs2}, Jacobi-PCG {its_jacobi}");
        total_jgs2 += its_jgs2;
        total_jacobi += its_jacobi;
    }
    assert!(
        total_jgs2 < total_jacobi,
        "to 1e-6 JGS2-PCG needed {total_jgs2} iterations in total, Jacobi-PCG {total_jacobi}"
    );
}

/// The multilevel solver with the JGS2 smoother, and Newton-PCG preconditioned by JGS2 alone,
/// converge to Newton's solution of a drop step in contact with the ground (the shared check:
/// within the stop rule's bound of Newton's 1e-10 solution, at the scene's ε and 1e-3 of it).
#[test]
fn multilevel_and_newton_pcg_with_jgs2_converge_to_newtons_solution() {
    let built = common::bundled_scene("drop.toml");
    let m = &built.model;
    let sub = Arc::new(
        build_subspace(
            m,
            m.integrator.steady_h(built.config.h),
            &SubspaceOptions::default(),
        )
        .unwrap(),
    );
    for (what, base) in [
        ("multilevel-jgs2", MultilevelParams::default()),
        (
            "newton-jgs2-pcg",
            MultilevelParams::newton_pcg(1e-4, 10_000),
        ),
    ] {
        common::assert_matches_newton_on_bundled_scene("drop.toml", 15, what, &mut |m, eps| {
            let (mut s, _) = build_solver(
                m,
                MultilevelParams {
                    stop: MultilevelStop::Shared(StopRule::Cn { eps }),
                    max_iterations: 400,
                    smoother: Preconditioner::Jgs2,
                    ..base
                },
                None,
            )
            .unwrap();
            s.set_jgs2_subspace(m, sub.clone()).unwrap();
            Box::new(s)
        });
    }
}

/// The solver refuses to step with the JGS2 smoother but no subspace (an error, no panic), and
/// `[solver] smoother` accepts `jacobi`/`jgs2`, names itself in its error otherwise, and
/// applies to solver multilevel only.
#[test]
fn smoother_key_and_missing_subspace_are_errors() {
    let built = common::bundled_scene("contact_stack.toml");
    let m = &built.model;
    let state = m.initial_state(&built.velocity);
    let problem = StepProblem::new(m, &state, built.config.h);
    let (mut s, _) = build_solver(
        m,
        MultilevelParams {
            smoother: Preconditioner::Jgs2,
            ..MultilevelParams::newton_pcg(1e-4, 100)
        },
        None,
    )
    .unwrap();
    let mut x = Vec::new();
    let Err(e) = jello::solver::StepSolver::step(&mut s, &problem, m, &mut x, false) else {
        panic!("stepping without a JGS2 subspace must fail");
    };
    assert!(e.to_string().contains("jgs2"), "{e}");
    let path = common::bundled_scene_path("contact_stack.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let with = |solver: &str, line: &str| {
        Scene::parse(
            &path,
            &text.replace("name = \"newton\"", &format!("name = \"{solver}\"\n{line}")),
        )
        .and_then(|s| s.build())
    };
    let ok = with("multilevel", "smoother = \"jgs2\"").unwrap();
    assert_eq!(ok.config.multilevel.smoother, Preconditioner::Jgs2);
    let ok = with("multilevel", "smoother = \"jacobi\"").unwrap();
    assert_eq!(ok.config.multilevel.smoother, Preconditioner::Jacobi);
    // Through the runner (`jello run`'s path): the JGS2 subspace is built and the solver steps.
    let drop = common::bundled_scene_path("drop.toml");
    let text_drop = std::fs::read_to_string(&drop).unwrap().replace(
        "name = \"newton\"",
        "name = \"multilevel\"\nsmoother = \"jgs2\"",
    );
    let built = Scene::parse(&drop, &text_drop).unwrap().build().unwrap();
    let solver = jello::runner::make_solver(&built.config, &built.model, None).unwrap();
    let mut sim = common::simulation(&built, solver);
    let r = sim.step(false).unwrap();
    assert!(r.converged, "residual {:e}", r.residual);
    for (solver, line) in [
        ("multilevel", "smoother = \"gauss\""),
        ("newton", "smoother = \"jgs2\""),
    ] {
        let Err(e) = with(solver, line) else {
            panic!("{solver}: `{line}` must be refused");
        };
        let e = e.to_string();
        assert!(e.contains("solver.smoother"), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
}
