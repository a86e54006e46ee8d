//! NNLS against brute-force enumeration of active sets.
#![allow(clippy::needless_range_loop)]
use jello_precompute::nnls::nnls;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Reference: every subset's unconstrained LS (dense nalgebra), keep feasible, take the best.
fn brute_force(a: &[f64], m: usize, p: usize, b: &[f64]) -> f64 {
    let am = nalgebra::DMatrix::from_column_slice(m, p, a);
    let bv = nalgebra::DVector::from_column_slice(b);
    let mut best = bv.norm();
    for mask in 1u32..(1 << p) {
        let idx: Vec<usize> = (0..p).filter(|i| mask & (1 << i) != 0).collect();
        let sub = nalgebra::DMatrix::from_fn(m, idx.len(), |r, c| am[(r, idx[c])]);
        let Ok(w) = sub.clone().svd(true, true).solve(&bv, 1e-14) else {
            continue;
        };
        if w.iter().all(|x| *x >= -1e-12) {
            best = best.min((&sub * &w - &bv).norm());
        }
    }
    best
}

#[test]
fn nnls_matches_brute_force_and_kkt() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for trial in 0..200 {
        let p = 1 + trial % 6;
        let m = p + 3 + trial % 20;
        let a: Vec<f64> = (0..m * p).map(|_| rng.random_range(-1.0..1.0)).collect();
        let b: Vec<f64> = (0..m).map(|_| rng.random_range(-1.0..1.0)).collect();
        let sol = nnls(&a, m, p, &b);
        assert!(sol.w.iter().all(|w| *w >= 0.0), "negative weight");
        // returned residual equals a recomputation
        let mut r = b.clone();
        for j in 0..p {
            for i in 0..m {
                r[i] -= a[j * m + i] * sol.w[j];
            }
        }
        let rn = r.iter().map(|x| x * x).sum::<f64>().sqrt();
        assert!((rn - sol.residual).abs() < 1e-12 * (1.0 + rn));
        // optimal: matches the enumeration
        let best = brute_force(&a, m, p, &b);
        assert!(
            sol.residual <= best * (1.0 + 1e-9) + 1e-12,
            "trial {trial}: {} vs {best}",
            sol.residual
        );
        // KKT: gradient Aᵀ(Aw − b) ≥ 0, and = 0 where w > 0
        for j in 0..p {
            let gj: f64 = (0..m).map(|i| -a[j * m + i] * r[i]).sum();
            assert!(gj > -1e-9, "dual infeasible");
            if sol.w[j] > 1e-12 {
                assert!(gj.abs() < 1e-9, "complementarity");
            }
        }
    }
}

#[test]
fn nnls_exact_positive_combination_is_recovered() {
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let (m, p) = (30, 5);
    let a: Vec<f64> = (0..m * p).map(|_| rng.random_range(-1.0..1.0)).collect();
    let w_true = [0.5, 0.0, 2.0, 1.25, 0.0];
    let b: Vec<f64> = (0..m)
        .map(|i| (0..p).map(|j| a[j * m + i] * w_true[j]).sum())
        .collect();
    let sol = nnls(&a, m, p, &b);
    for j in 0..p {
        assert!((sol.w[j] - w_true[j]).abs() < 1e-9);
    }
    assert!(sol.residual < 1e-10);
}
