//! IPC pair geometry (`jello::contact`): every distance type's value against an independent
//! minimum over all feature pairs (tests/contact_common), analytic gradients and Hessians
//! against central differences on random and degenerate configurations (parallel and nearly
//! parallel edges, points over a triangle's edge or corner, points in the face's plane),
//! continuity of the classified distance across type boundaries, and the mollifier and barrier
//! derivatives (with the adaptive-stiffness rules).

use crate::common;
use crate::contact_common;

use contact_common::{ee_distance_sq, pt_distance_sq, rand_perp, rand_point, rand_unit, V3};
use jello::contact::barrier::{
    barrier, initial_stiffness, pair_barrier, raise_stiffness, stiffness_bounds, StiffnessBounds,
    KAPPA_RAISE_GAP,
};
use jello::contact::distance::{
    edge_edge, edge_edge_distance, edge_edge_type, line_line, point_edge, point_edge_type,
    point_line, point_plane, point_point, point_triangle, point_triangle_distance,
    point_triangle_type, EdgeEdgeType, PointEdgeType, SecondOrder,
};
use jello::contact::mollifier::{
    edge_cross_squared, edge_edge_mollifier, mollified, mollifier, mollifier_threshold,
};
use jello::problem::TriangleFeature;
use nalgebra::{SMatrix, SVector};
use rand::Rng;
use std::collections::HashMap;

type X12 = SVector<f64, 12>;

fn stack<const N: usize>(v: &[V3]) -> SVector<f64, N> {
    SVector::from_iterator(v.iter().flat_map(|p| p.iter().copied()))
}

fn vertex<const N: usize>(x: &SVector<f64, N>, k: usize) -> V3 {
    V3::new(x[3 * k], x[3 * k + 1], x[3 * k + 2])
}

fn four(x: &X12) -> [V3; 4] {
    [0, 1, 2, 3].map(|k| vertex(x, k))
}

/// Largest distance between two vertices of the stencil (the configuration's length scale).
fn size<const N: usize>(x: &SVector<f64, N>) -> f64 {
    let n = N / 3;
    let mut s = 0.0f64;
    for i in 0..n {
        for j in 0..n {
            s = s.max((vertex(x, i) - vertex(x, j)).norm());
        }
    }
    s
}

/// Relative errors (gradient, Hessian) of `f`'s analytic derivatives against central differences
/// with step `h`: the gradient against differences of the value, the Hessian against differences
/// of the analytic gradient. The gradient's error is relative to ‖∇f‖ + ‖∇²f‖·size (the natural
/// gradient scale, also where ∇f vanishes), the Hessian's to ‖∇²f‖.
fn fd_errors<const N: usize>(
    f: impl Fn(&SVector<f64, N>) -> SecondOrder<N>,
    x: &SVector<f64, N>,
    h: f64,
) -> (f64, f64) {
    let at = f(x);
    let mut g_fd = SVector::<f64, N>::zeros();
    let mut h_fd = SMatrix::<f64, N, N>::zeros();
    for i in 0..N {
        let (mut xp, mut xm) = (*x, *x);
        xp[i] += h;
        xm[i] -= h;
        let (fp, fm) = (f(&xp), f(&xm));
        g_fd[i] = (fp.value - fm.value) / (2.0 * h);
        h_fd.set_column(i, &((fp.grad - fm.grad) / (2.0 * h)));
    }
    let hn = at.hess.norm();
    let eg = (at.grad - g_fd).norm() / (at.grad.norm() + hn * size(x)).max(1e-300);
    let eh = (at.hess - h_fd).norm() / hn.max(1e-300);
    assert!(
        (at.hess - at.hess.transpose()).norm() <= 1e-12 * hn,
        "Hessian not symmetric"
    );
    (eg, eh)
}

/// Tracks the largest FD errors of a family for the report.
#[derive(Default)]
struct Worst(HashMap<&'static str, (f64, f64)>);

impl Worst {
    fn check(&mut self, what: &'static str, (eg, eh): (f64, f64), tol: f64, ctx: &str) {
        assert!(
            eg <= tol && eh <= tol,
            "{what}: gradient error {eg:.2e}, Hessian error {eh:.2e} > {tol:.0e} at {ctx}"
        );
        let e = self.0.entry(what).or_default();
        e.0 = e.0.max(eg);
        e.1 = e.1.max(eh);
    }

    fn report(&self, test: &str) {
        let mut rows: Vec<_> = self.0.iter().collect();
        rows.sort_by_key(|r| *r.0);
        for (what, (eg, eh)) in rows {
            println!("{test}: {what:<28} max FD error: gradient {eg:.1e}, Hessian {eh:.1e}");
        }
    }
}

/// A random configuration of 4 vertices at a random scale 10^[-3, 1] (m).
fn random_config(rng: &mut impl Rng) -> X12 {
    let scale = 10f64.powf(rng.random_range(-3.0..1.0));
    let offset = rand_point(rng, 10.0 * scale);
    stack(&[0, 1, 2, 3].map(|_| offset + rand_point(rng, scale)))
}

#[test]
fn primitive_distance_derivatives_match_finite_differences() {
    let mut rng = common::rng("primitive_distance_derivatives_match_finite_differences");
    let mut worst = Worst::default();
    for _ in 0..300 {
        let x = random_config(&mut rng);
        let v = four(&x);
        let h = 1e-6 * size(&x);
        let ctx = format!("{v:?}");
        // Values against their own definitions (projections, not the cross-product forms).
        let d = point_plane(&v[0], &v[1], &v[2], &v[3]).value;
        let n = (v[2] - v[1]).cross(&(v[3] - v[1])).normalize();
        let expect = (v[0] - v[1]).dot(&n).powi(2);
        assert!(
            (d - expect).abs() <= 1e-10 * size(&x).powi(2),
            "point–plane value"
        );
        // Each on the 12-coordinate stencil (unused vertices get zero derivatives).
        type Primitive = fn(&[V3; 4]) -> SecondOrder<12>;
        let primitives: [(&'static str, Primitive); 4] = [
            ("point–point", |v| {
                point_point(&v[0], &v[1]).scatter(&[0, 1])
            }),
            ("point–line", |v| {
                point_line(&v[0], &v[1], &v[2]).scatter(&[0, 1, 2])
            }),
            ("point–plane", |v| point_plane(&v[0], &v[1], &v[2], &v[3])),
            ("line–line", |v| line_line(&v[0], &v[1], &v[2], &v[3])),
        ];
        for (what, f) in primitives {
            worst.check(what, fd_errors(|y| f(&four(y)), &x, h), 1e-6, &ctx);
        }
    }
    worst.report("primitives");
}

/// A point around triangle (v1, v2, v3) (within twice its size, any side) so that every closest
/// feature occurs; the triangle random.
fn random_point_triangle(rng: &mut impl Rng) -> X12 {
    let mut x = random_config(rng);
    let v = four(&x);
    let c = (v[1] + v[2] + v[3]) / 3.0;
    let s = size(&x);
    let p = c + rand_point(rng, 1.5 * s) * if rng.random_bool(0.3) { 0.1 } else { 1.0 };
    x.fixed_rows_mut::<3>(0).copy_from(&p);
    x
}

fn pt_auto(x: &X12) -> (TriangleFeature, f64) {
    let v = four(x);
    let ty = point_triangle_type(&v[0], &v[1], &v[2], &v[3]);
    (ty, point_triangle_distance(&v[0], &v[1], &v[2], &v[3], ty))
}

fn ee_auto(x: &X12) -> (EdgeEdgeType, f64) {
    let v = four(x);
    let ty = edge_edge_type(&v[0], &v[1], &v[2], &v[3]);
    (ty, edge_edge_distance(&v[0], &v[1], &v[2], &v[3], ty))
}

fn pt_ref(x: &X12) -> f64 {
    let v = four(x);
    pt_distance_sq(&v[0], &v[1], &v[2], &v[3])
}

fn ee_ref(x: &X12) -> f64 {
    let v = four(x);
    ee_distance_sq(&v[0], &v[1], &v[2], &v[3])
}

/// Checks a classified distance: its value against the reference, its derivatives against
/// central differences of the classified (auto-typed) distance wherever the type does not change
/// within the difference stencil. Returns whether the derivatives were checked.
#[allow(clippy::too_many_arguments)]
fn check_classified<T: Copy + PartialEq + std::fmt::Debug>(
    x: &X12,
    auto: impl Fn(&X12) -> (T, f64),
    reference: impl Fn(&X12) -> f64,
    derivs: impl Fn(&X12, T) -> SecondOrder<12>,
    what: &'static str,
    value_tol: f64,
    worst: &mut Worst,
) -> (T, bool) {
    let (ty, d) = auto(x);
    let r = reference(x);
    let s2 = size(x).powi(2);
    assert!(
        (d - r).abs() <= value_tol * s2 + 1e-10 * r,
        "{what}: type {ty:?} gives {d:e}, reference {r:e}, at {:?}",
        four(x)
    );
    let h = 1e-6 * size(x);
    let stable = (0..12).all(|i| {
        [h, -h].iter().all(|&dh| {
            let mut y = *x;
            y[i] += dh;
            auto(&y).0 == ty
        })
    });
    if stable {
        let e = fd_errors(
            |y| {
                let (t, value) = auto(y);
                let out = derivs(y, t);
                assert_eq!(out.value, value);
                out
            },
            x,
            h,
        );
        worst.check(what, e, 1e-6, &format!("{ty:?} {:?}", four(x)));
    }
    (ty, stable)
}

fn pt_derivs(x: &X12, ty: TriangleFeature) -> SecondOrder<12> {
    let v = four(x);
    point_triangle(&v[0], &v[1], &v[2], &v[3], ty)
}

fn ee_derivs(x: &X12, ty: EdgeEdgeType) -> SecondOrder<12> {
    let v = four(x);
    edge_edge(&v[0], &v[1], &v[2], &v[3], ty)
}

/// Counts a case of type `ty` (and whether its derivatives were checked).
fn tally(types: &mut HashMap<String, (usize, usize)>, ty: String, checked: bool) {
    let e = types.entry(ty).or_default();
    e.0 += 1;
    e.1 += checked as usize;
}

#[test]
fn classified_distances_match_the_feature_minimum_and_differences() {
    let mut rng = common::rng("classified_distances_match_the_feature_minimum_and_differences");
    let mut worst = Worst::default();
    let mut pt_types: HashMap<String, (usize, usize)> = HashMap::new();
    let mut ee_types: HashMap<String, (usize, usize)> = HashMap::new();
    for _ in 0..3000 {
        let x = random_point_triangle(&mut rng);
        let (ty, checked) =
            check_classified(&x, pt_auto, pt_ref, pt_derivs, "PT", 1e-13, &mut worst);
        tally(&mut pt_types, format!("{ty:?}"), checked);
        // Edges: a random pair, and a pair meeting near each other's ends.
        let mut x = random_config(&mut rng);
        if rng.random_bool(0.5) {
            let v = four(&x);
            let shift = v[rng.random_range(0..2)] - v[2 + rng.random_range(0..2)];
            let jitter = rand_point(&mut rng, 0.2 * size(&x));
            for k in 2..4 {
                let p = vertex(&x, k) + shift + jitter;
                x.fixed_rows_mut::<3>(3 * k).copy_from(&p);
            }
        }
        let (ty, checked) =
            check_classified(&x, ee_auto, ee_ref, ee_derivs, "EE", 1e-13, &mut worst);
        tally(&mut ee_types, format!("{ty:?}"), checked);
    }
    for (family, types, expected) in [("PT", &pt_types, 7), ("EE", &ee_types, 9)] {
        let mut rows: Vec<_> = types.iter().collect();
        rows.sort();
        for (ty, (n, checked)) in &rows {
            println!("{family} {ty:<18} {n:>5} cases, {checked:>5} with derivatives checked");
            assert!(*checked >= 5, "{family} type {ty} hardly exercised");
        }
        assert_eq!(rows.len(), expected, "{family}: not every type occurred");
    }
    worst.report("classified");
}

/// v rotated by `angle` about a random axis perpendicular to it.
fn rotated(rng: &mut impl Rng, v: &V3, angle: f64) -> V3 {
    let axis = rand_perp(rng, &v.normalize());
    nalgebra::Rotation3::from_axis_angle(&nalgebra::Unit::new_normalize(axis), angle) * v
}

#[test]
fn parallel_and_nearly_parallel_edges() {
    let mut rng = common::rng("parallel_and_nearly_parallel_edges");
    let mut worst = Worst::default();
    for _ in 0..400 {
        let a0 = rand_point(&mut rng, 1.0);
        let u = rand_unit(&mut rng) * rng.random_range(0.2..2.0);
        let perp = rand_perp(&mut rng, &u.normalize()) * 10f64.powf(rng.random_range(-4.0..0.0));
        let b0 = a0 + perp + u * rng.random_range(-2.0..2.0);
        // Exactly parallel (up to the rounding of a scaled copy), same or opposite direction.
        let v = u * rng.random_range(-1.5..1.5);
        let x = stack(&[a0, a0 + u, b0, b0 + v]);
        let (ty, d) = ee_auto(&x);
        assert!(
            ty != EdgeEdgeType::Interiors,
            "parallel edges took line–line"
        );
        let r = ee_ref(&x);
        assert!(
            (d - r).abs() <= 1e-13 * size(&x).powi(2) + 1e-10 * r,
            "parallel: {ty:?} {d:e} vs {r:e}"
        );
        // The type's own function is smooth: its derivatives at the parallel configuration.
        let h = 1e-6 * size(&x);
        worst.check(
            "parallel (fixed type)",
            fd_errors(|y| ee_derivs(y, ty), &x, h),
            1e-6,
            &format!("{ty:?}"),
        );
        // Nearly parallel: line–line applies down to sin²θ = 2.5e-16; its precision degrades as
        // ε/sinθ there, the tolerance with it.
        for angle in [1e-2, 1e-4, 1e-6, 1e-7] {
            let v = rotated(&mut rng, &u, angle) * rng.random_range(0.5..1.5);
            let x = stack(&[a0, a0 + u, b0, b0 + v]);
            let (ty, d) = ee_auto(&x);
            let r = ee_ref(&x);
            let tol = 1e-13 + 1e-15 / angle;
            assert!(
                (d - r).abs() <= tol * size(&x).powi(2) + 1e-10 * r,
                "angle {angle:e}: {ty:?} {d:e} vs {r:e}"
            );
            if angle >= 1e-4 {
                // Third derivatives grow like 1/sin³θ: a step proportional to the angle.
                let h = 1e-4 * angle * size(&x);
                worst.check(
                    "nearly parallel (fixed type)",
                    fd_errors(|y| ee_derivs(y, ty), &x, h),
                    1e-4,
                    &format!("{ty:?} angle {angle:e}"),
                );
            }
        }
    }
    worst.report("parallel");
}

#[test]
fn points_over_edges_corners_and_in_the_plane() {
    let mut rng = common::rng("points_over_edges_corners_and_in_the_plane");
    let mut worst = Worst::default();
    for _ in 0..500 {
        let t = [0, 1, 2].map(|_| rand_point(&mut rng, 1.0));
        let n = (t[1] - t[0]).cross(&(t[2] - t[0])).normalize();
        let k = rng.random_range(0..3);
        let (e0, e1, opposite) = (t[k], t[(k + 1) % 3], t[(k + 2) % 3]);
        let dir = (e1 - e0).normalize();
        // In-plane normal of edge k pointing away from the triangle.
        let mut out = n.cross(&dir);
        if out.dot(&(opposite - e0)) > 0.0 {
            out = -out;
        }
        let height =
            10f64.powf(rng.random_range(-6.0..0.0)) * if rng.random_bool(0.5) { 1.0 } else { -1.0 };
        let tri = |p: V3| stack::<12>(&[p, t[0], t[1], t[2]]);
        let d_of = |x: &X12, ty| {
            let v = four(x);
            point_triangle_distance(&v[0], &v[1], &v[2], &v[3], ty)
        };
        // Directly over edge k (projection on the edge): face and edge formulas agree.
        let q = e0 + (e1 - e0) * rng.random_range(0.05..0.95);
        let x = tri(q + n * height);
        let (df, de) = (
            d_of(&x, TriangleFeature::Face),
            d_of(&x, TriangleFeature::Edge(k)),
        );
        // The point's rounding (≈1e-16 m here) perturbs the distance by that much; the face
        // formula's normal carries a relative rounding that grows as 1/sin of the triangle's
        // angle at t0 (a sliver's normal is a small difference of products), which tilts the
        // plane by that much over the point's ~1 m offset from t0.
        let (a, b) = (t[1] - t[0], t[2] - t[0]);
        let cond = (a.norm() * b.norm() / a.cross(&b).norm()).max(1.0);
        let tol = |d: f64| 1e-12 * d + 1e-14 * cond * d.sqrt();
        assert!(
            (df - de).abs() <= tol(df),
            "over edge {k}: face {df:e} vs edge {de:e} (1/sin at t0: {cond:.1})"
        );
        check_classified(
            &x,
            pt_auto,
            pt_ref,
            pt_derivs,
            "over an edge",
            1e-13,
            &mut worst,
        );
        // Over the corner where edge k starts, on the edge's side: edge and vertex agree.
        let x = tri(e0 + out * rng.random_range(0.0..1.0) + n * height);
        let (de, dv) = (
            d_of(&x, TriangleFeature::Edge(k)),
            d_of(&x, TriangleFeature::Vertex(k)),
        );
        assert!(
            (de - dv).abs() <= tol(dv),
            "over corner {k}: edge {de:e} vs vertex {dv:e}"
        );
        check_classified(
            &x,
            pt_auto,
            pt_ref,
            pt_derivs,
            "over a corner",
            1e-13,
            &mut worst,
        );
        // In the plane: inside (distance ~0, face type, derivatives of the face function at
        // d = 0), and outside beyond edge k.
        let (b1, b2) = (rng.random_range(0.05..0.45), rng.random_range(0.05..0.45));
        let inside = t[0] + (t[1] - t[0]) * b1 + (t[2] - t[0]) * b2;
        let x = tri(inside);
        let (ty, d) = pt_auto(&x);
        assert_eq!(ty, TriangleFeature::Face);
        assert!(d <= 1e-28, "in-plane point inside: distance² {d:e}");
        let h = 1e-6 * size(&x);
        worst.check(
            "in the plane (face)",
            fd_errors(|y| pt_derivs(y, TriangleFeature::Face), &x, h),
            1e-6,
            "in-plane",
        );
        let x = tri(q + out * rng.random_range(1e-3..1.0));
        let (ty, _) = check_classified(
            &x,
            pt_auto,
            pt_ref,
            pt_derivs,
            "in the plane (out)",
            1e-13,
            &mut worst,
        );
        assert!(
            ty != TriangleFeature::Face,
            "in-plane point outside took the face"
        );
    }
    // Point–edge: endpoint and interior types against the clamped projection.
    for _ in 0..500 {
        let v = [0, 1, 2].map(|_| rand_point(&mut rng, 1.0));
        let ty = point_edge_type(&v[0], &v[1], &v[2]);
        let d = point_edge(&v[0], &v[1], &v[2], ty);
        let r = contact_common::point_segment_sq(&v[0], &v[1], &v[2]);
        assert!(
            (d.value - r).abs() <= 1e-13 + 1e-12 * r,
            "point–edge {ty:?}"
        );
        let expect_interior = {
            let s = (v[0] - v[1]).dot(&(v[2] - v[1])) / (v[2] - v[1]).norm_squared();
            s > 0.0 && s < 1.0
        };
        assert_eq!(ty == PointEdgeType::Interior, expect_interior);
        let x9: SVector<f64, 9> = stack(&v);
        worst.check(
            "point–edge",
            fd_errors(
                |y| point_edge(&vertex(y, 0), &vertex(y, 1), &vertex(y, 2), ty),
                &x9,
                1e-6,
            ),
            1e-6,
            "point–edge",
        );
    }
    worst.report("degenerate");
}

/// Walks straight lines through configuration space in small steps; the classified distance
/// must be continuous (1-Lipschitz in the largest vertex step, unsquared) and equal to the
/// reference at every step, including where the type changes.
#[test]
fn classified_distance_is_continuous_across_type_boundaries() {
    let mut rng = common::rng("classified_distance_is_continuous_across_type_boundaries");
    let mut transitions: HashMap<&str, usize> = HashMap::new();
    for walk in 0..60 {
        let pt = walk % 2 == 0;
        let x0 = if pt {
            random_point_triangle(&mut rng)
        } else {
            random_config(&mut rng)
        };
        let s = size(&x0);
        let mut dir = X12::zeros();
        for i in 0..12 {
            dir[i] = rng.random_range(-1.0..1.0) * s * if i < 3 || !pt { 2.0 } else { 0.2 };
        }
        let steps = 2000;
        let mut prev: Option<(String, f64, X12)> = None;
        for k in 0..=steps {
            let x = x0 + dir * (k as f64 / steps as f64 - 0.5);
            let (ty, d, r) = if pt {
                let (ty, d) = pt_auto(&x);
                (format!("{ty:?}"), d, pt_ref(&x))
            } else {
                let (ty, d) = ee_auto(&x);
                (format!("{ty:?}"), d, ee_ref(&x))
            };
            assert!(
                (d - r).abs() <= 1e-12 * s * s + 1e-9 * r,
                "walk {walk} step {k}: {ty} {d:e} vs reference {r:e}"
            );
            if let Some((pty, pd, px)) = &prev {
                let step = (0..4)
                    .map(|v| (vertex(&x, v) - vertex(px, v)).norm())
                    .fold(0.0f64, f64::max);
                let jump = (d.sqrt() - pd.sqrt()).abs();
                assert!(
                    jump <= 2.0 * step * (1.0 + 1e-9) + 1e-12 * s,
                    "walk {walk} step {k}: {pty} → {ty} jumps by {jump:e} (step {step:e})"
                );
                if *pty != ty {
                    *transitions.entry(if pt { "PT" } else { "EE" }).or_default() += 1;
                }
            }
            prev = Some((ty, d, x));
        }
    }
    println!("type transitions crossed: {transitions:?}");
    for family in ["PT", "EE"] {
        assert!(
            transitions.get(family).copied().unwrap_or(0) >= 30,
            "{family}: too few type boundaries crossed to test continuity"
        );
    }
}

#[test]
fn mollifier_derivatives_and_continuity() {
    let mut rng = common::rng("mollifier_derivatives_and_continuity");
    let mut worst = Worst::default();
    // Scalar m(c): derivatives, m(0) = 0, C¹ at ε×.
    for _ in 0..200 {
        let eps = 10f64.powf(rng.random_range(-8.0..0.0));
        let c = rng.random_range(0.0..eps);
        let h = 1e-6 * eps;
        let (m, dm, ddm) = mollifier(c, eps);
        let (mp, dmp, _) = mollifier(c + h, eps);
        let (mm, dmm, _) = mollifier(c - h, eps);
        if c > h && c + h < eps {
            assert!((dm - (mp - mm) / (2.0 * h)).abs() <= 1e-6 * dm.abs().max(1.0 / eps));
            assert!((ddm - (dmp - dmm) / (2.0 * h)).abs() <= 1e-6 * ddm.abs());
        }
        assert!((0.0..=1.0).contains(&m));
    }
    let eps = 0.37;
    assert_eq!(mollifier(0.0, eps).0, 0.0);
    let below = mollifier(eps * (1.0 - 1e-9), eps);
    assert!((below.0 - 1.0).abs() <= 1e-15 && below.1.abs() * eps <= 1e-8);
    assert_eq!(mollifier(eps, eps), (1.0, 0.0, 0.0));
    // c(x) = ‖u × v‖² and the mollifier as functions of the edges.
    for _ in 0..300 {
        let x = random_config(&mut rng);
        let h = 1e-6 * size(&x);
        let f = |y: &X12| {
            let v = four(y);
            edge_cross_squared(&v[0], &v[1], &v[2], &v[3])
        };
        worst.check("‖u × v‖²", fd_errors(f, &x, h), 1e-6, "cross");
        // Nearly parallel edges (sin²θ ≈ 1e-4 .. 1e-3): the mollifier acts.
        let v = four(&x);
        let u = v[1] - v[0];
        let angle = rng.random_range(0.005..0.03);
        let w = rotated(&mut rng, &u, angle) * rng.random_range(0.5..1.5);
        let x = stack::<12>(&[v[0], v[1], v[2], v[2] + w]);
        let eps = mollifier_threshold(u.norm_squared(), w.norm_squared());
        let m = |y: &X12| {
            let v = four(y);
            edge_edge_mollifier(&v[0], &v[1], &v[2], &v[3], eps)
        };
        let c = f(&x).value;
        if c < eps * 0.99 {
            assert!(m(&x).value < 1.0);
            worst.check(
                "mollifier m(c(x))",
                fd_errors(m, &x, 1e-3 * h),
                1e-5,
                "mollifier",
            );
        }
        // Far from parallel: m = 1, no derivatives.
        let x = random_config(&mut rng);
        let v = four(&x);
        let eps = 1e-3 * (v[1] - v[0]).norm_squared() * (v[3] - v[2]).norm_squared();
        let c = (v[1] - v[0]).cross(&(v[3] - v[2])).norm_squared();
        if c >= eps {
            let mo = edge_edge_mollifier(&v[0], &v[1], &v[2], &v[3], eps);
            assert_eq!(mo, SecondOrder::constant(1.0));
        }
    }
    // The mollified barrier m·b for close, nearly parallel edges, against differences of the
    // product of the two values.
    let mut checked = 0;
    for _ in 0..400 {
        let a0 = rand_point(&mut rng, 1.0);
        let u = rand_unit(&mut rng);
        let b0 = a0 + rand_perp(&mut rng, &u) * rng.random_range(0.01..0.05) + u * 0.3;
        let angle = rng.random_range(0.005..0.03);
        let w = rotated(&mut rng, &u, angle);
        let x = stack::<12>(&[a0, a0 + u, b0, b0 + w]);
        let eps = mollifier_threshold(1.0, 1.0);
        let dhat_sq = 0.06f64.powi(2);
        let (ty, d) = ee_auto(&x);
        if d >= dhat_sq {
            continue;
        }
        let f = |y: &X12| {
            let v = four(y);
            let m = edge_edge_mollifier(&v[0], &v[1], &v[2], &v[3], eps);
            let b = pair_barrier(&edge_edge(&v[0], &v[1], &v[2], &v[3], ty), dhat_sq, 3.0);
            mollified(&m, &b)
        };
        let mb = f(&x);
        let v = four(&x);
        let m_only = edge_edge_mollifier(&v[0], &v[1], &v[2], &v[3], eps).value;
        assert!((mb.value - m_only * 3.0 * barrier(d, dhat_sq).0).abs() <= 1e-12 * mb.value.abs());
        // The barrier's curvature varies over the gap √d, so central differences carry a
        // relative truncation error of ~(h/√d)²: h = 1e-7 unless the edges are closer than 1e-4
        // (a random pair 1.3e-5 apart, seed 1795965360639939311, measured 2.4e-5 at h = 1e-7 and
        // 2.5e-7 at 1e-8, falling as h², the analytic Hessian being right).
        let h = 1e-7f64.min(1e-3 * d.sqrt());
        worst.check("mollified barrier m·b", fd_errors(f, &x, h), 1e-5, "m·b");
        checked += 1;
    }
    assert!(
        checked >= 50,
        "too few mollified pairs within d̂ ({checked})"
    );
    worst.report("mollifier");
}

#[test]
fn barrier_derivatives_and_stiffness_rules() {
    let mut rng = common::rng("barrier_derivatives_and_stiffness_rules");
    let mut worst = Worst::default();
    for _ in 0..500 {
        let dhat = 10f64.powf(rng.random_range(-8.0..0.0));
        let d = dhat * 10f64.powf(rng.random_range(-5.0..-1e-3));
        let h = 1e-6 * d;
        let (b, db, ddb) = barrier(d, dhat);
        let (bp, dbp, _) = barrier(d + h, dhat);
        let (bm, dbm, _) = barrier(d - h, dhat);
        let e1 = (db - (bp - bm) / (2.0 * h)).abs() / db.abs();
        let e2 = (ddb - (dbp - dbm) / (2.0 * h)).abs() / ddb.abs();
        assert!(
            e1 <= 1e-6 && e2 <= 1e-6,
            "b′ {e1:e}, b″ {e2:e} at d/d̂ = {}",
            d / dhat
        );
        // Positive, decreasing and convex inside (0, d̂).
        assert!(
            b > 0.0 && db < 0.0 && ddb > 0.0,
            "shape at d/d̂ = {}",
            d / dhat
        );
    }
    // C² at d̂, zero beyond, unbounded at 0.
    let dhat = 2e-6;
    let (b, db, ddb) = barrier(dhat * (1.0 - 1e-6), dhat);
    assert!(b <= 1e-17 * dhat * dhat && db.abs() <= 1e-11 * dhat && ddb.abs() <= 1e-5);
    assert_eq!(barrier(dhat, dhat), (0.0, 0.0, 0.0));
    assert_eq!(barrier(2.0 * dhat, dhat), (0.0, 0.0, 0.0));
    assert!(barrier(1e-300, dhat).0 > 10.0 * barrier(1e-12, dhat).0);
    assert_eq!(barrier(0.0, dhat).0, f64::INFINITY);
    // κ·b(d(x)) for a point near a triangle, against differences.
    let mut checked = 0;
    for _ in 0..500 {
        let x = random_point_triangle(&mut rng);
        let (ty, d) = pt_auto(&x);
        let dhat_sq = d * rng.random_range(1.2..4.0);
        let kappa = 10f64.powf(rng.random_range(-2.0..6.0));
        let f = |y: &X12| pair_barrier(&pt_derivs(y, ty), dhat_sq, kappa);
        // The step scales with the smaller of the distance and the triangle's shortest edge:
        // the central differences' truncation error goes as (h/L)² for either length L, and a
        // triangle small beside its distance (seed 1795782070375849654: edges ~0.1 at distance
        // 0.47) put h = 1e-4·√d at a Hessian error of 2.1e-5.
        let v = four(&x);
        let edge = (v[2] - v[1])
            .norm()
            .min((v[3] - v[2]).norm())
            .min((v[1] - v[3]).norm());
        let h = 1e-4 * d.sqrt().min(edge);
        worst.check("κ·b(d(x))", fd_errors(f, &x, h), 1e-5, &format!("{ty:?}"));
        assert_eq!(
            pair_barrier(&pt_derivs(&x, ty), 0.99 * d, kappa),
            SecondOrder::constant(0.0)
        );
        checked += 1;
    }
    assert!(checked > 0);
    worst.report("barrier");

    // Initial κ: the minimiser of ‖∇E + κ∇B‖ inside the bounds, clamped outside them.
    let wide = StiffnessBounds {
        min: 1e-12,
        max: 1e12,
    };
    for _ in 0..200 {
        let n = rng.random_range(3..40);
        let ge: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let gb: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let res = |k: f64| {
            ge.iter()
                .zip(&gb)
                .map(|(e, b)| (e + k * b).powi(2))
                .sum::<f64>()
        };
        let k = initial_stiffness(&ge, &gb, wide);
        if k > wide.min {
            for dk in [1e-3, -1e-3] {
                assert!(
                    res(k) <= res(k * (1.0 + dk)),
                    "κ = {k} does not minimise the residual"
                );
            }
            let tight = StiffnessBounds {
                min: 2.0 * k,
                max: 3.0 * k,
            };
            assert_eq!(initial_stiffness(&ge, &gb, tight), 2.0 * k);
            let tight = StiffnessBounds {
                min: 0.1 * k,
                max: 0.5 * k,
            };
            assert_eq!(initial_stiffness(&ge, &gb, tight), 0.5 * k);
        } else {
            // The balance asks for κ ≤ 0 (the barrier gradient already points with ∇E).
            let dot: f64 = ge.iter().zip(&gb).map(|(e, b)| e * b).sum();
            let bb: f64 = gb.iter().map(|b| b * b).sum();
            assert!(dot >= -1e-12 * bb);
        }
    }
    assert_eq!(initial_stiffness(&[1.0, 2.0], &[0.0, 0.0], wide), wide.min);

    // κ bounds: at a gap of 1e-8·l, κ_min·b gives a normal stiffness ∂²/∂δ² of the order of
    // 1e11 × the inertia (IPC's rule counts only the Gauss–Newton part 4d·b″; the full second
    // derivative is about half of it there).
    for _ in 0..50 {
        let l = 10f64.powf(rng.random_range(-2.0..1.0));
        let dhat = l * 10f64.powf(rng.random_range(-4.0..-2.0));
        let inertia = 10f64.powf(rng.random_range(-3.0..3.0));
        let bounds = stiffness_bounds(inertia, l, dhat * dhat);
        assert!((bounds.max / bounds.min - 100.0).abs() < 1e-9);
        let twice = stiffness_bounds(2.0 * inertia, l, dhat * dhat);
        assert!((twice.min / bounds.min - 2.0).abs() < 1e-12);
        let gap = 1e-8 * l;
        let p = pair_barrier(
            &point_point(&V3::new(gap, 0.0, 0.0), &V3::zeros()),
            dhat * dhat,
            bounds.min,
        );
        let ratio = p.hess[(0, 0)] / (1e11 * inertia);
        assert!(
            (0.3..=1.0).contains(&ratio),
            "normal stiffness / 1e11·inertia = {ratio}"
        );
    }

    // κ raise: only when the smallest distance stays below (raise·l)² (IPC's 1e-9, or another
    // fraction) and keeps shrinking.
    let l = 2.0;
    for raise in [KAPPA_RAISE_GAP, 1e-7] {
        let eps = (raise * l) * (raise * l);
        let r = |k, prev, now| raise_stiffness(k, 100.0, prev, now, l, raise);
        assert_eq!(r(5.0, 0.5 * eps, 0.4 * eps), 10.0);
        assert_eq!(r(80.0, 0.5 * eps, 0.4 * eps), 100.0);
        assert_eq!(r(5.0, 0.4 * eps, 0.5 * eps), 5.0);
        assert_eq!(r(5.0, 2.0 * eps, 0.4 * eps), 5.0);
        assert_eq!(r(5.0, 0.5 * eps, 1.5 * eps), 5.0);
    }
    assert_eq!(KAPPA_RAISE_GAP, 1e-9);
}
