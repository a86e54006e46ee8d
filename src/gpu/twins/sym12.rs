//! Twin of `shaders/shared/sym12.wgsl`: the eigen-decomposition of a symmetric 12×12 by cyclic
//! Jacobi in f32 and the PSD projection built on it (the contact pairs' Hessians).
//!
//! Rotations follow Numerical Recipes' `jacobi` (the τ = s/(1 + c) update, which keeps the
//! diagonal accurate), in the fixed cyclic order (0,1), (0,2), …, (10,11), for
//! [`SYM12_SWEEPS`] sweeps; a rotation is skipped only when its off-diagonal entry is exactly
//! zero. Both halves of the matrix are written with the same value, so it stays exactly
//! symmetric.
//!
//! **Sweeps.** Measured (`tests/gpu/gpu_contact_kernels.rs`, `sym12_projection_matches_f64`, seeds
//! 1–150, 100 matrices per spectrum type): the projection error reaches f32 rounding
//! (≤ 8.0·10⁻⁷ ‖A‖) after 7 sweeps for eigenvalues spread over 12 decades with mixed signs, for a
//! rank-6 stencil (zero rows, as a point–point pair) and for barrier-like spectra (one large
//! eigenvalue, small negatives); clustered spectra of both signs (±λ(1 ± 10⁻⁵)) converge
//! slowest, ≤ 3.8·10⁻⁶ after 8 sweeps and ≤ 1.3·10⁻⁶ after 10. [`SYM12_SWEEPS`] = 10; a sweep is
//! 66 rotations of ~100 flops, so ~7·10⁴ flops per projected pair.
//!
//! **Projection.** `A₊ = A − Σ_{λₖ<0} λₖ vₖvₖᵀ`: the negative eigenvalues' part is removed from
//! the matrix as given, so a PSD matrix comes back unchanged and the rounding is that of the
//! removed part only. The projection onto the PSD cone is non-expansive in the Frobenius norm,
//! so errors in A are not amplified; what Jacobi adds is ~ε‖A‖ (backward stability), also where
//! eigenvalues of both signs cluster (figures above, relative Frobenius norm against nalgebra's
//! f64 eigen-decomposition of the same f32 entries).

/// Cyclic Jacobi sweeps (same constant as the WGSL).
pub const SYM12_SWEEPS: u32 = 10;

/// Eigen-decomposition of the symmetric 12×12 `a` (row-major, both halves) in place: on return
/// the diagonal of `a` holds the eigenvalues (unsorted), the off-diagonal is ≈ 0, and column k
/// of `v` (row-major, `v[12·i + k]`) is the eigenvector of `a[13·k]`.
pub fn sym12_eigen(a: &mut [f32; 144], v: &mut [f32; 144]) {
    sym12_eigen_sweeps(a, v, SYM12_SWEEPS);
}

/// [`sym12_eigen`] with `sweeps` sweeps instead of [`SYM12_SWEEPS`] (for measuring convergence).
pub fn sym12_eigen_sweeps(a: &mut [f32; 144], v: &mut [f32; 144], sweeps: u32) {
    *v = [0.0; 144];
    for i in 0..12 {
        v[13 * i] = 1.0;
    }
    for _ in 0..sweeps {
        for p in 0..11 {
            for q in p + 1..12 {
                rotate(a, v, p, q);
            }
        }
    }
}

fn sign_nonzero(x: f32) -> f32 {
    if x < 0.0 {
        -1.0
    } else {
        1.0
    }
}

/// One Jacobi rotation zeroing a[p][q] (Numerical Recipes' form).
fn rotate(a: &mut [f32; 144], v: &mut [f32; 144], p: usize, q: usize) {
    let apq = a[12 * p + q];
    if apq == 0.0 {
        return;
    }
    let app = a[13 * p];
    let aqq = a[13 * q];
    let theta = (aqq - app) / (2.0 * apq);
    let t = if theta.abs() > 1e15 {
        // θ² would overflow; t ≈ 1/(2θ).
        0.5 / theta
    } else {
        sign_nonzero(theta) / (theta.abs() + (theta * theta + 1.0).sqrt())
    };
    let c = 1.0 / (t * t + 1.0).sqrt();
    let s = t * c;
    let tau = s / (1.0 + c);
    a[13 * p] = app - t * apq;
    a[13 * q] = aqq + t * apq;
    a[12 * p + q] = 0.0;
    a[12 * q + p] = 0.0;
    for k in 0..12 {
        if k == p || k == q {
            continue;
        }
        let akp = a[12 * k + p];
        let akq = a[12 * k + q];
        let nkp = akp - s * (akq + tau * akp);
        let nkq = akq + s * (akp - tau * akq);
        a[12 * k + p] = nkp;
        a[12 * p + k] = nkp;
        a[12 * k + q] = nkq;
        a[12 * q + k] = nkq;
    }
    for k in 0..12 {
        let vkp = v[12 * k + p];
        let vkq = v[12 * k + q];
        v[12 * k + p] = vkp - s * (vkq + tau * vkp);
        v[12 * k + q] = vkq + s * (vkp - tau * vkq);
    }
}

/// The PSD projection of the symmetric 12×12 `h` (row-major) in place: `h − Σ_{λₖ<0} λₖ vₖvₖᵀ`
/// (see the module docs); the upper triangle is computed and mirrored.
pub fn project_psd12(h: &mut [f32]) {
    project_psd12_sweeps(h, SYM12_SWEEPS);
}

/// [`project_psd12`] with `sweeps` Jacobi sweeps (for measuring convergence).
pub fn project_psd12_sweeps(h: &mut [f32], sweeps: u32) {
    debug_assert_eq!(h.len(), 144);
    let mut a = [0.0f32; 144];
    a.copy_from_slice(&h[..144]);
    let mut v = [0.0f32; 144];
    sym12_eigen_sweeps(&mut a, &mut v, sweeps);
    let mut lam = [0.0f32; 12];
    let mut any = false;
    for k in 0..12 {
        lam[k] = a[13 * k].min(0.0);
        any |= lam[k] < 0.0;
    }
    if !any {
        return;
    }
    for i in 0..12 {
        for j in i..12 {
            let mut acc = 0.0f32;
            for k in 0..12 {
                acc += lam[k] * v[12 * i + k] * v[12 * j + k];
            }
            let x = h[12 * i + j] - acc;
            h[12 * i + j] = x;
            h[12 * j + i] = x;
        }
    }
}
