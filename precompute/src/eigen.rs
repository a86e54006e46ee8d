//! Lowest eigenpairs of `A φ = μ M φ` (A sparse SPD, M diagonal ≥ 0) by shift-invert block
//! Krylov iteration with Rayleigh–Ritz restarts.
//!
//! The operator is `T = A⁻¹ M`, applied with a Cholesky factor of `A`; its largest
//! eigenvalues `1/μ` are the wanted ones. For the stiffness problem `K φ = λ M φ`, pass
//! `A = K + s M` (SPD for `s > 0` even when K has rigid modes) and read `λ = μ − s`
//! ([`EigenPairs::shifted`]). In JGS2, `A = H̄ = K + M/h²` is already factored, so the
//! training poses cost no extra factorisation.
//!
//! Each restart builds the block Krylov space `[X, TX, …, T^d X]` (M-orthonormal, Gram–Schmidt
//! applied twice), projects `A` onto it and keeps the lowest `p` Ritz vectors as the next `X`.
//! Zero-mass DOFs (e.g. pinned ones) carry infinite eigenvalues and never appear.

use nalgebra::{DMatrix, SymmetricEigen};

use crate::cholesky::SparseCholesky;
use crate::rng::SplitMix64;
use crate::sparse::SymSparse;
use crate::{PrecomputeError, Result};

/// Tuning of [`lowest_generalized`].
#[derive(Clone, Debug)]
pub struct EigenOptions {
    /// Extra block columns beyond the `k` wanted (guards against clustered eigenvalues);
    /// default 8.
    pub extra: usize,
    /// Krylov depth per restart (number of `T` applications per block); default 3.
    pub depth: usize,
    /// Converged when `‖Aφ − μMφ‖ ≤ tol · μ ‖Mφ‖` for every wanted pair; default 1e-8.
    pub tol: f64,
    /// Maximum restarts; default 60.
    pub max_restarts: usize,
    /// Seed of the random start block.
    pub seed: u64,
}

impl Default for EigenOptions {
    fn default() -> Self {
        Self {
            extra: 8,
            depth: 3,
            tol: 1e-8,
            max_restarts: 60,
            seed: 0x5eed,
        }
    }
}

/// Result of an eigen solve.
#[derive(Clone, Debug)]
pub struct EigenPairs {
    /// Dimension of the vectors.
    pub n: usize,
    /// Eigenvalues μ of `A φ = μ M φ`, ascending.
    pub values: Vec<f64>,
    /// Eigenvectors, column-major `n × k`, M-orthonormal (`ΦᵀMΦ = I`).
    pub vectors: Vec<f64>,
    /// Relative residuals `‖Aφ − μMφ‖ / (μ‖Mφ‖)` per pair.
    pub residuals: Vec<f64>,
    /// Restarts used.
    pub restarts: usize,
    /// True when every residual reached the tolerance.
    pub converged: bool,
}

impl EigenPairs {
    /// Eigenvalues `λ = μ − s` of `K φ = λ M φ` when `A = K + s M`.
    pub fn shifted(&self, s: f64) -> Vec<f64> {
        self.values.iter().map(|m| m - s).collect()
    }

    /// Eigenvector `j`.
    pub fn vector(&self, j: usize) -> &[f64] {
        &self.vectors[j * self.n..(j + 1) * self.n]
    }
}

/// Lowest `k` eigenpairs of `A φ = μ M φ`; `a_factor` must hold a factorisation of `a`.
pub fn lowest_generalized(
    a: &SymSparse,
    a_factor: &SparseCholesky,
    mass: &[f64],
    k: usize,
    opts: &EigenOptions,
) -> Result<EigenPairs> {
    let n = a.n();
    if a_factor.n() != n || mass.len() != n {
        return Err(PrecomputeError::Invalid(format!(
            "eigen: sizes differ (A {n}, factor {}, mass {})",
            a_factor.n(),
            mass.len()
        )));
    }
    if mass.iter().any(|m| !m.is_finite() || *m < 0.0) {
        return Err(PrecomputeError::Invalid(
            "eigen: mass must be finite and ≥ 0".into(),
        ));
    }
    let n_pos = mass.iter().filter(|m| **m > 0.0).count();
    if k == 0 || k > n_pos {
        return Err(PrecomputeError::Invalid(format!(
            "eigen: asked for {k} pairs but only {n_pos} DOFs carry mass"
        )));
    }
    let p = (k + opts.extra).min(n_pos);
    let depth = opts.depth.max(1);

    // Start block: T applied to random vectors (lands in range(T), zero mass handled).
    let mut rng = SplitMix64::new(opts.seed);
    let mut x: Vec<f64> = (0..n * p)
        .map(|i| if mass[i % n] > 0.0 { rng.normal() } else { 0.0 })
        .collect();
    apply_t(a_factor, mass, &mut x, p)?;
    let mut basis: Vec<f64> = Vec::new();
    let mut xcols = m_orthonormalize_into(&mut basis, &x, n, p, mass, 0);
    if xcols < k {
        return Err(PrecomputeError::Numeric(
            "eigen: start block is rank deficient".into(),
        ));
    }

    let mut restarts = 0;
    loop {
        // Krylov block: basis holds X (xcols columns); extend with T^j X.
        let mut w = basis.clone();
        let mut wcols = xcols;
        for _ in 0..depth {
            apply_t(a_factor, mass, &mut w, wcols)?;
            let have = basis.len() / n;
            let added = m_orthonormalize_into(&mut basis, &w, n, wcols, mass, have);
            if added == 0 {
                break;
            }
            w = basis[have * n..].to_vec();
            wcols = added;
        }
        let m = basis.len() / n;
        // Rayleigh–Ritz: Vᵀ A V (V is M-orthonormal).
        let mut av = vec![0.0; n * m];
        a.mul_block(&basis, &mut av, m);
        let vt_av = gram(&basis, &av, n, m, m, None);
        let mut sym = DMatrix::from_column_slice(m, m, &vt_av);
        sym = (&sym + sym.transpose()) * 0.5;
        let eig = SymmetricEigen::new(sym);
        let mut order: Vec<usize> = (0..m).collect();
        order.sort_by(|&i, &j| eig.eigenvalues[i].total_cmp(&eig.eigenvalues[j]));
        let keep = p.min(m);
        // New X = V Z[:, order[..keep]], and A X = (AV) Z for the residuals.
        let mut z = vec![0.0; m * keep];
        for (c, &o) in order.iter().take(keep).enumerate() {
            for r in 0..m {
                z[c * m + r] = eig.eigenvectors[(r, o)];
            }
        }
        let xnew = matmul(&basis, &z, n, m, keep);
        let axnew = matmul(&av, &z, n, m, keep);
        let values: Vec<f64> = order
            .iter()
            .take(keep)
            .map(|&o| eig.eigenvalues[o])
            .collect();
        let mut residuals = Vec::with_capacity(k);
        for j in 0..k.min(keep) {
            let mu = values[j];
            let (mut rn, mut mn) = (0.0, 0.0);
            for i in 0..n {
                let mx = mass[i] * xnew[j * n + i];
                let r = axnew[j * n + i] - mu * mx;
                rn += r * r;
                mn += mx * mx;
            }
            residuals.push(rn.sqrt() / (mu.abs() * mn.sqrt()).max(f64::MIN_POSITIVE));
        }
        restarts += 1;
        let converged = residuals.len() == k && residuals.iter().all(|r| *r <= opts.tol);
        if converged || restarts >= opts.max_restarts {
            return Ok(EigenPairs {
                n,
                values: values[..k].to_vec(),
                vectors: xnew[..n * k].to_vec(),
                residuals,
                restarts,
                converged,
            });
        }
        basis.clear();
        xcols = m_orthonormalize_into(&mut basis, &xnew, n, keep, mass, 0);
        if xcols < k {
            return Err(PrecomputeError::Numeric(
                "eigen: Ritz block lost rank".into(),
            ));
        }
    }
}

/// Lowest `k` eigenpairs of the SPD matrix `A` (`M = I`).
pub fn lowest_standard(
    a: &SymSparse,
    a_factor: &SparseCholesky,
    k: usize,
    opts: &EigenOptions,
) -> Result<EigenPairs> {
    lowest_generalized(a, a_factor, &vec![1.0; a.n()], k, opts)
}

/// `X ← A⁻¹ M X` for a column-major block.
fn apply_t(f: &SparseCholesky, mass: &[f64], x: &mut [f64], cols: usize) -> Result<()> {
    let n = mass.len();
    for j in 0..cols {
        for i in 0..n {
            x[j * n + i] *= mass[i];
        }
    }
    f.solve_many_in_place(&mut x[..n * cols], cols)
}

/// `Xᵀ diag(w) Y` (`cx × cy`, column-major), or `XᵀY` when `w` is `None`.
fn gram(x: &[f64], y: &[f64], n: usize, cx: usize, cy: usize, w: Option<&[f64]>) -> Vec<f64> {
    let xm = faer::MatRef::from_column_major_slice(x, n, cx);
    let ym = match w {
        None => faer::Mat::from_fn(n, cy, |i, j| y[j * n + i]),
        Some(w) => faer::Mat::from_fn(n, cy, |i, j| w[i] * y[j * n + i]),
    };
    let g = xm.transpose() * &ym;
    let mut out = vec![0.0; cx * cy];
    for j in 0..cy {
        for i in 0..cx {
            out[j * cx + i] = g[(i, j)];
        }
    }
    out
}

/// `X Z` with X `n × m`, Z `m × c` (column-major).
fn matmul(x: &[f64], z: &[f64], n: usize, m: usize, c: usize) -> Vec<f64> {
    let xm = faer::MatRef::from_column_major_slice(x, n, m);
    let zm = faer::MatRef::from_column_major_slice(z, m, c);
    let r = xm * zm;
    let mut out = vec![0.0; n * c];
    for j in 0..c {
        for i in 0..n {
            out[j * n + i] = r[(i, j)];
        }
    }
    out
}

/// M-orthogonalises the `cols` columns of `w` against the first `have` columns of `basis`
/// (twice, classical Gram–Schmidt), then orthonormalises them among themselves and appends
/// the survivors (columns whose norm collapses below 1e-10 of their size are dropped).
/// Returns the number of columns appended.
fn m_orthonormalize_into(
    basis: &mut Vec<f64>,
    w: &[f64],
    n: usize,
    cols: usize,
    mass: &[f64],
    have: usize,
) -> usize {
    let mut w = w[..n * cols].to_vec();
    let norms0: Vec<f64> = (0..cols)
        .map(|j| m_norm(&w[j * n..(j + 1) * n], mass))
        .collect();
    if have > 0 {
        for _ in 0..2 {
            let c = gram(&basis[..have * n], &w, n, have, cols, Some(mass));
            let corr = matmul(&basis[..have * n], &c, n, have, cols);
            for (wi, ci) in w.iter_mut().zip(&corr) {
                *wi -= ci;
            }
        }
    }
    let start = basis.len() / n;
    let mut added = 0;
    for j in 0..cols {
        let mut v = w[j * n..(j + 1) * n].to_vec();
        for _ in 0..2 {
            for q in start..start + added {
                let b = &basis[q * n..(q + 1) * n];
                let d: f64 = (0..n).map(|i| b[i] * mass[i] * v[i]).sum();
                for i in 0..n {
                    v[i] -= d * b[i];
                }
            }
        }
        let nv = m_norm(&v, mass);
        if nv > 1e-10 * norms0[j] && nv > 0.0 {
            for vi in &mut v {
                *vi /= nv;
            }
            basis.extend_from_slice(&v);
            added += 1;
        }
    }
    added
}

fn m_norm(v: &[f64], mass: &[f64]) -> f64 {
    v.iter()
        .zip(mass)
        .map(|(x, m)| m * x * x)
        .sum::<f64>()
        .sqrt()
}
