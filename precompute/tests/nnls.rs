//! NNLS against brute-force enumeration of active sets.
#![allow(clippy::needless_range_loop)]
use jello_precompute::nnls::{nnls, nnls_from};
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

/// Wide problems (columns far outnumbering rows, as in cubature training): the column
/// formulation [`nnls`] satisfies KKT and reaches the residual of the normal-equations
/// solver [`nnls_gram`] on the same data, with at most m positive weights.
#[test]
fn wide_nnls_matches_the_normal_equations_solver() {
    use jello_precompute::nnls::nnls_gram;
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    for trial in 0..12 {
        let m = 20 + 5 * trial;
        let p = 10 * m + 37 * trial;
        // Non-negative-ish columns with a positive target, as moment-fitting columns are.
        let a: Vec<f64> = (0..m * p).map(|_| rng.random_range(-0.2..1.0)).collect();
        let b: Vec<f64> = (0..m)
            .map(|_| rng.random_range(0.0..(p as f64 / 4.0)))
            .collect();
        let sol = nnls(&a, m, p, &b);
        let mut g = vec![0.0; p * p];
        let mut c = vec![0.0; p];
        for i in 0..p {
            c[i] = (0..m).map(|k| a[i * m + k] * b[k]).sum();
            for j in 0..p {
                g[i * p + j] = (0..m).map(|k| a[i * m + k] * a[j * m + k]).sum();
            }
        }
        let wg = nnls_gram(&g, &c, p);
        let res = |w: &[f64]| {
            let mut r = b.clone();
            for j in 0..p {
                for i in 0..m {
                    r[i] -= a[j * m + i] * w[j];
                }
            }
            r
        };
        let r = res(&sol.w);
        let rn = r.iter().map(|x| x * x).sum::<f64>().sqrt();
        let rg = res(&wg).iter().map(|x| x * x).sum::<f64>().sqrt();
        let bn = b.iter().map(|x| x * x).sum::<f64>().sqrt();
        eprintln!(
            "m = {m}, p = {p}: residual {rn:.3e} (normal equations {rg:.3e}), {} positive weights",
            sol.w.iter().filter(|w| **w > 0.0).count()
        );
        assert!(sol.w.iter().all(|w| *w >= 0.0));
        assert!(sol.w.iter().filter(|w| **w > 0.0).count() <= m);
        assert!(
            (rn - rg).abs() <= 1e-9 * bn,
            "trial {trial}: {rn:e} vs {rg:e}"
        );
        for j in 0..p {
            let gj: f64 = (0..m).map(|i| -a[j * m + i] * r[i]).sum();
            assert!(
                gj > -1e-8 * bn,
                "trial {trial}: dual infeasible at {j}: {gj:e}"
            );
            if sol.w[j] > 1e-12 {
                assert!(
                    gj.abs() < 1e-8 * bn,
                    "trial {trial}: complementarity at {j}"
                );
            }
        }
    }
}

/// A warm start (the solution on the first columns, as residual-driven sampling appends
/// columns) reaches the cold start's optimum, from a good and from a poor start.
#[test]
fn warm_started_nnls_reaches_the_cold_optimum() {
    let mut rng = ChaCha8Rng::seed_from_u64(10);
    for trial in 0..10 {
        let m = 30 + 7 * trial;
        let p = 8 * m;
        let a: Vec<f64> = (0..m * p).map(|_| rng.random_range(-0.2..1.0)).collect();
        let b: Vec<f64> = (0..m)
            .map(|_| rng.random_range(0.0..(p as f64 / 4.0)))
            .collect();
        let cold = nnls(&a, m, p, &b);
        let half = p / 2;
        let first = nnls(&a[..m * half], m, half, &b);
        let mut start = first.w.clone();
        start.resize(p, 0.0);
        let warm = nnls_from(&a, m, p, &b, &start);
        // A poor start: every column at weight 1.
        let poor = nnls_from(&a, m, p, &b, &vec![1.0; p]);
        let bn = b.iter().map(|x| x * x).sum::<f64>().sqrt();
        for (what, sol) in [("warm", &warm), ("poor", &poor)] {
            assert!(sol.w.iter().all(|w| *w >= 0.0), "{what}");
            assert!(
                (sol.residual - cold.residual).abs() <= 1e-9 * bn,
                "trial {trial} {what}: {} vs {}",
                sol.residual,
                cold.residual
            );
        }
    }
}
