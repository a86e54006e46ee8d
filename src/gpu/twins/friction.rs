//! Twin of `shaders/ipc_friction.wgsl`: IPC's lagged friction per pair in f32, the per-pair
//! half of [`crate::contact::friction::FrictionSet`]'s energy and gradient.
//!
//! # `ipc_friction` (one invocation per lagged pair)
//! For pair i (a [`GpuFrictionPair`]: stencil v, s = μλ in N, the lagged 2×12 tangent map T
//! stored per vertex) and the step displacements Δxₖ = `dx[vₖ]` (m):
//! u = Σₖ (`t[2k]`·Δxₖ, `t[2k+1]`·Δxₖ) ∈ ℝ² (m, summed in k order), y = ‖u‖, and with the
//! mollifier width ε = ε_v·h = `Params::f0` (m):
//! * `energy[i]` = s·f₀(y) (J), f₀(y) = −y³/(3ε²) + y²/ε + ε/3 below ε and y above;
//! * with [`FRICTION_GRADIENT`] in u0, `grad[4i + k].xyz` = s·(f₁(y)/y)·(u.x·`t[2k]` + u.y·`t[2k+1]`)
//!   (N, w = 0), f₁(y)/y = 2/ε − y/ε² below ε and 1/y above — the per-pair layout of
//!   `ipc_pairs`' gradient, so `ipc_gather` sums it per vertex over the same
//!   [`crate::gpu::VertexCsr::from_pairs`] CSR.
//!
//! * with [`FRICTION_HESSIAN`], `hess[144i + 12r + c]` = s·(Tᵀ C T)[r][c] (N/m, row-major, dofs
//!   vertex-major, `ipc_pairs`' layout), C = (I − uuᵀ/y²)/y above ε, (f₁(y)/y)·I − uuᵀ/(ε²y)
//!   below, (f₁/y)·I at y = 0 — [`crate::contact::friction::FrictionPair::potential`]'s
//!   Hessian, PSD in both regimes (the eigenvalues of C are 0 and 1/y above ε; (2 − q)/ε and
//!   (2 − 2q)/ε with q = y/ε below), so it is not projected. The JGS2/VBD device iteration
//!   gathers its diagonal blocks into the local systems; the multilevel solver's direction
//!   takes friction Hessians from the host (`StepProblem::contact_hessian_blocks`).
//!
//! **Why displacements, not positions.** The kernel reads the step displacement x − x̂ per
//! vertex (an obstacle vertex's: its scripted motion over the step,
//! [`crate::contact::friction::FrictionSet::obstacle_motion`]), kept by the host or a device
//! solver as its own f32 field. A difference of two f32 positions carries ε_f32·|x| of absolute
//! error (6e-8 m at 1 m from the origin) against a mollifier width ε_v·h of ~1e-5 m: measured on
//! the bundled cube stack's landing step (`tests/gpu/gpu_multilevel.rs`), positions moved sticking
//! pairs' forces by up to 6%; from displacements the error is relative to |Δx|.
//!
//! **Precision.** u is a sum of four dot products of f32 displacements: with Δx of size ~D its
//! error is ~ε_f32·D (absolute), relative to y when the pair slides (y ≳ D) and not otherwise —
//! a sticking pair (y ≪ ε) still has energy s·(ε/3 + O(y²/ε)) to ε_f32 relative. Measured
//! against the f64 [`FrictionSet`](crate::contact::friction::FrictionSet) in
//! `tests/gpu/gpu_contact_kernels.rs`.

use super::need;
use crate::gpu::{GpuFrictionPair, GpuVec4, Params};
use crate::{JelloError, Result};
use glam::Vec3;
use rayon::prelude::*;

pub use crate::gpu::abi::{FRICTION_GRADIENT, FRICTION_HESSIAN};

fn v3(p: &GpuVec4) -> Vec3 {
    Vec3::new(p[0], p[1], p[2])
}

/// f₀(y) (m) and f₁(y)/y (1/m) of IPC's friction mollifier of width `eps` (m), in f32 as the
/// kernel evaluates them.
pub fn mollifier_f0_ratio(y: f32, eps: f32) -> (f32, f32) {
    if y >= eps {
        (y, 1.0 / y)
    } else {
        let q = y / eps;
        (eps * (q * q - q * q * q / 3.0 + 1.0 / 3.0), (2.0 - q) / eps)
    }
}

/// Twin of `ipc_friction.wgsl` (module docs): per pair i < n, `energy[i]` (J), with
/// [`FRICTION_GRADIENT`] `grad[4i + k]` (N, w = 0), with [`FRICTION_HESSIAN`]
/// `hess[144i..144i + 144]` (N/m). f0 = ε_v·h (m), u0 = flags.
pub fn ipc_friction(
    p: &Params,
    dx: &[GpuVec4],
    pairs: &[GpuFrictionPair],
    energy: &mut [f32],
    grad: &mut [GpuVec4],
    hess: &mut [f32],
) -> Result<()> {
    let n = p.n as usize;
    let want_g = p.u0 & FRICTION_GRADIENT != 0;
    let want_h = p.u0 & FRICTION_HESSIAN != 0;
    need(pairs.len(), n, "ipc_friction pairs")?;
    need(energy.len(), n, "ipc_friction energy")?;
    if want_g {
        need(grad.len(), 4 * n, "ipc_friction grad")?;
    }
    if want_h {
        need(hess.len(), 144 * n, "ipc_friction hess")?;
    }
    let nx = dx.len();
    if let Some((i, pr)) = pairs[..n]
        .iter()
        .enumerate()
        .find(|(_, pr)| pr.v.iter().any(|&v| v as usize >= nx))
    {
        return Err(JelloError::Invalid(format!(
            "ipc_friction: pair {i} = {:?} indexes past {nx} vertices",
            pr.v
        )));
    }
    let eps = p.f0;
    let mut gch: Vec<Option<&mut [GpuVec4]>> = if want_g {
        grad[..4 * n].chunks_mut(4).map(Some).collect()
    } else {
        (0..n).map(|_| None).collect()
    };
    let mut hch: Vec<Option<&mut [f32]>> = if want_h {
        hess[..144 * n].chunks_mut(144).map(Some).collect()
    } else {
        (0..n).map(|_| None).collect()
    };
    energy[..n]
        .par_iter_mut()
        .zip(gch.par_iter_mut().zip(hch.par_iter_mut()))
        .enumerate()
        .for_each(|(i, (e, (g, h)))| {
            let pr = &pairs[i];
            let (mut ux, mut uy) = (0.0f32, 0.0f32);
            for k in 0..4 {
                let d = v3(&dx[pr.v[k] as usize]);
                ux += v3(&pr.t[2 * k]).dot(d);
                uy += v3(&pr.t[2 * k + 1]).dot(d);
            }
            let y = (ux * ux + uy * uy).sqrt();
            let (f0, ratio) = mollifier_f0_ratio(y, eps);
            *e = pr.s * f0;
            if let Some(g) = g.take() {
                let c = pr.s * ratio;
                for (k, gk) in g.iter_mut().enumerate() {
                    let v = (v3(&pr.t[2 * k]) * ux + v3(&pr.t[2 * k + 1]) * uy) * c;
                    *gk = [v.x, v.y, v.z, 0.0];
                }
            }
            if let Some(h) = h.take() {
                let (mut c00, mut c01, mut c11) = (ratio, 0.0f32, ratio);
                let w = if y >= eps {
                    1.0 / (y * y * y)
                } else if y > 0.0 {
                    1.0 / (eps * eps * y)
                } else {
                    0.0
                };
                if w != 0.0 {
                    c00 = ratio - ux * ux * w;
                    c01 = -ux * uy * w;
                    c11 = ratio - uy * uy * w;
                }
                let (c00, c01, c11) = (c00 * pr.s, c01 * pr.s, c11 * pr.s);
                for a in 0..4 {
                    let (ta, sa) = (v3(&pr.t[2 * a]), v3(&pr.t[2 * a + 1]));
                    for b in 0..4 {
                        let (tb, sb) = (v3(&pr.t[2 * b]), v3(&pr.t[2 * b + 1]));
                        for r in 0..3 {
                            let p0 = ta[r] * c00 + sa[r] * c01;
                            let p1 = ta[r] * c01 + sa[r] * c11;
                            let base = 12 * (3 * a + r) + 3 * b;
                            for q in 0..3 {
                                h[base + q] = p0 * tb[q] + p1 * sb[q];
                            }
                        }
                    }
                }
            }
        });
    Ok(())
}
