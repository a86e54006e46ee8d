//! The inner-solver work a step reports ([`jello::solver::StepWork`]) for the Newton-type
//! solvers that share one outer loop: Newton's numeric factorisations are one per Hessian it
//! assembles (one per iteration; one per step when lagged), multilevel's CG iterations per
//! level are what its own counters and its fixed-count smoother imply, and every accepted
//! iteration took at least one line-search trial. Run on bundled scenes, from Newton's states:
//! free fall of a pinned beam, a stack in IPC contact with friction, a ball's impact and the
//! heterogeneous impact step that needs the stall rescue.

use crate::common;

use jello::problem::StepProblem;
use jello::solver::multilevel::{build_solver, MultilevelParams, MultilevelStop, Rescue};
use jello::solver::{NewtonParams, NewtonSolver, StepReport, StepSolver};

/// (scene, Newton steps before the measured step).
const CASES: [(&str, usize); 4] = [
    ("cantilever.toml", 2),
    ("contact_stack.toml", 12),
    ("drop.toml", 11),
    ("contact_hetero.toml", 2),
];

#[test]
fn newton_and_multilevel_report_their_inner_work() {
    for (name, steps) in CASES {
        let built = common::bundled_scene(name);
        let m = &built.model;
        let h = built.config.h;
        let state = common::state_after(&built, steps);
        let problem = StepProblem::new(m, &state, h);
        let mut x = Vec::new();
        for lagged in [false, true] {
            let mut newton = NewtonSolver::new(
                m,
                NewtonParams {
                    stop: built.config.stop,
                    lagged,
                    ..NewtonParams::default()
                },
            )
            .unwrap();
            let r = newton.step(&problem, m, &mut x, true).unwrap();
            eprintln!(
                "WORK {name} step {steps} {}: iterations {} converged {} residual {:.3e} work {:?}",
                newton.name(),
                r.iterations,
                r.converged,
                r.residual,
                r.work
            );
            let w = &r.work;
            let what = format!("{name}, {}", newton.name());
            // One factorisation per assembled Hessian: every iteration, or the first when
            // lagged.
            let factored = if lagged {
                r.iterations.min(1)
            } else {
                r.iterations
            };
            assert_eq!(w.refactorisations, factored, "{what}");
            assert!(w.cg_iterations.is_empty(), "{what}: {:?}", w.cg_iterations);
            assert_iterations_and_trials(&r, &what);
        }
        let (mut ml, _) = build_solver(
            m,
            MultilevelParams {
                stop: MultilevelStop::Shared(built.config.stop),
                ..MultilevelParams::default()
            },
            None,
        )
        .unwrap();
        let r = ml.step(&problem, m, &mut x, true).unwrap();
        let st = ml.last_stats();
        eprintln!(
            "WORK {name} step {steps} multilevel: iterations {} converged {} residual {:.3e} \
             stats {st:?} work {:?}",
            r.iterations, r.converged, r.residual, r.work
        );
        let w = &r.work;
        let what = format!("{name}, multilevel");
        assert_eq!(st.iterations, r.iterations, "{what}");
        // Finest first: the full-space smoother, the SMS level, the affine level.
        assert_eq!(
            w.cg_iterations,
            vec![st.full_cg, st.sms_cg, st.affine_cg],
            "{what}"
        );
        assert_eq!(
            w.cg_iterations.iter().sum::<usize>(),
            st.total_cg(),
            "{what}"
        );
        assert_eq!(
            w.line_search_trials,
            st.ls_host_trials + st.ls_device_trials,
            "{what}"
        );
        assert_eq!(w.refactorisations, 0, "{what}");
        // The smoother runs exactly N_cg iterations (full_tolerance = 0) in every iteration
        // outside the rescue, once more after a descent fallback; a rescued iteration runs
        // between 1 and the rescue's cap.
        let fixed = ml.n_cg() * (r.iterations - st.rescued + st.descent_fallbacks);
        let cap = Rescue::default().max_cg.max(ml.n_cg());
        assert!(
            st.full_cg >= fixed + st.rescued && st.full_cg <= fixed + cap * st.rescued,
            "{what}: {} full-space CG, {fixed} fixed, {} rescued",
            st.full_cg,
            st.rescued
        );
        if st.rescued == 0 {
            assert_eq!(st.full_cg, fixed, "{what}");
        }
        assert_iterations_and_trials(&r, &what);
    }
}

/// The trace has one record per iteration after the start's, and every accepted iteration took
/// at least one line-search trial (a converged step accepted all of its iterations).
fn assert_iterations_and_trials(r: &StepReport, what: &str) {
    let trace = r.trace.as_ref().expect("traced");
    assert_eq!(trace.len(), r.iterations + 1, "{what}");
    let accepted = trace[1..].iter().filter(|t| t.alpha > 0.0).count();
    assert_eq!(
        accepted, r.iterations,
        "{what}: every traced iteration was accepted"
    );
    assert!(
        r.work.line_search_trials >= r.iterations,
        "{what}: {} trials for {} iterations",
        r.work.line_search_trials,
        r.iterations
    );
}
