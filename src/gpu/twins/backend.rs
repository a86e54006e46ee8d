//! Twins of the device backend's kernels (`shaders/dev_*.wgsl`, used by
//! `crate::solver::backend::DeviceBackend`), f32, operation for operation: one item (vertex or
//! element) per invocation, 256 per workgroup, and the workgroup tree reductions of
//! `shaders/shared/wg_reduce.wgsl` in the same order. Obstacle records use the twins of
//! `obstacle.wgsl` ([`super::jgs2`]).

use super::jgs2::{barrier, contact_advance, contact_distance, contact_step_bound};
use super::need;
use crate::gpu::layout::{ElemParams, GpuContact, GpuMat3, GpuTet, GpuVec4, GpuVertexInfo, Params};
use crate::{JelloError, Result};
use glam::Vec3;
use rayon::prelude::*;

pub use crate::gpu::abi::{
    dev_groups, COMBINE_DOT, COMBINE_SET, COMBINE_VEC4, DEV_GROUP, ENERGY_REFERENCE, ENERGY_STRICT,
    INVERSION_LEVELS, INVERSION_LEVELS_STRICT, INVERSION_STRICT, SLOT_NONE,
};

fn v3(p: &GpuVec4) -> Vec3 {
    Vec3::new(p[0], p[1], p[2])
}

/// `dot(a, b)` of two vec4s in WGSL's lane order.
fn dot4(a: &GpuVec4, b: &GpuVec4) -> f32 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]
}

fn v4(v: Vec3) -> GpuVec4 {
    [v.x, v.y, v.z, 0.0]
}

/// Mirror of `wg_sum3` / `wg_max3`: the tree over one group's per-invocation values (missing
/// invocations contribute `zero`).
fn tree(vals: &mut [[f32; 3]; DEV_GROUP], f: impl Fn(f32, f32) -> f32) -> [f32; 3] {
    let mut s = DEV_GROUP / 2;
    while s > 0 {
        for t in 0..s {
            let other = vals[t + s];
            for (a, b) in vals[t].iter_mut().zip(other) {
                *a = f(*a, b);
            }
        }
        s >>= 1;
    }
    vals[0]
}

/// Runs `item(i)` for the items of every group and reduces each group with `f`, in parallel
/// over groups: the per-group results, in order.
fn per_group(
    n: usize,
    item: impl Fn(usize) -> [f32; 3] + Sync,
    f: impl Fn(f32, f32) -> f32 + Sync + Copy,
) -> Vec<[f32; 3]> {
    (0..dev_groups(n))
        .into_par_iter()
        .map(|g| {
            let mut vals = [[0.0f32; 3]; DEV_GROUP];
            for (t, v) in vals.iter_mut().enumerate() {
                let i = g * DEV_GROUP + t;
                if i < n {
                    *v = item(i);
                }
            }
            tree(&mut vals, f)
        })
        .collect()
}

fn slot(scal: &[f32], i: u32, what: &str) -> Result<f32> {
    scal.get(i as usize).copied().ok_or_else(|| {
        JelloError::Invalid(format!(
            "{what}: slot {i} outside a scalar buffer of {}",
            scal.len()
        ))
    })
}

fn records_per_vertex(contacts: &[GpuContact], n: usize, what: &str) -> Result<usize> {
    if n == 0 {
        return Ok(0);
    }
    let nc = contacts.len() / n;
    if nc == 0 || nc * n != contacts.len() {
        return Err(JelloError::Invalid(format!(
            "{what}: {} contact records for {n} vertices",
            contacts.len()
        )));
    }
    Ok(nc)
}

/// Twin of `dev_combine.wgsl` (see there for the slot packing and flags).
pub fn dev_combine(
    p: &Params,
    scal: &mut [f32],
    x: &[GpuVec4],
    z: &[GpuVec4],
    y: &mut [GpuVec4],
    part: &mut [f32],
) -> Result<()> {
    let n = p.n as usize;
    need(x.len(), n, "dev_combine x")?;
    need(z.len(), n, "dev_combine z")?;
    need(y.len(), n, "dev_combine y")?;
    let (ia, inum, iden) = (p.u0 & 1023, (p.u0 >> 10) & 1023, (p.u0 >> 20) & 1023);
    let (istore, flags) = (p.u1 & 1023, p.u1 >> 10);
    let a = if ia != SLOT_NONE {
        slot(scal, ia, "dev_combine a")?
    } else {
        1.0
    };
    let mut r = 0.0f32;
    if inum != SLOT_NONE {
        let num = slot(scal, inum, "dev_combine num")?;
        if iden != SLOT_NONE {
            let den = slot(scal, iden, "dev_combine den")?;
            if den > 0.0 && den < 3.4e38 {
                r = num / den;
            }
        } else {
            r = num;
        }
    }
    let c = p.f0 * a - p.f1 * r;
    let set = flags & COMBINE_SET != 0;
    let lanes4 = flags & COMBINE_VEC4 != 0;
    y[..n].par_iter_mut().zip(&x[..n]).for_each(|(y, x)| {
        if lanes4 {
            for (yk, xk) in y.iter_mut().zip(x) {
                *yk = if set { c * xk } else { c * xk + *yk };
            }
            return;
        }
        let mut yv = c * v3(x);
        if !set {
            yv += v3(y);
        }
        *y = v4(yv);
    });
    if flags & COMBINE_DOT != 0 {
        need(part.len(), dev_groups(n), "dev_combine part")?;
        let y = &*y;
        let sums = per_group(
            n,
            |v| {
                let d = if lanes4 {
                    dot4(&z[v], &y[v])
                } else {
                    v3(&z[v]).dot(v3(&y[v]))
                };
                [d, 0.0, 0.0]
            },
            |a, b| a + b,
        );
        for (g, s) in sums.iter().enumerate() {
            part[g] = s[0];
        }
    }
    if istore != SLOT_NONE {
        need(scal.len(), istore as usize + 1, "dev_combine store")?;
        scal[istore as usize] = r;
    }
    Ok(())
}

/// Twin of `dev_dots.wgsl`.
pub fn dev_dots(
    p: &Params,
    a: &[GpuVec4],
    b: &[GpuVec4],
    p_ab: &mut [f32],
    p_aa: &mut [f32],
    p_bb: &mut [f32],
) -> Result<()> {
    let n = p.n as usize;
    need(a.len(), n, "dev_dots a")?;
    need(b.len(), n, "dev_dots b")?;
    let groups = dev_groups(n);
    need(p_ab.len(), groups, "dev_dots p_ab")?;
    need(p_aa.len(), groups, "dev_dots p_aa")?;
    need(p_bb.len(), groups, "dev_dots p_bb")?;
    let sums = per_group(
        n,
        |v| {
            if p.u0 & 1 != 0 {
                let (av, bv) = (&a[v], &b[v]);
                return [dot4(av, bv), dot4(av, av), dot4(bv, bv)];
            }
            let (av, bv) = (v3(&a[v]), v3(&b[v]));
            [av.dot(bv), av.dot(av), bv.dot(bv)]
        },
        |x, y| x + y,
    );
    for (g, s) in sums.iter().enumerate() {
        p_ab[g] = s[0];
        p_aa[g] = s[1];
        p_bb[g] = s[2];
    }
    Ok(())
}

/// Twin of `dev_curvature.wgsl`: per group of 256 items i, Σ d_eᵀH_e d_e (i < u0 elements)
/// + d_vᵀK_v d_v (i < u1 vertices).
pub fn dev_curvature(
    p: &Params,
    hess: &[f32],
    tets: &[GpuTet],
    d: &[GpuVec4],
    kv: &[GpuMat3],
    part: &mut [f32],
) -> Result<()> {
    let n = p.n as usize;
    let (ne, nv) = (p.u0 as usize, p.u1 as usize);
    if ne > n || nv > n {
        return Err(JelloError::Invalid(format!(
            "dev_curvature: {ne} elements and {nv} vertices over {n} items"
        )));
    }
    need(hess.len(), 144 * ne, "dev_curvature hess")?;
    need(tets.len(), ne, "dev_curvature tets")?;
    need(d.len(), nv, "dev_curvature d")?;
    need(kv.len(), nv, "dev_curvature kv")?;
    need(part.len(), dev_groups(n), "dev_curvature part")?;
    for t in &tets[..ne] {
        if t.iter().any(|&v| v as usize >= d.len()) {
            return Err(JelloError::Invalid(format!(
                "dev_curvature: tet {t:?} outside {} direction vectors",
                d.len()
            )));
        }
    }
    let sums = per_group(
        n,
        |i| {
            let mut acc = 0.0f32;
            if i < ne {
                let t = tets[i];
                let c = |k: usize| d[t[k / 3] as usize][k % 3];
                let h = &hess[144 * i..144 * i + 144];
                for r in 0..12 {
                    let mut row = 0.0f32;
                    for k in 0..12 {
                        row += h[12 * r + k] * c(k);
                    }
                    acc += c(r) * row;
                }
            }
            if i < nv {
                let dv = v3(&d[i]);
                let m = &kv[i].cols;
                let kd = Vec3::new(m[0][0], m[0][1], m[0][2]) * dv.x
                    + Vec3::new(m[1][0], m[1][1], m[1][2]) * dv.y
                    + Vec3::new(m[2][0], m[2][1], m[2][2]) * dv.z;
                acc += dv.dot(kd);
            }
            [acc, 0.0, 0.0]
        },
        |a, b| a + b,
    );
    for (g, s) in sums.iter().enumerate() {
        part[g] = s[0];
    }
    Ok(())
}

/// Twin of `dev_step_bound.wgsl`.
pub fn dev_step_bound(
    p: &Params,
    d: &[GpuVec4],
    contacts: &[GpuContact],
    part: &mut [f32],
) -> Result<()> {
    let n = p.n as usize;
    need(d.len(), n, "dev_step_bound d")?;
    let nc = records_per_vertex(contacts, n, "dev_step_bound contacts")?;
    need(part.len(), dev_groups(n), "dev_step_bound part")?;
    let maxes = per_group(
        n,
        |v| {
            let dv = v3(&d[v]);
            let b = if dv != Vec3::ZERO {
                1.0 / contact_step_bound(&contacts[v * nc..(v + 1) * nc], dv).max(1e-30)
            } else {
                0.0
            };
            [b, 0.0, 0.0]
        },
        f32::max,
    );
    for (g, m) in maxes.iter().enumerate() {
        part[g] = m[0];
    }
    Ok(())
}

/// Twin of `dev_inversion_bound.wgsl`.
pub fn dev_inversion_bound(
    p: &Params,
    tets: &[GpuTet],
    elem: &[ElemParams],
    x: &[GpuVec4],
    d: &[GpuVec4],
    scal: &[f32],
    part: &mut [u32],
) -> Result<()> {
    let n = p.n as usize;
    need(tets.len(), n, "dev_inversion_bound tets")?;
    need(elem.len(), n, "dev_inversion_bound elem")?;
    need(scal.len(), p.u0 as usize + 1, "dev_inversion_bound scal")?;
    need(part.len(), dev_groups(n), "dev_inversion_bound part")?;
    let nv = x.len().min(d.len());
    if let Some((e, t)) = tets[..n]
        .iter()
        .enumerate()
        .find(|(_, t)| t.iter().any(|&i| i as usize >= nv))
    {
        return Err(JelloError::Invalid(format!(
            "dev_inversion_bound: tet {e} = {t:?} indexes past {nv} vertices"
        )));
    }
    let strict = p.u1 & INVERSION_STRICT != 0;
    let alpha_o = 1.0 / scal[p.u0 as usize].max(1.0);
    let mask = |e: usize| -> u32 {
        let t = &tets[e];
        let (x0, d0) = (v3(&x[t[0] as usize]), v3(&d[t[0] as usize]));
        let [a, b, c] = [1, 2, 3].map(|k| v3(&x[t[k] as usize]) - x0);
        let [da, db, dc] = [1, 2, 3].map(|k| v3(&d[t[k] as usize]) - d0);
        let v0 = a.dot(b.cross(c));
        let mut mask = u32::MAX;
        if v0 > 0.0 {
            let (floor_v, levels) = if strict {
                let six_rest = 6.0 * elem[e].volume;
                let j = v0 / six_rest;
                (
                    j.min((0.1 * j).max(1e-8)) * six_rest,
                    INVERSION_LEVELS_STRICT,
                )
            } else {
                (0.0, INVERSION_LEVELS)
            };
            let mut alpha = alpha_o;
            for k in 0..levels {
                let v = (a + alpha * da).dot((b + alpha * db).cross(c + alpha * dc));
                let ok = if strict { v >= floor_v } else { v > 0.0 };
                if !ok {
                    mask &= !(1u32 << k);
                }
                alpha *= 0.5;
            }
        }
        mask
    };
    part[..dev_groups(n)]
        .par_iter_mut()
        .enumerate()
        .for_each(|(g, out)| {
            let end = ((g + 1) * DEV_GROUP).min(n);
            *out = (g * DEV_GROUP..end).fold(u32::MAX, |m, e| m & mask(e));
        });
    Ok(())
}

/// Twin of `dev_inversion_finish.wgsl`.
pub fn dev_inversion_finish(p: &Params, part: &[u32], scal: &mut [f32]) -> Result<()> {
    let groups = p.u1 as usize;
    let slot = (p.u0 & 0xffff) as usize;
    need(part.len(), groups, "dev_inversion_finish part")?;
    need(scal.len(), slot + 1, "dev_inversion_finish scal")?;
    let strict = (p.u0 >> 16) & INVERSION_STRICT != 0;
    let levels = if strict {
        INVERSION_LEVELS_STRICT
    } else {
        INVERSION_LEVELS
    };
    let mut m = part[..groups].iter().fold(u32::MAX, |m, &g| m & g);
    if levels < 32 {
        m &= (1u32 << levels) - 1;
    }
    let base = scal[slot].max(1.0);
    // ldexp in the kernel: exact, as these doublings are.
    let ldexp = |b: f32, k: u32| (0..k).fold(b, |b, _| b * 2.0);
    if m != 0 {
        scal[slot] = ldexp(base, m.trailing_zeros());
    } else if strict {
        scal[slot] = ldexp(base, 32);
    }
    Ok(())
}

/// Twin of `dev_trial.wgsl`.
#[allow(clippy::too_many_arguments)]
pub fn dev_trial(
    p: &Params,
    x: &[GpuVec4],
    d: &[GpuVec4],
    contacts: &[GpuContact],
    scal: &[f32],
    x_new: &mut [GpuVec4],
    contacts_new: &mut [GpuContact],
    step: &mut [GpuVec4],
    out: &mut [f32],
) -> Result<()> {
    let n = p.n as usize;
    need(x.len(), n, "dev_trial x")?;
    need(d.len(), n, "dev_trial d")?;
    need(x_new.len(), n, "dev_trial x_new")?;
    need(step.len(), n, "dev_trial step")?;
    let nc = records_per_vertex(contacts, n, "dev_trial contacts")?;
    need(contacts_new.len(), nc * n, "dev_trial contacts_new")?;
    need(out.len(), p.u1 as usize + dev_groups(n), "dev_trial out")?;
    let alpha = p.f0 / slot(scal, p.u0, "dev_trial bound")?.max(1.0);
    step[..n]
        .par_iter_mut()
        .zip(x_new[..n].par_iter_mut())
        .zip(contacts_new[..nc * n].par_chunks_mut(nc.max(1)))
        .enumerate()
        .for_each(|(v, ((s, xn), cn))| {
            let sv = alpha * v3(&d[v]);
            *s = v4(sv);
            *xn = v4(v3(&x[v]) + sv);
            for (o, c) in cn.iter_mut().enumerate() {
                let rec = &contacts[v * nc + o];
                *c = if rec.kind() == GpuContact::NONE {
                    *rec
                } else {
                    contact_advance(rec, sv)
                };
            }
        });
    let step = &*step;
    let maxes = per_group(n, |v| [v3(&step[v]).length(), 0.0, 0.0], f32::max);
    let off = p.u1 as usize;
    for (g, m) in maxes.iter().enumerate() {
        out[off + g] = m[0];
    }
    Ok(())
}

/// Twin of `dev_element_energy.wgsl`.
#[allow(clippy::too_many_arguments)]
pub fn dev_element_energy(
    p: &Params,
    energy: &[f32],
    eref: &mut [f32],
    x: &[GpuVec4],
    x_new: &[GpuVec4],
    tets: &[GpuTet],
    elem: &[ElemParams],
    out: &mut [f32],
) -> Result<()> {
    let n = p.n as usize;
    need(energy.len(), n, "dev_element_energy energy")?;
    need(eref.len(), n, "dev_element_energy eref")?;
    need(tets.len(), n, "dev_element_energy tets")?;
    need(elem.len(), n, "dev_element_energy elem")?;
    let groups = dev_groups(n);
    let off = p.u1 as usize;
    need(out.len(), off + 2 * groups, "dev_element_energy out")?;
    let reference = p.u0 & ENERGY_REFERENCE != 0;
    let strict = p.u0 & ENERGY_STRICT != 0;
    if !reference {
        let nv = x.len().min(x_new.len());
        if let Some((e, t)) = tets[..n]
            .iter()
            .enumerate()
            .find(|(_, t)| t.iter().any(|&i| i as usize >= nv))
        {
            return Err(JelloError::Invalid(format!(
                "dev_element_energy: tet {e} = {t:?} indexes past {nv} vertices"
            )));
        }
    }
    if reference {
        eref[..n].copy_from_slice(&energy[..n]);
    }
    let eref = &*eref;
    let six_volume = |pos: &[GpuVec4], t: &GpuTet| {
        let q = t.map(|i| v3(&pos[i as usize]));
        (q[1] - q[0]).dot((q[2] - q[0]).cross(q[3] - q[0]))
    };
    let sums = per_group(
        n,
        |e| {
            if reference {
                return [energy[e].abs(), 0.0, 0.0];
            }
            let t = &tets[e];
            let (v0, v1) = (six_volume(x, t), six_volume(x_new, t));
            let mut flip = 0.0;
            if v0 > 0.0 {
                let ok = if strict {
                    let six_rest = 6.0 * elem[e].volume;
                    let j = v0 / six_rest;
                    let floor_j = j.min((0.1 * j).max(1e-8));
                    v1 >= floor_j * six_rest
                } else {
                    v1 > 0.0
                };
                if !ok {
                    flip = 1.0;
                }
            }
            [energy[e] - eref[e], flip, 0.0]
        },
        |a, b| a + b,
    );
    for (g, s) in sums.iter().enumerate() {
        out[off + g] = s[0];
        out[off + groups + g] = s[1];
    }
    Ok(())
}

/// Twin of `dev_rounding.wgsl`: per group g of [`DEV_GROUP`] terms t < n,
/// `out[u1 + g] = Σ_t Σ_c Σ_k |forces[4t + c].k|·|coords[stencils[t][c]].k|` (J before the
/// host's 2⁻²⁴). A stencil index past `coords` is an error here (the kernel skips it).
pub fn dev_rounding(
    p: &Params,
    forces: &[GpuVec4],
    coords: &[GpuVec4],
    stencils: &[GpuTet],
    out: &mut [f32],
) -> Result<()> {
    let n = p.n as usize;
    need(forces.len(), 4 * n, "dev_rounding forces")?;
    need(stencils.len(), n, "dev_rounding stencils")?;
    let off = p.u1 as usize;
    need(out.len(), off + dev_groups(n), "dev_rounding out")?;
    if let Some((t, s)) = stencils[..n]
        .iter()
        .enumerate()
        .find(|(_, s)| s.iter().any(|&i| i as usize >= coords.len()))
    {
        return Err(JelloError::Invalid(format!(
            "dev_rounding: term {t} = {s:?} indexes past {} coordinates",
            coords.len()
        )));
    }
    let sums = per_group(
        n,
        |t| {
            let mut acc = 0.0f32;
            for (c, &i) in stencils[t].iter().enumerate() {
                let f = &forces[4 * t + c];
                let q = &coords[i as usize];
                acc += f[0].abs() * q[0].abs() + f[1].abs() * q[1].abs() + f[2].abs() * q[2].abs();
            }
            [acc, 0.0, 0.0]
        },
        |a, b| a + b,
    );
    for (g, s) in sums.iter().enumerate() {
        out[off + g] = s[0];
    }
    Ok(())
}

/// Twin of `dev_vertex_energy.wgsl`.
#[allow(clippy::too_many_arguments)]
pub fn dev_vertex_energy(
    p: &Params,
    x: &[GpuVec4],
    x_start: &[GpuVec4],
    x_tilde: &[GpuVec4],
    vinfo: &[GpuVertexInfo],
    contacts: &[GpuContact],
    vref: &mut [f32],
    out: &mut [f32],
) -> Result<()> {
    let n = p.n as usize;
    need(x.len(), n, "dev_vertex_energy x")?;
    need(x_start.len(), n, "dev_vertex_energy x_start")?;
    need(x_tilde.len(), n, "dev_vertex_energy x_tilde")?;
    need(vinfo.len(), n, "dev_vertex_energy vinfo")?;
    need(vref.len(), n, "dev_vertex_energy vref")?;
    let nc = records_per_vertex(contacts, n, "dev_vertex_energy contacts")?;
    let off = p.u1 as usize;
    need(out.len(), off + dev_groups(n), "dev_vertex_energy out")?;
    let reference = p.u0 == ENERGY_REFERENCE;
    let bar = |v: usize| {
        let m = vinfo[v].mass;
        let mut b = 0.0f32;
        for c in &contacts[v * nc..(v + 1) * nc] {
            if c.kind() == GpuContact::NONE {
                continue;
            }
            let de = contact_distance(c);
            if de.d < p.f2 {
                b += p.f1 * m * p.f3 * barrier(de.d, p.f2).x;
            }
        }
        b
    };
    if reference {
        vref[..n]
            .par_iter_mut()
            .enumerate()
            .for_each(|(v, r)| *r = bar(v));
    }
    let vref = &*vref;
    let sums = per_group(
        n,
        |v| {
            let b = bar(v);
            if reference {
                return [b.abs(), 0.0, 0.0];
            }
            let m = vinfo[v].mass;
            let (pv, sv) = (v3(&x[v]), v3(&x_start[v]));
            let e = 0.5 * m * p.f0 * (pv - sv).dot(pv + sv - 2.0 * v3(&x_tilde[v])) + (b - vref[v]);
            [e, 0.0, 0.0]
        },
        |a, b| a + b,
    );
    for (g, s) in sums.iter().enumerate() {
        out[off + g] = s[0];
    }
    Ok(())
}

/// Twin of `dev_vertex_gradient.wgsl`.
#[allow(clippy::too_many_arguments)]
pub fn dev_vertex_gradient(
    p: &Params,
    x: &[GpuVec4],
    x_tilde: &[GpuVec4],
    vinfo: &[GpuVertexInfo],
    contacts: &[GpuContact],
    inv_c: &[f32],
    g: &mut [GpuVec4],
    out: &mut [f32],
) -> Result<()> {
    let n = p.n as usize;
    need(x.len(), n, "dev_vertex_gradient x")?;
    need(x_tilde.len(), n, "dev_vertex_gradient x_tilde")?;
    need(vinfo.len(), n, "dev_vertex_gradient vinfo")?;
    need(inv_c.len(), n, "dev_vertex_gradient inv_c")?;
    need(g.len(), n, "dev_vertex_gradient g")?;
    let nc = records_per_vertex(contacts, n, "dev_vertex_gradient contacts")?;
    let off = p.u1 as usize;
    need(out.len(), off + dev_groups(n), "dev_vertex_gradient out")?;
    g[..n].par_iter_mut().enumerate().for_each(|(v, gv)| {
        let info = vinfo[v];
        if info.free == 0 {
            *gv = [0.0; 4];
            return;
        }
        let m = info.mass;
        let mut acc = v3(gv) + m * p.f0 * (v3(&x[v]) - v3(&x_tilde[v]));
        for c in &contacts[v * nc..(v + 1) * nc] {
            if c.kind() == GpuContact::NONE {
                continue;
            }
            let de = contact_distance(c);
            if de.d < p.f2 {
                acc += de.grad * (p.f1 * m * p.f3 * barrier(de.d, p.f2).y);
            }
        }
        *gv = v4(acc);
    });
    let g = &*g;
    let sums = per_group(
        n,
        |v| {
            if vinfo[v].free == 0 {
                return [0.0; 3];
            }
            let w = v3(&g[v]).length() * inv_c[v];
            [w * w, 0.0, 0.0]
        },
        |a, b| a + b,
    );
    for (k, s) in sums.iter().enumerate() {
        out[off + k] = s[0];
    }
    Ok(())
}
