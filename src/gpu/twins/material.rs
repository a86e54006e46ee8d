//! Twin of `shaders/shared/material.wgsl`: isotropic models in singular-value space, f32,
//! written as Ψ(σ) = k(I_C) + h(J) + Σ g(σ_i) so the flip/twist eigenvalues come in closed form.
//! Constants are shifted so Ψ(I) = 0, as in `crate::material`.

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

/// Mirror of WGSL `sigma_eval`; `model` is the raw id (unknown ids give Ψ = +∞, zero derivatives).
pub fn sigma_eval(model: u32, mu: f32, lam: f32, s: Vec3) -> SigmaEval {
    let ic = s.dot(s);
    let j = s.x * s.y * s.z;
    let pj = Vec3::new(s.y * s.z, s.x * s.z, s.x * s.y);
    let si = Vec3::new(s.x, s.x, s.y);
    let sj = Vec3::new(s.y, s.z, s.z);
    let third = Vec3::new(s.z, s.y, s.x);
    let mut k = Vec3::ZERO;
    let mut h = Vec3::ZERO;
    let mut g0 = 0.0f32;
    let mut g1 = Vec3::ZERO;
    let mut g2 = Vec3::ZERO;
    let mut gflip = Vec3::ZERO;
    let mut gtwist = Vec3::ZERO;
    let mut infinite = false;
    match GpuModel::from_id(model) {
        Some(GpuModel::StableNeoHookean) => {
            let alpha = 1.0 + 0.75 * mu / lam;
            k = Vec3::new(
                0.5 * mu * (ic - 3.0) - 0.5 * mu * (0.25 * (ic + 1.0)).ln(),
                0.5 * mu - 0.5 * mu / (ic + 1.0),
                0.5 * mu / ((ic + 1.0) * (ic + 1.0)),
            );
            h = Vec3::new(
                0.5 * lam * (j - 1.0) * (j + 1.0 - 2.0 * alpha),
                lam * (j - alpha),
                lam,
            );
        }
        Some(GpuModel::StableNeoHookeanVbd) => {
            let alpha = 1.0 + mu / lam;
            k = Vec3::new(0.5 * mu * (ic - 3.0), 0.5 * mu, 0.0);
            h = Vec3::new(
                0.5 * lam * (j - 1.0) * (j + 1.0 - 2.0 * alpha),
                lam * (j - alpha),
                lam,
            );
        }
        Some(m @ (GpuModel::FixedCorotated | GpuModel::Arap)) => {
            let d = s - Vec3::ONE;
            g0 = mu * d.dot(d);
            g1 = 2.0 * mu * d;
            g2 = Vec3::splat(2.0 * mu);
            gflip = Vec3::splat(2.0 * mu);
            let sum = Vec3::new(
                guard_pair_sum(si.x + sj.x),
                guard_pair_sum(si.y + sj.y),
                guard_pair_sum(si.z + sj.z),
            );
            gtwist = 2.0 * mu * (Vec3::ONE - 2.0 / sum);
            if m == GpuModel::FixedCorotated {
                h = Vec3::new(0.5 * lam * (j - 1.0) * (j - 1.0), lam * (j - 1.0), lam);
            }
        }
        Some(GpuModel::NeoHookean) => {
            k = Vec3::new(0.5 * mu * (ic - 3.0), 0.5 * mu, 0.0);
            if j > 0.0 {
                let lj = j.ln();
                h = Vec3::new(
                    -mu * lj + 0.5 * lam * lj * lj,
                    (lam * lj - mu) / j,
                    (mu + lam - lam * lj) / (j * j),
                );
            } else {
                infinite = true;
            }
        }
        Some(GpuModel::StVK) => {
            let e = 0.5 * (s * s - Vec3::ONE);
            g0 = mu * e.dot(e);
            g1 = 2.0 * mu * e * s;
            g2 = mu * (3.0 * s * s - Vec3::ONE);
            gflip = mu * (si * si + si * sj + sj * sj - Vec3::ONE);
            gtwist = mu * (si * si - si * sj + sj * sj - Vec3::ONE);
            k = Vec3::new(
                0.125 * lam * (ic - 3.0) * (ic - 3.0),
                0.25 * lam * (ic - 3.0),
                0.25 * lam,
            );
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
        psi: k.x + h.x + g0,
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
