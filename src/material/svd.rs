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
