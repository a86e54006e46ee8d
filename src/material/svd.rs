//! Rotation-variant ("signed") singular value decomposition of a 3×3 matrix.

use nalgebra::{Matrix3, RealField, Vector3};

/// F = U · diag(sigma) · Vᵀ with U, V proper rotations (det = +1) and
/// `sigma[0] ≥ sigma[1] ≥ |sigma[2]|`; an inverted F (det F < 0) gets `sigma[2] < 0`.
#[derive(Clone, Copy, Debug)]
pub struct Svd3<T: RealField + Copy> {
    /// Left rotation.
    pub u: Matrix3<T>,
    /// Signed singular values.
    pub sigma: Vector3<T>,
    /// Right rotation.
    pub v: Matrix3<T>,
}

impl<T: RealField + Copy> Svd3<T> {
    /// The rotation of the polar decomposition F = R S (R = U Vᵀ).
    pub fn rotation(&self) -> Matrix3<T> {
        self.u * self.v.transpose()
    }
    /// Reassembles U diag(sigma) Vᵀ.
    pub fn recompose(&self) -> Matrix3<T> {
        self.u * Matrix3::from_diagonal(&self.sigma) * self.v.transpose()
    }
}

/// Signed SVD, robust to inverted and degenerate (rank-deficient, zero) F.
///
/// Uses nalgebra's Golub–Kahan SVD, sorts the singular values in decreasing order, and moves any
/// reflection into the smallest singular value so both factors are rotations.
pub fn svd3<T: RealField + Copy>(f: &Matrix3<T>) -> Svd3<T> {
    let svd = f.svd(true, true);
    // Both were requested above, so they are present.
    let mut u = svd.u.unwrap_or_else(Matrix3::identity);
    let mut vt = svd.v_t.unwrap_or_else(Matrix3::identity);
    let mut s = svd.singular_values;
    // Sort descending (nalgebra does not promise an order for every version).
    let mut order = [0usize, 1, 2];
    order.sort_by(|&a, &b| s[b].partial_cmp(&s[a]).unwrap_or(std::cmp::Ordering::Equal));
    if order != [0, 1, 2] {
        let (u0, vt0, s0) = (u, vt, s);
        for (dst, &src) in order.iter().enumerate() {
            u.set_column(dst, &u0.column(src));
            vt.set_row(dst, &vt0.row(src));
            s[dst] = s0[src];
        }
    }
    let mut v = vt.transpose();
    if u.determinant() < T::zero() {
        let col = -u.column(2);
        u.set_column(2, &col);
        s[2] = -s[2];
    }
    if v.determinant() < T::zero() {
        let col = -v.column(2);
        v.set_column(2, &col);
        s[2] = -s[2];
    }
    Svd3 { u, sigma: s, v }
}

/// Eigen-decomposition of a symmetric 3×3 matrix by cyclic Jacobi rotations, to round-off:
/// (eigenvalues, eigenvectors as the columns of a proper rotation), unsorted. About 10× fewer
/// instructions than nalgebra's general `SymmetricEigen` on 3×3 (Householder tridiagonalisation
/// and implicit QR) for the same accuracy; the per-vertex solvers call it per element and corner.
///
/// Works on the six distinct entries as scalars: a rotation in the (p, q) plane changes the two
/// diagonal entries by ∓t·a_pq and rotates the two off-diagonal entries of the third index r —
/// about 20 flops, where rotating full rows and columns of the matrix took about 50 and was
/// 59% of a VBD iteration.
pub fn symmetric_eigen3<T: RealField + Copy>(s: &Matrix3<T>) -> (Vector3<T>, Matrix3<T>) {
    let (zero, one) = (T::zero(), T::one());
    let hundred: T = nalgebra::convert(100.0);
    let two: T = nalgebra::convert(2.0);
    let eps2 = T::default_epsilon() * T::default_epsilon();
    let mut d = [s[(0, 0)], s[(1, 1)], s[(2, 2)]];
    // Off-diagonal entries of the pairs (0,1), (0,2), (1,2) (the upper triangle).
    let mut o = [s[(0, 1)], s[(0, 2)], s[(1, 2)]];
    // v[row][col]; the columns become the eigenvectors.
    let mut v = [[one, zero, zero], [zero, one, zero], [zero, zero, one]];
    // Per plane (p, q): the index in `o` of (p, q), of (p, r) and of (q, r), r the third index.
    const PLANES: [(usize, usize, usize, usize, usize); 3] =
        [(0, 1, 0, 1, 2), (0, 2, 1, 0, 2), (1, 2, 2, 0, 1)];
    // Converges quadratically: 3–4 sweeps in f64; the cap only guards against NaN input.
    for _ in 0..32 {
        // Done when the off-diagonal part is below round-off of the diagonal (relative to ‖A‖,
        // the accuracy the SVD's QR step needs; one sweep fewer than an entry-wise test).
        let off = o[0] * o[0] + o[1] * o[1] + o[2] * o[2];
        let diag = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
        if off <= eps2 * diag {
            break;
        }
        let mut rotated = false;
        for &(p, q, pq, pr, qr) in &PLANES {
            let apq = o[pq];
            if apq == zero {
                continue;
            }
            // Numerical Recipes' test: an off-diagonal entry below the diagonal's last digit is
            // set to zero (this also keeps τ² below overflow).
            let g = hundred * apq.abs();
            if d[p].abs() + g == d[p].abs() && d[q].abs() + g == d[q].abs() {
                o[pq] = zero;
                continue;
            }
            rotated = true;
            // The rotation J (c, s) with (JᵀAJ)_pq = 0 (Golub & Van Loan, sym.schur2): with
            // τ = x/y, x = a_qq − a_pp, y = 2a_pq, t = sign(τ)/(|τ| + √(1+τ²)) and
            // c = 1/√(1+t²). Multiplied through by |y| and with r = √(x²+y²), 1 + t² =
            // 2r/(|x|+r), so t = ±|y|/(|x|+r), c = (|x|+r)/√(2r(|x|+r)), s = t·c: two square
            // roots and one reciprocal in the dependent chain instead of three divisions and two
            // square roots (the chain's latency was most of this function's time).
            let x = d[q] - d[p];
            let y = two * apq;
            let r = (x * x + y * y).sqrt();
            let xr = x.abs() + r;
            let signed_y = if x * y >= zero { y.abs() } else { -y.abs() };
            let t = signed_y / xr;
            let inv = one / (two * r * xr).sqrt();
            let c = xr * inv;
            let sn = signed_y * inv;
            d[p] -= t * apq;
            d[q] += t * apq;
            o[pq] = zero;
            let (arp, arq) = (o[pr], o[qr]);
            o[pr] = c * arp - sn * arq;
            o[qr] = sn * arp + c * arq;
            for row in v.iter_mut() {
                let (vkp, vkq) = (row[p], row[q]);
                row[p] = c * vkp - sn * vkq;
                row[q] = sn * vkp + c * vkq;
            }
        }
        if !rotated {
            break;
        }
    }
    (
        Vector3::new(d[0], d[1], d[2]),
        Matrix3::new(
            v[0][0], v[0][1], v[0][2], v[1][0], v[1][1], v[1][2], v[2][0], v[2][1], v[2][2],
        ),
    )
}

/// The signed SVD of [`svd3`] (same conventions: U, V rotations, σ₀ ≥ σ₁ ≥ |σ₂| — up to
/// round-off where singular values repeat —, σ₂ < 0 when det F < 0) by the algorithm nalgebra uses for 3×3 (McAdams et al. 2011): V from the
/// eigenvectors of FᵀF ([`symmetric_eigen3`]), columns of B = FV sorted by norm, then U and the
/// signed σ from a Givens QR of B (R's off-diagonal vanishes as B's columns are orthogonal).
/// Agrees with [`svd3`] to round-off (up to the sign freedom of repeated singular values'
/// vectors) at about a fifth of its instructions.
pub fn svd3_fast<T: RealField + Copy>(f: &Matrix3<T>) -> Svd3<T> {
    let (_, mut v) = symmetric_eigen3(&f.tr_mul(f));
    let mut b = f * v;
    let mut rho = [
        b.column(0).norm_squared(),
        b.column(1).norm_squared(),
        b.column(2).norm_squared(),
    ];
    // Sort by column norm, descending; each swap negates one column so det V stays +1.
    for (i, j) in [(0usize, 1usize), (0, 2), (1, 2)] {
        if rho[i] < rho[j] {
            b.swap_columns(i, j);
            v.swap_columns(i, j);
            let nb = -b.column(j);
            b.set_column(j, &nb);
            let nv = -v.column(j);
            v.set_column(j, &nv);
            rho.swap(i, j);
        }
    }
    // Givens QR: zero (1,0), (2,0), (2,1); U accumulates the rotations' transposes (det +1).
    let mut u = Matrix3::identity();
    for (p, q, col) in [(0usize, 1usize, 0usize), (0, 2, 0), (1, 2, 1)] {
        let (x, y) = (b[(p, col)], b[(q, col)]);
        // √(x² + y²) rather than libm's hypot (5% of a VBD iteration): the entries of a
        // deformation gradient are nowhere near where x² over- or underflows.
        let r = (x * x + y * y).sqrt();
        if r == T::zero() {
            continue;
        }
        let (c, s) = (x / r, y / r);
        for k in 0..3 {
            let (bp, bq) = (b[(p, k)], b[(q, k)]);
            b[(p, k)] = c * bp + s * bq;
            b[(q, k)] = -s * bp + c * bq;
            let (up, uq) = (u[(k, p)], u[(k, q)]);
            u[(k, p)] = c * up + s * uq;
            u[(k, q)] = -s * up + c * uq;
        }
    }
    // Each rotation leaves a non-negative hypotenuse on the diagonal, so R₀₀, R₁₁ ≥ 0 and the
    // sign of det F lands in R₂₂.
    let sigma = Vector3::new(b[(0, 0)], b[(1, 1)], b[(2, 2)]);
    Svd3 { u, sigma, v }
}
