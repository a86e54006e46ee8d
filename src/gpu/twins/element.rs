//! Twins of the per-element kernels: `deformation_gradient`, `svd3`, `elastic`.

use super::linalg::{self, outer3, sym_eig3};
use super::material::sigma_eval;
use super::{need, CHUNK};
use crate::gpu::{ElemParams, GpuMat3, GpuModel, GpuTet, GpuVec4, Params};
use crate::{JelloError, Result};
use glam::{Mat3, Vec3};
use rayon::prelude::*;

pub use crate::gpu::abi::{
    ELASTIC_ABS, ELASTIC_DIAGONAL, ELASTIC_EXACT_SNH, ELASTIC_GRADIENT, ELASTIC_HESSIAN,
    ELASTIC_PROJECT, ELASTIC_STRICT, ELASTIC_STRICT_SENTINEL,
};

const INV_SQRT2: f32 = std::f32::consts::FRAC_1_SQRT_2;

fn v3(p: &GpuVec4) -> Vec3 {
    Vec3::new(p[0], p[1], p[2])
}

fn check_tets(tets: &[GpuTet], n: usize, nv: usize) -> Result<()> {
    if let Some((e, t)) = tets[..n]
        .iter()
        .enumerate()
        .find(|(_, t)| t.iter().any(|&i| i as usize >= nv))
    {
        return Err(JelloError::Invalid(format!(
            "tet {e} = {t:?} references a vertex ≥ {nv}"
        )));
    }
    Ok(())
}

fn element_f(x: &[GpuVec4], t: &GpuTet, dmi: Mat3) -> Mat3 {
    linalg::deformation_gradient(
        v3(&x[t[0] as usize]),
        v3(&x[t[1] as usize]),
        v3(&x[t[2] as usize]),
        v3(&x[t[3] as usize]),
        dmi,
    )
}

/// Twin of `deformation_gradient.wgsl`: `f_out[e] = Ds·Dm⁻¹`, e < n.
pub fn deformation_gradient(
    p: &Params,
    x: &[GpuVec4],
    tets: &[GpuTet],
    dm_inv: &[GpuMat3],
    f_out: &mut [GpuMat3],
) -> Result<()> {
    let n = p.n as usize;
    need(tets.len(), n, "deformation_gradient tets")?;
    need(dm_inv.len(), n, "deformation_gradient dm_inv")?;
    need(f_out.len(), n, "deformation_gradient f_out")?;
    check_tets(tets, n, x.len())?;
    f_out[..n].par_iter_mut().enumerate().for_each(|(e, f)| {
        *f = GpuMat3::from_glam(element_f(x, &tets[e], dm_inv[e].to_glam()));
    });
    Ok(())
}

/// Twin of `svd3.wgsl`: signed SVD of each `f_in[e]`, e < n; `s_out[e].w = 0`.
pub fn svd3(
    p: &Params,
    f_in: &[GpuMat3],
    u_out: &mut [GpuMat3],
    s_out: &mut [GpuVec4],
    v_out: &mut [GpuMat3],
) -> Result<()> {
    let n = p.n as usize;
    need(f_in.len(), n, "svd3 f_in")?;
    need(u_out.len(), n, "svd3 u_out")?;
    need(s_out.len(), n, "svd3 s_out")?;
    need(v_out.len(), n, "svd3 v_out")?;
    u_out[..n]
        .par_iter_mut()
        .zip(s_out[..n].par_iter_mut())
        .zip(v_out[..n].par_iter_mut())
        .enumerate()
        .for_each(|(e, ((u, s), v))| {
            let r = linalg::svd3(f_in[e].to_glam());
            *u = GpuMat3::from_glam(r.u);
            *s = [r.s.x, r.s.y, r.s.z, 0.0];
            *v = GpuMat3::from_glam(r.v);
        });
    Ok(())
}

/// One element's outputs.
struct ElemOut {
    energy: f32,
    grad: [GpuVec4; 4],
}

/// Energy, gradient and (optionally) the 12×12 Hessian of one element, mirroring `elastic.wgsl`.
fn element(
    x: &[GpuVec4],
    t: &GpuTet,
    dmi: Mat3,
    prm: &ElemParams,
    flags: u32,
    j_floor: f32,
    hess: Option<&mut [f32]>,
) -> ElemOut {
    let f = element_f(x, t, dmi);
    let mut sv = linalg::svd3(f);
    let ev = sigma_eval(prm.model, prm.mu, prm.lambda, sv.s);
    let vol = prm.volume;
    let mut psi = ev.psi;
    let mut pk1 = sv.u * Mat3::from_diagonal(ev.grad) * sv.v.transpose();
    if prm.model == GpuModel::Linear as u32 {
        let eps = (f + f.transpose()) * 0.5 - Mat3::IDENTITY;
        let tr = eps.x_axis.x + eps.y_axis.y + eps.z_axis.z;
        psi = prm.mu
            * (eps.x_axis.dot(eps.x_axis)
                + eps.y_axis.dot(eps.y_axis)
                + eps.z_axis.dot(eps.z_axis))
            + 0.5 * prm.lambda * tr * tr;
        pk1 = eps * (2.0 * prm.mu) + Mat3::IDENTITY * (prm.lambda * tr);
        sv.u = Mat3::IDENTITY;
        sv.v = Mat3::IDENTITY;
    }
    let dmit = dmi.transpose();
    let mut out = ElemOut {
        energy: vol * psi,
        grad: [[0.0; 4]; 4],
    };
    if flags & ELASTIC_STRICT != 0 && f.x_axis.dot(f.y_axis.cross(f.z_axis)) < j_floor {
        out.energy = ELASTIC_STRICT_SENTINEL;
    }
    if flags & ELASTIC_GRADIENT != 0 {
        let g = (pk1 * dmit) * vol;
        let c = |v: Vec3| [v.x, v.y, v.z, 0.0];
        out.grad = [
            c(-(g.x_axis + g.y_axis + g.z_axis)),
            c(g.x_axis),
            c(g.y_axis),
            c(g.z_axis),
        ];
    }
    if let Some(h) = hess {
        let project = flags & ELASTIC_PROJECT != 0;
        let absolute = flags & ELASTIC_ABS != 0;
        let exact =
            flags & ELASTIC_EXACT_SNH != 0 && prm.model <= GpuModel::StableNeoHookeanVbd as u32;
        let eig = sym_eig3(ev.hess);
        let (u, v) = (sv.u, sv.v);
        let mut lam = [0.0f32; 9];
        let mut w = [[Vec3::ZERO; 4]; 9];
        for m in 0..9 {
            let q = if m < 3 {
                lam[m] = eig.values[m];
                u * Mat3::from_diagonal(eig.vectors.col(m)) * v.transpose()
            } else {
                let pair = (m - 3) % 3;
                let (i, j) = [(0, 1), (0, 2), (1, 2)][pair];
                let a = outer3(u.col(i), v.col(j));
                let b = outer3(u.col(j), v.col(i));
                if m < 6 {
                    lam[m] = ev.flip[pair];
                    (a + b) * INV_SQRT2
                } else {
                    lam[m] = ev.twist[pair];
                    (a - b) * INV_SQRT2
                }
            };
            if exact {
                // unfiltered
            } else if absolute {
                lam[m] = lam[m].abs();
            } else if project {
                lam[m] = lam[m].max(0.0);
            }
            let wm = q * dmit;
            w[m] = [
                -(wm.x_axis + wm.y_axis + wm.z_axis),
                wm.x_axis,
                wm.y_axis,
                wm.z_axis,
            ];
        }
        let diagonal = flags & ELASTIC_DIAGONAL != 0;
        for a in 0..4 {
            for b in 0..4 {
                if diagonal && a != b {
                    continue;
                }
                let mut blk = Mat3::ZERO;
                for m in 0..9 {
                    blk += outer3(w[m][a], w[m][b]) * lam[m];
                }
                for r in 0..3 {
                    for c in 0..3 {
                        h[(3 * a + r) * 12 + 3 * b + c] = vol * blk.col(c)[r];
                    }
                }
            }
        }
    }
    out
}

/// Twin of `elastic.wgsl` (see there for the flags and layouts). `grad` must hold 4n items when
/// [`ELASTIC_GRADIENT`] is set and `hess` 144n when [`ELASTIC_HESSIAN`] is set; otherwise they
/// are not touched (a 1-item placeholder is fine).
#[allow(clippy::too_many_arguments)]
pub fn elastic(
    p: &Params,
    x: &[GpuVec4],
    tets: &[GpuTet],
    dm_inv: &[GpuMat3],
    elem: &[ElemParams],
    energy: &mut [f32],
    grad: &mut [GpuVec4],
    hess: &mut [f32],
) -> Result<()> {
    let n = p.n as usize;
    let flags = p.u0;
    let want_g = flags & ELASTIC_GRADIENT != 0;
    let want_h = flags & ELASTIC_HESSIAN != 0;
    need(tets.len(), n, "elastic tets")?;
    need(dm_inv.len(), n, "elastic dm_inv")?;
    need(elem.len(), n, "elastic elem")?;
    need(energy.len(), n, "elastic energy")?;
    if want_g {
        need(grad.len(), 4 * n, "elastic grad")?;
    }
    if want_h {
        need(hess.len(), 144 * n, "elastic hess")?;
    }
    check_tets(tets, n, x.len())?;
    // Split the outputs into matching chunks so rayon can fill them in parallel.
    type Chunk<'a> = (
        usize,
        &'a mut [f32],
        Option<&'a mut [GpuVec4]>,
        Option<&'a mut [f32]>,
    );
    let mut chunks: Vec<Chunk<'_>> = Vec::with_capacity(n.div_ceil(CHUNK));
    let mut g_rest: Option<&mut [GpuVec4]> = if want_g {
        Some(&mut grad[..4 * n])
    } else {
        None
    };
    let mut h_rest: Option<&mut [f32]> = if want_h {
        Some(&mut hess[..144 * n])
    } else {
        None
    };
    for (ci, ec) in energy[..n].chunks_mut(CHUNK).enumerate() {
        let len = ec.len();
        let gc = g_rest.take().map(|g| {
            let (a, b) = g.split_at_mut(4 * len);
            g_rest = Some(b);
            a
        });
        let hc = h_rest.take().map(|h| {
            let (a, b) = h.split_at_mut(144 * len);
            h_rest = Some(b);
            a
        });
        chunks.push((ci * CHUNK, ec, gc, hc));
    }
    chunks.into_par_iter().for_each(|(e0, ec, mut gc, mut hc)| {
        for (k, en) in ec.iter_mut().enumerate() {
            let e = e0 + k;
            let hslot = hc.as_deref_mut().map(|h| &mut h[144 * k..144 * (k + 1)]);
            let o = element(
                x,
                &tets[e],
                dm_inv[e].to_glam(),
                &elem[e],
                flags,
                p.f0,
                hslot,
            );
            *en = o.energy;
            if let Some(g) = gc.as_deref_mut() {
                g[4 * k..4 * k + 4].copy_from_slice(&o.grad);
            }
        }
    });
    Ok(())
}
