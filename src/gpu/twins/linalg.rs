//! Twin of `shaders/shared/linalg.wgsl`: Jacobi eigen-decomposition of a symmetric 3×3, signed
//! SVD (Jacobi on FᵀF + Givens QR) and the deformation gradient, all f32 with glam.

use glam::{Mat3, Vec3};

/// Cyclic Jacobi sweeps (same constant as the WGSL).
pub const JACOBI_SWEEPS: u32 = 6;

/// Eigen-decomposition of a symmetric 3×3.
#[derive(Clone, Copy, Debug)]
pub struct Eig3 {
    /// Eigenvalues, descending.
    pub values: Vec3,
    /// Orthonormal eigenvectors as columns, det +1.
    pub vectors: Mat3,
}

/// Signed SVD `F = U·diag(s)·Vᵀ`, U and V rotations, `s.x ≥ s.y ≥ |s.z|`, `s.z < 0` iff det F < 0.
#[derive(Clone, Copy, Debug)]
pub struct Svd3 {
    /// Left rotation.
    pub u: Mat3,
    /// Signed singular values.
    pub s: Vec3,
    /// Right rotation.
    pub v: Mat3,
}

fn sign_nonzero(x: f32) -> f32 {
    if x < 0.0 {
        -1.0
    } else {
        1.0
    }
}

fn at(m: &Mat3, col: usize, row: usize) -> f32 {
    m.col(col)[row]
}

fn set(m: &mut Mat3, col: usize, row: usize, v: f32) {
    m.col_mut(col)[row] = v;
}

fn jacobi_rotate(a: &mut Mat3, v: &mut Mat3, p: usize, q: usize) {
    let apq = at(a, q, p);
    if apq.abs() <= 1e-30 {
        return;
    }
    let theta = (at(a, q, q) - at(a, p, p)) / (2.0 * apq);
    let t = if theta.abs() > 1e15 {
        0.5 / theta
    } else {
        sign_nonzero(theta) / (theta.abs() + (theta * theta + 1.0).sqrt())
    };
    let c = 1.0 / (t * t + 1.0).sqrt();
    let s = t * c;
    let mut j = Mat3::IDENTITY;
    set(&mut j, p, p, c);
    set(&mut j, q, q, c);
    set(&mut j, q, p, s);
    set(&mut j, p, q, -s);
    let mut r = j.transpose() * *a * j;
    set(&mut r, q, p, 0.0);
    set(&mut r, p, q, 0.0);
    *a = r;
    *v *= j;
}

/// Symmetric 3×3 eigen-decomposition by cyclic Jacobi (mirror of WGSL `sym_eig3`).
pub fn sym_eig3(m: Mat3) -> Eig3 {
    let mut a = m;
    let mut v = Mat3::IDENTITY;
    for _ in 0..JACOBI_SWEEPS {
        jacobi_rotate(&mut a, &mut v, 0, 1);
        jacobi_rotate(&mut a, &mut v, 0, 2);
        jacobi_rotate(&mut a, &mut v, 1, 2);
    }
    let mut d = Vec3::new(a.x_axis.x, a.y_axis.y, a.z_axis.z);
    if d.x < d.y {
        d = Vec3::new(d.y, d.x, d.z);
        v = Mat3::from_cols(v.y_axis, v.x_axis, v.z_axis);
    }
    if d.x < d.z {
        d = Vec3::new(d.z, d.y, d.x);
        v = Mat3::from_cols(v.z_axis, v.y_axis, v.x_axis);
    }
    if d.y < d.z {
        d = Vec3::new(d.x, d.z, d.y);
        v = Mat3::from_cols(v.x_axis, v.z_axis, v.y_axis);
    }
    if v.determinant() < 0.0 {
        v.z_axis = -v.z_axis;
    }
    Eig3 {
        values: d,
        vectors: v,
    }
}

fn givens(b: &Mat3, col: usize, i: usize, k: usize) -> Mat3 {
    let x = at(b, col, i);
    let y = at(b, col, k);
    let r = (x * x + y * y).sqrt();
    let (mut c, mut s) = (1.0, 0.0);
    if r > 1e-30 {
        c = x / r;
        s = y / r;
    }
    let mut g = Mat3::IDENTITY;
    set(&mut g, i, i, c);
    set(&mut g, k, k, c);
    set(&mut g, k, i, s);
    set(&mut g, i, k, -s);
    g
}

/// Signed SVD (mirror of WGSL `svd3`).
pub fn svd3(f: Mat3) -> Svd3 {
    let e = sym_eig3(f.transpose() * f);
    let v = e.vectors;
    let mut b = f * v;
    let mut q = Mat3::IDENTITY;
    let g1 = givens(&b, 0, 0, 1);
    b = g1 * b;
    q = g1 * q;
    let g2 = givens(&b, 0, 0, 2);
    b = g2 * b;
    q = g2 * q;
    let g3 = givens(&b, 1, 1, 2);
    b = g3 * b;
    q = g3 * q;
    Svd3 {
        u: q.transpose(),
        s: Vec3::new(b.x_axis.x, b.y_axis.y, b.z_axis.z),
        v,
    }
}

/// `F = Ds·Dm⁻¹`, `Ds = [x1−x0, x2−x0, x3−x0]`.
pub fn deformation_gradient(x0: Vec3, x1: Vec3, x2: Vec3, x3: Vec3, dm_inv: Mat3) -> Mat3 {
    Mat3::from_cols(x1 - x0, x2 - x0, x3 - x0) * dm_inv
}

/// `a·bᵀ`.
pub fn outer3(a: Vec3, b: Vec3) -> Mat3 {
    Mat3::from_cols(a * b.x, a * b.y, a * b.z)
}
