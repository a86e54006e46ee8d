//! Isotropic energy densities in singular-value space: Ψ(σ), ∂Ψ/∂σ and ∂²Ψ/∂σ².
//! Every density is shifted by a constant so that Ψ(I) = 0.

use super::{c, Material, MaterialModel};
use nalgebra::{Matrix3, RealField, Vector3};

/// Ψ and its first and second derivatives with respect to the signed singular values.
#[derive(Clone, Copy, Debug)]
pub struct SigmaDerivatives<T: RealField + Copy> {
    /// Energy density Ψ, J/m³ (`+∞` where the model is undefined, e.g. Neo-Hookean with J ≤ 0).
    pub psi: T,
    /// ∂Ψ/∂σᵢ, Pa.
    pub grad: Vector3<T>,
    /// ∂²Ψ/∂σᵢ∂σⱼ, Pa.
    pub hess: Matrix3<T>,
}

/// The rest-stability shift α of the stable Neo-Hookeans' volume term λ/2 (J − α)²: 1 + ¾μ/λ
/// for Smith et al.'s (with its −μ/2 log(I_C + 1) term), 1 + μ/λ for the log-free VBD variant;
/// both make P(I) = 0.
pub fn stable_nh_alpha<T: RealField + Copy>(m: &Material) -> T {
    let (mu, la): (T, T) = (c(m.mu), c(m.lambda));
    if m.model == MaterialModel::StableNeoHookean {
        T::one() + c::<T>(0.75) * mu / la
    } else {
        T::one() + mu / la
    }
}

/// Ψ, ∂Ψ/∂σ and ∂²Ψ/∂σ² for an isotropic model. Panics on [`MaterialModel::Linear`], which is
/// not a function of the singular values alone (see `stress.rs`).
pub fn sigma_derivatives<T: RealField + Copy>(m: &Material, s: &Vector3<T>) -> SigmaDerivatives<T> {
    let mu: T = c(m.mu);
    let la: T = c(m.lambda);
    let one = T::one();
    let two: T = c(2.0);
    let j = s[0] * s[1] * s[2];
    // ∂J/∂σᵢ = product of the other two.
    let dj = Vector3::new(s[1] * s[2], s[0] * s[2], s[0] * s[1]);
    // ∂²J/∂σᵢ∂σⱼ = the remaining singular value (zero diagonal).
    let ddj = Matrix3::new(
        T::zero(),
        s[2],
        s[1],
        s[2],
        T::zero(),
        s[0],
        s[1],
        s[0],
        T::zero(),
    );
    let ic = s.dot(s);
    let id = Matrix3::<T>::identity();
    match m.model {
        MaterialModel::Arap | MaterialModel::FixedCorotated => {
            let la = if m.model == MaterialModel::Arap {
                T::zero()
            } else {
                la
            };
            let d = s - Vector3::repeat(one);
            let psi = mu * d.dot(&d) + la / two * (j - one) * (j - one);
            let grad = d * (two * mu) + dj * (la * (j - one));
            let hess = id * (two * mu) + (dj * dj.transpose()) * la + ddj * (la * (j - one));
            SigmaDerivatives { psi, grad, hess }
        }
        MaterialModel::StableNeoHookean | MaterialModel::StableNeoHookeanVbd => {
            let smith = m.model == MaterialModel::StableNeoHookean;
            let alpha = stable_nh_alpha::<T>(m);
            // Constant offsets are removed so that Ψ(I) = 0 for every model (they change nothing
            // but the reported energy).
            let mut psi = mu / two * (ic - c(3.0)) + la / two * (j - alpha) * (j - alpha)
                - la / two * (one - alpha) * (one - alpha);
            let mut grad = s * mu + dj * (la * (j - alpha));
            let mut hess = id * mu + (dj * dj.transpose()) * la + ddj * (la * (j - alpha));
            if smith {
                // − μ/2 log(I_C + 1)
                let q = ic + one;
                psi -= mu / two * (q.ln() - c::<T>(4.0).ln());
                grad -= s * (mu / q);
                hess -= id * (mu / q);
                hess += (s * s.transpose()) * (two * mu / (q * q));
            }
            SigmaDerivatives { psi, grad, hess }
        }
        MaterialModel::NeoHookean => {
            if j <= T::zero() {
                let inf = c::<T>(f64::INFINITY);
                let nan = c::<T>(f64::NAN);
                return SigmaDerivatives {
                    psi: inf,
                    grad: Vector3::repeat(nan),
                    hess: Matrix3::repeat(nan),
                };
            }
            let lj = j.ln();
            let inv = Vector3::new(one / s[0], one / s[1], one / s[2]);
            let psi = mu / two * (ic - c(3.0)) - mu * lj + la / two * lj * lj;
            let grad = s * mu + inv * (la * lj - mu);
            let mut hess = (inv * inv.transpose()) * la;
            for i in 0..3 {
                hess[(i, i)] += mu + (mu - la * lj) * inv[i] * inv[i];
            }
            SigmaDerivatives { psi, grad, hess }
        }
        MaterialModel::StVk => {
            let e = Vector3::new(
                (s[0] * s[0] - one) / two,
                (s[1] * s[1] - one) / two,
                (s[2] * s[2] - one) / two,
            );
            let tr = e[0] + e[1] + e[2];
            let psi = mu * e.dot(&e) + la / two * tr * tr;
            let mut grad = Vector3::zeros();
            let mut hess = (s * s.transpose()) * la;
            for i in 0..3 {
                grad[i] = (two * mu * e[i] + la * tr) * s[i];
                hess[(i, i)] += two * mu * e[i] + la * tr + two * mu * s[i] * s[i];
            }
            SigmaDerivatives { psi, grad, hess }
        }
        MaterialModel::Linear => panic!("linear elasticity is not a singular-value model"),
    }
}
