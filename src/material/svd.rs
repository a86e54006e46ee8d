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

/// [`symmetric_eigen3`] of `L` matrices in lock-step, bit-identical to calling it on each: every
/// lane performs exactly the scalar routine's operations (same sweeps, same skipped planes, same
/// stopping sweep); a lane that has stopped or skips a plane keeps its values through selects,
/// so the lanes vectorise and their square-root/division chains overlap. The sweep loop runs
/// until the slowest lane stops (its cap, 32 sweeps, as in the scalar routine).
pub fn symmetric_eigen3_lanes<T: RealField + Copy, const L: usize>(
    s: &[Matrix3<T>; L],
) -> [(Vector3<T>, Matrix3<T>); L] {
    let (zero, one) = (T::zero(), T::one());
    let hundred: T = nalgebra::convert(100.0);
    let two: T = nalgebra::convert(2.0);
    let eps2 = T::default_epsilon() * T::default_epsilon();
    let lanes = |f: &dyn Fn(usize) -> T| -> [T; L] { std::array::from_fn(f) };
    let mut d = [0, 1, 2].map(|i| lanes(&|l| s[l][(i, i)]));
    let mut o = [(0, 1), (0, 2), (1, 2)].map(|(i, j)| lanes(&|l| s[l][(i, j)]));
    let mut v = [0, 1, 2].map(|r| [0, 1, 2].map(|c| [if r == c { one } else { zero }; L]));
    const PLANES: [(usize, usize, usize, usize, usize); 3] =
        [(0, 1, 0, 1, 2), (0, 2, 1, 0, 2), (1, 2, 2, 0, 1)];
    let mut active = [true; L];
    for _ in 0..32 {
        for l in 0..L {
            let off = o[0][l] * o[0][l] + o[1][l] * o[1][l] + o[2][l] * o[2][l];
            let diag = d[0][l] * d[0][l] + d[1][l] * d[1][l] + d[2][l] * d[2][l];
            // A NaN lane fails the test and keeps sweeping, as in the scalar routine.
            if off <= eps2 * diag {
                active[l] = false;
            }
        }
        if !active.iter().any(|&a| a) {
            break;
        }
        let mut rotated = [false; L];
        for &(p, q, pq, pr, qr) in &PLANES {
            let mut rot = [false; L];
            let mut cs = [(zero, zero); L];
            for l in 0..L {
                let apq = o[pq][l];
                let g = hundred * apq.abs();
                let negligible =
                    d[p][l].abs() + g == d[p][l].abs() && d[q][l].abs() + g == d[q][l].abs();
                let live = active[l] && apq != zero;
                if live && negligible {
                    o[pq][l] = zero;
                }
                rot[l] = live && !negligible;
                // The same expressions as `symmetric_eigen3`, computed on every lane (a lane
                // that does not rotate discards them).
                let x = d[q][l] - d[p][l];
                let y = two * apq;
                let r = (x * x + y * y).sqrt();
                let xr = x.abs() + r;
                let signed_y = if x * y >= zero { y.abs() } else { -y.abs() };
                let t = signed_y / xr;
                let inv = one / (two * r * xr).sqrt();
                let (c, sn) = (xr * inv, signed_y * inv);
                if rot[l] {
                    d[p][l] -= t * apq;
                    d[q][l] += t * apq;
                    o[pq][l] = zero;
                    let (arp, arq) = (o[pr][l], o[qr][l]);
                    o[pr][l] = c * arp - sn * arq;
                    o[qr][l] = sn * arp + c * arq;
                    rotated[l] = true;
                }
                cs[l] = (c, sn);
            }
            for row in v.iter_mut() {
                for l in 0..L {
                    if rot[l] {
                        let (c, sn) = cs[l];
                        let (vkp, vkq) = (row[p][l], row[q][l]);
                        row[p][l] = c * vkp - sn * vkq;
                        row[q][l] = sn * vkp + c * vkq;
                    }
                }
            }
        }
        for l in 0..L {
            active[l] &= rotated[l];
        }
    }
    std::array::from_fn(|l| {
        (
            Vector3::new(d[0][l], d[1][l], d[2][l]),
            Matrix3::new(
                v[0][0][l], v[0][1][l], v[0][2][l], v[1][0][l], v[1][1][l], v[1][2][l], v[2][0][l],
                v[2][1][l], v[2][2][l],
            ),
        )
    })
}

/// The signed SVD of [`svd3`] (same conventions: U, V rotations, σ₀ ≥ σ₁ ≥ |σ₂| — up to
/// round-off where singular values repeat —, σ₂ < 0 when det F < 0) by the algorithm nalgebra uses for 3×3 (McAdams et al. 2011): V from the
/// eigenvectors of FᵀF ([`symmetric_eigen3`]), columns of B = FV sorted by norm, then U and the
/// signed σ from a Givens QR of B (R's off-diagonal vanishes as B's columns are orthogonal).
/// Agrees with [`svd3`] to round-off (up to the sign freedom of repeated singular values'
/// vectors) at about a fifth of its instructions.
pub fn svd3_fast<T: RealField + Copy>(f: &Matrix3<T>) -> Svd3<T> {
    let (_, v) = symmetric_eigen3(&f.tr_mul(f));
    svd3_from_right(f, v)
}

/// [`svd3_fast`] of `L` matrices at once, bit-identical to calling it on each: the Jacobi
/// eigen-solves of FᵀF run in lock-step ([`symmetric_eigen3_lanes`]), the rest per matrix.
/// The scalar eigen-solve is one dependent chain of square roots and divisions per rotation,
/// so a lone element keeps the core waiting on their latency (the element pass's body is too
/// long for out-of-order execution to overlap two elements); `L` independent chains fill it.
pub fn svd3_fast_lanes<T: RealField + Copy, const L: usize>(f: &[Matrix3<T>; L]) -> [Svd3<T>; L] {
    let c: [Matrix3<T>; L] = std::array::from_fn(|l| f[l].tr_mul(&f[l]));
    let eig = symmetric_eigen3_lanes(&c);
    std::array::from_fn(|l| svd3_from_right(&f[l], eig[l].1))
}

/// The rest of [`svd3_fast`] once V (the eigenvectors of FᵀF, a rotation) is known.
fn svd3_from_right<T: RealField + Copy>(f: &Matrix3<T>, mut v: Matrix3<T>) -> Svd3<T> {
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
