//! IPC contact in the JGS2 / VBD device iteration (`jello::solver::jgs2`'s `device_ipc.rs`):
//! whole contact steps (JGS2 and VBD against Newton-IPC's answer; every accepted iterate
//! intersection-free at a positive distance), and the terms at a contact state — the assembled gradient, the local systems' barrier Hessian blocks and the
//! energy at a contact state, on the CPU twins and on the GPU, against the f64 [`StepProblem`]
//! — the barrier over the host's candidate pairs (`ipc_pairs`, gathered per vertex by
//! `ipc_gather`) and the lagged friction (`ipc_friction`) added to the elastic, inertia and
//! obstacle terms. The Hessian blocks are compared as the difference the IPC terms make (the
//! same model with and without contact on the device) against the diagonal blocks of the f64
//! pair Hessians (the barrier's PSD-projected, friction's PSD as it is).
//!
//! **States.** Projected-Newton states of bundled contact scenes in contact: the colliding
//! balls (coarse, no friction) pressed together, and the stacked cubes (μ = 0.5) resting on
//! each other and on the ground, with friction lagged at the step's start.
//!
//! **Tolerances.** The contact kernels read each pair relative to its first vertex from
//! positions in two parts (`solver/jgs2/device_ipc.rs`, "Data"), so a pair's coordinates round
//! with its size L, and the pair distances in contact are ~1e-5..1e-4 m: a pair's barrier
//! gradient carries a relative error of up to ~ε_f32·L/d ≈ 1e-3 (the kernels' own tests,
//! `gpu_contact_kernels.rs`, hold each pair to its conditioning). The whole gradient is held to
//! 1e-3 of the contact gradient's norm — so a missing, doubled or misplaced contact term fails
//! (measured 1.4e-5 and 4.2e-5; 1.7e-5 and 4.3e-5 with f32 positions relative to the rest
//! centroid) — the blocks to 1e-3 of their norm (Frobenius over all
//! vertices; the PSD projection's eigen-decomposition adds f32 error of the same order as the
//! gradient's), and the energy to 1e-5 of the summed terms' magnitude plus 1e-3 of the contact
//! energy (measured |Δ| ≤ 1.6e-6 J against 5.5 J).

use crate::common;
use jello::gpu::Device;
use jello::problem::{ElasticTerms, StepProblem};
use jello::scene::{BuiltScene, Scene};
use jello::solver::jgs2::{build_subspace, SubspaceOptions};
use jello::solver::jgs2::{DeviceJgs2, Jgs2Params, Safeguard, Variant};
use jello::solver::{StepSolver, StopRule};
use nalgebra::Matrix3;
use std::sync::Arc;

fn scene(name: &str, from: &str, to: &str) -> BuiltScene {
    let path = common::bundled_scene_path(name);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{name} changed");
    let text = text.replace(from, to);
    Scene::parse(&path, &text).unwrap().build().unwrap()
}

fn norm(a: &[f64]) -> f64 {
    a.iter().map(|v| v * v).sum::<f64>().sqrt()
}

#[test]
fn device_contact_terms_match_the_f64_problem() {
    let cases = [
        (
            "coarse contact_balls.toml, step 9",
            scene("contact_balls.toml", "resolution = 6", "resolution = 4"),
            8,
        ),
        (
            "contact_stack.toml, step 11",
            scene("contact_stack.toml", "[solver]", "[solver]"),
            10,
        ),
    ];
    for (label, built, steps) in cases {
        let m = &built.model;
        let state = common::state_after(&built, steps);
        let problem = StepProblem::new(m, &state, built.config.h);
        problem.begin_contact_step(m);
        let lagged = problem.lag_friction(&problem.x_start.clone());
        let x = &problem.x_start;
        let mut g = vec![0.0; x.len()];
        problem.gradient(m, x, &mut g);
        // The contact part alone: the f64 IPC barrier and friction gradients.
        let ipc = m.contact.as_ref().unwrap();
        let xs = problem.contact_positions(ipc, x);
        let pairs = ipc.active_pairs(&xs).unwrap();
        let mut gc = vec![0.0; x.len()];
        let contact_e = problem.kappa() * ipc.add_gradient(&pairs, &xs, problem.kappa(), &mut gc)
            + problem
                .lagged_friction()
                .map_or(0.0, |f| f.0.add_gradient(x, &problem.x_hat, &mut gc));
        for (v, p) in m.pinned.iter().enumerate() {
            if *p {
                gc[3 * v..3 * v + 3].iter_mut().for_each(|c| *c = 0.0);
            }
        }
        assert!(!pairs.is_empty(), "{label}: no pair within d̂");
        let mut blocks = vec![Matrix3::<f64>::zeros(); m.num_vertices()];
        let friction_blocks = problem
            .lagged_friction()
            .map_or(Vec::new(), |f| f.0.hessian_blocks(x, &problem.x_hat));
        for (ids, h) in ipc
            .hessian_blocks(&pairs, &xs, problem.kappa())
            .into_iter()
            .chain(friction_blocks)
        {
            for (a, &v) in ids.iter().enumerate() {
                if (v as usize) < blocks.len() && !m.pinned[v as usize] {
                    blocks[v as usize] += h.fixed_view::<3, 3>(3 * a, 3 * a);
                }
            }
        }
        let mut bare = m.clone();
        bare.contact = None;
        let e_ref = problem.energy(m, x) - problem.inertia_energy(x);
        let magnitude = m.elastic_energy(x).abs() + contact_e.abs();
        let params = Jgs2Params {
            stop: StopRule::Cn { eps: 1e-7 },
            max_iterations: 10,
            variant: Variant::GaussSeidel,
            safeguard: Safeguard::Off,
        };
        for (dname, gpu) in [("cpu twins", false), ("gpu", true)] {
            let device = || {
                if gpu {
                    common::gpu_device()
                } else {
                    Some(Device::cpu())
                }
            };
            let (Some(dev), Some(dev_bare)) = (device(), device()) else {
                continue;
            };
            let without = DeviceJgs2::new(dev_bare, &bare, params, None)
                .unwrap()
                .terms_at_start(&StepProblem::new(&bare, &state, built.config.h), &bare)
                .unwrap();
            let mut solver = DeviceJgs2::new(dev, m, params, None).unwrap();
            let t = solver.terms_at_start(&problem, m).unwrap();
            let (gd, ed) = (&t.gradient, t.energy);
            let mut dh2 = 0.0;
            let mut h2 = 0.0;
            for (v, b) in blocks.iter().enumerate() {
                if m.pinned[v] {
                    continue;
                }
                let dev_block = t.barrier_hessians[v] - without.barrier_hessians[v];
                dh2 += (dev_block - b).norm_squared();
                h2 += b.norm_squared();
            }
            let h_rel = (dh2 / h2).sqrt();
            let diff: Vec<f64> = gd.iter().zip(&g).map(|(a, b)| a - b).collect();
            let rel = norm(&diff) / norm(&gc);
            let e_err = (ed - e_ref).abs();
            eprintln!(
                "{label} on {dname}: {} pairs within d̂, {lagged} friction pairs; ‖Δg‖/‖g_contact‖ \
                 {rel:.2e} (‖g_contact‖/‖g‖ {:.2e}); energy {ed:.6e} vs {e_ref:.6e} J (contact \
                 {contact_e:.3e} J), |Δ| {e_err:.2e}; contact blocks ‖Δ‖/‖H‖ {h_rel:.2e}",
                pairs.len(),
                norm(&gc) / norm(&g),
            );
            assert!(rel < 1e-3, "{label} on {dname}: gradient off by {rel:e}");
            assert!(h_rel < 1e-3, "{label} on {dname}: blocks off by {h_rel:e}");
            assert!(
                e_err <= 1e-5 * magnitude + 1e-3 * contact_e.abs(),
                "{label} on {dname}: energy {ed:e} vs {e_ref:e}"
            );
        }
    }
}

/// contact_balls.toml (coarse) steps: the balls' first step in contact (6) and pressed
/// together (9).
const CONTACT_STEPS: [usize; 2] = [5, 8];

fn coarse_balls() -> BuiltScene {
    scene("contact_balls.toml", "resolution = 6", "resolution = 4")
}

fn devices() -> Vec<(&'static str, Device)> {
    let mut out = vec![("cpu twins", Device::cpu())];
    out.extend(common::gpu_device().map(|d| ("gpu", d)));
    out
}

fn params(variant: Variant, safeguard: Safeguard, cap: usize) -> Jgs2Params {
    Jgs2Params {
        stop: StopRule::Cn { eps: 1e-7 },
        max_iterations: cap,
        variant,
        safeguard,
    }
}

/// JGS2 (Jacobi, cut safeguard) and VBD (the safeguard kept on under IPC, `device_ipc.rs`)
/// with IPC on the device through the balls' first contact step: converged at the scene's CN
/// 1e-7, within 2h²‖∇E(x)‖_{M⁻¹} of Newton's answer at 1e-10 in the mass norm (the bound of
/// `common::assert_matches_newton`), the surfaces apart.
#[test]
fn device_jgs2_and_vbd_land_on_newtons_answer_through_contact() {
    let built = coarse_balls();
    let m = &built.model;
    let h = built.config.h;
    let sub = Arc::new(build_subspace(m, h, &SubspaceOptions::default()).unwrap());
    let at = CONTACT_STEPS[0];
    let state = common::state_after(&built, at);
    let problem = StepProblem::new(m, &state, h);
    let reference = common::newton_reference(m, &state, h);
    for (name, variant, safeguard, jgs2) in [
        ("jgs2", Variant::Jacobi, Safeguard::Cut, true),
        ("vbd", Variant::GaussSeidel, Safeguard::Off, false),
    ] {
        for (dname, dev) in devices() {
            let p = params(variant, safeguard, 1000);
            let mut solver = DeviceJgs2::new(dev, m, p, jgs2.then(|| sub.clone())).unwrap();
            let mut x = Vec::new();
            let r = solver.step(&problem, m, &mut x, false).unwrap();
            let d = common::assert_apart(m, &x, &format!("{name} on {dname}, step {}", at + 1));
            let dist = common::m_dist(m, &x, &reference);
            let bound = common::residual_bound(&problem, m, &x);
            eprintln!(
                "step {}: {name} on {dname}: converged {} in {} iterations, residual {:.2e}, \
                 ‖x − x*‖_M {dist:.2e} (bound {bound:.2e}), max vertex distance {:.2e} m, \
                 closest pair {d:.2e} m, {} list rebuilds",
                at + 1,
                r.converged,
                r.iterations,
                r.residual,
                common::max_dist(&x, &reference),
                solver.contact_list_rebuilds()
            );
            assert!(r.converged, "{name} on {dname}: residual {:e}", r.residual);
            assert!(dist <= bound, "{name} on {dname}: {dist:e} > {bound:e}");
        }
    }
}

/// Every accepted iterate of a device contact step is intersection-free at a positive distance:
/// each of the first 13 iterations' iterates (`common::step_iterates`, read back after every
/// iteration), JGS2 (Jacobi, cut safeguard) and VBD, on the CPU twins and the GPU, at the first
/// step of contact and with the balls pressed together.
#[test]
fn every_accepted_device_iterate_is_apart() {
    let built = coarse_balls();
    let m = &built.model;
    let h = built.config.h;
    let sub = Arc::new(build_subspace(m, h, &SubspaceOptions::default()).unwrap());
    let cap = 13;
    let mut closest = f64::INFINITY;
    for at in CONTACT_STEPS {
        let state = common::state_after(&built, at);
        let problem = StepProblem::new(m, &state, h);
        for (dname, gpu) in [("cpu twins", false), ("gpu", true)] {
            for (name, variant, safeguard, jgs2) in [
                ("jgs2", Variant::Jacobi, Safeguard::Cut, true),
                ("vbd", Variant::GaussSeidel, Safeguard::Off, false),
            ] {
                let dev = if gpu {
                    common::gpu_device()
                } else {
                    Some(Device::cpu())
                };
                let Some(dev) = dev else { continue };
                let p = params(variant, safeguard, cap);
                let solver = DeviceJgs2::new(dev, m, p, jgs2.then(|| sub.clone())).unwrap();
                let (r, iterates) = common::step_iterates(solver, &problem, m);
                assert!(r.iterations <= cap);
                for (k, x) in iterates.iter().enumerate() {
                    let what = format!("{name} on {dname}, step {}, iterate {}", at + 1, k + 1);
                    closest = closest.min(common::assert_apart(m, x, &what));
                }
            }
        }
    }
    let dhat = m.contact.as_ref().unwrap().dhat;
    eprintln!("closest pair over the iterates: {closest:.3e} m (d̂ {dhat:.1e} m)");
    // The iterates must have been in contact range, or the test checks nothing.
    assert!(closest < dhat, "no iterate came within d̂: {closest:e}");
}

/// The bundled cup's impact (step 12, from Newton-IPC's state after 11 steps): the device
/// JGS2 converges, apart, and solves the problem Newton-IPC solves
/// (`common::assert_solves_newtons_problem`: stationary for it in f64, within the residual
/// bounds of Newton's answer). With the raise gap the device had used before (the
/// f32 CCD's rounding bound, 1.9e-6 of the diagonal) its κ ended 16× Newton's and the point's
/// f64 CN for Newton's problem was 6.4e-4 (`device_ipc.rs`, "κ and friction").
#[test]
fn device_jgs2_solves_newtons_problem_at_the_cup_impact() {
    let built = common::bundled_scene("contact_cup.toml");
    let m = &built.model;
    let h = built.config.h;
    let Some(dev) = common::gpu_device() else {
        return;
    };
    let before = common::state_after(&built, 11);
    let sub = Arc::new(build_subspace(m, h, &SubspaceOptions::default()).unwrap());
    let p = params(Variant::Jacobi, Safeguard::Cut, 1000);
    let solver = DeviceJgs2::new(dev, m, p, Some(sub)).unwrap();
    let mut sim =
        jello::sim::Simulation::new(m.clone(), before.clone(), h, Box::new(solver)).unwrap();
    let r = sim.step(false).unwrap();
    let x = &sim.state.x;
    let d = common::assert_apart(m, x, "step 12");
    eprintln!(
        "step 12: {} iterations, residual {:.2e}, closest pair {d:.2e} m",
        r.iterations, r.residual
    );
    assert!(r.converged, "step 12: residual {:e}", r.residual);
    common::assert_solves_newtons_problem(m, &before, h, x, "step 12");
}

/// The bundled balls (resolution 6) on the GPU, JGS2 through their first two contact steps
/// (from Newton's state after five free-flight steps): each converges at the scene's CN 1e-7,
/// apart, within the residual bound of Newton's answer from the same start. The f32 CCD
/// once certified no motion of a pair closer than its rounding bound (~6e-8 m here, with
/// positions relative to the model's origin): an edge–edge pair settled at 8.1e-8 m and the
/// second step ended at the 1,000-iteration cap (residual 0.11, α ≈ 4e-6 per iteration) —
/// the case the two-part positions and the host's f64 decision of held pairs resolve
/// (`device_ipc.rs`, "κ and friction").
#[test]
fn device_jgs2_converges_through_the_bundled_balls_impact() {
    let built = common::bundled_scene("contact_balls.toml");
    let m = &built.model;
    let h = built.config.h;
    let Some(dev) = common::gpu_device() else {
        return;
    };
    let sub = Arc::new(build_subspace(m, h, &SubspaceOptions::default()).unwrap());
    let from = 5;
    let p = params(Variant::Jacobi, Safeguard::Cut, 1000);
    let solver = DeviceJgs2::new(dev, m, p, Some(sub)).unwrap();
    let start = common::state_after(&built, from);
    let mut sim = jello::sim::Simulation::new(m.clone(), start, h, Box::new(solver)).unwrap();
    for step in from + 1..=from + 2 {
        let before = sim.state.clone();
        let r = sim.step(false).unwrap();
        let x = &sim.state.x;
        let d = common::assert_apart(m, x, &format!("step {step}"));
        let reference = common::newton_reference(m, &before, h);
        let problem = StepProblem::new(m, &before, h);
        let dist = common::m_dist(m, x, &reference);
        let bound = common::residual_bound(&problem, m, x);
        eprintln!(
            "step {step}: {} iterations, residual {:.2e}, ‖x − x*‖_M {dist:.2e} (bound \
             {bound:.2e}), max vertex distance {:.2e} m, closest pair {d:.2e} m",
            r.iterations,
            r.residual,
            common::max_dist(x, &reference),
        );
        assert!(r.converged, "step {step}: residual {:e}", r.residual);
        assert!(dist <= bound, "step {step}: {dist:e} > {bound:e}");
    }
}
