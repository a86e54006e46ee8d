//! Twins of the multilevel solver's kernels (`shaders/ml_*.wgsl`; issue 13), f32, operation for
//! operation: the lift `u = P U q` and the restriction `q = Uᵀ P y` of a subspace level over its
//! two CSR lists, the block-Jacobi application `z_h = B_h r_h`, and the terms of the full-space
//! H·x (the element/contact terms per corner, the block-sparse base with the gathered terms
//! added). The f64 references are [`Level::lift`], [`Level::restrict`], the product with
//! [`invert_blocks`]' blocks and [`HessianOperator::apply`]; the host arrays these kernels read
//! come from [`Level::device_arrays`], [`pack_blocks`], [`BsrArrays::from_sym`] and
//! [`DeviceTerms::new`].
//!
//! Layout: a subspace vector is `array<vec4<f32>>` with three vec4s per handle, the rows
//! `[A_h | t_h]` of its 3×4 affine map — exactly the f64 level's 12-DOF layout `q[12h + 4r + c]`
//! read as f32 words. A CSR entry (vertex v, handle h) carries its weighted frame
//! `wf = φ_vh·[x̄_v − o_h; 1]` as one vec4, computed in f64 on the host.
//!
//! [`Level::lift`]: crate::solver::multilevel::Level::lift
//! [`Level::restrict`]: crate::solver::multilevel::Level::restrict
//! [`Level::device_arrays`]: crate::solver::multilevel::Level::device_arrays
//! [`invert_blocks`]: crate::solver::multilevel::operator::invert_blocks
//! [`pack_blocks`]: crate::solver::multilevel::pack_blocks
//! [`HessianOperator::apply`]: crate::solver::multilevel::HessianOperator::apply
//! [`BsrArrays::from_sym`]: crate::solver::multilevel::BsrArrays::from_sym
//! [`DeviceTerms::new`]: crate::solver::multilevel::DeviceTerms::new

use super::need;
use crate::gpu::layout::{GpuMat3, GpuVec4, GpuVertexInfo, Params};
use crate::{JelloError, Result};
use rayon::prelude::*;

/// Invocations per workgroup of `ml_restrict` (one workgroup per handle).
pub const ML_RESTRICT_GROUP: usize = 64;
pub use crate::gpu::abi::{ML_BLOCK_VEC4, ML_HANDLE_VEC4};

/// `dot(a, b)` in WGSL's component order.
fn dot4(a: &GpuVec4, b: &GpuVec4) -> f32 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]
}

/// Checks one CSR of `rows` rows: `ptr` monotone with `rows + 1` entries, `idx` and `frame` as
/// long as its last offset, every index below `targets`.
fn check_ml_csr(
    ptr: &[u32],
    idx: &[u32],
    frame: &[GpuVec4],
    rows: usize,
    targets: usize,
    what: &str,
) -> Result<()> {
    need(ptr.len(), rows + 1, what)?;
    let end = ptr[rows] as usize;
    need(idx.len(), end, what)?;
    need(frame.len(), end, what)?;
    for r in 0..rows {
        if ptr[r] > ptr[r + 1] {
            return Err(JelloError::Invalid(format!(
                "{what}: offsets decrease at row {r}"
            )));
        }
    }
    if let Some(k) = (ptr[0] as usize..end).find(|&k| idx[k] as usize >= targets) {
        return Err(JelloError::Invalid(format!(
            "{what}: entry {k} = {} out of range ({targets})",
            idx[k]
        )));
    }
    Ok(())
}

/// Twin of `ml_lift.wgsl` (n = vertices): `u[v].xyz = Σ_k (q[3h]·wf_k, q[3h+1]·wf_k,
/// q[3h+2]·wf_k)` over the vertex's CSR row in order (h = `vhandle[k]`, wf = `vframe[k]`), zero
/// on pinned vertices; `u[v].w = 0`. Units: those of `q` times metres for the `A` part (`t`'s
/// units for the translation part) — metres for a displacement.
pub fn ml_lift(
    p: &Params,
    q: &[GpuVec4],
    vptr: &[u32],
    vhandle: &[u32],
    vframe: &[GpuVec4],
    vinfo: &[GpuVertexInfo],
    u: &mut [GpuVec4],
) -> Result<()> {
    let n = p.n as usize;
    need(vinfo.len(), n, "ml_lift vinfo")?;
    need(u.len(), n, "ml_lift u")?;
    check_ml_csr(
        vptr,
        vhandle,
        vframe,
        n,
        q.len() / ML_HANDLE_VEC4,
        "ml_lift vertex CSR",
    )?;
    u[..n].par_iter_mut().enumerate().for_each(|(v, uv)| {
        let mut acc = [0.0f32; 3];
        if vinfo[v].free != 0 {
            for k in vptr[v] as usize..vptr[v + 1] as usize {
                let h = vhandle[k] as usize;
                let f = &vframe[k];
                for (r, a) in acc.iter_mut().enumerate() {
                    *a += dot4(&q[ML_HANDLE_VEC4 * h + r], f);
                }
            }
        }
        *uv = [acc[0], acc[1], acc[2], 0.0];
    });
    Ok(())
}

/// Twin of `ml_restrict.wgsl` (n = handles, one 64-invocation workgroup each):
/// `q[3h + r] = Σ_k y[v][r]·wf_k` over the handle's CSR row, pinned vertices skipped.
/// Invocation t sums the entries `t, t + 64, …` of the row in order; the 64 partials are added
/// by the tree with strides 32, 16, …, 1, as the shader does.
pub fn ml_restrict(
    p: &Params,
    y: &[GpuVec4],
    hptr: &[u32],
    hvertex: &[u32],
    hframe: &[GpuVec4],
    vinfo: &[GpuVertexInfo],
    q: &mut [GpuVec4],
) -> Result<()> {
    let n = p.n as usize;
    need(q.len(), ML_HANDLE_VEC4 * n, "ml_restrict q")?;
    let nv = y.len().min(vinfo.len());
    check_ml_csr(hptr, hvertex, hframe, n, nv, "ml_restrict handle CSR")?;
    q[..ML_HANDLE_VEC4 * n]
        .par_chunks_mut(ML_HANDLE_VEC4)
        .enumerate()
        .for_each(|(h, qh)| {
            let mut part = [[[0.0f32; 4]; ML_HANDLE_VEC4]; ML_RESTRICT_GROUP];
            let (lo, hi) = (hptr[h] as usize, hptr[h + 1] as usize);
            for (t, acc) in part.iter_mut().enumerate() {
                let mut k = lo + t;
                while k < hi {
                    let v = hvertex[k] as usize;
                    if vinfo[v].free != 0 {
                        let f = &hframe[k];
                        for (r, a) in acc.iter_mut().enumerate() {
                            for c in 0..4 {
                                a[c] += y[v][r] * f[c];
                            }
                        }
                    }
                    k += ML_RESTRICT_GROUP;
                }
            }
            let mut s = ML_RESTRICT_GROUP / 2;
            while s > 0 {
                for t in 0..s {
                    let other = part[t + s];
                    for (a, b) in part[t].iter_mut().zip(other) {
                        for c in 0..4 {
                            a[c] += b[c];
                        }
                    }
                }
                s >>= 1;
            }
            qh.copy_from_slice(&part[0]);
        });
    Ok(())
}

/// Twin of `ml_block_apply.wgsl` (n = 3 × handles, one invocation per row vec4 of a subspace
/// vector): `z[i][c] = Σ_{k<3} dot(blocks[36h + 3(4r + c) + k], rv[3h + k])` with h = i / 3,
/// r = i % 3 — the product of the handle's row-major 12×12 block with its 12 DOFs.
pub fn ml_block_apply(
    p: &Params,
    blocks: &[GpuVec4],
    rv: &[GpuVec4],
    z: &mut [GpuVec4],
) -> Result<()> {
    let n = p.n as usize;
    let handles = n.div_ceil(ML_HANDLE_VEC4);
    need(
        blocks.len(),
        ML_BLOCK_VEC4 * handles,
        "ml_block_apply blocks",
    )?;
    need(rv.len(), ML_HANDLE_VEC4 * handles, "ml_block_apply r")?;
    need(z.len(), n, "ml_block_apply z")?;
    z[..n].par_iter_mut().enumerate().for_each(|(i, zi)| {
        let (h, r) = (i / ML_HANDLE_VEC4, i % ML_HANDLE_VEC4);
        let rh = &rv[ML_HANDLE_VEC4 * h..][..ML_HANDLE_VEC4];
        for (c, out) in zi.iter_mut().enumerate() {
            let b = ML_BLOCK_VEC4 * h + 3 * (4 * r + c);
            *out = dot4(&blocks[b], &rh[0])
                + dot4(&blocks[b + 1], &rh[1])
                + dot4(&blocks[b + 2], &rh[2]);
        }
    });
    Ok(())
}

/// Twin of `ml_element_hv.wgsl` (n = element terms): `out[4e + a].xyz = free(v_a) ? scale[e] ·
/// Σ_b K_e[a, b] x̄_b : 0` with `x̄_b` zero at pinned vertices, `K_e[a, b]` the 3×3 block of
/// the term's row-major 12×12 Hessian (N/m; 144 f32 per term) applied as WGSL's `mat3x3 * vec3`
/// (column by column); `out[4e + a].w = 0`. Units: N for x in m.
pub fn ml_element_hv(
    p: &Params,
    x: &[GpuVec4],
    tets: &[[u32; 4]],
    hess: &[f32],
    scale: &[f32],
    vinfo: &[GpuVertexInfo],
    out: &mut [GpuVec4],
) -> Result<()> {
    let n = p.n as usize;
    need(tets.len(), n, "ml_element_hv tets")?;
    need(hess.len(), 144 * n, "ml_element_hv hess")?;
    need(scale.len(), n, "ml_element_hv scale")?;
    need(out.len(), 4 * n, "ml_element_hv out")?;
    let nv = x.len().min(vinfo.len());
    if let Some(e) = (0..n).find(|&e| tets[e].iter().any(|&v| v as usize >= nv)) {
        return Err(JelloError::Invalid(format!(
            "ml_element_hv: term {e} references a vertex ≥ {nv}"
        )));
    }
    out[..4 * n]
        .par_chunks_mut(4)
        .enumerate()
        .for_each(|(e, oe)| {
            let t = tets[e];
            let free = |v: u32| vinfo[v as usize].free != 0;
            let xe: [[f32; 3]; 4] = std::array::from_fn(|b| {
                let v = t[b];
                if free(v) {
                    let p = x[v as usize];
                    [p[0], p[1], p[2]]
                } else {
                    [0.0; 3]
                }
            });
            let s = scale[e];
            for (a, o) in oe.iter_mut().enumerate() {
                let mut acc = [0.0f32; 3];
                if free(t[a]) {
                    for (b, xb) in xe.iter().enumerate() {
                        let base = 144 * e + 36 * a + 3 * b;
                        // mat3x3 * vec3: col0·x + col1·y + col2·z, column c = K[.., c].
                        for (r, ar) in acc.iter_mut().enumerate() {
                            let row = &hess[base + 12 * r..][..3];
                            *ar += row[0] * xb[0] + row[1] * xb[1] + row[2] * xb[2];
                        }
                    }
                }
                *o = [s * acc[0], s * acc[1], s * acc[2], 0.0];
            }
        });
    Ok(())
}

/// Twin of `ml_bsr_hv.wgsl` (n = rows, i.e. vertices): `y[v].xyz = Σ_k blocks[k]·x[cols[k]].xyz`
/// over row v in order, each block applied as WGSL's `mat3x3 * vec3` (column by column), then
/// `+ add[v].xyz` when `u0 & 1`; `y[v].w = 0`. Units: those of the blocks times those of x
/// (N for N/m and m); with the inverse diagonal as blocks, the Jacobi preconditioner.
pub fn ml_bsr_hv(
    p: &Params,
    rowptr: &[u32],
    cols: &[u32],
    blocks: &[GpuMat3],
    x: &[GpuVec4],
    add: &[GpuVec4],
    y: &mut [GpuVec4],
) -> Result<()> {
    let n = p.n as usize;
    need(rowptr.len(), n + 1, "ml_bsr_hv rowptr")?;
    need(y.len(), n, "ml_bsr_hv y")?;
    let with_add = p.u0 & 1 != 0;
    if with_add {
        need(add.len(), n, "ml_bsr_hv add")?;
    }
    let end = rowptr[n] as usize;
    need(cols.len(), end, "ml_bsr_hv cols")?;
    need(blocks.len(), end, "ml_bsr_hv blocks")?;
    if let Some(r) = (0..n).find(|&r| rowptr[r] > rowptr[r + 1]) {
        return Err(JelloError::Invalid(format!(
            "ml_bsr_hv: offsets decrease at row {r}"
        )));
    }
    if let Some(k) = (rowptr[0] as usize..end).find(|&k| cols[k] as usize >= x.len()) {
        return Err(JelloError::Invalid(format!(
            "ml_bsr_hv: entry {k} = column {} out of range ({})",
            cols[k],
            x.len()
        )));
    }
    y[..n].par_iter_mut().enumerate().for_each(|(v, yv)| {
        let mut acc = [0.0f32; 3];
        for k in rowptr[v] as usize..rowptr[v + 1] as usize {
            let (m, xc) = (&blocks[k].cols, &x[cols[k] as usize]);
            for (r, a) in acc.iter_mut().enumerate() {
                *a += m[0][r] * xc[0] + m[1][r] * xc[1] + m[2][r] * xc[2];
            }
        }
        if with_add {
            for (a, b) in acc.iter_mut().zip(&add[v]) {
                *a += b;
            }
        }
        *yv = [acc[0], acc[1], acc[2], 0.0];
    });
    Ok(())
}
