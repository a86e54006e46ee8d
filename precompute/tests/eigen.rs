//! Eigenpairs against dense references.
#![allow(clippy::needless_range_loop)]
mod common;

use std::sync::Arc;

use jello_precompute::cholesky::{Ordering, SparseCholesky};
use jello_precompute::eigen::{lowest_generalized, lowest_standard, EigenOptions};
use jello_precompute::sparse::{tet_dofs, ScatterMap, SymSparse, SymmetricPattern};

fn stiffness(nx: usize, ny: usize, nz: usize) -> (SymSparse, Vec<f64>) {
    let (pos, tets) = common::box_grid(nx, ny, nz, 0.1);
    let pat = Arc::new(SymmetricPattern::from_elements(pos.len(), 3, &tets).unwrap());
    let map = ScatterMap::new(&pat, 12, &tet_dofs(&tets), None).unwrap();
    let (mu, la) = common::lame(1e5, 0.4);
    let mut k = SymSparse::zeros(pat);
    for (e, t) in tets.iter().enumerate() {
        k.scatter_add(&map, e, &common::linear_elastic_ke(&pos, t, mu, la));
    }
    let (_, mv) = common::lumped_mass(&pos, &tets, 1000.0);
    let mass: Vec<f64> = mv.iter().flat_map(|&m| [m; 3]).collect();
    (k, mass)
}

/// Dense generalized eigenvalues of (K, diag(m)) restricted to `keep` DOFs, ascending.
fn dense_generalized(k: &SymSparse, mass: &[f64], keep: &[usize]) -> Vec<f64> {
    let n = k.n();
    let kd = k.to_dense();
    let s = keep.len();
    let m = nalgebra::DMatrix::from_fn(s, s, |i, j| {
        kd[keep[j] * n + keep[i]] / (mass[keep[i]] * mass[keep[j]]).sqrt()
    });
    let mut ev: Vec<f64> = nalgebra::SymmetricEigen::new(m)
        .eigenvalues
        .iter()
        .copied()
        .collect();
    ev.sort_by(f64::total_cmp);
    ev
}

fn check_pairs(a: &SymSparse, mass: &[f64], pairs: &jello_precompute::eigen::EigenPairs, k: usize) {
    let n = a.n();
    for j in 0..k {
        let phi = pairs.vector(j);
        let mut ap = vec![0.0; n];
        a.mul_vec(phi, &mut ap);
        let mu = pairs.values[j];
        let r: f64 = (0..n)
            .map(|i| (ap[i] - mu * mass[i] * phi[i]).powi(2))
            .sum::<f64>()
            .sqrt();
        let s: f64 = (0..n)
            .map(|i| (mu * mass[i] * phi[i]).powi(2))
            .sum::<f64>()
            .sqrt();
        assert!(r / s < 1e-7, "pair {j}: residual {}", r / s);
        for l in 0..k {
            let d: f64 = (0..n).map(|i| phi[i] * mass[i] * pairs.vector(l)[i]).sum();
            let want = if j == l { 1.0 } else { 0.0 };
            assert!((d - want).abs() < 1e-8, "M-orthonormality ({j},{l}) = {d}");
        }
    }
}

#[test]
fn generalized_matches_dense_free_body() {
    let (k, mass) = stiffness(3, 2, 2);
    let n = k.n();
    let s = 1e4; // A = K + sM, like H̄ = K + M/h² with h = 0.01
    let mut a = k.clone();
    a.add_diagonal(&mass.iter().map(|m| s * m).collect::<Vec<_>>());
    let f = SparseCholesky::new(&a, Ordering::default()).unwrap();
    let nk = 12;
    let pairs = lowest_generalized(&a, &f, &mass, nk, &EigenOptions::default()).unwrap();
    assert!(pairs.converged, "residuals {:?}", pairs.residuals);
    let lam = pairs.shifted(s);
    let reference = dense_generalized(&k, &mass, &(0..n).collect::<Vec<_>>());
    for j in 0..nk {
        let scale = reference[nk].abs().max(1.0);
        assert!(
            (lam[j] - reference[j]).abs() < 1e-6 * scale,
            "λ{j}: {} vs {}",
            lam[j],
            reference[j]
        );
    }
    // the first six are rigid modes (λ ≈ 0), the seventh is not
    assert!(lam[5].abs() < 1e-6 * reference[6]);
    assert!(reference[6] > 1.0);
    check_pairs(&a, &mass, &pairs, nk);
}

#[test]
fn generalized_with_zero_mass_pinned_dofs() {
    let (mut k, mut mass) = stiffness(3, 2, 2);
    let n = k.n();
    // pin the four vertices of the x = 0 face with z = 0 or 1 cell... simply: first 4 vertices
    let mut fixed = vec![false; n];
    for d in 0..12 {
        fixed[d] = true;
    }
    let s = 1e4;
    k.set_identity_rows(&fixed);
    let mut a = k.clone();
    let shift: Vec<f64> = (0..n)
        .map(|i| if fixed[i] { 0.0 } else { s * mass[i] })
        .collect();
    a.add_diagonal(&shift);
    for i in 0..n {
        if fixed[i] {
            mass[i] = 0.0;
        }
    }
    let f = SparseCholesky::new(&a, Ordering::Amd).unwrap();
    let nk = 8;
    let pairs = lowest_generalized(&a, &f, &mass, nk, &EigenOptions::default()).unwrap();
    assert!(pairs.converged);
    let free: Vec<usize> = (0..n).filter(|&i| !fixed[i]).collect();
    let reference = dense_generalized(&a, &mass, &free);
    for j in 0..nk {
        assert!(
            (pairs.values[j] - reference[j]).abs() < 1e-8 * reference[j],
            "{} vs {}",
            pairs.values[j],
            reference[j]
        );
        for &i in (0..n).filter(|&i| fixed[i]).collect::<Vec<_>>().iter() {
            assert_eq!(pairs.vector(j)[i], 0.0);
        }
    }
    check_pairs(&a, &mass, &pairs, nk);
}

#[test]
fn standard_matches_dense() {
    let (mut a, _) = stiffness(2, 2, 2);
    let n = a.n();
    a.add_diagonal(&vec![50.0; n]);
    let f = SparseCholesky::new(&a, Ordering::NestedDissection { block: 3 }).unwrap();
    let pairs = lowest_standard(&a, &f, 10, &EigenOptions::default()).unwrap();
    let reference = dense_generalized(&a, &vec![1.0; n], &(0..n).collect::<Vec<_>>());
    for j in 0..10 {
        assert!((pairs.values[j] - reference[j]).abs() < 1e-8 * reference[j]);
    }
    check_pairs(&a, &vec![1.0; n], &pairs, 10);
    // bad requests are errors
    assert!(lowest_standard(&a, &f, 0, &EigenOptions::default()).is_err());
    assert!(lowest_standard(&a, &f, n + 1, &EigenOptions::default()).is_err());
}
