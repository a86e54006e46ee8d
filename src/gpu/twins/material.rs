//! Twin of `shaders/shared/material.wgsl`: isotropic models in singular-value space, f32,
//! written as Ψ(σ) = k(I_C) + h(J) + Σ g(σ_i) so the flip/twist eigenvalues come in closed form.
//! Constants are shifted so Ψ(I) = 0, as in `crate::material`; Ψ is evaluated in e = σ − 1 so
//! that no first-order terms cancel at rest.

use super::linalg::outer3;
use crate::gpu::GpuModel;
use glam::{Mat3, Vec3};

/// Guard on |σ_i + σ_j| in the corotational twist eigenvalue (same constant as the WGSL).
pub const PAIR_SUM_EPS: f32 = 1e-6;

/// Energy density and its σ-space derivatives at one σ.
#[derive(Clone, Copy, Debug)]
pub struct SigmaEval {
    /// Ψ (Pa).
    pub psi: f32,
    /// ∂Ψ/∂σ_i.
    pub grad: Vec3,
    /// ∂²Ψ/∂σ_i∂σ_j.
    pub hess: Mat3,
    /// Flip-mode eigenvalues (ψ_i − ψ_j)/(σ_i − σ_j) for pairs (0,1), (0,2), (1,2).
    pub flip: Vec3,
    /// Twist-mode eigenvalues (ψ_i + ψ_j)/(σ_i + σ_j) for the same pairs.
    pub twist: Vec3,
}

fn guard_pair_sum(d: f32) -> f32 {
    if d.abs() < PAIR_SUM_EPS {
        if d < 0.0 {
            -PAIR_SUM_EPS
        } else {
            PAIR_SUM_EPS
        }
    } else {
        d
    }
}

/// `x − ln(1 + x)` without cancellation (mirror of WGSL `x_minus_log1p`).
pub fn x_minus_log1p(x: f32) -> f32 {
    if x.abs() < 0.1 {
        let p = 1.0 / 6.0 + x * (-1.0 / 7.0 + x * (1.0 / 8.0));
        return x * x * (0.5 + x * (-1.0 / 3.0 + x * (0.25 + x * (-0.2 + x * p))));
    }
    x - (1.0 + x).ln()
}

/// `ln(1 + x)`, accurate near 0 (mirror of WGSL `log1p_f32`).
pub fn log1p_f32(x: f32) -> f32 {
    if x.abs() < 0.1 {
        return x - x_minus_log1p(x);
    }
    (1.0 + x).ln()
}

/// Mirror of WGSL `sigma_eval`; `model` is the raw id (unknown ids give Ψ = +∞, NaN derivatives).
pub fn sigma_eval(model: u32, mu: f32, lam: f32, s: Vec3) -> SigmaEval {
    let ic = s.dot(s);
    let j = s.x * s.y * s.z;
    let e1 = s - Vec3::ONE;
    let se = e1.x + e1.y + e1.z;
    let pe = e1.x * e1.y + e1.x * e1.z + e1.y * e1.z;
    let te = e1.x * e1.y * e1.z;
    let d_ic = e1.dot(e1) + 2.0 * se;
    let d_j = se + pe + te;
    let w = 0.5 * e1.dot(e1) - pe - te;
    let mut psi = 0.0f32;
    let pj = Vec3::new(s.y * s.z, s.x * s.z, s.x * s.y);
    let si = Vec3::new(s.x, s.x, s.y);
    let sj = Vec3::new(s.y, s.z, s.z);
    let third = Vec3::new(s.z, s.y, s.x);
    let mut k = Vec3::ZERO;
    let mut h = Vec3::ZERO;
    let mut g1 = Vec3::ZERO;
    let mut g2 = Vec3::ZERO;
    let mut gflip = Vec3::ZERO;
    let mut gtwist = Vec3::ZERO;
    let mut infinite = false;
    match GpuModel::from_id(model) {
        Some(GpuModel::StableNeoHookean) => {
            let alpha = 1.0 + 0.75 * mu / lam;
            psi = 0.5 * mu * x_minus_log1p(0.25 * d_ic) + 0.75 * mu * w + 0.5 * lam * d_j * d_j;
            k = Vec3::new(
                0.0,
                0.5 * mu - 0.5 * mu / (ic + 1.0),
                0.5 * mu / ((ic + 1.0) * (ic + 1.0)),
            );
            h = Vec3::new(0.0, lam * (j - alpha), lam);
        }
        Some(GpuModel::StableNeoHookeanVbd) => {
            let alpha = 1.0 + mu / lam;
            psi = mu * w + 0.5 * lam * d_j * d_j;
            k = Vec3::new(0.0, 0.5 * mu, 0.0);
            h = Vec3::new(0.0, lam * (j - alpha), lam);
        }
        Some(m @ (GpuModel::FixedCorotated | GpuModel::Arap)) => {
            psi = mu * e1.dot(e1);
            g1 = 2.0 * mu * e1;
            g2 = Vec3::splat(2.0 * mu);
            gflip = Vec3::splat(2.0 * mu);
            let sum = Vec3::new(
                guard_pair_sum(si.x + sj.x),
                guard_pair_sum(si.y + sj.y),
                guard_pair_sum(si.z + sj.z),
            );
            gtwist = 2.0 * mu * (Vec3::ONE - 2.0 / sum);
            if m == GpuModel::FixedCorotated {
                psi += 0.5 * lam * d_j * d_j;
                h = Vec3::new(0.0, lam * d_j, lam);
            }
        }
        Some(GpuModel::NeoHookean) => {
            k = Vec3::new(0.0, 0.5 * mu, 0.0);
            if j > 0.0 {
                let lj = log1p_f32(d_j);
                psi = mu * w + mu * x_minus_log1p(d_j) + 0.5 * lam * lj * lj;
                h = Vec3::new(0.0, (lam * lj - mu) / j, (mu + lam - lam * lj) / (j * j));
            } else {
                infinite = true;
            }
        }
        Some(GpuModel::StVK) => {
            let e = e1 + 0.5 * e1 * e1;
            psi = mu * e.dot(e) + 0.125 * lam * d_ic * d_ic;
            g1 = 2.0 * mu * e * s;
            g2 = mu * (3.0 * s * s - Vec3::ONE);
            gflip = mu * (si * si + si * sj + sj * sj - Vec3::ONE);
            gtwist = mu * (si * si - si * sj + sj * sj - Vec3::ONE);
            k = Vec3::new(0.0, 0.25 * lam * d_ic, 0.25 * lam);
        }
        Some(GpuModel::Linear) => {
            // Only the ∂P/∂F data; Ψ and P come from F (see the kernel twin).
            return SigmaEval {
                psi: 0.0,
                grad: Vec3::ZERO,
                hess: Mat3::from_cols(
                    Vec3::new(2.0 * mu + lam, lam, lam),
                    Vec3::new(lam, 2.0 * mu + lam, lam),
                    Vec3::new(lam, lam, 2.0 * mu + lam),
                ),
                flip: Vec3::splat(2.0 * mu),
                twist: Vec3::ZERO,
            };
        }
        None => infinite = true,
    }
    if infinite {
        return SigmaEval {
            psi: f32::INFINITY,
            grad: Vec3::NAN,
            hess: Mat3::NAN,
            flip: Vec3::NAN,
            twist: Vec3::NAN,
        };
    }
    let off = Mat3::from_cols(
        Vec3::new(0.0, s.z, s.y),
        Vec3::new(s.z, 0.0, s.x),
        Vec3::new(s.y, s.x, 0.0),
    );
    let diag = Mat3::from_diagonal(g2);
    SigmaEval {
        psi,
        grad: 2.0 * k.y * s + h.y * pj + g1,
        hess: outer3(s, s) * (4.0 * k.z)
            + Mat3::IDENTITY * (2.0 * k.y)
            + outer3(pj, pj) * h.z
            + off * h.y
            + diag,
        flip: Vec3::splat(2.0 * k.y) - h.y * third + gflip,
        twist: Vec3::splat(2.0 * k.y) + h.y * third + gtwist,
    }
}
