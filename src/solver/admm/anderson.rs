//! Type-II Anderson acceleration of ADMM's fixed-point map (Zhang, Peng, Ouyang, Deng 2019,
//! "Accelerating ADMM for efficient simulation and optimization"), host f64 on either backend.
//!
//! The map is G: q = (z, ū) ↦ x-step from q, then the local step: (z', ū'). x is a function of
//! z − ū alone, so q is the whole state an iteration carries. With f = G(q) − q and the last
//! `depth` differences ΔF, ΔG of f and G, the next state is q⁺ = G(q_k) − ΔG γ with γ the
//! least-squares fit min ‖f_k − ΔF γ‖ in the W-weighted norm ‖q‖² = Σ_e w_e²(‖z_e‖² + ‖ū_e‖²)
//! (J). Because ū' − ū = D x − z', ‖f‖² = ‖W(Dx − z')‖² + ‖W(z' − z)‖² is the paper's combined
//! residual, which the safeguard watches.
//!
//! The x-step's right-hand side Σ w²Dᵀ(z − ū) is linear in q, so the right-hand side of a mixed
//! state is the same combination of the plain ones: the history keeps each G output's
//! right-hand side (3n) beside it, and a mixed state needs no extra scatter on the backend.
//! The mixing is m × m dense algebra (m ≤ `depth`) on the host; the history vectors are host
//! f64 (on a device the fields are read back and the mixed state written, 2 × 48 bytes per
//! element each way per iteration; measured in the module docs of `super`).

use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;
use std::collections::VecDeque;

/// One G output of the history.
struct Entry {
    /// G(q), the state after the local step (z then ū, 9 values per element each).
    g: Vec<f64>,
    /// f = G(q) − q.
    f: Vec<f64>,
    /// The x-step right-hand side Σ w²Dᵀ(z − ū) of `g` (3n), once the x-step has read it.
    rhs: Option<Vec<f64>>,
}

/// Anderson history and mixing (see the module docs).
pub(crate) struct Anderson {
    depth: usize,
    /// Per element w_e² (J): the inner product's weights (the base penalty, fixed for a run).
    w2: Vec<f64>,
    history: VecDeque<Entry>,
    /// Coefficients of the last mix, one per difference column (empty: the plain step).
    gamma: Vec<f64>,
}

impl Anderson {
    /// A history of `depth` differences for elements weighted `w2`.
    pub(crate) fn new(depth: usize, w2: &[f64]) -> Self {
        Anderson {
            depth,
            w2: w2.to_vec(),
            history: VecDeque::with_capacity(depth + 1),
            gamma: Vec::new(),
        }
    }

    /// The W-weighted inner product of two states (what [`Self::normal_equations`] fuses).
    #[cfg(test)]
    fn dot(&self, a: &[f64], b: &[f64]) -> f64 {
        let ne = self.w2.len();
        let half = 9 * ne;
        let mut s = 0.0;
        for (e, &w) in self.w2.iter().enumerate() {
            let mut d = 0.0;
            for k in (9 * e..9 * e + 9).chain(half + 9 * e..half + 9 * e + 9) {
                d += a[k] * b[k];
            }
            s += w * d;
        }
        s
    }

    /// The least-squares fit's normal equations over the history's m = len − 1 differences
    /// ΔF_j = f_{j+1} − f_j: (ΔFᵀWΔF, ΔFᵀW f_m), the lower triangle mirrored. The
    /// m(m + 1)/2 + m inner products one at a time, over difference vectors built first, read
    /// the 2 × 9 × ne states ~20 times at depth 5 (10% of an ADMM iteration on an 86k-tet
    /// bar). Here one parallel sweep computes every product's per-element sum, and the
    /// weighted sums over the elements then run in element order: each entry is summed in
    /// [`Self::dot`]'s order (per element over its 18 values, then over the elements), so it is
    /// bit-identical to `dot(ΔF_i, ΔF_j)`.
    fn normal_equations(&self) -> (DMatrix<f64>, DVector<f64>) {
        let f: Vec<&[f64]> = self.history.iter().map(|e| e.f.as_slice()).collect();
        let m = f.len() - 1;
        let half = 9 * self.w2.len();
        // Per element: the lower triangle of ΔFᵀΔF row by row, then ΔFᵀ f_m.
        let tri = m * (m + 1) / 2;
        let width = tri + m;
        let mut per_element = vec![0.0; width * self.w2.len()];
        per_element.par_chunks_mut(width).enumerate().for_each_init(
            || vec![0.0; m],
            |df, (e, out)| {
                for k in (9 * e..9 * e + 9).chain(half + 9 * e..half + 9 * e + 9) {
                    for (j, d) in df.iter_mut().enumerate() {
                        *d = f[j + 1][k] - f[j][k];
                    }
                    let fk = f[m][k];
                    let mut slot = 0;
                    for i in 0..m {
                        for j in 0..=i {
                            out[slot] += df[i] * df[j];
                            slot += 1;
                        }
                        out[tri + i] += df[i] * fk;
                    }
                }
            },
        );
        let mut total = vec![0.0; width];
        for (d, &w) in per_element.chunks_exact(width).zip(&self.w2) {
            for (t, d) in total.iter_mut().zip(d) {
                *t += w * d;
            }
        }
        let mut a = DMatrix::zeros(m, m);
        let mut slot = 0;
        for i in 0..m {
            for j in 0..=i {
                a[(i, j)] = total[slot];
                a[(j, i)] = total[slot];
                slot += 1;
            }
        }
        (a, DVector::from_column_slice(&total[tri..]))
    }

    /// Forgets the history (a rejected mix, a penalty change, a new step).
    pub(crate) fn clear(&mut self) {
        self.history.clear();
        self.gamma.clear();
    }

    /// The newest plain output G(q) and its right-hand side, if both are known.
    pub(crate) fn newest(&self) -> Option<(&[f64], &[f64])> {
        let e = self.history.back()?;
        Some((&e.g, e.rhs.as_deref()?))
    }

    /// Adds G(q) for state q, and returns the next state: the Anderson mix when the history
    /// holds a difference and the least-squares system is solvable, else `None` (the plain
    /// step G(q)).
    pub(crate) fn push(&mut self, q: &[f64], g: Vec<f64>) -> Option<Vec<f64>> {
        let f: Vec<f64> = g.iter().zip(q).map(|(g, q)| g - q).collect();
        if self.history.len() > self.depth {
            self.history.pop_front();
        }
        self.history.push_back(Entry { g, f, rhs: None });
        self.gamma.clear();
        let m = self.history.len() - 1;
        if m == 0 {
            return None;
        }
        // ΔF columns f_{j+1} − f_j; normal equations (ΔFᵀWΔF + εI) γ = ΔFᵀW f_k.
        let (mut a, b) = self.normal_equations();
        let h = &self.history;
        // Relative Tikhonov term: keeps nearly dependent columns from blowing γ up.
        let reg = 1e-10 * a.trace().max(f64::MIN_POSITIVE);
        for i in 0..m {
            a[(i, i)] += reg;
        }
        let gamma = a.cholesky()?.solve(&b);
        if gamma.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let mut next = h[m].g.clone();
        for (j, &c) in gamma.iter().enumerate() {
            for ((n, a), b) in next.iter_mut().zip(&h[j + 1].g).zip(&h[j].g) {
                *n -= c * (a - b);
            }
        }
        self.gamma = gamma.iter().copied().collect();
        Some(next)
    }

    /// Stores the newest G output's right-hand side `rhs` (as the x-step read it) and
    /// overwrites `rhs` with the right-hand side of the last mix (unchanged for a plain step).
    pub(crate) fn mix_rhs(&mut self, rhs: &mut [f64]) {
        let Some(last) = self.history.back_mut() else {
            return;
        };
        last.rhs = Some(rhs.to_vec());
        let h = &self.history;
        for (j, &c) in self.gamma.iter().enumerate() {
            let (Some(a), Some(b)) = (&h[j + 1].rhs, &h[j].rhs) else {
                continue;
            };
            for ((r, a), b) in rhs.iter_mut().zip(a).zip(b) {
                *r -= c * (a - b);
            }
        }
    }
}

/// The two parts of the combined residual of G(q) = `g` at state `q` (z then ū, 9 values per
/// element each) under weights `w2` (J): [‖W(z' − z)‖, ‖W(ū' − ū)‖] = [z-change,
/// ‖W(D x − z')‖], √J; the combined residual is their Euclidean norm.
pub(crate) fn residual_parts(w2: &[f64], q: &[f64], g: &[f64]) -> [f64; 2] {
    let half = 9 * w2.len();
    let part = |off: usize| {
        w2.iter()
            .enumerate()
            .map(|(e, &w)| {
                let k = off + 9 * e;
                w * (k..k + 9).map(|i| (g[i] - q[i]).powi(2)).sum::<f64>()
            })
            .sum::<f64>()
            .sqrt()
    };
    [part(0), part(half)]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fused normal equations equal the inner products one at a time, bit for bit, at
    /// every history length up to a depth of 5, on random states (seed printed).
    #[test]
    fn normal_equations_are_bit_identical_to_the_dots() {
        use rand::{Rng, SeedableRng};
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        eprintln!("normal_equations_are_bit_identical_to_the_dots: seed {seed}");
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let ne = 37;
        let w2: Vec<f64> = (0..ne).map(|_| rng.random_range(1e-3..1e3)).collect();
        let mut aa = Anderson::new(5, &w2);
        let mut q: Vec<f64> = (0..18 * ne).map(|_| rng.random_range(-1.0..1.0)).collect();
        for _ in 0..9 {
            let g: Vec<f64> = q
                .iter()
                .map(|v| 0.9 * v + rng.random_range(-0.1..0.1))
                .collect();
            aa.push(&q, g.clone());
            q = g;
            let m = aa.history.len() - 1;
            if m == 0 {
                continue;
            }
            let (a, b) = aa.normal_equations();
            let h = &aa.history;
            let df: Vec<Vec<f64>> = (0..m)
                .map(|j| h[j + 1].f.iter().zip(&h[j].f).map(|(a, b)| a - b).collect())
                .collect();
            for i in 0..m {
                for j in 0..m {
                    assert_eq!(a[(i, j)].to_bits(), aa.dot(&df[i], &df[j]).to_bits());
                }
                assert_eq!(b[i].to_bits(), aa.dot(&df[i], &h[m].f).to_bits());
            }
        }
    }

    /// On an affine contraction G(q) = Mq + c in 18 unknowns (one element), Anderson with a
    /// full-depth history reaches the fixed point far faster than the plain iteration, and the
    /// mixed right-hand side is the same combination as the mixed state (a linear map of it).
    #[test]
    fn anderson_accelerates_an_affine_contraction() {
        let n = 18;
        let mmat = DMatrix::from_fn(n, n, |i, j| {
            if i == j {
                0.95 - 0.04 * i as f64 / n as f64
            } else {
                0.01 * ((i * 7 + j * 3) % 5) as f64 / n as f64
            }
        });
        let c = DVector::from_fn(n, |i, _| (i as f64).sin());
        let fixed = (DMatrix::identity(n, n) - &mmat)
            .lu()
            .solve(&c)
            .expect("solvable");
        let g = |q: &DVector<f64>| &mmat * q + &c;
        let lin = DMatrix::from_fn(3, n, |i, j| ((i + 2 * j) % 4) as f64 - 1.5);
        let run = |depth: usize| {
            let mut aa = Anderson::new(depth, &[1.0]);
            let mut q = DVector::zeros(n);
            for k in 0..40 {
                let gq = g(&q);
                let next = aa.push(q.as_slice(), gq.as_slice().to_vec());
                let mut rhs: Vec<f64> = (&lin * &gq).iter().copied().collect();
                aa.mix_rhs(&mut rhs);
                q = next.map_or(gq, DVector::from_vec);
                let want = &lin * &q;
                for (a, b) in rhs.iter().zip(want.iter()) {
                    assert!((a - b).abs() <= 1e-9 * (1.0 + b.abs()), "iteration {k}");
                }
            }
            (q - &fixed).norm()
        };
        let plain = run(0);
        let accelerated = run(5);
        assert!(plain > 1e-2, "plain error {plain}");
        assert!(accelerated < 1e-10, "Anderson error {accelerated}");
    }
}
