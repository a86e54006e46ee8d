//! [`BackendPcg`] — the PCG the multilevel direction runs on a backend's vectors (on a device:
//! `dev_combine`/`dev_dots`, coefficients formed from scalar slots) — on the f64 CPU backend
//! against [`pcg`] on the same operator, preconditioner and start: the same algorithm, so the
//! same iterates. On per-vertex fields of fewer than 4,096 numbers the CPU backend's dot
//! product sums in the same order as `pcg`'s and every update is the same IEEE operation
//! (`x + (−α)·p` is `x − α·p`), so the iterates agree bit for bit; on flat vectors past
//! 4,096 numbers the backend sums per 4,096-number chunk, so they agree to round-off. The
//! device runs of the same loop are compared with `pcg` in `tests/gpu/gpu_multilevel.rs`.

use crate::common;

use jello::solver::backend::{Backend, CpuBackend};
use jello::solver::pcg::{pcg, BackendPcg};
use rand::Rng;

/// A banded symmetric positive-definite matrix of size `n` (diagonally dominant): `y = A x`.
struct Banded {
    diag: Vec<f64>,
    /// `off[k][i]` couples i and i + k + 1.
    off: Vec<Vec<f64>>,
}

impl Banded {
    fn random(n: usize, band: usize, rng: &mut impl Rng) -> Self {
        // S M S with M a banded graph Laplacian (random negative couplings, diagonal = their
        // row sum) plus 1e-3·I — SPD, condition number ~10⁴ — and S a random positive diagonal
        // spanning 1 to 10: the Jacobi preconditioner removes S, and PCG still needs hundreds
        // of iterations.
        let s: Vec<f64> = (0..n).map(|_| rng.random_range(1.0..10.0)).collect();
        let m: Vec<Vec<f64>> = (0..band)
            .map(|k| {
                (0..n - k - 1)
                    .map(|_| -rng.random_range(0.0..1.0))
                    .collect()
            })
            .collect();
        let mut row = vec![1e-3; n];
        for (k, o) in m.iter().enumerate() {
            for (i, &a) in o.iter().enumerate() {
                row[i] += a.abs();
                row[i + k + 1] += a.abs();
            }
        }
        let off = m
            .iter()
            .enumerate()
            .map(|(k, o)| {
                o.iter()
                    .enumerate()
                    .map(|(i, &a)| a * s[i] * s[i + k + 1])
                    .collect()
            })
            .collect();
        let diag = row.iter().zip(&s).map(|(r, s)| r * s * s).collect();
        Banded { diag, off }
    }

    fn apply(&self, x: &[f64], y: &mut [f64]) {
        for (i, yi) in y.iter_mut().enumerate() {
            *yi = self.diag[i] * x[i];
        }
        for (k, o) in self.off.iter().enumerate() {
            for (i, &a) in o.iter().enumerate() {
                let j = i + k + 1;
                y[i] += a * x[j];
                y[j] += a * x[i];
            }
        }
    }
}

fn random(n: usize, rng: &mut impl Rng) -> Vec<f64> {
    (0..n).map(|_| rng.random_range(-1.0..1.0)).collect()
}

/// [`BackendPcg::solve`] on the CPU backend with `a`'s product and its Jacobi preconditioner.
#[allow(clippy::too_many_arguments)]
fn solve_on_cpu_backend(
    be: &mut CpuBackend,
    solver: &BackendPcg<CpuBackend>,
    a: &Banded,
    correction: Option<&mut jello::solver::pcg::HostCorrection>,
    b: jello::solver::backend::CpuVector,
    x: jello::solver::backend::CpuVector,
    warm: bool,
    tolerance: f64,
    max_iterations: usize,
) -> jello::solver::pcg::PcgOutcome {
    let n = a.diag.len();
    solver
        .solve(
            be,
            &mut |be: &mut CpuBackend, v, o| {
                let mut y = vec![0.0; n];
                a.apply(be.values(v), &mut y);
                be.write_vector(o, &y)
            },
            &mut |be: &mut CpuBackend, r, z| {
                let zr: Vec<f64> = be
                    .values(r)
                    .iter()
                    .zip(&a.diag)
                    .map(|(r, d)| r / d)
                    .collect();
                be.write_vector(z, &zr)
            },
            correction,
            b,
            x,
            warm,
            tolerance,
            max_iterations,
        )
        .unwrap()
}

/// Warm-started Jacobi PCG on per-vertex fields, to a tolerance: the same iteration count and
/// bit-identical iterates.
#[test]
fn backend_pcg_on_the_cpu_backend_is_the_f64_pcg() {
    let mut rng = common::rng("backend_pcg_on_the_cpu_backend_is_the_f64_pcg");
    let nv = 600;
    let n = 3 * nv;
    let a = Banded::random(n, 7, &mut rng);
    let b = random(n, &mut rng);
    let start: Vec<f64> = random(n, &mut rng).iter().map(|v| 1e-3 * v).collect();
    let mut x = start.clone();
    let want = pcg(
        &mut |v: &[f64], o: &mut [f64]| a.apply(v, o),
        &|r: &[f64], z: &mut [f64]| {
            for k in 0..r.len() {
                z[k] = r[k] / a.diag[k];
            }
        },
        &b,
        &mut x,
        1e-8,
        5000,
    );
    assert!(
        !want.breakdown && want.relative_residual <= 1e-8,
        "{want:?}"
    );

    let mut be = CpuBackend::new(nv);
    let (bv, xv) = (be.vector("b").unwrap(), be.vector("x").unwrap());
    be.write_vector(bv, &b).unwrap();
    be.write_vector(xv, &start).unwrap();
    let solver = BackendPcg::new(&mut be, None).unwrap();
    let got = solve_on_cpu_backend(&mut be, &solver, &a, None, bv, xv, true, 1e-8, 5000);
    eprintln!("f64 pcg {want:?}; BackendPcg on the CPU backend {got:?}");
    assert_eq!(got, want);
    assert_eq!(be.values(xv), &x[..], "iterates differ");
}

/// Flat vectors of 8,400 numbers (700 handles of 12), from zero, a fixed 60 iterations, with a
/// host correction added to the block preconditioner (as the SMS level's coarse correction):
/// the iterates agree with `pcg`'s (whose preconditioner adds the same correction) to
/// round-off of the chunked dot products.
#[test]
fn backend_pcg_with_a_host_correction_on_flat_vectors() {
    let mut rng = common::rng("backend_pcg_with_a_host_correction_on_flat_vectors");
    let n = 12 * 700;
    let a = Banded::random(n, 12, &mut rng);
    let b = random(n, &mut rng);
    // A positive diagonal correction: P⁻¹ = D⁻¹ + C stays SPD.
    let c: Vec<f64> = a
        .diag
        .iter()
        .map(|d| rng.random_range(0.1..1.0) / d)
        .collect();
    let mut x = vec![0.0; n];
    let want = pcg(
        &mut |v: &[f64], o: &mut [f64]| a.apply(v, o),
        &|r: &[f64], z: &mut [f64]| {
            for k in 0..r.len() {
                z[k] = r[k] / a.diag[k];
                z[k] += c[k] * r[k];
            }
        },
        &b,
        &mut x,
        0.0,
        60,
    );
    assert_eq!(want.iterations, 60, "{want:?}");

    let mut be = CpuBackend::new(1);
    let bv = be.flat_vector("b", n).unwrap();
    let xv = be.flat_vector("x", n).unwrap();
    be.write_vector(bv, &b).unwrap();
    be.write_vector(xv, &vec![f64::NAN; n]).unwrap();
    let solver = BackendPcg::new(&mut be, Some(n)).unwrap();
    let mut calls = 0;
    let mut correction = |r: &[f64]| -> jello::Result<Vec<f64>> {
        calls += 1;
        Ok(r.iter().zip(&c).map(|(r, c)| c * r).collect())
    };
    let got = solve_on_cpu_backend(
        &mut be,
        &solver,
        &a,
        Some(&mut correction),
        bv,
        xv,
        false,
        0.0,
        60,
    );
    assert_eq!(got.iterations, 60, "{got:?}");
    let diff: f64 = be
        .values(xv)
        .iter()
        .zip(&x)
        .map(|(p, q)| (p - q).powi(2))
        .sum::<f64>()
        .sqrt();
    let norm: f64 = x.iter().map(|v| v * v).sum::<f64>().sqrt();
    eprintln!(
        "flat vectors, host correction ({calls} calls): ‖x − x_pcg‖/‖x_pcg‖ = {:.2e}; residual {:.3e} vs {:.3e}",
        diff / norm,
        got.relative_residual,
        want.relative_residual
    );
    assert_eq!(
        calls, 61,
        "the correction runs with every preconditioner application"
    );
    // 60 iterations whose dot products differ in summation order (chunks of 4,096) by ~n·ε
    // relative each; CG's sensitivity to them grows with the iterations, still far from 1e-8.
    assert!(
        diff <= 1e-8 * norm,
        "‖x − x_pcg‖/‖x_pcg‖ = {:.2e}",
        diff / norm
    );
}

/// Vectors of different kinds or lengths are refused, not mixed.
#[test]
fn backend_vectors_of_different_lengths_are_refused() {
    use jello::solver::backend::{Coef, Combine, Dots};
    let mut be = CpuBackend::new(10);
    let field = be.vector("field").unwrap();
    let flat = be.flat_vector("flat", 12).unwrap();
    let s = be.scalar().unwrap();
    assert!(be
        .combine(field, Coef::constant(1.0), flat, Combine::Add, None)
        .is_err());
    let dots = Dots {
        ab: Some(s),
        aa: None,
        bb: None,
    };
    assert!(be.dots(field, flat, dots).is_err());
    assert!(be.write_vector(flat, &[0.0; 30]).is_err());
}
