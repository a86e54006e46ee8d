//! IPC contact in the step problem and on projected Newton: the composed pair energy against
//! finite differences, the step's gradient with contact against its energy, and collisions that
//! must stay intersection-free, conserve momentum and bounce.

use crate::common;

use jello::contact::ccd::PairKind;
use jello::contact::distance::{edge_edge_type, point_triangle_type};
use jello::contact::{ContactPair, IpcContact};
use jello::mesh::box_grid;
use jello::problem::{Model, StepProblem};
use jello::sim::Simulation;
use jello::solver::{NewtonParams, NewtonSolver};
use nalgebra::Vector3;
use rand::Rng;

/// Two 0.2 m cubes of `cells`³ cells, `gap` (m) apart along x, as bodies `b0` (left) and `b1`.
fn two_cubes(gap: f64, cells: usize) -> Model {
    let a = box_grid(
        [-0.2 - gap / 2.0, -0.1, -0.1],
        [-gap / 2.0, 0.1, 0.1],
        [cells; 3],
    );
    let b = box_grid(
        [gap / 2.0, -0.1, -0.1],
        [0.2 + gap / 2.0, 0.1, 0.1],
        [cells; 3],
    );
    common::bodies_model(vec![a, b])
}

fn flat(m: &Model) -> Vec<f64> {
    m.mesh.positions.iter().flatten().copied().collect()
}

#[test]
fn pair_energy_derivatives_match_finite_differences() {
    // Random point–triangle and edge–edge stencils closer than d̂, including nearly parallel
    // edges (the mollifier acts) and points over a triangle's edge or corner (other distance
    // types): the composed m·b's gradient against central differences of its value, and its
    // (unprojected) Hessian against central differences of the gradient.
    let mut rng = common::rng("pair_energy_derivatives_match_finite_differences");
    let model = two_cubes(0.05, 1);
    let mesh = jello::contact::CollisionMesh::from_model(&model).unwrap();
    let dhat = 0.02;
    let ipc = IpcContact::new(mesh, &flat(&model), dhat, None).unwrap();
    let (mut worst_g, mut worst_h) = (0.0f64, 0.0f64);
    let mut checked = [0usize; 2];
    let mut seams = 0;
    let v = |r: &mut rand_chacha::ChaCha8Rng, s: f64| {
        Vector3::new(
            r.random_range(-s..s),
            r.random_range(-s..s),
            r.random_range(-s..s),
        )
    };
    for case in 0..400 {
        let kind = if case % 2 == 0 {
            PairKind::PointTriangle
        } else {
            PairKind::EdgeEdge
        };
        let mut x: Vec<Vector3<f64>> = (0..4).map(|_| v(&mut rng, 0.1)).collect();
        match kind {
            PairKind::PointTriangle => {
                // The point near the triangle: over its face, an edge or a corner.
                let w: [f64; 3] = match case % 6 {
                    0 => [0.3, 0.3, 0.4],
                    2 => [
                        0.5 + rng.random_range(-0.05..0.05),
                        0.5,
                        rng.random_range(-0.1..0.0),
                    ],
                    _ => [
                        1.0 + rng.random_range(0.0..0.1),
                        rng.random_range(-0.1..0.0),
                        0.0,
                    ],
                };
                let foot = x[1] * w[0] + x[2] * w[1] + x[3] * w[2];
                let n = (x[2] - x[1]).cross(&(x[3] - x[1])).normalize();
                x[0] = foot + n * (dhat * rng.random_range(0.2..0.9)) + v(&mut rng, 0.002);
            }
            PairKind::EdgeEdge => {
                // Edge b near edge a's middle; every third case nearly parallel.
                let mid = (x[0] + x[1]) * 0.5;
                let u = (x[1] - x[0]).normalize();
                let dir = if case % 3 == 0 {
                    (u + v(&mut rng, 0.01)).normalize()
                } else {
                    v(&mut rng, 1.0).normalize()
                };
                let off = u.cross(&dir);
                let off = if off.norm() > 1e-6 {
                    off.normalize()
                } else {
                    u.cross(&Vector3::z()).normalize()
                };
                let c = mid + off * (dhat * rng.random_range(0.2..0.9));
                x[2] = c - dir * 0.05;
                x[3] = c + dir * 0.05;
            }
        }
        let xs: Vec<[f64; 3]> = x.iter().map(|p| [p.x, p.y, p.z]).collect();
        let eps_x = match kind {
            PairKind::PointTriangle => 0.0,
            PairKind::EdgeEdge => {
                1e-3 * (x[1] - x[0]).norm_squared() * (x[3] - x[2]).norm_squared()
            }
        };
        let pair = ContactPair {
            kind,
            ids: [0, 1, 2, 3],
            eps_x,
        };
        let d = jello::contact::potential::distance_sq(&pair, &xs);
        // Beyond 0.84 d̂ (d > 0.7 d̂²) b vanishes to third order at d̂: its gradient is tiny
        // against the value's round-off and the difference quotients' truncation, so a relative
        // error means nothing there.
        if !(d > 0.0 && d < 0.7 * dhat * dhat) {
            continue;
        }
        let at = |xs: &[[f64; 3]]| ipc.pair_derivatives(&pair, xs);
        let exact = at(&xs);
        if exact.value == 0.0 {
            continue;
        }
        // The pair's smooth piece: its distance type and, for edges, the mollifier's regime.
        // Both switch across C¹ seams (the Hessian jumps there), so a stencil whose difference
        // quotients straddle a seam is skipped (counted).
        let regime = |xs: &[[f64; 3]]| {
            let v: Vec<Vector3<f64>> = xs.iter().map(|p| Vector3::new(p[0], p[1], p[2])).collect();
            match kind {
                PairKind::PointTriangle => (
                    format!("{:?}", point_triangle_type(&v[0], &v[1], &v[2], &v[3])),
                    false,
                ),
                PairKind::EdgeEdge => (
                    format!("{:?}", edge_edge_type(&v[0], &v[1], &v[2], &v[3])),
                    (v[1] - v[0]).cross(&(v[3] - v[2])).norm_squared() < eps_x,
                ),
            }
        };
        let h = 1e-7;
        let centre = regime(&xs);
        let straddles = (0..12).any(|k| {
            [h, -h].iter().any(|&s| {
                let mut q = xs.clone();
                q[k / 3][k % 3] += s;
                regime(&q) != centre
            })
        });
        if straddles {
            seams += 1;
            continue;
        }
        let mut g_fd = [0.0; 12];
        let mut h_fd = nalgebra::SMatrix::<f64, 12, 12>::zeros();
        for k in 0..12 {
            let (mut p, mut m) = (xs.clone(), xs.clone());
            p[k / 3][k % 3] += h;
            m[k / 3][k % 3] -= h;
            g_fd[k] = (ipc.pair_value(&pair, &p) - ipc.pair_value(&pair, &m)) / (2.0 * h);
            let (gp, gm) = (at(&p).grad, at(&m).grad);
            h_fd.set_column(k, &((gp - gm) / (2.0 * h)));
        }
        let g_err = (nalgebra::SVector::<f64, 12>::from(g_fd) - exact.grad).norm()
            / exact.grad.norm().max(1e-300);
        let h_err = (h_fd - exact.hess).norm() / exact.hess.norm().max(1e-300);
        worst_g = worst_g.max(g_err);
        worst_h = worst_h.max(h_err);
        checked[case % 2] += 1;
        // Central differences with h = 1e-7 m on distances ≥ 0.2 d̂ = 4 mm: truncation
        // ~(h/d)² ≈ 1e-9, round-off ~ε·|b|/(h·|∇b|) ≈ 1e-8; 1e-4 and 1e-3 leave room for
        // the nearly parallel edges, whose line–line derivatives carry 1/sin θ.
        assert!(
            g_err < 1e-4,
            "case {case} ({kind:?}): gradient relative error {g_err:.2e}"
        );
        assert!(
            h_err < 1e-3,
            "case {case} ({kind:?}): Hessian relative error {h_err:.2e}"
        );
    }
    eprintln!(
        "checked {} point–triangle and {} edge–edge pairs ({seams} skipped on a seam): worst \
         gradient error {worst_g:.2e}, Hessian {worst_h:.2e}",
        checked[0], checked[1]
    );
    assert!(
        checked[0] > 100 && checked[1] > 100,
        "too few active pairs: {checked:?}"
    );
}

#[test]
fn step_gradient_with_contact_matches_its_energy() {
    // Two cubes 0.6 d̂ apart (every facing pair active): ∇E·u against central differences of E
    // along random directions u, with E including κ·Σ m·b. The right cube is turned by 2 mrad:
    // with exactly parallel facing edges the mollified edge–edge energy is only C¹ (the
    // closest-feature type flips with the sign of the perturbation), and the difference
    // quotient's error is then first order in h (measured: 1.2e-7 at h = 1e-8, 1.3e-5 at 1e-6).
    let mut rng = common::rng("step_gradient_with_contact_matches_its_energy");
    let dhat = 2e-3;
    let gap = 0.6 * dhat;
    let a = box_grid(
        [-0.2 - gap / 2.0, -0.1, -0.1],
        [-gap / 2.0, 0.1, 0.1],
        [2; 3],
    );
    let mut b = box_grid([gap / 2.0, -0.1, -0.1], [0.2 + gap / 2.0, 0.1, 0.1], [2; 3]);
    let turn = nalgebra::Rotation3::from_axis_angle(
        &nalgebra::Unit::new_normalize(Vector3::new(0.0, 1.0, 1.0)),
        2e-3,
    );
    let centre = Vector3::new(0.1 + gap / 2.0, 0.0, 0.0);
    for p in &mut b.positions {
        let q = turn * (Vector3::from(*p) - centre) + centre;
        // Keep the facing side's gap (the turn moves its corners by up to 0.2 mm).
        *p = [q.x + 2.5e-4, q.y, q.z];
    }
    let model = common::bodies_model(vec![a, b])
        .with_contact(dhat, &[true, true], None)
        .unwrap();
    let state = model.initial_state(&vec![[0.0; 3]; model.num_vertices()]);
    let prob = StepProblem::new(&model, &state, 0.01);
    let kappa = prob.init_contact_stiffness(&model);
    assert!(kappa > 0.0);
    let x = prob.x_start.clone();
    let mut g = vec![0.0; x.len()];
    prob.gradient(&model, &x, &mut g);
    let contact_pairs = {
        let ipc = model.contact.as_ref().unwrap();
        ipc.active_pairs(&ipc.positions(&x)).unwrap().len()
    };
    assert!(
        contact_pairs > 0,
        "the cubes' facing sides must be in contact"
    );
    for trial in 0..5 {
        let u: Vec<f64> = (0..x.len()).map(|_| rng.random_range(-1.0..1.0)).collect();
        // Nearly parallel facing edges put C¹ seams (closest-feature type switches) within
        // ~h/θ² of the start, so the difference quotient's error is first order in h there:
        // h = 1e-9 keeps it small while the energy change's round-off stays ~1e-7.
        let h = 1e-9;
        let at = |s: f64| {
            let y: Vec<f64> = x.iter().zip(&u).map(|(a, b)| a + s * b).collect();
            prob.energy_change(&model, &y)
        };
        let fd = (at(h) - at(-h)) / (2.0 * h);
        let exact: f64 = g.iter().zip(&u).map(|(a, b)| a * b).sum();
        let err = (fd - exact).abs() / exact.abs().max(1e-300);
        eprintln!(
            "trial {trial}: ∇E·u = {exact:.6e}, difference quotient {fd:.6e}, error {err:.2e}"
        );
        // Measured ≤ 2.4e-5 over 400 directions (seeds 1–80); a wrong or missing term (κ, a
        // pair kind, the mollifier) is O(1).
        assert!(err < 1e-4, "trial {trial}: relative error {err:.2e}");
    }
}

fn momentum(model: &Model, v: &[f64]) -> Vector3<f64> {
    Vector3::from(model.linear_momentum(v))
}

#[test]
fn cubes_collide_head_on_bounce_and_conserve_momentum() {
    // Two cubes 2 cm apart at ±1 m/s, no gravity: they meet after ~10 ms, push each other back
    // through the barrier alone, and leave with reversed velocities. Contact forces are internal
    // (each pair's gradient sums to zero), so momentum is conserved up to the solver's stop
    // tolerance; every step is intersection-free.
    let model = two_cubes(0.02, 3);
    let dhat = 1e-3;
    let model = model.with_contact(dhat, &[true, true], None).unwrap();
    let nv = model.num_vertices();
    let half = model.bodies[0].vertices.clone();
    let velocity: Vec<[f64; 3]> = (0..nv)
        .map(|v| {
            if half.contains(&v) {
                [1.0, 0.0, 0.0]
            } else {
                [-1.0, 0.0, 0.0]
            }
        })
        .collect();
    let state = model.initial_state(&velocity);
    let p0 = momentum(&model, &state.v);
    let mass: f64 = model.mass.iter().sum();
    let solver = NewtonSolver::new(&model, NewtonParams::default()).unwrap();
    let mut sim = Simulation::new(model.clone(), state, 2e-3, Box::new(solver)).unwrap();
    let mut closest = f64::INFINITY;
    for step in 0..40 {
        let r = sim.step(false).unwrap();
        assert!(r.converged, "step {step} did not converge: {r:?}");
        let d = common::assert_apart(&model, &sim.state.x, &format!("step {step}"));
        closest = closest.min(d);
    }
    let p = momentum(&model, &sim.state.v);
    let drift = (p - p0).norm() / (0.5 * mass * 1.0);
    let vel = |range: std::ops::Range<usize>| {
        let m: f64 = range.clone().map(|v| model.mass[v]).sum();
        range
            .map(|v| model.mass[v] * sim.state.v[3 * v])
            .sum::<f64>()
            / m
    };
    let (va, vb) = (
        vel(model.bodies[0].vertices.clone()),
        vel(model.bodies[1].vertices.clone()),
    );
    eprintln!(
        "closest approach {closest:.3e} m (d̂ {dhat:.0e}), momentum drift {drift:.2e} of one \
         cube's, mean x-velocities after: {va:.3} and {vb:.3} m/s"
    );
    assert!(drift < 1e-3, "momentum drift {drift:.2e}");
    assert!(
        va < -0.3 && vb > 0.3,
        "the cubes must bounce apart: {va}, {vb}"
    );
    assert!(closest < dhat, "the cubes never came within d̂: {closest}");
}

#[test]
fn a_fast_cube_does_not_tunnel_through_a_thin_plate() {
    // A cube at 12 m/s toward a 1 cm plate 5 cm away: one 10 ms step would carry it 12 cm,
    // through the plate. The CCD filter must stop it at the plate: every step intersection-free
    // and the cube's leading face never past the plate's far side.
    let cube = box_grid([-0.15, -0.05, -0.05], [-0.05, 0.05, 0.05], [2, 2, 2]);
    let plate = box_grid([0.0, -0.2, -0.2], [0.01, 0.2, 0.2], [1, 4, 4]);
    let model = common::bodies_model(vec![cube, plate])
        .with_contact(1e-3, &[true, true], None)
        .unwrap();
    let nv = model.num_vertices();
    let cube_v = model.bodies[0].vertices.clone();
    let velocity: Vec<[f64; 3]> = (0..nv)
        .map(|v| {
            if cube_v.contains(&v) {
                [12.0, 0.0, 0.0]
            } else {
                [0.0; 3]
            }
        })
        .collect();
    let solver = NewtonSolver::new(&model, NewtonParams::default()).unwrap();
    let mut sim = Simulation::new(
        model.clone(),
        model.initial_state(&velocity),
        1e-2,
        Box::new(solver),
    )
    .unwrap();
    let mut reached = f64::MIN;
    for step in 0..4 {
        let r = sim.step(false).unwrap();
        assert!(r.converged, "step {step} did not converge: {r:?}");
        common::assert_apart(&model, &sim.state.x, &format!("step {step}"));
        let lead = cube_v
            .clone()
            .map(|v| sim.state.x[3 * v])
            .fold(f64::MIN, f64::max);
        let plate_back = model.bodies[1]
            .vertices
            .clone()
            .map(|v| sim.state.x[3 * v])
            .fold(f64::MIN, f64::max);
        assert!(
            lead < plate_back,
            "step {step}: the cube passed the plate ({lead} m)"
        );
        reached = reached.max(lead);
    }
    // It did hit: its leading face came within 1 mm of the plate's near side (x = 0).
    eprintln!("leading face reached x = {reached:.4e} m");
    assert!(
        reached > -1e-3,
        "the cube never reached the plate: {reached}"
    );
}

#[test]
fn contact_refuses_intersecting_or_touching_bodies() {
    let e = two_cubes(-0.01, 1)
        .with_contact(1e-3, &[true, true], None)
        .unwrap_err()
        .to_string();
    eprintln!("{e}");
    assert!(
        e.contains("`b0`") && e.contains("`b1`") && e.contains("intersect"),
        "{e}"
    );
    assert!(!e.contains('\n'));
    let e = two_cubes(0.0, 1)
        .with_contact(1e-3, &[true, true], None)
        .unwrap_err()
        .to_string();
    eprintln!("{e}");
    assert!(e.contains("`b0`") && e.contains("`b1`"), "{e}");
    for bad in [0.0, -1e-3, f64::NAN] {
        let e = two_cubes(0.05, 1)
            .with_contact(bad, &[true, true], None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("contact.dhat"), "{e}");
    }
    let e = two_cubes(0.05, 1)
        .with_contact(1e-3, &[true, true], Some(-1.0))
        .unwrap_err()
        .to_string();
    assert!(e.contains("contact.ipc_kappa"), "{e}");
}

#[test]
fn lagged_friction_of_a_contact_set_matches_its_energy() {
    // Two cubes in contact (0.6 d̂ apart), friction lagged at rest with μ = 0.5, then moved by
    // random displacements in the sticking (‖u‖ < ε_v h) and sliding regimes: ∇ΣD·w against
    // central differences of ΣD along random w, and the forces sum to zero (momentum).
    let mut rng = common::rng("lagged_friction_of_a_contact_set_matches_its_energy");
    let dhat = 2e-3;
    let model = two_cubes(0.6 * dhat, 2)
        .with_contact(dhat, &[true, true], None)
        .unwrap();
    let ipc = model.contact.clone().unwrap();
    let x0 = flat(&model);
    let eps = 1e-3 * 1e-2; // ε_v = 1 mm/s, h = 10 ms
    let set = jello::contact::friction::FrictionSet::lag(&ipc, &x0, 1e9, |_, _| 0.5, eps).unwrap();
    assert!(!set.pairs.is_empty());
    for (scale, regime) in [(2e-6, "sticking"), (1e-3, "sliding")] {
        for trial in 0..4 {
            let x: Vec<f64> = x0
                .iter()
                .map(|v| v + scale * rng.random_range(-1.0..1.0))
                .collect();
            let mut g = vec![0.0; x.len()];
            set.add_gradient(&x, &x0, &mut g);
            let w: Vec<f64> = (0..x.len()).map(|_| rng.random_range(-1.0..1.0)).collect();
            let at = |s: f64| {
                let y: Vec<f64> = x.iter().zip(&w).map(|(a, b)| a + s * b).collect();
                set.energy(&y, &x0)
            };
            let exact: f64 = g.iter().zip(&w).map(|(a, b)| a * b).sum();
            // Relative to |∇ΣD·w| + ‖∇ΣD‖·rms(w): a w nearly ⟂ ∇ΣD makes the exact slope
            // small against the quotient's round-off. ΣD is C¹ only: f₁′ jumps where a pair's
            // tangential move crosses ε_v h, and a stencil straddling that seam has an O(h)
            // error (seeds 1795748219207206157 and 329: 4e-5 and 9e-4 at h = 1e-3·scale). So
            // the best of three step sizes counts: a gradient error shows at all three, a seam
            // only where the stencil reaches it.
            let gnorm = g.iter().map(|v| v * v).sum::<f64>().sqrt();
            let wrms = (w.iter().map(|v| v * v).sum::<f64>() / w.len() as f64).sqrt();
            let err = [1e-3, 2.5e-4, 6.25e-5]
                .iter()
                .map(|f| {
                    let h = f * scale;
                    let fd = (at(h) - at(-h)) / (2.0 * h);
                    (fd - exact).abs() / (exact.abs() + gnorm * wrms).max(1e-300)
                })
                .fold(f64::INFINITY, f64::min);
            let total: Vector3<f64> = (0..x.len() / 3)
                .map(|v| Vector3::new(g[3 * v], g[3 * v + 1], g[3 * v + 2]))
                .sum();
            let gn = gnorm;
            eprintln!(
                "{regime} {trial}: error {err:.2e}, |Σf|/|f| {:.1e}",
                total.norm() / gn
            );
            // Measured ≤ 3.6e-6 over seeds 1–400 (3,200 directions, both regimes).
            assert!(err < 1e-4, "{regime} {trial}: relative error {err:.2e}");
            assert!(
                total.norm() < 1e-12 * gn,
                "{regime}: friction forces do not balance"
            );
        }
    }
}
