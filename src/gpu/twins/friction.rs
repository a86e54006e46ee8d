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
//! The Hessian is not computed here: the multilevel solver's direction takes friction
//! Hessians from the host (`StepProblem::contact_hessian_blocks`), and the line search needs
//! only energies.
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

pub use crate::gpu::abi::FRICTION_GRADIENT;

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

/// Twin of `ipc_friction.wgsl` (module docs): per pair i < n, `energy[i]` (J) and with
/// [`FRICTION_GRADIENT`] `grad[4i + k]` (N, w = 0). f0 = ε_v·h (m), u0 = flags.
pub fn ipc_friction(
    p: &Params,
    dx: &[GpuVec4],
    pairs: &[GpuFrictionPair],
    energy: &mut [f32],
    grad: &mut [GpuVec4],
) -> Result<()> {
    let n = p.n as usize;
    let want_g = p.u0 & FRICTION_GRADIENT != 0;
    need(pairs.len(), n, "ipc_friction pairs")?;
    need(energy.len(), n, "ipc_friction energy")?;
    if want_g {
        need(grad.len(), 4 * n, "ipc_friction grad")?;
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
    energy[..n]
        .par_iter_mut()
        .zip(gch.par_iter_mut())
        .enumerate()
        .for_each(|(i, (e, g))| {
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
        });
    Ok(())
}
