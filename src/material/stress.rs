//! Energy density, first Piola–Kirchhoff stress and its derivative ∂P/∂F (optionally
//! PSD-projected by an [`EigenFilter`]) for every model, built from the singular-value derivatives.

use super::{
    c, sigma_derivatives, stable_nh_alpha, svd3, svd3_fast, symmetric_eigen3, EigenFilter,
    Material, MaterialModel, Svd3,
};
use nalgebra::{Matrix3, RealField, SMatrix, SymmetricEigen, Vector3};

/// 9×9 matrix over column-major vec(F).
pub type Mat9<T> = SMatrix<T, 9, 9>;

/// Everything a kernel needs at one deformation gradient.
#[derive(Clone, Copy, Debug)]
pub struct StressEval<T: RealField + Copy> {
    /// Ψ(F), J/m³.
    pub psi: T,
    /// P(F) = ∂Ψ/∂F, Pa.
    pub p: Matrix3<T>,
    /// ∂P/∂F (column-major vec order), Pa; filtered to PSD when requested.
    pub dpdf: Option<Mat9<T>>,
}

/// Ψ(F) in J/m³.
pub fn energy_density<T: RealField + Copy>(m: &Material, f: &Matrix3<T>) -> T {
    evaluate(m, f, false, false).psi
}

/// First Piola–Kirchhoff stress P(F) = ∂Ψ/∂F, Pa.
pub fn pk1<T: RealField + Copy>(m: &Material, f: &Matrix3<T>) -> Matrix3<T> {
    evaluate(m, f, false, false).p
}

/// ∂P/∂F as a 9×9 matrix over column-major vec(F); `project` clamps its eigenvalues at 0.
pub fn dpdf<T: RealField + Copy>(m: &Material, f: &Matrix3<T>, project: bool) -> Mat9<T> {
    dpdf_filtered(m, f, project.then_some(EigenFilter::Clamp))
}

/// ∂P/∂F as a 9×9 matrix over column-major vec(F), its eigenvalues passed through `filter`
/// (`None`: the true, possibly indefinite ∂P/∂F).
pub fn dpdf_filtered<T: RealField + Copy>(
    m: &Material,
    f: &Matrix3<T>,
    filter: Option<EigenFilter>,
) -> Mat9<T> {
    evaluate_filtered(m, f, true, filter)
        .dpdf
        .unwrap_or_else(Mat9::zeros)
}

/// The rest elasticity tensor C = ∂²Ψ/∂F² at F = I (unprojected), Pa.
pub fn rest_tensor(m: &Material) -> Mat9<f64> {
    dpdf(m, &Matrix3::identity(), false)
}

/// Ψ, P and (optionally) ∂P/∂F at F; `project` clamps ∂P/∂F's eigenvalues at 0.
pub fn evaluate<T: RealField + Copy>(
    m: &Material,
    f: &Matrix3<T>,
    want_dpdf: bool,
    project: bool,
) -> StressEval<T> {
    evaluate_filtered(m, f, want_dpdf, project.then_some(EigenFilter::Clamp))
}

/// Ψ, P and (optionally) ∂P/∂F at F, ∂P/∂F's nine eigenvalues passed through `filter` (`None`:
/// unprojected). Linear elasticity's ∂P/∂F is constant and PSD, so no filter changes it.
pub fn evaluate_filtered<T: RealField + Copy>(
    m: &Material,
    f: &Matrix3<T>,
    want_dpdf: bool,
    filter: Option<EigenFilter>,
) -> StressEval<T> {
    if m.model == MaterialModel::Linear {
        return linear(m, f, want_dpdf);
    }
    if !want_dpdf {
        if let Some((psi, p)) = invariant_stress(m, f) {
            return StressEval { psi, p, dpdf: None };
        }
        // P alone: the SVD and σ-space gradient, no eigenpairs.
        let (psi, p) = svd_stress(m, &svd3_fast(f));
        return StressEval { psi, p, dpdf: None };
    }
    let mut out = Mat9::zeros();
    let (psi, p, _) = filtered_modes(m, f, filter, false, |svd, modes| {
        if let SigmaModes::One(lambda, q) = modes {
            add_mode(&mut out, svd, q, lambda);
        }
    });
    StressEval {
        psi,
        p,
        dpdf: Some(out),
    }
}

/// Whether [`evaluate_filtered`] takes P alone (no ∂P/∂F) through F's SVD: the models whose
/// energy is written in the singular values (the corotated family), not the linear model nor
/// those [`invariant_stress`] covers.
pub(crate) fn stress_needs_svd(model: MaterialModel) -> bool {
    !matches!(
        model,
        MaterialModel::Linear
            | MaterialModel::StableNeoHookean
            | MaterialModel::StableNeoHookeanVbd
            | MaterialModel::NeoHookean
            | MaterialModel::StVk
    )
}

/// Ψ(F) (J/m³) and P(F) (Pa) of a model with [`stress_needs_svd`] from F's SVD: the SVD route
/// of [`evaluate_filtered`] without ∂P/∂F, for callers that batch the SVDs.
pub(crate) fn svd_stress<T: RealField + Copy>(m: &Material, svd: &Svd3<T>) -> (T, Matrix3<T>) {
    let d = sigma_derivatives(m, &svd.sigma);
    (
        d.psi,
        svd.u * Matrix3::from_diagonal(&d.grad) * svd.v.transpose(),
    )
}

/// `out += λ vec(M) vec(M)ᵀ` for the F-space mode M = U Q Vᵀ (vec column-major, as ∂P/∂F's).
fn add_mode<T: RealField + Copy>(out: &mut Mat9<T>, svd: &Svd3<T>, q: &Matrix3<T>, lambda: T) {
    let full = svd.u * q * svd.v.transpose();
    // full is stored column-major, so its slice is vec(full).
    let v = nalgebra::SVector::<T, 9>::from_column_slice(full.as_slice());
    *out += v * v.transpose() * lambda;
}

/// ∂P/∂F (9×9, column-major vec order, Pa) by nalgebra's general 3×3 SVD ([`svd3`]) and
/// symmetric eigen-solver, the eigenvalues passed through `filter`: an independent route to
/// what [`evaluate_filtered`] computes with the cyclic-Jacobi solvers, kept as their test
/// oracle and benchmark baseline.
pub fn dpdf_reference<T: RealField + Copy>(
    m: &Material,
    f: &Matrix3<T>,
    filter: Option<EigenFilter>,
) -> Mat9<T> {
    if m.model == MaterialModel::Linear {
        return linear(m, f, true).dpdf.unwrap_or_else(Mat9::zeros);
    }
    let svd = svd3(f);
    let d = sigma_derivatives(m, &svd.sigma);
    let eig = SymmetricEigen::new(d.hess);
    let mut out = Mat9::zeros();
    for_each_mode_with(
        &svd.sigma,
        &d,
        (eig.eigenvalues, eig.eigenvectors),
        |lambda, q| {
            add_mode(
                &mut out,
                &svd,
                q,
                filter.map_or(lambda, |f| f.apply(lambda)),
            )
        },
    );
    out
}

/// One or more of ∂P/∂F's modes in singular-value space, as [`filtered_modes`] hands them over.
pub(crate) enum SigmaModes<'a, T: RealField + Copy> {
    /// One mode: its eigenvalue after the filter and Q_k (the F-space mode is U Q_k Vᵀ).
    One(T, &'a Matrix3<T>),
    /// The three scaling modes at once, when the filter leaves them as they are: the σ-space
    /// Hessian H itself, Σ_k λ_k diag(w_k) ⊗ diag(w_k) = Σ_ij H_ij (e_i e_iᵀ) ⊗ (e_j e_jᵀ).
    Scaling(&'a Matrix3<T>),
}

/// True when the symmetric 3×3 `h` is positive definite (leading minors > 0, Sylvester): then
/// no eigenvalue filter changes it.
fn positive_definite3<T: RealField + Copy>(h: &Matrix3<T>) -> bool {
    let m1 = h[(0, 0)];
    let m2 = h[(0, 0)] * h[(1, 1)] - h[(0, 1)] * h[(1, 0)];
    m1 > T::zero() && m2 > T::zero() && h.determinant() > T::zero()
}

/// The singular-value route shared by [`evaluate_filtered`], [`stress_and_block`],
/// [`dpdf_curvature`] and the element Hessian: the SVD by cyclic Jacobi ([`svd3_fast`]; nalgebra's general solvers were 58% and
/// 20% of a VBD iteration's instructions), then `visit(svd, modes)` for each mode whose
/// eigenvalue after `filter` is non-zero. With `whole_scaling`, the three scaling modes come as
/// one [`SigmaModes::Scaling`] whenever the filter cannot change them (no filter, or the σ-space
/// Hessian positive definite — the common case): that skips the σ-space eigen-solve, a chain of
/// square roots and divisions that was a third of a VBD iteration. Returns Ψ (J/m³), P (Pa) and
/// the SVD.
pub(crate) fn filtered_modes<T: RealField + Copy>(
    m: &Material,
    f: &Matrix3<T>,
    filter: Option<EigenFilter>,
    whole_scaling: bool,
    visit: impl FnMut(&Svd3<T>, SigmaModes<'_, T>),
) -> (T, Matrix3<T>, Svd3<T>) {
    filtered_modes_of(m, svd3_fast(f), filter, whole_scaling, visit)
}

/// [`filtered_modes`] with F's SVD already taken ([`svd3_fast`], or
/// [`super::svd3_fast_lanes`] for a batch of elements: the same bits).
pub(crate) fn filtered_modes_of<T: RealField + Copy>(
    m: &Material,
    svd: Svd3<T>,
    filter: Option<EigenFilter>,
    whole_scaling: bool,
    mut visit: impl FnMut(&Svd3<T>, SigmaModes<'_, T>),
) -> (T, Matrix3<T>, Svd3<T>) {
    let d = sigma_derivatives(m, &svd.sigma);
    let p = svd.u * Matrix3::from_diagonal(&d.grad) * svd.v.transpose();
    let apply = |lambda: T| filter.map_or(lambda, |filter| filter.apply(lambda));
    if whole_scaling && (filter.is_none() || positive_definite3(&d.hess)) {
        visit(&svd, SigmaModes::Scaling(&d.hess));
        for_each_pair_mode(&svd.sigma, &d, |lambda, q| {
            let lambda = apply(lambda);
            if lambda != T::zero() {
                visit(&svd, SigmaModes::One(lambda, q));
            }
        });
    } else {
        for_each_mode_with(&svd.sigma, &d, symmetric_eigen3(&d.hess), |lambda, q| {
            let lambda = apply(lambda);
            if lambda != T::zero() {
                visit(&svd, SigmaModes::One(lambda, q));
            }
        });
    }
    (d.psi, p, svd)
}

/// P(F) (Pa) and the filtered ∂P/∂F contracted with `b` on both column sides,
/// K\[(i,k)\] = Σ_{j,l} (∂P/∂F)\[(i+3j),(k+3l)\] b_j b_l (Pa/m² for `b` in 1/m): with
/// δF = δx bᵀ, vec(δF)ᵀ(∂P/∂F)vec(δF) = δxᵀKδx. One tet's diagonal Hessian block at corner a is
/// V·K with b = ∇N_a, so a per-vertex solver (VBD) gets it without the 9×9 ∂P/∂F or the 12×12
/// element Hessian: K = Σ_k λ_k (M_k b)(M_k b)ᵀ over the same nine modes M_k = U Q_k Vᵀ as
/// [`evaluate_filtered`] (`filtered_modes`: the scaling modes as one block diag(w) H diag(w)
/// where the filter leaves them alone): equal to its P and its contraction up to round-off.
pub fn stress_and_block<T: RealField + Copy>(
    m: &Material,
    f: &Matrix3<T>,
    b: &Vector3<T>,
    filter: Option<EigenFilter>,
) -> (Matrix3<T>, Matrix3<T>) {
    if m.model == MaterialModel::Linear {
        let s = linear(m, f, true);
        let d = s.dpdf.unwrap_or_else(Mat9::zeros);
        let k = Matrix3::from_fn(|i, k| {
            let mut acc = T::zero();
            for j in 0..3 {
                for l in 0..3 {
                    acc += d[(i + 3 * j, k + 3 * l)] * b[j] * b[l];
                }
            }
            acc
        });
        return (s.p, k);
    }
    // In the singular frame: w = Vᵀb, z_k = Q_k w, and K = U (Σ_k λ_k z_k z_kᵀ) Uᵀ.
    let mut w = None;
    let mut s = Matrix3::zeros();
    let (_, p, svd) = filtered_modes(m, f, filter, true, |svd, modes| {
        let w = *w.get_or_insert_with(|| svd.v.tr_mul(b));
        match modes {
            SigmaModes::One(lambda, q) => {
                let z = q * w;
                s += z * z.transpose() * lambda;
            }
            // Σ_k λ_k (diag(w_k) w)(diag(w_k) w)ᵀ = diag(w) H diag(w).
            SigmaModes::Scaling(h) => {
                s += Matrix3::from_fn(|i, j| w[i] * h[(i, j)] * w[j]);
            }
        }
    });
    (p, svd.u * s * svd.u.transpose())
}

/// P(F) (Pa) and the true, unfiltered K = Σ_{j,l} (∂P/∂F)\[(i+3j),(k+3l)\] b_j b_l (Pa/m² for `b`
/// in 1/m) of [`stress_and_block`] with no filter, in closed form without an SVD, for the models
/// whose K is positive semidefinite at every F: the two stable Neo-Hookeans. `None` for the
/// others.
///
/// Why it is closed form and PSD: these Ψ depend on F through I_C = ‖F‖² and J = det F only, and
/// with δF = δx bᵀ the second derivative of J drops out of K — ∂²J/∂F_ij∂F_kl = ε_ikm ε_jln F_mn
/// is antisymmetric in (j, l), so Σ_jl ε_jln b_j b_l = 0. What is left is
/// K = 2Ψ_I |b|² I + 4Ψ_II (Fb)(Fb)ᵀ + Ψ_JJ (cof F b)(cof F b)ᵀ (no Ψ_IJ term in these models):
/// log-free (`StableNeoHookeanVbd`) Ψ_I = μ/2, Ψ_II = 0, Ψ_JJ = λ; Smith et al.'s log term adds
/// Ψ_I −= μ/(2q), Ψ_II = μ/(2q²) with q = I_C + 1 ≥ 1. Every coefficient is ≥ 0 for μ, λ ≥ 0.
/// This is one tet's exact diagonal Hessian block at a corner (times V, b = ∇N_a): the Hessian
/// of the local problem a per-vertex Newton step (VBD) solves.
pub fn stress_and_exact_block<T: RealField + Copy>(
    m: &Material,
    f: &Matrix3<T>,
    b: &Vector3<T>,
) -> Option<(Matrix3<T>, Matrix3<T>)> {
    if !matches!(
        m.model,
        MaterialModel::StableNeoHookean | MaterialModel::StableNeoHookeanVbd
    ) {
        return None;
    }
    let mu: T = c(m.mu);
    let la: T = c(m.lambda);
    let (cof, j) = cofactor(f);
    let q = f.norm_squared() + T::one();
    let cb = cof * b;
    let bb = b.norm_squared();
    let mut k = cb * cb.transpose() * la;
    if m.model == MaterialModel::StableNeoHookean {
        let fb = f * b;
        k += fb * fb.transpose() * (c::<T>(2.0) * mu / (q * q));
        k += Matrix3::identity() * (mu * (T::one() - T::one() / q) * bb);
    } else {
        k += Matrix3::identity() * (mu * bb);
    }
    Some((stable_nh_pk1(m, f, &cof, j, q), k))
}

/// cof F (columns f₁×f₂, f₂×f₀, f₀×f₁) and J = det F.
fn cofactor<T: RealField + Copy>(f: &Matrix3<T>) -> (Matrix3<T>, T) {
    let (f0, f1, f2) = (f.column(0), f.column(1), f.column(2));
    let cof = Matrix3::from_columns(&[f1.cross(&f2), f2.cross(&f0), f0.cross(&f1)]);
    let j = f0.dot(&cof.column(0));
    (cof, j)
}

/// P(F) (Pa) of the two stable Neo-Hookeans from cof F, J and q = I_C + 1:
/// μF + λ(J − α) cof F, minus μF/q for Smith's log term. Shared by [`invariant_stress`] and
/// [`stress_and_exact_block`].
fn stable_nh_pk1<T: RealField + Copy>(
    m: &Material,
    f: &Matrix3<T>,
    cof: &Matrix3<T>,
    j: T,
    q: T,
) -> Matrix3<T> {
    let mu: T = c(m.mu);
    let mut p = f * mu + cof * (c::<T>(m.lambda) * (j - stable_nh_alpha::<T>(m)));
    if m.model == MaterialModel::StableNeoHookean {
        p -= f * (mu / q);
    }
    p
}

/// vec(δF)ᵀ (∂P/∂F) vec(δF) at F, Pa: the true (unprojected) curvature of Ψ along δF. From the
/// same nine modes as [`evaluate_filtered`], as Σ_k λ_k (Q_k : UᵀδFV)², without forming the 9×9
/// matrix.
pub fn dpdf_curvature<T: RealField + Copy>(m: &Material, f: &Matrix3<T>, df: &Matrix3<T>) -> T {
    if m.model == MaterialModel::Linear {
        let c = linear(m, f, true).dpdf.unwrap_or_else(Mat9::zeros);
        let v = nalgebra::SVector::<T, 9>::from_column_slice(df.as_slice());
        return (v.transpose() * c * v)[(0, 0)];
    }
    let mut local = None;
    let mut acc = T::zero();
    filtered_modes(m, f, None, true, |svd, modes| {
        let l: Matrix3<T> = *local.get_or_insert_with(|| svd.u.transpose() * df * svd.v);
        match modes {
            SigmaModes::One(lambda, q) => {
                let a = q.component_mul(&l).sum();
                acc += lambda * a * a;
            }
            // Σ_k λ_k (diag(w_k) : L)² = dᵀ H d with d = diag(L).
            SigmaModes::Scaling(h) => {
                let d = l.diagonal();
                acc += (d.transpose() * h * d)[(0, 0)];
            }
        }
    });
    acc
}

/// Calls `visit(λ_k, Q_k)` for the nine eigenpairs of ∂P/∂F in singular-value space (the
/// eigenvector in F space is U·Q_k·Vᵀ, unit Frobenius norm): three scaling modes (eigenvectors
/// of the σ-space Hessian), then a flip (symmetric) and a twist (skew) mode per pair of
/// singular values. The σ-space Hessian's eigenpairs are given (values, vectors as
/// columns).
fn for_each_mode_with<T: RealField + Copy>(
    sigma: &Vector3<T>,
    d: &super::SigmaDerivatives<T>,
    (values, vectors): (Vector3<T>, Matrix3<T>),
    mut visit: impl FnMut(T, &Matrix3<T>),
) {
    for k in 0..3 {
        let w = vectors.column(k);
        visit(
            values[k],
            &Matrix3::from_diagonal(&Vector3::new(w[0], w[1], w[2])),
        );
    }
    for_each_pair_mode(sigma, d, visit);
}

/// The six flip and twist modes of [`for_each_mode_with`] (closed form in σ: no eigen-solve).
fn for_each_pair_mode<T: RealField + Copy>(
    sigma: &Vector3<T>,
    d: &super::SigmaDerivatives<T>,
    mut visit: impl FnMut(T, &Matrix3<T>),
) {
    let tol = T::default_epsilon().sqrt();
    let inv_sqrt2: T = c(std::f64::consts::FRAC_1_SQRT_2);
    for (i, j) in [(0usize, 1usize), (0, 2), (1, 2)] {
        let (si, sj) = (sigma[i], sigma[j]);
        let (gi, gj) = (d.grad[i], d.grad[j]);
        let scale = T::one().max(si.abs()).max(sj.abs());
        let diff = si - sj;
        let lambda_flip = if diff.abs() > tol * scale {
            (gi - gj) / diff
        } else {
            // Limit of the difference quotient for a symmetric Ψ.
            (d.hess[(i, i)] + d.hess[(j, j)]) / c(2.0) - d.hess[(i, j)]
        };
        let mut sum = si + sj;
        if sum.abs() < tol * scale {
            sum = if sum < T::zero() {
                -tol * scale
            } else {
                tol * scale
            };
        }
        let lambda_twist = (gi + gj) / sum;
        let mut q = Matrix3::zeros();
        q[(i, j)] = inv_sqrt2;
        q[(j, i)] = inv_sqrt2;
        visit(lambda_flip, &q);
        q[(j, i)] = -inv_sqrt2;
        visit(lambda_twist, &q);
    }
}

/// Ψ (J/m³) and P (Pa) from the invariants I_C = ‖F‖², J = det F and the cofactor matrix
/// cof F = ∂J/∂F, without an SVD, for the models whose P has that closed form (both stable
/// Neo-Hookeans, Neo-Hookean, St. Venant–Kirchhoff); `None` for the rotation-based ones (fixed
/// corotated, ARAP), which need the polar factor. Equal to the singular-value route up to
/// round-off; a gradient or energy pass then costs a few dozen flops per element instead of a
/// 3×3 SVD.
fn invariant_stress<T: RealField + Copy>(m: &Material, f: &Matrix3<T>) -> Option<(T, Matrix3<T>)> {
    let mu: T = c(m.mu);
    let la: T = c(m.lambda);
    let (one, two, three): (T, T, T) = (T::one(), c(2.0), c(3.0));
    let ic = f.norm_squared();
    let (cof, j) = cofactor(f);
    Some(match m.model {
        MaterialModel::StableNeoHookean | MaterialModel::StableNeoHookeanVbd => {
            let q = ic + one;
            let alpha = stable_nh_alpha::<T>(m);
            let mut psi = mu / two * (ic - three) + la / two * (j - alpha) * (j - alpha)
                - la / two * (one - alpha) * (one - alpha);
            if m.model == MaterialModel::StableNeoHookean {
                psi -= mu / two * (q.ln() - c::<T>(4.0).ln());
            }
            (psi, stable_nh_pk1(m, f, &cof, j, q))
        }
        MaterialModel::NeoHookean => {
            if j <= T::zero() {
                return Some((c(f64::INFINITY), Matrix3::repeat(c(f64::NAN))));
            }
            let lj = j.ln();
            let psi = mu / two * (ic - three) - mu * lj + la / two * lj * lj;
            (psi, f * mu + cof * ((la * lj - mu) / j))
        }
        MaterialModel::StVk => {
            let e = (f.tr_mul(f) - Matrix3::identity()) * c::<T>(0.5);
            let tr = e.trace();
            let psi = mu * e.norm_squared() + la / two * tr * tr;
            (psi, f * (e * (two * mu) + Matrix3::identity() * (la * tr)))
        }
        _ => return None,
    })
}

/// Linear elasticity: Ψ = μ‖ε‖² + λ/2 tr(ε)², ε = sym(F) − I; constant, PSD ∂P/∂F.
fn linear<T: RealField + Copy>(m: &Material, f: &Matrix3<T>, want_dpdf: bool) -> StressEval<T> {
    let mu: T = c(m.mu);
    let la: T = c(m.lambda);
    let eps = (f + f.transpose()) * c::<T>(0.5) - Matrix3::identity();
    let tr = eps.trace();
    let psi = mu * eps.norm_squared() + la / c(2.0) * tr * tr;
    let p = eps * (c::<T>(2.0) * mu) + Matrix3::identity() * (la * tr);
    let dpdf = want_dpdf.then(|| {
        let mut out = Mat9::zeros();
        for i in 0..3 {
            for j in 0..3 {
                for k in 0..3 {
                    for l in 0..3 {
                        let mut v = T::zero();
                        if i == k && j == l {
                            v += mu;
                        }
                        if i == l && j == k {
                            v += mu;
                        }
                        if i == j && k == l {
                            v += la;
                        }
                        out[(i + 3 * j, k + 3 * l)] = v;
                    }
                }
            }
        }
        out
    });
    StressEval { psi, p, dpdf }
}
