//! Twins of the per-vertex kernels: CSR gathers and the inertia term.

use super::need;
use crate::gpu::{GpuMat3, GpuVec4, Params};
use crate::{JelloError, Result};
use rayon::prelude::*;

/// Checks the CSR for vertices `0..n`: monotone offsets, entries within `tets`/`local`, element
/// (or contact pair) ids below `n_elems` and corners (slots) below 4.
pub(super) fn check_csr(
    offsets: &[u32],
    tets: &[u32],
    local: &[u32],
    n: usize,
    n_elems: usize,
) -> Result<()> {
    need(offsets.len(), n + 1, "CSR offsets")?;
    let end = offsets[n] as usize;
    need(tets.len(), end, "CSR tets")?;
    need(local.len(), end, "CSR local")?;
    for v in 0..n {
        if offsets[v] > offsets[v + 1] {
            return Err(JelloError::Invalid(format!(
                "CSR offsets decrease at vertex {v}"
            )));
        }
    }
    for k in offsets[0] as usize..end {
        if tets[k] as usize >= n_elems || local[k] >= 4 {
            return Err(JelloError::Invalid(format!(
                "CSR entry {k} = (tet {}, corner {}) out of range ({n_elems} elements)",
                tets[k], local[k]
            )));
        }
    }
    Ok(())
}

/// Twin of `gather_gradient.wgsl`: `out[v] = Σ elem_grad[4·tets[k] + local[k]]` over the CSR row
/// of v, in CSR order; `out[v].w = 0`.
pub fn gather_gradient(
    p: &Params,
    elem_grad: &[GpuVec4],
    offsets: &[u32],
    tets: &[u32],
    local: &[u32],
    out: &mut [GpuVec4],
) -> Result<()> {
    let n = p.n as usize;
    need(out.len(), n, "gather_gradient out")?;
    check_csr(offsets, tets, local, n, elem_grad.len() / 4)?;
    out[..n].par_iter_mut().enumerate().for_each(|(v, o)| {
        let mut acc = [0.0f32; 3];
        for k in offsets[v] as usize..offsets[v + 1] as usize {
            let g = &elem_grad[4 * tets[k] as usize + local[k] as usize];
            for i in 0..3 {
                acc[i] += g[i];
            }
        }
        *o = [acc[0], acc[1], acc[2], 0.0];
    });
    Ok(())
}

/// Twin of `gather_hessian_diag.wgsl`: `out[v] = Σ H_e[3l..3l+3, 3l..3l+3]` over the CSR row of v.
pub fn gather_hessian_diag(
    p: &Params,
    elem_hess: &[f32],
    offsets: &[u32],
    tets: &[u32],
    local: &[u32],
    out: &mut [GpuMat3],
) -> Result<()> {
    let n = p.n as usize;
    need(out.len(), n, "gather_hessian_diag out")?;
    check_csr(offsets, tets, local, n, elem_hess.len() / 144)?;
    out[..n].par_iter_mut().enumerate().for_each(|(v, o)| {
        let mut acc = GpuMat3::default();
        for k in offsets[v] as usize..offsets[v + 1] as usize {
            let base = 144 * tets[k] as usize + 39 * local[k] as usize;
            for c in 0..3 {
                for r in 0..3 {
                    acc.cols[c][r] += elem_hess[base + 12 * r + c];
                }
            }
        }
        *o = acc;
    });
    Ok(())
}

/// Twin of `inertia.wgsl` (f0 = 1/h²): `grad[v].xyz += m/h²·(x−x̃)`, `energy[v] = m/(2h²)|x−x̃|²`.
pub fn inertia(
    p: &Params,
    x: &[GpuVec4],
    x_tilde: &[GpuVec4],
    mass: &[f32],
    grad: &mut [GpuVec4],
    energy: &mut [f32],
) -> Result<()> {
    let n = p.n as usize;
    need(x.len(), n, "inertia x")?;
    need(x_tilde.len(), n, "inertia x_tilde")?;
    need(mass.len(), n, "inertia mass")?;
    need(grad.len(), n, "inertia grad")?;
    need(energy.len(), n, "inertia energy")?;
    let inv_h2 = p.f0;
    grad[..n]
        .par_iter_mut()
        .zip(energy[..n].par_iter_mut())
        .enumerate()
        .for_each(|(v, (g, en))| {
            let d = [
                x[v][0] - x_tilde[v][0],
                x[v][1] - x_tilde[v][1],
                x[v][2] - x_tilde[v][2],
            ];
            let k = mass[v] * inv_h2;
            for i in 0..3 {
                g[i] += k * d[i];
            }
            *en = 0.5 * k * (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
        });
    Ok(())
}
