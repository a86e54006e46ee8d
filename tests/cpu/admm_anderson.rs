//! ADMM's Anderson acceleration and residual-balancing penalty (issue 42): the same answer as
//! the plain iteration run to convergence, a safeguard that never keeps a mix whose combined
//! residual grew, and a bounded, reported refactorisation count.

use crate::admm::{gradient_bound, scene};
use crate::common;
use jello::problem::StepProblem;
use jello::solver::admm::{AdmmParams, AdmmSolver, PenaltyParams};
use jello::solver::{StepSolver, StopRule};

/// One step from each bundled scene's start (the obstacle-free ones: with obstacles neither
/// part runs), every variant to ε = 1e-9: plain, Anderson alone, penalty alone, both. Each
/// ends within the sum of its and the plain run's gradient bounds on ‖x − x*‖_M of the plain
/// run's x (the same answer); every kept mix has a combined residual no larger than the
/// iteration before it (read from the trace), every rejected one is followed by a plain
/// step; refactorisations ≤ the penalty's update cap, and reported in the step's work.
#[test]
fn anderson_and_penalty_reach_plain_admms_answer() {
    let eps = 1e-9;
    for name in ["cantilever.toml", "twist.toml", "stiff_soft.toml"] {
        let built = scene(name);
        let m = &built.model;
        assert!(m.obstacles.is_empty());
        let state = m.initial_state(&built.velocity);
        let problem = StepProblem::new(m, &state, built.config.h);
        let run = |anderson: usize, adapt: bool| {
            let params = AdmmParams {
                stop: StopRule::Cn { eps },
                max_iterations: 20_000,
                anderson,
                penalty: PenaltyParams {
                    adapt,
                    ..PenaltyParams::default()
                },
                ..AdmmParams::default()
            };
            let mut s = AdmmSolver::new(m, params).unwrap();
            // The first step factors A once; every further factorisation is a penalty update.
            let mut x = Vec::new();
            let r = s.step(&problem, m, &mut x, true).unwrap();
            let refactor_cap = 1 + params.penalty.max_updates * usize::from(adapt);
            assert!(
                r.work.refactorisations <= refactor_cap,
                "{name}: {} refactorisations",
                r.work.refactorisations
            );
            assert_eq!(r.work.refactorisations, s.system().factorizations());
            assert!(r.work.primal.is_some() && r.work.dual.is_some());
            let trace = r.trace.as_ref().unwrap();
            let (mut kept, mut rejected) = (0, 0);
            for k in 1..trace.len() {
                match trace[k].accelerated {
                    Some(true) => {
                        kept += 1;
                        let (now, before) = (trace[k].combined.unwrap(), trace[k - 1].combined);
                        let before = before.expect("a mix follows an evaluated iteration");
                        assert!(now <= before, "{name}: iteration {k}: {now:e} > {before:e}");
                    }
                    Some(false) => {
                        rejected += 1;
                        if let Some(next) = trace.get(k + 1) {
                            assert_eq!(next.accelerated, None, "{name}: {k}: no fallback");
                        }
                    }
                    None => {}
                }
            }
            if anderson == 0 {
                assert_eq!(kept + rejected, 0);
            }
            eprintln!(
                "{name}: anderson {anderson}, penalty {adapt}: {} iterations, converged {}, \
                 residual {:.2e}, mixes kept {kept} rejected {rejected}, refactorisations {}, \
                 ρ {}, {:.0} ms",
                r.iterations,
                r.converged,
                r.residual,
                r.work.refactorisations,
                s.rho(),
                r.wall_ms
            );
            assert!(r.converged, "{name}: anderson {anderson}, penalty {adapt}");
            let (_, bound) = gradient_bound(&problem, m, &x);
            (x, bound, r.iterations)
        };
        let (x0, b0, it0) = run(0, false);
        for (anderson, adapt) in [(5, false), (0, true), (5, true)] {
            let (x, b, it) = run(anderson, adapt);
            let d = common::m_dist(m, &x, &x0);
            eprintln!("{name}: ‖x − x_plain‖_M = {d:.2e} (bounds {b0:.1e} + {b:.1e})");
            assert!(d <= b0 + b, "{name}: {d:e}");
            if anderson > 0 {
                assert!(
                    it <= it0,
                    "{name}: Anderson took {it} iterations, plain {it0}"
                );
            }
        }
    }
}
