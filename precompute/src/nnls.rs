//! Non-negative least squares, `min ‖A w − b‖ subject to w ≥ 0` (Lawson–Hanson active set).
//!
//! [`nnls`] works over the columns (the dual from the residual, Gram matrices of the passive
//! set only: cheap when the columns far outnumber the rows, as in cubature training);
//! [`nnls_gram`] on precomputed normal equations `G = AᵀA`, `c = Aᵀb`, for callers that
//! already hold them.

/// Result of an NNLS solve.
#[derive(Clone, Debug)]
pub struct NnlsSolution {
    /// Weights, all ≥ 0.
    pub w: Vec<f64>,
    /// Residual norm ‖A w − b‖ computed from the data.
    pub residual: f64,
}

/// Solves NNLS for a dense column-major `m × p` matrix `a` and `b` (length `m`).
///
/// Lawson–Hanson over the columns: the dual `d = Aᵀ(b − Aw)` costs O(m·p) per outer
/// iteration, and the passive set's least squares goes through a Cholesky factor of the
/// passive columns' Gram matrix that grows by one row per added column (O(m·k + k²)). A wide problem — cubature candidate sets of thousands of
/// columns against hundreds of targets — thus never forms the p × p Gram matrix
/// ([`nnls_gram`]: O(m·p²) to set up, O(p²) per iteration) nor refactors per iteration
/// (O(k³)); a column leaving is a rank-one update of the factor.
pub fn nnls(a: &[f64], m: usize, p: usize, b: &[f64]) -> NnlsSolution {
    nnls_from(a, m, p, b, &[])
}

/// [`nnls`] warm-started from `start` (length `p`, or empty for zero): its positive entries
/// form the initial passive set, whose least-squares solution (made feasible as Lawson–Hanson's
/// inner loop does) is the starting point. The answer is the same optimum; a start near it —
/// the previous solution when columns are appended, as residual-driven cubature sampling
/// does — saves most of the outer iterations.
pub fn nnls_from(a: &[f64], m: usize, p: usize, b: &[f64], start: &[f64]) -> NnlsSolution {
    assert_eq!(a.len(), m * p, "nnls: matrix size");
    assert_eq!(b.len(), m, "nnls: rhs size");
    assert!(start.is_empty() || start.len() == p, "nnls: start size");
    let col = |j: usize| &a[j * m..(j + 1) * m];
    let c: Vec<f64> = (0..p).map(|j| dot(col(j), b)).collect();
    // The same scale and tolerance as `nnls_gram` (max diag G = max ‖a_j‖², max |c_j|).
    let scale = (0..p)
        .map(|j| dot(col(j), col(j)))
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let tol = 1e-13
        * scale.sqrt()
        * c.iter()
            .fold(0.0f64, |mx, x| mx.max(x.abs()))
            .max(f64::MIN_POSITIVE)
            .sqrt();
    let mut w = vec![0.0; p];
    let mut passive = vec![false; p];
    let mut chol = PassiveCholesky::default();
    for (j, &s0) in start.iter().enumerate() {
        if s0 > 0.0 && chol.push(j, &col) {
            // Feasible: the inner loop steps from here towards the passive set's solution.
            w[j] = s0;
            passive[j] = true;
        }
    }
    let mut r = b.to_vec();
    let residual = |w: &[f64], r: &mut Vec<f64>| {
        r.copy_from_slice(b);
        for (j, &wj) in w.iter().enumerate() {
            if wj != 0.0 {
                for (ri, &aij) in r.iter_mut().zip(col(j)) {
                    *ri -= wj * aij;
                }
            }
        }
    };
    // Makes `w` the passive set's least-squares solution, stepping back and dropping columns
    // that would turn negative (Lawson–Hanson's inner loop); from w = 0 on a warm start.
    let settle = |w: &mut Vec<f64>, chol: &mut PassiveCholesky, passive: &mut Vec<bool>| {
        for _ in 0..p + 3 {
            let z = chol.solve(&c);
            if z.iter().all(|&(_, v)| v > 0.0) {
                w.iter_mut().for_each(|x| *x = 0.0);
                for (i, v) in z {
                    w[i] = v;
                }
                return;
            }
            let mut alpha = f64::INFINITY;
            for &(i, v) in &z {
                if v <= 0.0 {
                    alpha = alpha.min(w[i] / (w[i] - v));
                }
            }
            let mut drop = Vec::new();
            for &(i, v) in &z {
                w[i] += alpha * (v - w[i]);
                if w[i] <= 1e-15 * scale {
                    w[i] = 0.0;
                    passive[i] = false;
                    drop.push(i);
                }
            }
            chol.remove(&drop);
        }
    };
    if !chol.idx.is_empty() {
        settle(&mut w, &mut chol, &mut passive);
        residual(&w, &mut r);
    }
    for _ in 0..3 * p + 10 {
        let mut best = None;
        let mut best_d = tol;
        for j in 0..p {
            if !passive[j] {
                let d = dot(col(j), &r);
                if d > best_d {
                    best_d = d;
                    best = Some(j);
                }
            }
        }
        let Some(t) = best else { break };
        if !chol.push(t, &col) {
            // Singular passive set: the newest column is dependent; stop growing.
            break;
        }
        passive[t] = true;
        settle(&mut w, &mut chol, &mut passive);
        residual(&w, &mut r);
    }
    for x in &mut w {
        if *x < 0.0 {
            *x = 0.0;
        }
    }
    residual(&w, &mut r);
    NnlsSolution {
        w,
        residual: dot(&r, &r).sqrt(),
    }
}

/// The Cholesky factor L (row i holds L[i][0..=i]) of the Gram matrix of the passive columns
/// `idx`, in the order they entered.
#[derive(Default)]
struct PassiveCholesky {
    idx: Vec<usize>,
    l: Vec<Vec<f64>>,
}

impl PassiveCholesky {
    /// Appends column `t`; false (and nothing appended) when it is numerically dependent on
    /// the passive ones (the same test as [`solve_passive`]'s: pivot ≤ 1e-12 of ‖a_t‖²).
    fn push<'a>(&mut self, t: usize, col: &impl Fn(usize) -> &'a [f64]) -> bool {
        let at = col(t);
        let k = self.idx.len();
        let mut y: Vec<f64> = self.idx.iter().map(|&i| dot(col(i), at)).collect();
        for i in 0..k {
            let mut s = y[i];
            for q in 0..i {
                s -= self.l[i][q] * y[q];
            }
            y[i] = s / self.l[i][i];
        }
        let d = dot(at, at);
        let piv = d - dot(&y, &y);
        if piv <= 1e-12 * d || piv <= 0.0 {
            return false;
        }
        y.push(piv.sqrt());
        self.idx.push(t);
        self.l.push(y);
        true
    }

    /// Removes the columns `drop`. Deleting row and column q of G = L·Lᵀ leaves the rows
    /// above q as they were and, below it, L₂₂'·L₂₂'ᵀ = L₂₂·L₂₂ᵀ + l·lᵀ with l = L[q+1.., q]:
    /// a rank-one update, O((k − q)²), no dot products recomputed.
    fn remove(&mut self, drop: &[usize]) {
        for &t in drop {
            let Some(q) = self.idx.iter().position(|&i| i == t) else {
                continue;
            };
            self.idx.remove(q);
            self.l.remove(q);
            let mut x: Vec<f64> = self.l[q..].iter_mut().map(|row| row.remove(q)).collect();
            let n = x.len();
            for j in 0..n {
                let ljj = self.l[q + j][q + j];
                let r = ljj.hypot(x[j]);
                let (c, s) = (r / ljj, x[j] / ljj);
                self.l[q + j][q + j] = r;
                for i in j + 1..n {
                    let lij = (self.l[q + i][q + j] + s * x[i]) / c;
                    self.l[q + i][q + j] = lij;
                    x[i] = c * x[i] - s * lij;
                }
            }
        }
    }

    /// The least-squares solution on the passive columns: (column, weight) pairs.
    fn solve(&self, c: &[f64]) -> Vec<(usize, f64)> {
        let k = self.idx.len();
        let mut y: Vec<f64> = self.idx.iter().map(|&i| c[i]).collect();
        for i in 0..k {
            for q in 0..i {
                y[i] -= self.l[i][q] * y[q];
            }
            y[i] /= self.l[i][i];
        }
        for i in (0..k).rev() {
            for q in i + 1..k {
                y[i] -= self.l[q][i] * y[q];
            }
            y[i] /= self.l[i][i];
        }
        self.idx.iter().copied().zip(y).collect()
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
