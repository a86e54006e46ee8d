//! Non-negative least squares, `min ‖A w − b‖ subject to w ≥ 0` (Lawson–Hanson active set).
//!
//! The problems met in cubature training are tiny (a handful of columns, tens of rows), so
//! the solver works on the normal equations: with the Gram matrix `G = AᵀA` and `c = Aᵀb`
//! precomputed, each passive-set solve is a `p × p` Cholesky. Scoring many candidate columns
//! then only needs `p + 1` new dot products per candidate.

/// Result of an NNLS solve.
#[derive(Clone, Debug)]
pub struct NnlsSolution {
    /// Weights, all ≥ 0.
    pub w: Vec<f64>,
    /// Residual norm ‖A w − b‖ computed from the data.
    pub residual: f64,
}

/// Solves NNLS for a dense column-major `m × p` matrix `a` and `b` (length `m`).
pub fn nnls(a: &[f64], m: usize, p: usize, b: &[f64]) -> NnlsSolution {
    assert_eq!(a.len(), m * p, "nnls: matrix size");
    assert_eq!(b.len(), m, "nnls: rhs size");
    let mut g = vec![0.0; p * p];
    let mut c = vec![0.0; p];
    for i in 0..p {
        let ai = &a[i * m..(i + 1) * m];
        c[i] = dot(ai, b);
        for j in 0..=i {
            let v = dot(ai, &a[j * m..(j + 1) * m]);
            g[i * p + j] = v;
            g[j * p + i] = v;
        }
    }
    let w = nnls_gram(&g, &c, p);
    let mut r = b.to_vec();
    for (j, &wj) in w.iter().enumerate() {
        if wj != 0.0 {
            for (ri, &aij) in r.iter_mut().zip(&a[j * m..(j + 1) * m]) {
                *ri -= wj * aij;
            }
        }
    }
    NnlsSolution {
        w,
        residual: dot(&r, &r).sqrt(),
    }
}

/// Lawson–Hanson on the normal equations: `G = AᵀA` (row-major `p × p`), `c = Aᵀb`.
/// Returns `w ≥ 0` minimising `wᵀGw − 2cᵀw`.
pub fn nnls_gram(g: &[f64], c: &[f64], p: usize) -> Vec<f64> {
    let mut w = vec![0.0; p];
    let mut passive = vec![false; p];
    let scale = (0..p)
        .map(|i| g[i * p + i])
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let tol = 1e-13
        * scale.sqrt()
        * c.iter()
            .fold(0.0f64, |m, x| m.max(x.abs()))
            .max(f64::MIN_POSITIVE)
            .sqrt();
    let max_outer = 3 * p + 10;
    for _ in 0..max_outer {
        // gradient of ½‖Aw−b‖²: negative "dual" d = c − G w
        let d: Vec<f64> = (0..p)
            .map(|i| c[i] - (0..p).map(|j| g[i * p + j] * w[j]).sum::<f64>())
            .collect();
        let mut best = None;
        let mut best_d = tol;
        for i in 0..p {
            if !passive[i] && d[i] > best_d {
                best_d = d[i];
                best = Some(i);
            }
        }
        let Some(t) = best else { break };
        passive[t] = true;
        // inner loop: keep the passive-set LS solution feasible
        let mut guard = 0;
        loop {
            guard += 1;
            let z = solve_passive(g, c, p, &passive);
            let Some(z) = z else {
                // singular passive set: drop the newest column and stop growing
                passive[t] = false;
                return w;
            };
            if (0..p).all(|i| !passive[i] || z[i] > 0.0) {
                w = z;
                break;
            }
            // step towards z until a weight hits zero
            let mut alpha = f64::INFINITY;
            for i in 0..p {
                if passive[i] && z[i] <= 0.0 {
                    let a = w[i] / (w[i] - z[i]);
                    if a < alpha {
                        alpha = a;
                    }
                }
            }
            for i in 0..p {
                w[i] += alpha * (z[i] - w[i]);
                if passive[i] && w[i] <= 1e-15 * scale {
                    w[i] = 0.0;
                    passive[i] = false;
                }
            }
            if guard > p + 2 {
                break;
            }
        }
    }
    for x in &mut w {
        if *x < 0.0 {
            *x = 0.0;
        }
    }
    w
}

/// Unconstrained LS on the passive set via Cholesky of `G_PP`; `None` when singular.
fn solve_passive(g: &[f64], c: &[f64], p: usize, passive: &[bool]) -> Option<Vec<f64>> {
    let idx: Vec<usize> = (0..p).filter(|&i| passive[i]).collect();
    let k = idx.len();
    let mut l = vec![0.0; k * k];
    for i in 0..k {
        for j in 0..=i {
            let mut s = g[idx[i] * p + idx[j]];
            for q in 0..j {
                s -= l[i * k + q] * l[j * k + q];
            }
            if i == j {
                let d = g[idx[i] * p + idx[i]];
                if s <= 1e-12 * d || s <= 0.0 {
                    return None;
                }
                l[i * k + i] = s.sqrt();
            } else {
                l[i * k + j] = s / l[j * k + j];
            }
        }
    }
    let mut y: Vec<f64> = idx.iter().map(|&i| c[i]).collect();
    for i in 0..k {
        for q in 0..i {
            y[i] -= l[i * k + q] * y[q];
        }
        y[i] /= l[i * k + i];
    }
    for i in (0..k).rev() {
        for q in i + 1..k {
            y[i] -= l[q * k + i] * y[q];
        }
        y[i] /= l[i * k + i];
    }
    let mut z = vec![0.0; p];
    for (q, &i) in idx.iter().enumerate() {
        z[i] = y[q];
    }
    Some(z)
}

pub(crate) fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
