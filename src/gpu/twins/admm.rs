//! Twins of the ADMM-PD kernels (`shaders/admm_*.wgsl`, used by the device implementation of
//! `crate::solver::admm::AdmmBackend`) and of their shared z-steps
//! (`shaders/shared/admm_prox.wgsl`), f32, operation for operation.

use super::linalg::{self, svd3, sym_eig3};
use super::material::sigma_eval;
use super::{need, CHUNK};
use crate::gpu::layout::{ElemParams, GpuMat3, GpuTet, GpuVec4, GpuVertexInfo, Params};
use crate::gpu::GpuModel;
use crate::{JelloError, Result};
use glam::{Mat3, Vec3};
use rayon::prelude::*;

pub use crate::gpu::abi::{ADMM_PROX_HYPERELASTIC, ADMM_PROX_PD, ADMM_RESET};
/// Items per workgroup of `admm_gather` and `admm_primal` (their partials are per 256).
pub const ADMM_GROUP: usize = 256;
/// Items per workgroup of `admm_local`.
pub const ADMM_LOCAL_GROUP: usize = 64;

const NEWTON_MAX: u32 = 30;
const HALVINGS: u32 = 30;
const TOL: f32 = 2e-6;
const NOISE: f32 = 1e-5;
const FINITE: f32 = 3.0e38;

fn phi(p: &ElemParams, s: Vec3, target: Vec3, tau: f32) -> f32 {
    let d = s - target;
    sigma_eval(p.model, p.mu, p.lambda, s).psi + 0.5 * tau * d.dot(d)
}

fn phi_grad(p: &ElemParams, s: Vec3, target: Vec3, tau: f32) -> Vec3 {
    sigma_eval(p.model, p.mu, p.lambda, s).grad + tau * (s - target)
}

/// Mirror of WGSL `admm_prox_sigma`: min_σ ψ̂(σ) + τ/2‖σ − σ̃‖² by damped Newton.
pub fn prox_sigma(p: &ElemParams, target: Vec3, tau: f32) -> Vec3 {
    let mut s = target;
    let mut f = f32::INFINITY;
    for c in [target.abs(), target, Vec3::ONE] {
        let fc = phi(p, c, target, tau);
        if fc < f {
            s = c;
            f = fc;
        }
    }
    let tol = TOL * tau * (1.0 + target.length());
    let noise = NOISE * (f.abs() + tau * (1.0 + target.dot(target)));
    for _ in 0..NEWTON_MAX {
        let ev = sigma_eval(p.model, p.mu, p.lambda, s);
        let g = ev.grad + tau * (s - target);
        let gn = g.length();
        // NaN stops as well.
        #[allow(clippy::neg_cmp_op_on_partial_ord)]
        if !(gn > tol) {
            break;
        }
        let eig = sym_eig3(ev.hess + Mat3::from_diagonal(Vec3::splat(tau)));
        let fl = 1e-6 * tau;
        let l = eig.values;
        let sel = |v: f32| if v > fl { v } else { fl };
        let l = Vec3::new(sel(l.x), sel(l.y), sel(l.z));
        let q = eig.vectors;
        let step = -(q * ((q.transpose() * g) / l));
        let slope = g.dot(step);
        let mut alpha = 1.0f32;
        let mut accepted = false;
        for _ in 0..HALVINGS {
            let trial = s + alpha * step;
            let ft = phi(p, trial, target, tau);
            let armijo = ft <= f + 1e-4 * alpha * slope;
            let newton = alpha == 1.0
                && ft <= f + noise
                && phi_grad(p, trial, target, tau).length() <= 0.5 * gn;
            if ft.abs() <= FINITE && (armijo || newton) {
                s = trial;
                f = ft;
                accepted = true;
                break;
            }
            alpha *= 0.5;
        }
        if !accepted {
            break;
        }
    }
    s
}

/// Mirror of WGSL `admm_prox_hyperelastic` (linear elasticity in closed form).
pub fn prox_hyperelastic(p: &ElemParams, v: Mat3, w2: f32) -> Mat3 {
    let tau = w2 / p.volume;
    if p.model == GpuModel::Linear as u32 {
        let b = v - Mat3::IDENTITY;
        let bt = b.transpose();
        let skew = (b - bt) * 0.5;
        let sym = (b + bt) * 0.5;
        let tr = b.x_axis.x + b.y_axis.y + b.z_axis.z;
        let trs = tau * tr / (2.0 * p.mu + tau + 3.0 * p.lambda);
        let s = (sym * tau - Mat3::from_diagonal(Vec3::splat(p.lambda * trs)))
            * (1.0 / (2.0 * p.mu + tau));
        return Mat3::IDENTITY + s + skew;
    }
    let sv = svd3(v);
    let sigma = prox_sigma(p, sv.s, tau);
    sv.u * Mat3::from_diagonal(sigma) * sv.v.transpose()
}

/// Mirror of WGSL `admm_prox_pd`.
pub fn prox_pd(p: &ElemParams, v: Mat3, w2: f32) -> Mat3 {
    let k = 2.0 * p.mu * p.volume;
    let proj = if p.model == GpuModel::Linear as u32 {
        Mat3::IDENTITY + (v - v.transpose()) * 0.5
    } else {
        let sv = svd3(v);
        sv.u * sv.v.transpose()
    };
    (proj * k + v * w2) * (1.0 / (k + w2))
}

fn v3(p: &GpuVec4) -> Vec3 {
    Vec3::new(p[0], p[1], p[2])
}

fn element_f(x: &[GpuVec4], t: &GpuTet, dmi: Mat3) -> Result<Mat3> {
    let at = |i: u32| {
        x.get(i as usize).map(v3).ok_or_else(|| {
            JelloError::Invalid(format!("admm: tet {t:?} references a vertex ≥ {}", x.len()))
        })
    };
    Ok(linalg::deformation_gradient(
        at(t[0])?,
        at(t[1])?,
        at(t[2])?,
        at(t[3])?,
        dmi,
    ))
}

/// D_eᵀG as the four corner forces G·∇N_a (mirror of WGSL `admm_corners`).
fn corners(g: Mat3, dmi: Mat3) -> [GpuVec4; 4] {
    let h = g * dmi.transpose();
    let c = |v: Vec3| [v.x, v.y, v.z, 0.0];
    [
        c(-(h.x_axis + h.y_axis + h.z_axis)),
        c(h.x_axis),
        c(h.y_axis),
        c(h.z_axis),
    ]
}

/// Twin of `admm_local.wgsl` (see there for the modes and outputs).
#[allow(clippy::too_many_arguments)]
pub fn admm_local(
    p: &Params,
    x: &[GpuVec4],
    tets: &[GpuTet],
    dm_inv: &[GpuMat3],
    elem: &[ElemParams],
    w2: &[f32],
    z: &mut [GpuMat3],
    u: &mut [GpuMat3],
    corner: &mut [GpuVec4],
) -> Result<()> {
    let n = p.n as usize;
    need(tets.len(), n, "admm_local tets")?;
    need(dm_inv.len(), n, "admm_local dm_inv")?;
    need(elem.len(), n, "admm_local elem")?;
    need(w2.len(), n, "admm_local w2")?;
    need(z.len(), n, "admm_local z")?;
    need(u.len(), n, "admm_local u")?;
    need(corner.len(), 8 * n, "admm_local corner")?;
    if p.u0 > ADMM_PROX_HYPERELASTIC {
        return Err(JelloError::Invalid(format!("admm_local: mode {}", p.u0)));
    }
    z[..n]
        .par_chunks_mut(CHUNK)
        .zip(u[..n].par_chunks_mut(CHUNK))
        .zip(corner[..8 * n].par_chunks_mut(8 * CHUNK))
        .enumerate()
        .try_for_each(|(c, ((zc, uc), cc))| {
            for (i, ((ze, ue), ce)) in zc
                .iter_mut()
                .zip(uc.iter_mut())
                .zip(cc.chunks_mut(8))
                .enumerate()
            {
                let e = c * CHUNK + i;
                let dmi = dm_inv[e].to_glam();
                let f = element_f(x, &tets[e], dmi)?;
                if p.u0 == ADMM_RESET {
                    *ze = GpuMat3::from_glam(f);
                    *ue = GpuMat3::default();
                    continue;
                }
                let pe = &elem[e];
                let we = w2[e];
                let v = f + ue.to_glam();
                let zn = if p.u0 == ADMM_PROX_PD {
                    prox_pd(pe, v, we)
                } else {
                    prox_hyperelastic(pe, v, we)
                };
                let un = v - zn;
                ce[..4].copy_from_slice(&corners((zn - un) * we, dmi));
                ce[4..].copy_from_slice(&corners((zn - ze.to_glam()) * we, dmi));
                *ze = GpuMat3::from_glam(zn);
                *ue = GpuMat3::from_glam(un);
            }
            Ok(())
        })
}

/// Mirror of `wg_sum3`'s tree on the first component over one group of [`ADMM_GROUP`].
fn tree_sum(vals: &mut [f32; ADMM_GROUP]) -> f32 {
    let mut s = ADMM_GROUP / 2;
    while s > 0 {
        for t in 0..s {
            vals[t] += vals[t + s];
        }
        s >>= 1;
    }
    vals[0]
}

/// Twin of `admm_gather.wgsl`: rhs per vertex and the dual residual's per-group partials at
/// `out[u1..]`.
#[allow(clippy::too_many_arguments)]
pub fn admm_gather(
    p: &Params,
    corner: &[GpuVec4],
    offsets: &[u32],
    csr_tets: &[u32],
    csr_local: &[u32],
    vinfo: &[GpuVertexInfo],
    rhs: &mut [GpuVec4],
    out: &mut [f32],
) -> Result<()> {
    let n = p.n as usize;
    need(offsets.len(), n + 1, "admm_gather offsets")?;
    need(vinfo.len(), n, "admm_gather vinfo")?;
    need(rhs.len(), n, "admm_gather rhs")?;
    let groups = n.div_ceil(ADMM_GROUP);
    need(out.len(), p.u1 as usize + groups, "admm_gather out")?;
    let nnz = offsets[n] as usize;
    need(csr_tets.len(), nnz, "admm_gather csr_tets")?;
    need(csr_local.len(), nnz, "admm_gather csr_local")?;
    if let Some(k) = (0..nnz).find(|&k| {
        csr_local[k] > 3 || 8 * csr_tets[k] as usize + 4 + csr_local[k] as usize >= corner.len()
    }) {
        return Err(JelloError::Invalid(format!(
            "admm_gather: CSR entry {k} outside {} corner records",
            corner.len()
        )));
    }
    if offsets.windows(2).take(n).any(|w| w[0] > w[1]) {
        return Err(JelloError::Invalid(
            "admm_gather: CSR offsets decrease".into(),
        ));
    }
    let parts: Vec<f32> = rhs[..n]
        .par_chunks_mut(ADMM_GROUP)
        .enumerate()
        .map(|(g, rc)| {
            let mut vals = [0.0f32; ADMM_GROUP];
            for (t, r) in rc.iter_mut().enumerate() {
                let v = g * ADMM_GROUP + t;
                let mut acc = Vec3::ZERO;
                let mut dual = Vec3::ZERO;
                for k in offsets[v] as usize..offsets[v + 1] as usize {
                    let i = 8 * csr_tets[k] as usize + csr_local[k] as usize;
                    acc += v3(&corner[i]);
                    dual += v3(&corner[i + 4]);
                }
                *r = [acc.x, acc.y, acc.z, 0.0];
                if vinfo[v].free != 0 {
                    vals[t] = dual.dot(dual);
                }
            }
            tree_sum(&mut vals)
        })
        .collect();
    out[p.u1 as usize..p.u1 as usize + groups].copy_from_slice(&parts);
    Ok(())
}

/// Twin of `admm_primal.wgsl`: per-group partials of Σ w²‖F(x) − z‖² at `out[u1..]`.
pub fn admm_primal(
    p: &Params,
    x: &[GpuVec4],
    tets: &[GpuTet],
    dm_inv: &[GpuMat3],
    w2: &[f32],
    z: &[GpuMat3],
    out: &mut [f32],
) -> Result<()> {
    let n = p.n as usize;
    need(tets.len(), n, "admm_primal tets")?;
    need(dm_inv.len(), n, "admm_primal dm_inv")?;
    need(w2.len(), n, "admm_primal w2")?;
    need(z.len(), n, "admm_primal z")?;
    let groups = n.div_ceil(ADMM_GROUP);
    need(out.len(), p.u1 as usize + groups, "admm_primal out")?;
    let parts: Vec<f32> = (0..groups)
        .into_par_iter()
        .map(|g| {
            let mut vals = [0.0f32; ADMM_GROUP];
            for (t, val) in vals.iter_mut().enumerate() {
                let e = g * ADMM_GROUP + t;
                if e >= n {
                    break;
                }
                let f = element_f(x, &tets[e], dm_inv[e].to_glam())?;
                let d = f - z[e].to_glam();
                *val = w2[e]
                    * (d.x_axis.dot(d.x_axis) + d.y_axis.dot(d.y_axis) + d.z_axis.dot(d.z_axis));
            }
            Ok(tree_sum(&mut vals))
        })
        .collect::<Result<_>>()?;
    out[p.u1 as usize..p.u1 as usize + groups].copy_from_slice(&parts);
    Ok(())
}
