//! Material and element tests: finite-difference checks of P, ∂P/∂F and element gradients and
//! Hessians, rest-state and rotation invariants, PSD projection, and the parameter mappings.

use crate::common;

use jello::material::*;
use nalgebra::{Matrix3, Rotation3, SMatrix, Vector3};
use rand::Rng;

fn random_f(rng: &mut impl Rng, spread: f64) -> Matrix3<f64> {
    Matrix3::identity() + Matrix3::from_fn(|_, _| rng.random_range(-spread..spread))
}

fn random_rotation(rng: &mut impl Rng) -> Matrix3<f64> {
    let axis = Vector3::new(
        rng.random_range(-1.0..1.0),
        rng.random_range(-1.0..1.0),
        rng.random_range(-1.0..1.0),
    );
    Rotation3::new(axis.normalize() * rng.random_range(0.0..3.0)).into_inner()
}

fn materials() -> Vec<Material> {
    MaterialModel::ALL
        .iter()
        .map(|&m| Material::from_young_poisson(m, 1e5, 0.4).unwrap())
        .collect()
}

/// Relative error ‖a − b‖ / max(‖b‖, floor).
fn rel(a: f64, b: f64, floor: f64) -> f64 {
    (a - b).abs() / b.abs().max(floor)
}

#[test]
fn svd_recomposes_and_is_signed() {
    let mut rng = common::rng("svd_recomposes_and_is_signed");
    for k in 0..2000 {
        let mut f = random_f(&mut rng, 1.5);
        if k % 5 == 0 {
            // Rank-deficient and zero matrices must not break it.
            f.set_column(2, &(f.column(0) * 0.5));
        }
        if k == 7 {
            f = Matrix3::zeros();
        }
        let s = svd3(&f);
        assert!(
            (s.recompose() - f).norm() <= 1e-12 * f.norm().max(1.0),
            "recompose {f}"
        );
        assert!((s.u.determinant() - 1.0).abs() < 1e-12);
        assert!((s.v.determinant() - 1.0).abs() < 1e-12);
        assert!(s.sigma[0] >= s.sigma[1] && s.sigma[1] >= s.sigma[2].abs() - 1e-15);
        if f.determinant().abs() > 1e-9 {
            assert_eq!(
                f.determinant() < 0.0,
                s.sigma[2] < 0.0,
                "sign of σ3 follows det F"
            );
        }
    }
}

/// The Jacobi SVD of the per-vertex solvers ([`svd3_fast`]) against [`svd3`]: same signed
/// singular values to round-off, proper rotations, recomposition — on random, inverted,
/// rank-deficient, repeated-σ and scaled (1e-6, 1e6) matrices.
#[test]
fn fast_svd_matches_svd3() {
    let mut rng = common::rng("fast_svd_matches_svd3");
    for k in 0..4000 {
        let mut f = random_f(&mut rng, 1.5);
        match k % 8 {
            1 => f.set_column(0, &(-f.column(0))), // inverted
            2 => f.set_column(2, &(f.column(0) * 0.5 + f.column(1) * 2.0)), // rank 2
            3 => f = Matrix3::zeros(),
            4 => {
                // Repeated singular values.
                let s = rng.random_range(0.2..2.0);
                f = random_rotation(&mut rng)
                    * Matrix3::from_diagonal(&Vector3::new(s, s, rng.random_range(-2.0..2.0)))
                    * random_rotation(&mut rng);
            }
            5 => f *= 1e-6,
            6 => f *= 1e6,
            7 => f = random_rotation(&mut rng),
            _ => {}
        }
        let (a, b) = (svd3_fast(&f), svd3(&f));
        let scale = f.norm().max(1e-300);
        assert!(
            (a.sigma - b.sigma).norm() <= 1e-13 * scale,
            "case {k}: σ {:?} vs {:?}",
            a.sigma,
            b.sigma
        );
        // Ordered up to round-off (repeated singular values may come out swapped by an ulp).
        let tol = 1e-13 * scale;
        assert!(a.sigma[0] >= a.sigma[1] - tol && a.sigma[1] >= a.sigma[2].abs() - tol);
        assert!(a.sigma[0] >= 0.0 && a.sigma[1] >= 0.0);
        for r in [a.u, a.v] {
            assert!((r.transpose() * r - Matrix3::identity()).norm() < 1e-13);
            assert!((r.determinant() - 1.0).abs() < 1e-13);
        }
        assert!(
            (a.recompose() - f).norm() <= 1e-13 * scale,
            "case {k}: recomposition {:e}",
            (a.recompose() - f).norm() / scale
        );
    }
    // The symmetric Jacobi eigen-solver on its own: A V = V Λ with V a rotation.
    for _ in 0..1000 {
        let m = random_f(&mut rng, 2.0);
        let s = m + m.transpose();
        let (l, v) = symmetric_eigen3(&s);
        assert!((s * v - v * Matrix3::from_diagonal(&l)).norm() <= 1e-13 * s.norm());
        assert!((v.transpose() * v - Matrix3::identity()).norm() < 1e-13);
    }
}

#[test]
fn rest_state_is_stress_free_and_energy_free() {
    for m in materials() {
        let p = pk1(&m, &Matrix3::<f64>::identity());
        assert!(p.norm() < 1e-9 * m.mu, "{:?}: P(I) = {p}", m.model);
        assert!(energy_density(&m, &Matrix3::<f64>::identity()).abs() < 1e-9 * m.mu);
    }
}

#[test]
fn pk1_matches_finite_differences_of_psi() {
    let mut rng = common::rng("pk1_matches_finite_differences_of_psi");
    for m in materials() {
        for _ in 0..50 {
            let f = random_f(&mut rng, 0.4);
            let p = pk1(&m, &f);
            let h = 1e-6;
            let mut fd = Matrix3::zeros();
            for i in 0..3 {
                for j in 0..3 {
                    let mut fp = f;
                    fp[(i, j)] += h;
                    let mut fm = f;
                    fm[(i, j)] -= h;
                    fd[(i, j)] = (energy_density(&m, &fp) - energy_density(&m, &fm)) / (2.0 * h);
                }
            }
            let err = (p - fd).norm() / p.norm().max(m.mu * 1e-3);
            assert!(
                err < 1e-6,
                "{:?}: P vs FD rel err {err:e} at F = {f}",
                m.model
            );
        }
    }
}

#[test]
fn dpdf_matches_finite_differences_of_pk1() {
    let mut rng = common::rng("dpdf_matches_finite_differences_of_pk1");
    for m in materials() {
        for k in 0..50 {
            let mut f = random_f(&mut rng, 0.4);
            if k == 0 {
                // Repeated singular values exercise the limit branch.
                f = Rotation3::new(Vector3::new(0.3, -0.2, 0.5)).into_inner() * 1.1;
            }
            let d = dpdf(&m, &f, false);
            let h = 1e-6;
            let mut fd = SMatrix::<f64, 9, 9>::zeros();
            for col in 0..9 {
                let mut fp = f;
                fp.as_mut_slice()[col] += h;
                let mut fm = f;
                fm.as_mut_slice()[col] -= h;
                let dp = (pk1(&m, &fp) - pk1(&m, &fm)) / (2.0 * h);
                fd.set_column(
                    col,
                    &nalgebra::SVector::<f64, 9>::from_column_slice(dp.as_slice()),
                );
            }
            let err = (d - fd).norm() / d.norm().max(m.mu);
            assert!(
                err < 1e-5,
                "{:?}: dP/dF vs FD rel err {err:e} at F = {f}",
                m.model
            );
            assert!(
                (d - d.transpose()).norm() <= 1e-9 * d.norm(),
                "dP/dF symmetric"
            );
        }
    }
}

#[test]
fn energy_is_rotation_invariant() {
    let mut rng = common::rng("energy_is_rotation_invariant");
    for m in materials() {
        if m.model == MaterialModel::Linear {
            continue; // small-strain elasticity is not rotation invariant, by design
        }
        for _ in 0..50 {
            let f = random_f(&mut rng, 0.4);
            let r = random_rotation(&mut rng);
            let e0 = energy_density(&m, &f);
            let e1 = energy_density(&m, &(r * f));
            assert!(rel(e1, e0, m.mu * 1e-6) < 1e-9, "{:?}", m.model);
            // P is rotation covariant: P(RF) = R P(F).
            let p0 = pk1(&m, &f);
            let p1 = pk1(&m, &(r * f));
            assert!(
                (p1 - r * p0).norm() <= 1e-9 * p0.norm().max(m.mu),
                "{:?}",
                m.model
            );
        }
    }
}

#[test]
fn projection_is_psd_and_identity_on_psd() {
    let mut rng = common::rng("projection_is_psd_and_identity_on_psd");
    for m in materials() {
        for _ in 0..50 {
            // Include strongly compressed and inverted states, where the raw Hessian is indefinite.
            let mut f = random_f(&mut rng, 1.2);
            if m.model == MaterialModel::NeoHookean && f.determinant() <= 0.05 {
                f = Matrix3::identity() * 0.9;
            }
            let raw = dpdf(&m, &f, false);
            let proj = dpdf(&m, &f, true);
            let eig = nalgebra::SymmetricEigen::new(proj);
            let min = eig.eigenvalues.min();
            assert!(
                min >= -1e-8 * proj.norm(),
                "{:?}: projected min eigenvalue {min}",
                m.model
            );
            let raw_min = nalgebra::SymmetricEigen::new(raw).eigenvalues.min();
            if raw_min >= 0.0 {
                assert!(
                    (raw - proj).norm() <= 1e-9 * raw.norm(),
                    "PSD input must be unchanged"
                );
            } else {
                // Projection is the nearest PSD matrix: it only removes the negative part.
                let eig_raw = nalgebra::SymmetricEigen::new(raw);
                let neg: f64 = eig_raw
                    .eigenvalues
                    .iter()
                    .filter(|&&l| l < 0.0)
                    .map(|l| l * l)
                    .sum();
                assert!(((raw - proj).norm_squared() - neg).abs() <= 1e-6 * raw.norm_squared());
            }
        }
    }
}

#[test]
fn small_strain_response_matches_young_and_poisson() {
    // Every model's rest tensor must equal that of linear elasticity with the same E, ν
    // (this checks the documented Lamé mappings, e.g. Smith et al.'s for stable Neo-Hookean).
    let lin = Material::from_young_poisson(MaterialModel::Linear, 2e5, 0.3).unwrap();
    let c_lin = rest_tensor(&lin);
    for model in MaterialModel::ALL {
        if model == MaterialModel::Arap {
            continue; // ARAP has no volumetric term
        }
        let m = Material::from_young_poisson(model, 2e5, 0.3).unwrap();
        let c = rest_tensor(&m);
        // The rest tensor is only defined on symmetric strains for rotation-invariant models:
        // compare the action on symmetric perturbations.
        let mut rng = common::rng("small_strain_response");
        for _ in 0..10 {
            let a = Matrix3::from_fn(|_, _| rng.random_range(-1.0..1.0));
            let e = (a + a.transpose()) * 0.5;
            let v = nalgebra::SVector::<f64, 9>::from_column_slice(e.as_slice());
            let q0 = (v.transpose() * c_lin * v)[0];
            let q1 = (v.transpose() * c * v)[0];
            assert!(rel(q1, q0, 1.0) < 1e-9, "{model:?}: {q1} vs {q0}");
        }
    }
}

#[test]
fn neo_hookean_is_infinite_when_inverted() {
    let m = Material::from_young_poisson(MaterialModel::NeoHookean, 1e5, 0.3).unwrap();
    let f = Matrix3::from_diagonal(&Vector3::new(1.0, 1.0, -0.5));
    assert_eq!(energy_density(&m, &f), f64::INFINITY);
    let m = Material::from_young_poisson(MaterialModel::StableNeoHookean, 1e5, 0.3).unwrap();
    assert!(
        energy_density(&m, &f).is_finite(),
        "stable NH is defined when inverted"
    );
}

#[test]
fn impossible_parameters_are_rejected() {
    for (e, nu) in [
        (0.0, 0.3),
        (-1.0, 0.3),
        (1e5, 0.5),
        (1e5, 0.7),
        (1e5, -1.0),
        (f64::NAN, 0.3),
    ] {
        let err = Material::from_young_poisson(MaterialModel::FixedCorotated, e, nu).unwrap_err();
        assert!(err.to_string().contains("invalid material"), "{err}");
    }
}

fn tet_positions(rng: &mut impl Rng) -> ([[f64; 3]; 4], [Vector3<f64>; 4]) {
    let rest = [
        [0.0, 0.0, 0.0],
        [0.1, 0.0, 0.0],
        [0.0, 0.1, 0.0],
        [0.0, 0.0, 0.1],
    ];
    let x = rest.map(|p| Vector3::from(p) + Vector3::from_fn(|_, _| rng.random_range(-0.02..0.02)));
    (rest, x)
}

#[test]
fn element_gradient_and_hessian_match_finite_differences() {
    let mut rng = common::rng("element_gradient_and_hessian_match_finite_differences");
    for m in materials() {
        for _ in 0..10 {
            let (rest, x) = tet_positions(&mut rng);
            let r = ElementRest::new(&rest).unwrap();
            let st = element_hessian(&m, &r, &x, false);
            let h = 1e-7;
            for dof in 0..12 {
                let (a, i) = (dof / 3, dof % 3);
                let mut xp = x;
                xp[a][i] += h;
                let mut xm = x;
                xm[a][i] -= h;
                let fd = (element_energy(&m, &r, &xp) - element_energy(&m, &r, &xm)) / (2.0 * h);
                let scale = st.gradient.norm().max(m.mu * r.volume * 1e-2);
                assert!(
                    (st.gradient[dof] - fd).abs() / scale < 1e-6,
                    "{:?} grad dof {dof}",
                    m.model
                );
                let gp = element_gradient(&m, &r, &xp).gradient;
                let gm = element_gradient(&m, &r, &xm).gradient;
                let col_fd = (gp - gm) / (2.0 * h);
                let hs = st.hessian.unwrap();
                let err = (hs.column(dof) - col_fd).norm() / hs.norm();
                assert!(err < 1e-6, "{:?} hess col {dof}: {err:e}", m.model);
            }
            // Translation invariance: gradient sums to zero per axis.
            for i in 0..3 {
                let s: f64 = (0..4).map(|a| st.gradient[3 * a + i]).sum();
                assert!(s.abs() < 1e-9 * st.gradient.norm().max(1e-12));
            }
            let proj = element_hessian(&m, &r, &x, true).hessian.unwrap();
            let min = nalgebra::SymmetricEigen::new(proj).eigenvalues.min();
            assert!(
                min >= -1e-8 * proj.norm(),
                "{:?} projected element Hessian PSD",
                m.model
            );
        }
    }
}

/// The per-corner evaluation VBD uses ([`element_corner`]) against the full element: gradient
/// rows and diagonal blocks equal to round-off, for every model and filter, on
/// mildly and strongly deformed (also inverted) tets.
#[test]
fn element_corner_matches_the_full_element_hessian() {
    let mut rng = common::rng("element_corner_matches_the_full_element_hessian");
    for m in materials() {
        for k in 0..50 {
            let (rest, mut x) = tet_positions(&mut rng);
            if k % 2 == 1 {
                for p in x.iter_mut() {
                    *p += Vector3::from_fn(|_, _| rng.random_range(-0.06..0.06));
                }
            }
            let r = ElementRest::new(&rest).unwrap();
            for filter in [None, Some(EigenFilter::Clamp), Some(EigenFilter::Abs)] {
                let full = element_hessian_filtered(&m, &r, &x, filter);
                if !full.gradient.iter().all(|v| v.is_finite()) {
                    continue; // Neo-Hookean on an inverted tet: +∞ energy, no gradient
                }
                let h = full.hessian.unwrap();
                for a in 0..4 {
                    let (row, block) = element_corner(&m, &r, &x, a, filter);
                    let want = full.gradient.fixed_rows::<3>(3 * a);
                    let err = (row - want).norm() / full.gradient.norm().max(1e-300);
                    assert!(err < 1e-12, "{:?} corner {a}: row error {err:e}", m.model);
                    let want = h.fixed_view::<3, 3>(3 * a, 3 * a);
                    let err = (block - want).norm() / h.norm().max(1e-300);
                    assert!(
                        err < 1e-12,
                        "{:?} {filter:?} corner {a}: block error {err:e}",
                        m.model
                    );
                }
            }
        }
    }
}

/// The local corner plain VBD uses ([`element_local_corner`]): for the two stable Neo-Hookeans
/// the closed-form block ([`stress_and_exact_block`], no SVD) equals the unfiltered element
/// Hessian's diagonal block to round-off and is PSD, on mild, strong and inverted tets; every
/// other model falls back to the filtered corner ([`element_corner`]) exactly.
#[test]
fn local_corner_is_the_exact_psd_block_for_the_stable_neo_hookeans() {
    let mut rng = common::rng("local_corner_is_the_exact_psd_block_for_the_stable_neo_hookeans");
    let mut negative_modes_seen = 0;
    for m in materials() {
        let closed = matches!(
            m.model,
            MaterialModel::StableNeoHookean | MaterialModel::StableNeoHookeanVbd
        );
        for k in 0..60 {
            let (rest, mut x) = tet_positions(&mut rng);
            if k % 3 != 0 {
                let spread = if k % 3 == 1 { 0.06 } else { 0.3 };
                for p in x.iter_mut() {
                    *p += Vector3::from_fn(|_, _| rng.random_range(-spread..spread));
                }
            }
            let r = ElementRest::new(&rest).unwrap();
            let exact = element_hessian_filtered(&m, &r, &x, None);
            if !exact.gradient.iter().all(|v| v.is_finite()) {
                continue; // Neo-Hookean on an inverted tet
            }
            let h = exact.hessian.unwrap();
            let f = r.deformation_gradient(&x);
            for a in 0..4 {
                let ga = r.shape_gradients()[a];
                assert_eq!(stress_and_exact_block(&m, &f, &ga).is_some(), closed);
                let (row, block) = element_local_corner(&m, &r, &x, a, Some(EigenFilter::Clamp));
                if !closed {
                    let (row_f, block_f) = element_corner(&m, &r, &x, a, Some(EigenFilter::Clamp));
                    assert_eq!((row, block), (row_f, block_f), "{:?} fallback", m.model);
                    continue;
                }
                let want = exact.gradient.fixed_rows::<3>(3 * a);
                let err = (row - want).norm() / exact.gradient.norm().max(1e-300);
                assert!(err < 1e-12, "{:?} corner {a}: row error {err:e}", m.model);
                let want = h.fixed_view::<3, 3>(3 * a, 3 * a);
                let err = (block - want).norm() / want.norm().max(1e-300);
                assert!(err < 1e-11, "{:?} corner {a}: block error {err:e}", m.model);
                let min = block.symmetric_eigenvalues().min();
                assert!(
                    min >= -1e-12 * block.norm(),
                    "{:?} corner {a}: eigenvalue {min:e}",
                    m.model
                );
                let (_, projected) = element_corner(&m, &r, &x, a, Some(EigenFilter::Clamp));
                if (projected - block).norm() > 1e-8 * block.norm() {
                    negative_modes_seen += 1;
                }
            }
        }
    }
    // Otherwise the equality above would not distinguish the exact block from the projected one.
    assert!(
        negative_modes_seen > 20,
        "only {negative_modes_seen} corners differ"
    );
}

/// The element Hessian's fast route (cyclic-Jacobi SVD and σ-space eigenpairs, one rank-one
/// update per ∂P/∂F mode: [`element_hessian_filtered`]) against the reference route (nalgebra's
/// general SVD and eigen-solver, the 9×9 ∂P/∂F contracted twice: [`element_hessian_reference`]):
/// equal to round-off (relative 1e-10 of the Hessian's norm) for every model and filter, on
/// mild, strong, inverted, flattened (rank-2) and isotropically scaled (repeated σ) tets.
#[test]
fn element_hessian_fast_route_matches_the_reference_route() {
    let mut rng = common::rng("element_hessian_fast_route_matches_the_reference_route");
    for m in materials() {
        for k in 0..60 {
            let (rest, mut x) = tet_positions(&mut rng);
            match k % 5 {
                1 => {
                    for p in x.iter_mut() {
                        *p += Vector3::from_fn(|_, _| rng.random_range(-0.06..0.06));
                    }
                }
                2 => x.swap(1, 2),                   // inverted
                3 => x[3] = x[1] * 0.3 + x[2] * 0.7, // flat: F of rank 2
                4 => {
                    // A rotated, uniformly scaled rest shape: σ₀ = σ₁ = σ₂.
                    let (r, s) = (random_rotation(&mut rng), rng.random_range(0.5..1.5));
                    x = rest.map(|p| r * Vector3::from(p) * s);
                }
                _ => {}
            }
            let r = ElementRest::new(&rest).unwrap();
            let j = r.deformation_gradient(&x).determinant();
            if m.model == MaterialModel::NeoHookean && j < 1e-6 {
                // +∞ energy at J ≤ 0; on the flat tet J is round-off (~1e-18) and log J, 1/σ²
                // are noise in either route.
                continue;
            }
            for filter in [None, Some(EigenFilter::Clamp), Some(EigenFilter::Abs)] {
                let fast = element_hessian_filtered(&m, &r, &x, filter);
                let h = fast.hessian.unwrap();
                let want = element_hessian_reference(&m, &r, &x, filter);
                let err = (h - want).norm() / want.norm().max(1e-300);
                assert!(
                    err < 1e-10,
                    "{:?} {filter:?} case {k}: Hessian error {err:e}",
                    m.model
                );
                assert!((h - h.transpose()).norm() <= 1e-14 * h.norm());
            }
        }
    }
}

/// The same bits, or both NaN (a NaN's sign bit may differ between vector and scalar code).
fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// [`same`] entry by entry.
fn same_all<'a>(
    a: impl IntoIterator<Item = &'a f64>,
    b: impl IntoIterator<Item = &'a f64>,
) -> bool {
    a.into_iter().zip(b).all(|(p, q)| same(*p, *q))
}

/// The lane-batched SVD and element Hessians (Newton's element pass) perform each lane's scalar
/// operations exactly: bit-identical results, whatever the other lanes hold — also a NaN lane,
/// which keeps the batch sweeping to the cap, and lanes that stop sweeps apart.
#[test]
fn lane_batched_svd_and_element_hessians_are_bit_identical() {
    let mut rng = common::rng("lane_batched_svd_and_element_hessians_are_bit_identical");
    let special = |k: usize, rng: &mut rand_chacha::ChaCha8Rng| -> Matrix3<f64> {
        let mut f = random_f(rng, 1.5);
        match k % 9 {
            1 => f.set_column(0, &(-f.column(0))),
            2 => f.set_column(2, &(f.column(0) * 0.5 + f.column(1) * 2.0)),
            3 => f = Matrix3::zeros(),
            4 => {
                let s = rng.random_range(0.2..2.0);
                f = random_rotation(rng)
                    * Matrix3::from_diagonal(&Vector3::new(s, s, rng.random_range(-2.0..2.0)))
                    * random_rotation(rng);
            }
            5 => f = Matrix3::identity() + Matrix3::from_fn(|_, _| rng.random_range(-1e-9..1e-9)),
            6 => f = random_rotation(rng),
            7 => f[(1, 2)] = f64::NAN,
            8 => f = Matrix3::identity(),
            _ => {}
        }
        f
    };
    for k in 0..3000 {
        let f: [Matrix3<f64>; 4] = std::array::from_fn(|l| special(k + 3 * l, &mut rng));
        let lanes = svd3_fast_lanes(&f);
        let c: [Matrix3<f64>; 4] = std::array::from_fn(|l| f[l].tr_mul(&f[l]));
        let eig = symmetric_eigen3_lanes(&c);
        for l in 0..4 {
            let one = svd3_fast(&f[l]);
            assert!(
                same_all(lanes[l].u.iter(), one.u.iter()),
                "case {k} lane {l}: U"
            );
            assert!(
                same_all(lanes[l].v.iter(), one.v.iter()),
                "case {k} lane {l}: V"
            );
            let (sa, sb) = (lanes[l].sigma, one.sigma);
            assert!(
                same_all(sa.iter(), sb.iter()),
                "case {k} lane {l}: σ {sa:?} vs {sb:?}"
            );
            let (d, v) = symmetric_eigen3(&f[l].tr_mul(&f[l]));
            assert!(
                same_all(eig[l].1.iter(), v.iter()),
                "case {k} lane {l}: eigenvectors"
            );
            assert!(
                same_all(eig[l].0.iter(), d.iter()),
                "case {k} lane {l}: eigenvalues {:?} vs {d:?}",
                eig[l].0
            );
        }
    }
    // Whole element Hessians, every material and filter, lanes of mixed materials.
    let ms = materials();
    for k in 0..400 {
        let tets: [(ElementRest<f64>, [Vector3<f64>; 4]); 4] = std::array::from_fn(|_| {
            let (rest, mut x) = tet_positions(&mut rng);
            match rng.random_range(0..4) {
                1 => x.swap(1, 2),
                2 => {
                    for p in x.iter_mut() {
                        *p += Vector3::from_fn(|_, _| rng.random_range(-0.06..0.06));
                    }
                }
                3 => x = rest.map(Vector3::from),
                _ => {}
            }
            (ElementRest::new(&rest).unwrap(), x)
        });
        let mats: [&Material; 4] = std::array::from_fn(|l| &ms[(k + 5 * l) % ms.len()]);
        for filter in [None, Some(EigenFilter::Clamp), Some(EigenFilter::Abs)] {
            let mut got = Vec::new();
            element_hessians_filtered_lanes(
                mats,
                std::array::from_fn(|l| &tets[l].0),
                &std::array::from_fn(|l| tets[l].1),
                filter,
                |l, s| got.push((l, s)),
            );
            assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), [0, 1, 2, 3]);
            let got: Vec<_> = got.into_iter().map(|g| g.1).collect();
            for l in 0..4 {
                let want = element_hessian_filtered(mats[l], &tets[l].0, &tets[l].1, filter);
                let (a, b) = (got[l].hessian.unwrap(), want.hessian.unwrap());
                assert!(
                    same_all(a.iter(), b.iter()),
                    "{:?} {filter:?} case {k} lane {l}: Hessians differ",
                    mats[l].model
                );
                assert!(same(got[l].energy, want.energy));
                assert!(same_all(got[l].gradient.iter(), want.gradient.iter()));
            }
        }
    }
}

/// The gradient passes' lane batch equals `element_gradient` tet by tet, bit for bit: every
/// material alone in a group (the corotated family's SVDs in lock-step, the invariant models'
/// scalar route) and mixed groups, at inverted, perturbed and rest positions.
#[test]
fn lane_batched_element_gradients_are_bit_identical() {
    let mut rng = common::rng("lane_batched_element_gradients_are_bit_identical");
    let ms = materials();
    for k in 0..600 {
        let tets: [(ElementRest<f64>, [Vector3<f64>; 4]); 4] = std::array::from_fn(|_| {
            let (rest, mut x) = tet_positions(&mut rng);
            match rng.random_range(0..4) {
                1 => x.swap(1, 2),
                2 => {
                    for p in x.iter_mut() {
                        *p += Vector3::from_fn(|_, _| rng.random_range(-0.06..0.06));
                    }
                }
                3 => x = rest.map(Vector3::from),
                _ => {}
            }
            (ElementRest::new(&rest).unwrap(), x)
        });
        // Even cases: one material in the whole group; odd cases: mixed.
        let mats: [&Material; 4] =
            std::array::from_fn(|l| &ms[if k % 2 == 0 { k / 2 } else { k + 5 * l } % ms.len()]);
        let mut got = Vec::new();
        element_gradients_lanes(
            mats,
            std::array::from_fn(|l| &tets[l].0),
            &std::array::from_fn(|l| tets[l].1),
            |l, s| got.push((l, s)),
        );
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), [0, 1, 2, 3]);
        for (l, s) in got {
            let want = element_gradient(mats[l], &tets[l].0, &tets[l].1);
            assert!(
                same(s.energy, want.energy),
                "{:?} case {k} lane {l}: energy {} vs {}",
                mats[l].model,
                s.energy,
                want.energy
            );
            assert!(
                same_all(s.gradient.iter(), want.gradient.iter()),
                "{:?} case {k} lane {l}: gradients differ",
                mats[l].model
            );
            assert!(s.hessian.is_none());
        }
    }
}

#[test]
fn f32_twin_agrees_with_f64() {
    let mut rng = common::rng("f32_twin_agrees_with_f64");
    for m in materials() {
        let (rest, x) = tet_positions(&mut rng);
        let r = ElementRest::new(&rest).unwrap();
        let a = element_hessian(&m, &r, &x, true);
        let r32 = r.cast::<f32>();
        let x32 = x.map(|v| v.map(|c| c as f32));
        let b = element_hessian(&m, &r32, &x32, true);
        let gerr = (a.gradient - b.gradient.map(|v| v as f64)).norm() / a.gradient.norm().max(1e-9);
        let ha = a.hessian.unwrap();
        let herr = (ha - b.hessian.unwrap().map(|v| v as f64)).norm() / ha.norm();
        // f32 has ~7 digits; F = I + O(0.2) perturbations keep cancellation mild.
        assert!(
            gerr < 1e-3 && herr < 1e-3,
            "{:?}: grad {gerr:e} hess {herr:e}",
            m.model
        );
    }
}
