//! IPC contact in JGS2 and VBD on the f64 backend: a contact step's answer against
//! Newton-IPC's, and every accepted iterate of a contact step intersection-free at a positive
//! distance.

use crate::common;
use jello::problem::{Model, State, StepProblem};
use jello::scene::{BuiltScene, Scene};
use jello::solver::jgs2::{
    build_subspace, ContactCoupling, Jgs2Params, Jgs2Solver, Jgs2Subspace, Safeguard,
    SubspaceOptions, Variant,
};
use jello::solver::StopRule;
use std::sync::Arc;

/// contact_balls.toml's step count by which the balls (thrown at 2 m/s each, 0.1 m apart) are
/// pressed together: they meet after ~25 ms (5 steps of 5 ms).
const IN_CONTACT: usize = 8;

/// contact_balls.toml with coarser balls (resolution 4 instead of 6): the same impact at a
/// size the suite can afford at ε·1e-3.
fn coarse_balls() -> BuiltScene {
    let path = common::bundled_scene_path("contact_balls.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        text.matches("resolution = 6").count(),
        2,
        "contact_balls.toml changed"
    );
    let text = text.replace("resolution = 6", "resolution = 4");
    Scene::parse(&path, &text).unwrap().build().unwrap()
}

fn subspace(m: &Model, h: f64) -> Arc<Jgs2Subspace> {
    Arc::new(build_subspace(m, h, &SubspaceOptions::default()).unwrap())
}

fn params(eps: f64, variant: Variant, safeguard: Safeguard, cap: usize) -> Jgs2Params {
    Jgs2Params {
        stop: StopRule::Cn { eps },
        max_iterations: cap,
        variant,
        safeguard,
    }
}

/// JGS2 (Jacobi, cut safeguard) with `coupling` lands on Newton-IPC's answer on the coarse balls'
/// contact step.
fn assert_jgs2_matches_newton(coupling: ContactCoupling, what: &str) {
    let built = coarse_balls();
    let sub = subspace(&built.model, built.config.h);
    common::assert_matches_newton(
        "coarse contact_balls.toml",
        &built,
        IN_CONTACT,
        what,
        &mut |m, eps| {
            let p = params(eps, Variant::Jacobi, Safeguard::Cut, 5000);
            Box::new(
                Jgs2Solver::jgs2(m, p, sub.clone())
                    .unwrap()
                    .with_contact_coupling(coupling),
            )
        },
    );
}

#[test]
fn jgs2_with_ipc_lands_on_newtons_answer_on_the_colliding_balls() {
    assert_jgs2_matches_newton(ContactCoupling::Held, "jgs2-ipc (Jacobi)");
}

#[test]
fn jgs2_with_the_papers_contact_coupling_lands_on_newtons_answer_on_the_colliding_balls() {
    // ContactCoupling::Extended changes each contacting vertex's local system, not the
    // fixed point: the step still ends where Newton-IPC's does.
    assert_jgs2_matches_newton(
        ContactCoupling::Extended,
        "jgs2-ipc (Jacobi, extended coupling)",
    );
}

#[test]
fn jgs2_with_the_coarse_correction_lands_on_newtons_answer_on_the_colliding_balls() {
    // ContactCoupling::Coarse adds a direction to the model step, not a term to the potential:
    // the step still ends where Newton-IPC's does.
    assert_jgs2_matches_newton(
        ContactCoupling::Coarse,
        "jgs2-ipc (Jacobi, coarse correction)",
    );
}

#[test]
fn the_coarse_correction_cuts_jgs2s_contact_iterations_on_the_stack_of_cubes() {
    // The slow modes of JGS2 in contact are regions of the bodies moving against each other
    // (coarse.rs): on the bundled stack's first six steps (the cubes land on the ground and
    // on each other), held 170 iterations against 60 with the correction when written
    // (release build; 450 against 112 over eight steps). Both runs meet the scene's CN 1e-7
    // on every step and keep every surface apart.
    let built = common::bundled_scene("contact_stack.toml");
    let sub = subspace(&built.model, built.config.h);
    let eps = match built.config.stop {
        StopRule::Cn { eps } => eps,
        StopRule::Dx { .. } => panic!("contact_stack.toml uses cn"),
    };
    let run = |coupling: ContactCoupling| {
        let p = params(eps, Variant::Jacobi, Safeguard::Cut, 1000);
        let solver = Jgs2Solver::jgs2(&built.model, p, sub.clone())
            .unwrap()
            .with_contact_coupling(coupling);
        let mut sim = common::simulation(&built, Box::new(solver));
        let mut its = Vec::new();
        for step in 1..=6 {
            let r = sim.step(false).unwrap();
            assert!(
                r.converged,
                "{coupling:?}: step {step} ended at {:e}",
                r.residual
            );
            common::assert_apart(
                &built.model,
                &sim.state.x,
                &format!("{coupling:?} step {step}"),
            );
            its.push(r.iterations);
        }
        eprintln!("contact_stack.toml, jgs2 {coupling:?}: iterations {its:?}");
        its.iter().sum::<usize>()
    };
    let held = run(ContactCoupling::Held);
    let coarse = run(ContactCoupling::Coarse);
    assert!(
        2 * coarse <= held,
        "coarse correction: {coarse} iterations against {held} held"
    );
}

#[test]
fn vbd_with_ipc_lands_on_newtons_answer_on_the_colliding_balls() {
    // VBD as `jello run` has it: coloured Gauss–Seidel, no safeguard.
    common::assert_matches_newton(
        "coarse contact_balls.toml",
        &coarse_balls(),
        IN_CONTACT,
        "vbd-ipc (Gauss–Seidel)",
        &mut |m, eps| {
            let p = params(eps, Variant::GaussSeidel, Safeguard::Off, 5000);
            Box::new(Jgs2Solver::vbd(m, p))
        },
    );
}

#[test]
fn every_accepted_iterate_of_a_contact_step_is_intersection_free() {
    // Every iterate of the first 21 iterations (`common::step_iterates`): JGS2 (Jacobi: all
    // vertices at once, safeguarded) and VBD (Gauss–Seidel: colour by colour, unguarded) from a
    // state where the balls are pressed together, and at the first step of contact.
    let built = coarse_balls();
    let m = &built.model;
    let h = built.config.h;
    let sub = subspace(m, h);
    let states: Vec<(usize, State)> = [5, IN_CONTACT]
        .into_iter()
        .map(|s| (s, common::state_after(&built, s)))
        .collect();
    let cap = 21;
    let mut closest = [f64::INFINITY; 2];
    for (at, state) in &states {
        let problem = StepProblem::new(m, state, h);
        common::assert_apart(m, &problem.x_start, &format!("start of step {}", at + 1));
        let jgs2 = Jgs2Solver::jgs2(
            m,
            params(1e-7, Variant::Jacobi, Safeguard::Cut, cap),
            sub.clone(),
        )
        .unwrap();
        let vbd = Jgs2Solver::vbd(m, params(1e-7, Variant::GaussSeidel, Safeguard::Off, cap));
        let runs = [
            ("jgs2", common::step_iterates(jgs2, &problem, m)),
            ("vbd", common::step_iterates(vbd, &problem, m)),
        ];
        for (s, (name, (r, iterates))) in runs.into_iter().enumerate() {
            assert!(r.iterations <= cap);
            for (k, x) in iterates.iter().enumerate() {
                let what = format!("{name}, step {}, iterate {}", at + 1, k + 1);
                closest[s] = closest[s].min(common::assert_apart(m, x, &what));
            }
        }
    }
    let dhat = m.contact.as_ref().unwrap().dhat;
    eprintln!(
        "closest pair over the iterates: jgs2 {:.3e} m, vbd {:.3e} m (d̂ {dhat:.1e} m)",
        closest[0], closest[1]
    );
    // The iterates must have been in contact range, or the test checks nothing.
    for c in closest {
        assert!(c < dhat, "no iterate came within d̂: {c:e}");
    }
}
