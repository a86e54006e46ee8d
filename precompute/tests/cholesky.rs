//! Sparse Cholesky against dense references.
#![allow(clippy::needless_range_loop)]
mod common;

use std::sync::Arc;

use jello_precompute::cholesky::{Ordering, SparseCholesky};
use jello_precompute::sparse::{tet_dofs, ScatterMap, SymSparse, SymmetricPattern};
use jello_precompute::PrecomputeError;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn build(n: usize, entries: &[(usize, usize, f64)]) -> SymSparse {
    let pat = Arc::new(
        SymmetricPattern::from_entries(n, entries.iter().map(|&(r, c, _)| (r, c))).unwrap(),
    );
    let mut a = SymSparse::zeros(pat.clone());
    for &(r, c, v) in entries {
        let k = pat.find(r, c).unwrap();
        a.values_mut()[k] += v;
    }
    a
}

/// The linear-elastic stiffness (E = 1e5 Pa, ν = 0.4) of a box grid of `nx × ny × nz` cells
/// (0.1 m), and its vertex count: singular (rigid modes) until a diagonal is added.
fn grid_stiffness(nx: usize, ny: usize, nz: usize) -> (SymSparse, usize) {
    let (pos, tets) = common::box_grid(nx, ny, nz, 0.1);
    let nv = pos.len();
    let pat = Arc::new(SymmetricPattern::from_elements(nv, 3, &tets).unwrap());
    let map = ScatterMap::new(&pat, 12, &tet_dofs(&tets), None).unwrap();
    let (mu, la) = common::lame(1e5, 0.4);
    let mut a = SymSparse::zeros(pat);
    for (e, t) in tets.iter().enumerate() {
        a.scatter_add(&map, e, &common::linear_elastic_ke(&pos, t, mu, la));
    }
    (a, nv)
}

fn dense(a: &SymSparse) -> nalgebra::DMatrix<f64> {
    let n = a.n();
    nalgebra::DMatrix::from_column_slice(n, n, &a.to_dense())
}

fn rel_residual(a: &SymSparse, x: &[f64], b: &[f64]) -> f64 {
    let mut ax = vec![0.0; b.len()];
    a.mul_vec(x, &mut ax);
    let num: f64 = ax
        .iter()
        .zip(b)
        .map(|(p, q)| (p - q).powi(2))
        .sum::<f64>()
        .sqrt();
    num / b.iter().map(|v| v * v).sum::<f64>().sqrt()
}

#[test]
fn mul_vec_matches_dense() {
    let entries = common::random_sym_entries(40, 3, 1, true);
    let a = build(40, &entries);
    let d = dense(&a);
    let x: Vec<f64> = (0..40).map(|i| (i as f64 * 0.37).sin()).collect();
    let mut y = vec![0.0; 40];
    a.mul_vec(&x, &mut y);
    let yd = &d * nalgebra::DVector::from_column_slice(&x);
    for i in 0..40 {
        assert!((y[i] - yd[i]).abs() < 1e-12 * (1.0 + yd[i].abs()));
    }
}

#[test]
fn solve_matches_dense_for_all_orderings() {
    for (seed, n) in [(2u64, 60usize), (3, 150), (4, 300)] {
        let entries = common::random_sym_entries(n, 4, seed, true);
        let a = build(n, &entries);
        let d = dense(&a);
        let mut rng = ChaCha8Rng::seed_from_u64(seed + 100);
        let k = 5;
        let b: Vec<f64> = (0..n * k).map(|_| rng.random_range(-1.0..1.0)).collect();
        let xd = d
            .clone()
            .cholesky()
            .expect("reference SPD")
            .solve(&nalgebra::DMatrix::from_column_slice(n, k, &b));
        for ord in [
            Ordering::Amd,
            Ordering::NestedDissection { block: 1 },
            Ordering::Identity,
        ] {
            let f = SparseCholesky::new(&a, ord).unwrap();
            // single RHS
            let mut x1 = b[..n].to_vec();
            f.solve_in_place(&mut x1).unwrap();
            assert!(rel_residual(&a, &x1, &b[..n]) < 1e-10, "{ord:?}");
            // many RHS
            let mut x = b.clone();
            f.solve_many_in_place(&mut x, k).unwrap();
            for j in 0..k {
                assert!(rel_residual(&a, &x[j * n..(j + 1) * n], &b[j * n..(j + 1) * n]) < 1e-10);
                for i in 0..n {
                    assert!((x[j * n + i] - xd[(i, j)]).abs() < 1e-9 * (1.0 + xd[(i, j)].abs()));
                }
            }
            // sequential path gives the same answer
            let mut xs = b.clone();
            f.solve_many_in_place_with(&mut xs, k, faer::Par::Seq)
                .unwrap();
            for (p, q) in xs.iter().zip(&x) {
                assert!((p - q).abs() < 1e-12 * (1.0 + q.abs()));
            }
        }
    }
}

#[test]
fn elasticity_matrix_nested_dissection_by_vertex() {
    let (pos, tets) = common::box_grid(4, 3, 3, 0.1);
    let nv = pos.len();
    let pat = Arc::new(SymmetricPattern::from_elements(nv, 3, &tets).unwrap());
    let map = ScatterMap::new(&pat, 12, &tet_dofs(&tets), None).unwrap();
    let (mu, la) = common::lame(1e5, 0.4);
    let mut a = SymSparse::zeros(pat.clone());
    for (e, t) in tets.iter().enumerate() {
        a.scatter_add(&map, e, &common::linear_elastic_ke(&pos, t, mu, la));
    }
    // stiffness alone is singular (rigid modes): Cholesky must refuse it, not panic.
    // (Round-off may leave tiny positive pivots; a negative shift makes it certainly indefinite.)
    let mut bad = a.clone();
    bad.add_diagonal(&vec![-1.0; 3 * nv]);
    let mut f =
        SparseCholesky::analyze(pat.clone(), Ordering::NestedDissection { block: 3 }).unwrap();
    assert!(matches!(
        f.refactor(&bad),
        Err(PrecomputeError::NotPositiveDefinite { .. })
    ));
    assert!(
        f.solve_in_place(&mut vec![0.0; 3 * nv]).is_err(),
        "failed factor must not be used"
    );
    a.add_diagonal(&vec![1e3; 3 * nv]);
    f.refactor(&a).unwrap();
    let b: Vec<f64> = (0..3 * nv)
        .map(|i| ((i * 7919) % 13) as f64 - 6.0)
        .collect();
    let mut x = b.clone();
    f.solve_in_place(&mut x).unwrap();
    assert!(rel_residual(&a, &x, &b) < 1e-10);
    // the pattern matches the dense assembly exactly
    let mut d = vec![0.0; 9 * nv * nv];
    for t in &tets {
        let ke = common::linear_elastic_ke(&pos, t, mu, la);
        let dofs: Vec<usize> = t
            .iter()
            .flat_map(|&v| (0..3).map(move |c| 3 * v as usize + c))
            .collect();
        for r in 0..12 {
            for c in 0..12 {
                d[dofs[c] * 3 * nv + dofs[r]] += ke[r * 12 + c];
            }
        }
    }
    for i in 0..3 * nv {
        d[i * 3 * nv + i] += 1e3;
    }
    let ad = a.to_dense();
    for (p, q) in ad.iter().zip(&d) {
        assert!((p - q).abs() < 1e-9 * (1.0 + q.abs()));
    }
}

#[test]
fn refactor_reuses_symbolic_and_detects_non_spd() {
    let n = 120;
    let entries = common::random_sym_entries(n, 4, 9, true);
    let a = build(n, &entries);
    let mut f = SparseCholesky::new(&a, Ordering::NestedDissection { block: 1 }).unwrap();
    let nnz_before = f.factor_nnz();
    // new values on the same pattern: scale off-diagonals, bump the diagonal
    let mut a2 = a.clone();
    let pat = a2.pattern().clone();
    for c in 0..n {
        for k in pat.col_ptr()[c]..pat.col_ptr()[c + 1] {
            let r = pat.row_idx()[k];
            a2.values_mut()[k] *= if r == c { 2.0 } else { -0.5 };
        }
    }
    f.refactor(&a2).unwrap();
    assert_eq!(f.factor_nnz(), nnz_before);
    let b: Vec<f64> = (0..n).map(|i| (i as f64).cos()).collect();
    let mut x = b.clone();
    f.solve_in_place(&mut x).unwrap();
    assert!(rel_residual(&a2, &x, &b) < 1e-10);
    // the old matrix's solution is no longer what we get
    let mut x_old = b.clone();
    SparseCholesky::new(&a, Ordering::Amd)
        .unwrap()
        .solve_in_place(&mut x_old)
        .unwrap();
    assert!(x.iter().zip(&x_old).any(|(p, q)| (p - q).abs() > 1e-6));

    let bad = build(n, &common::random_sym_entries(n, 4, 9, false));
    assert!(matches!(
        f.refactor(&bad),
        Err(PrecomputeError::NotPositiveDefinite { .. })
    ));
    assert!(f.solve_in_place(&mut x).is_err());
    // NaN input is an error too
    let mut nan = a.clone();
    nan.values_mut()[0] = f64::NAN;
    assert!(f.refactor(&nan).is_err());
    // a matrix on a different pattern is rejected
    let other = build(n, &common::random_sym_entries(n, 2, 77, true));
    assert!(f.refactor(&other).is_err());
    // wrong RHS size is rejected
    f.refactor(&a).unwrap();
    assert!(f.solve_in_place(&mut vec![0.0; n + 1]).is_err());
}

/// [`SparseCholesky::factor_flops`] on a dense pattern (one supernode) is dense Cholesky's
/// exact count Σ_c c(c+1) = (n−1)n(n+1)/3, and a sparser pattern of the same size costs less.
#[test]
fn factor_flops_of_a_dense_pattern_is_the_dense_count() {
    let n = 300;
    let mut entries = Vec::new();
    for c in 0..n {
        for r in 0..=c {
            let v = if r == c {
                n as f64
            } else {
                1.0 / (1.0 + (r + c) as f64)
            };
            entries.push((r, c, v));
        }
    }
    let a = build(n, &entries);
    let f = SparseCholesky::new(&a, Ordering::Identity).unwrap();
    let nf = n as f64;
    let want = (nf - 1.0) * nf * (nf + 1.0) / 3.0;
    let got = f
        .factor_flops()
        .expect("a dense 300×300 pattern factors supernodally");
    assert_eq!(got, want);
    // A tridiagonal pattern: c = 1 for every column but the last (at least; faer may relax
    // small supernodes into blocks with explicit zeros, whose work the count then includes).
    let tri: Vec<_> = (0..n)
        .flat_map(|c| {
            let mut e = vec![(c, c, 4.0)];
            if c > 0 {
                e.push((c - 1, c, -1.0));
            }
            e
        })
        .collect();
    let t = SparseCholesky::new(&build(n, &tri), Ordering::Identity).unwrap();
    if let Some(flops) = t.factor_flops() {
        assert!(flops >= 2.0 * (nf - 1.0) && flops < want / 10.0, "{flops}");
    }
}

/// The supernodal solve (row-major right-hand sides, zero blocks skipped in the forward pass)
/// gives faer's result to round-off, on sparse right-hand sides (unit columns, as the JGS2 basis solves, and a few random
/// nonzeros) and on dense ones, with and without a permutation.
#[test]
fn sparse_rhs_solve_matches_faer() {
    let seed = 0x5eed_2026u64;
    println!("seed {seed:#x}");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut a, nv) = grid_stiffness(9, 8, 7);
    let n = 3 * nv;
    a.add_diagonal(&vec![1e3; n]);
    for ord in [
        Ordering::NestedDissection { block: 3 },
        Ordering::Amd,
        Ordering::Identity,
    ] {
        let f = SparseCholesky::new(&a, ord).unwrap();
        if ord != Ordering::Identity {
            assert!(
                f.is_supernodal(),
                "{ord:?}: the test needs a supernodal factor"
            );
        }
        let k = 12;
        let mut unit = vec![0.0; n * k];
        for j in 0..k {
            unit[j * n + rng.random_range(0..n)] = 1.0;
        }
        let mut few = vec![0.0; n * k];
        for j in 0..k {
            for _ in 0..5 {
                few[j * n + rng.random_range(0..n)] = rng.random_range(-1.0..1.0);
            }
        }
        let dense: Vec<f64> = (0..n * k).map(|_| rng.random_range(-1.0..1.0)).collect();
        let mut scratch = jello_precompute::cholesky::SolveScratch::default();
        for (name, b) in [("unit", &unit), ("few", &few), ("dense", &dense)] {
            let mut want = b.clone();
            f.solve_many_in_place_reference(&mut want, k, faer::Par::Seq)
                .unwrap();
            let mut got = b.clone();
            f.solve_many_in_place_scratch(&mut got, k, faer::Par::Seq, &mut scratch)
                .unwrap();
            // The row-major operands may round differently from faer's column-major ones
            // (the products' blocking follows the layout), so: equal to round-off.
            let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let diff = want
                .iter()
                .zip(&got)
                .fold(0.0f64, |m, (p, q)| m.max((p - q).abs()));
            println!(
                "{ord:?}, {name}: max difference {:.1e} of {scale:.1e}",
                diff
            );
            assert!(
                diff <= 1e-13 * scale,
                "{ord:?}, {name} right-hand sides: results differ by {diff:e} (scale {scale:e})"
            );
            assert!(rel_residual(&a, &got[..n], &b[..n]) < 1e-10);
        }
    }
}

/// Right-hand sides stored in a caller's row order (`solve_many_in_place_rows`) give the plain
/// solve's result, moved to that order, bit for bit, and `solve_unit_columns_rows` gives that
/// of explicit unit columns: on a supernodal factor and on a simplicial one (a small random
/// matrix).
#[test]
fn solve_in_a_row_order_matches_the_plain_solve() {
    let seed = 0x0dd_0de5u64;
    println!("seed {seed:#x}");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut grid, nv) = grid_stiffness(8, 7, 6);
    grid.add_diagonal(&vec![1e3; 3 * nv]);
    let small = build(120, &common::random_sym_entries(120, 4, 11, true));
    let mut kinds = Vec::new();
    for a in [&grid, &small] {
        let n = a.pattern().n();
        let f = SparseCholesky::new(a, Ordering::NestedDissection { block: 1 }).unwrap();
        kinds.push(f.is_supernodal());
        // A random permutation (Fisher–Yates).
        let mut rows: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            rows.swap(i, rng.random_range(0..=i));
        }
        let k = 5;
        let b: Vec<f64> = (0..n * k).map(|_| rng.random_range(-1.0..1.0)).collect();
        let mut want = b.clone();
        f.solve_many_in_place_with(&mut want, k, faer::Par::Seq)
            .unwrap();
        let mut got = vec![0.0; n * k];
        for j in 0..k {
            for (r, &d) in rows.iter().enumerate() {
                got[j * n + r] = b[j * n + d];
            }
        }
        let mut scratch = jello_precompute::cholesky::SolveScratch::default();
        f.solve_many_in_place_rows(&mut got, k, faer::Par::Seq, &mut scratch, &rows)
            .unwrap();
        for j in 0..k {
            for (r, &d) in rows.iter().enumerate() {
                assert_eq!(
                    got[j * n + r].to_bits(),
                    want[j * n + d].to_bits(),
                    "n = {n}, column {j}, row {r}"
                );
            }
        }
        assert!(f
            .solve_many_in_place_rows(&mut got, k, faer::Par::Seq, &mut scratch, &rows[1..])
            .is_err());
        // Unit columns into an output full of stale values: the solve of the explicit columns.
        let units: Vec<usize> = (0..k).map(|_| rng.random_range(0..n)).collect();
        let mut explicit = vec![0.0; n * k];
        for (j, &u) in units.iter().enumerate() {
            explicit[j * n + u] = 1.0;
        }
        f.solve_many_in_place_rows(&mut explicit, k, faer::Par::Seq, &mut scratch, &rows)
            .unwrap();
        let mut out = vec![f64::NAN; n * k];
        f.solve_unit_columns_rows(&mut out, &units, faer::Par::Seq, &mut scratch, &rows)
            .unwrap();
        for (p, q) in out.iter().zip(&explicit) {
            assert_eq!(p.to_bits(), q.to_bits(), "n = {n}: unit columns");
        }
        assert!(f
            .solve_unit_columns_rows(&mut out, &[n], faer::Par::Seq, &mut scratch, &rows)
            .is_err());
    }
    assert_eq!(
        kinds,
        [true, false],
        "one supernodal and one simplicial factor"
    );
}
