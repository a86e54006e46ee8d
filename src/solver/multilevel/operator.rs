//! The full-space Hessian as an operator: y = H x without assembling H whole, and the 3×3
//! (Jacobi) and per-handle 12×12 (block-Jacobi) diagonals the PCG levels precondition with.
//!
//! H is the sum of three kinds of terms, each kept in the form it is produced in:
//! - `base`: a sparse matrix on the elastic pattern holding what is per vertex or per surface
//!   pair — inertia `m_v/ĥ²`, the obstacle barrier, sphere/box surface pairs — assembled by
//!   [`crate::problem::StepProblem::assemble`] with no element term, plus (full-space level only) the lagged
//!   elastic element Hessians scattered into it;
//! - element terms: `s_e · H_e` for the cubature samples (scale `s_e = w_e / vol_e`: the
//!   rule's weight replaces the element volume) — fresh at every Newton iteration;
//! - the IPC contact and friction stencils, fresh at every iteration
//!   ([`crate::problem::StepProblem::contact_hessian_blocks`]).
//!
//! Pinned DOFs: `base` holds identity rows there (as Newton's matrix), element and contact
//! terms skip them, so the operator is Newton's matrix with the same pinned rows.

use super::levels::Level;
use crate::gpu::{GpuMat3, GpuVec4};
use crate::{JelloError, Result};
use jello_precompute::sparse::{SymSparse, SymmetricPattern};
use nalgebra::{SMatrix, SVector};
use rayon::prelude::*;
use std::sync::Arc;

/// A visitor of one 3×3 coupling `(va, vb, K_ab)`.
type BlockVisitor<'f> = dyn FnMut(usize, usize, &[[f64; 3]; 3]) + 'f;

/// One 12×12 term on four vertices (row-major, N/m) with its scale.
#[derive(Clone, Debug)]
pub struct ElementTerm {
    /// The four vertices.
    pub vertices: [u32; 4],
    /// Multiplier (dimensionless): 1 for an exact element, `w_e/vol_e` for a cubature sample.
    pub scale: f64,
    /// The PSD element Hessian (row-major 12×12, N/m).
    pub hessian: [f64; 144],
}

/// H as [`base`](Self::base) + element terms + contact stencils (see the module docs).
pub struct HessianOperator<'a> {
    /// Per-vertex/pair terms (and lagged elastic elements), identity on pinned rows.
    pub base: &'a SymSparse,
    /// Element terms applied element by element.
    pub elements: &'a [ElementTerm],
    /// IPC stencils (collision-mesh ids; ids ≥ the vertex count have no DOF).
    pub contact: &'a [([u32; 4], SMatrix<f64, 12, 12>)],
    /// Per DOF: pinned.
    pub fixed: &'a [bool],
}

impl HessianOperator<'_> {
    /// DOF count `3n`.
    pub fn n(&self) -> usize {
        self.fixed.len()
    }

    /// `y = H x`.
    pub fn apply(&self, x: &[f64], y: &mut [f64]) {
        self.base.mul_vec(x, y);
        let nv = self.n() / 3;
        let fixed = self.fixed;
        for t in self.elements {
            let mut xe = [0.0; 12];
            for (a, &v) in t.vertices.iter().enumerate() {
                for i in 0..3 {
                    let k = 3 * v as usize + i;
                    xe[3 * a + i] = if fixed[k] { 0.0 } else { x[k] };
                }
            }
            for (a, &v) in t.vertices.iter().enumerate() {
                for i in 0..3 {
                    let k = 3 * v as usize + i;
                    if fixed[k] {
                        continue;
                    }
                    let row = &t.hessian[12 * (3 * a + i)..][..12];
                    y[k] += t.scale * row.iter().zip(&xe).map(|(h, x)| h * x).sum::<f64>();
                }
            }
        }
        for (ids, h) in self.contact {
            let mut xe = SVector::<f64, 12>::zeros();
            for (a, &v) in ids.iter().enumerate() {
                if (v as usize) < nv {
                    for i in 0..3 {
                        let k = 3 * v as usize + i;
                        xe[3 * a + i] = if fixed[k] { 0.0 } else { x[k] };
                    }
                }
            }
            let ye = h * xe;
            for (a, &v) in ids.iter().enumerate() {
                if (v as usize) < nv {
                    for i in 0..3 {
                        let k = 3 * v as usize + i;
                        if !fixed[k] {
                            y[k] += ye[3 * a + i];
                        }
                    }
                }
            }
        }
    }

    /// The diagonal of H (for Jacobi; pinned DOFs read 1).
    pub fn diagonal(&self) -> Vec<f64> {
        let n = self.n();
        let nv = n / 3;
        let mut d: Vec<f64> = (0..n).map(|k| self.base.get(k, k)).collect();
        for t in self.elements {
            for (a, &v) in t.vertices.iter().enumerate() {
                for i in 0..3 {
                    let k = 3 * v as usize + i;
                    if !self.fixed[k] {
                        d[k] += t.scale * t.hessian[13 * (3 * a + i)];
                    }
                }
            }
        }
        for (ids, h) in self.contact {
            for (a, &v) in ids.iter().enumerate() {
                if (v as usize) < nv {
                    for i in 0..3 {
                        let k = 3 * v as usize + i;
                        if !self.fixed[k] {
                            d[k] += h[(3 * a + i, 3 * a + i)];
                        }
                    }
                }
            }
        }
        d
    }

    /// Every 3×3 coupling `(va, vb, K_ab)` of H between free vertices, each ordered pair once
    /// (both `(a, b)` and `(b, a)` for a ≠ b), pinned DOFs zeroed: what a Galerkin block is
    /// summed from.
    fn for_each_block(&self, f: &mut BlockVisitor) {
        let nv = self.n() / 3;
        let fixed = self.fixed;
        let p = self.base.pattern();
        let vals = self.base.values();
        let (cp, ri) = (p.col_ptr(), p.row_idx());
        for c in 0..p.n() {
            if fixed[c] {
                continue;
            }
            for k in cp[c]..cp[c + 1] {
                let r = ri[k];
                if fixed[r] || vals[k] == 0.0 {
                    continue;
                }
                let mut b = [[0.0; 3]; 3];
                b[r % 3][c % 3] = vals[k];
                f(r / 3, c / 3, &b);
                if r != c {
                    let mut bt = [[0.0; 3]; 3];
                    bt[c % 3][r % 3] = vals[k];
                    f(c / 3, r / 3, &bt);
                }
            }
        }
        let mut emit = |vs: &[u32; 4], m: &dyn Fn(usize, usize) -> f64| {
            for (a, &va) in vs.iter().enumerate() {
                for (b, &vb) in vs.iter().enumerate() {
                    if va as usize >= nv || vb as usize >= nv {
                        continue;
                    }
                    let mut blk = [[0.0; 3]; 3];
                    for (i, row) in blk.iter_mut().enumerate() {
                        for (j, e) in row.iter_mut().enumerate() {
                            let (r, c) = (3 * va as usize + i, 3 * vb as usize + j);
                            if !(fixed[r] || fixed[c]) {
                                *e = m(3 * a + i, 3 * b + j);
                            }
                        }
                    }
                    f(va as usize, vb as usize, &blk);
                }
            }
        };
        for t in self.elements {
            emit(&t.vertices, &|r, c| t.scale * t.hessian[12 * r + c]);
        }
        for (ids, h) in self.contact {
            emit(ids, &|r, c| h[(r, c)]);
        }
    }

    /// The 12×12 diagonal blocks `U_hᵀ H U_h` of `level`'s Galerkin matrix (row-major), from
    /// the terms of H directly (never a product with U): for each coupling `K_ab` and each
    /// handle `h` covering both vertices, `φ_ah φ_bh (K_ab ⊗ f_a f_bᵀ)` with `f = [x̄ − o_h; 1]`.
    pub fn galerkin_diagonal(&self, level: &Level) -> Vec<[f64; 144]> {
        let mut out = vec![[0.0; 144]; level.n_handles()];
        self.for_each_block(&mut |a, b, k| {
            if level.is_pinned(a) || level.is_pinned(b) {
                return;
            }
            for (h, wa, fa) in level.covering(a) {
                let Some((wb, fb)) = level.weight_frame(b, h) else {
                    continue;
                };
                let blk = &mut out[h];
                let w = wa * wb;
                for (i, row) in k.iter().enumerate() {
                    for (j, &kij) in row.iter().enumerate() {
                        if kij == 0.0 {
                            continue;
                        }
                        for c in 0..4 {
                            for d in 0..4 {
                                blk[12 * (4 * i + c) + 4 * j + d] += w * kij * fa[c] * fb[d];
                            }
                        }
                    }
                }
            }
        });
        out
    }

    /// The whole Galerkin matrix `Uᵀ H U` of `level`, dense row-major `dim × dim`, from the
    /// terms of H directly as [`Self::galerkin_diagonal`] sums its blocks: for each coupling
    /// `K_ab` and each pair of handles `h` covering `a` and `g` covering `b`,
    /// `φ_ah φ_bg (K_ab ⊗ f_a f_bᵀ)` into block `(h, g)`. For small subspaces (its cost is
    /// one pass over H's terms times the handle pairs per coupling, and `dim²` memory).
    pub fn galerkin_matrix(&self, level: &Level) -> Vec<f64> {
        let dim = level.dim();
        let mut out = vec![0.0; dim * dim];
        self.for_each_block(&mut |a, b, k| {
            if level.is_pinned(a) || level.is_pinned(b) {
                return;
            }
            for (h, wa, fa) in level.covering(a) {
                for (g, wb, fb) in level.covering(b) {
                    let w = wa * wb;
                    for (i, row) in k.iter().enumerate() {
                        for (j, &kij) in row.iter().enumerate() {
                            if kij == 0.0 {
                                continue;
                            }
                            for (c, &fac) in fa.iter().enumerate() {
                                let r = (12 * h + 4 * i + c) * dim + 12 * g + 4 * j;
                                for (o, &fbd) in out[r..r + 4].iter_mut().zip(&fb) {
                                    *o += w * kij * fac * fbd;
                                }
                            }
                        }
                    }
                }
            }
        });
        out
    }
}

/// Inverts each 12×12 block by Cholesky; a block that is not SPD (a handle covering only
/// pinned vertices is all zero) gets a diagonal shift of 1e-12 of its largest diagonal entry,
/// and an all-zero block becomes the identity (its DOFs see zero right-hand sides anyway).
pub fn invert_blocks(blocks: &[[f64; 144]]) -> Vec<[f64; 144]> {
    blocks
        .par_iter()
        .map(|b| {
            let m = SMatrix::<f64, 12, 12>::from_row_slice(b);
            let scale = (0..12).map(|i| m[(i, i)].abs()).fold(0.0, f64::max);
            let mut out = [0.0; 144];
            if scale == 0.0 {
                for i in 0..12 {
                    out[13 * i] = 1.0;
                }
                return out;
            }
            let mut shift = 0.0;
            for _ in 0..8 {
                let shifted = m + SMatrix::<f64, 12, 12>::identity() * shift;
                if let Some(ch) = shifted.cholesky() {
                    let inv = ch.inverse();
                    for r in 0..12 {
                        for c in 0..12 {
                            out[12 * r + c] = inv[(r, c)];
                        }
                    }
                    return out;
                }
                shift = if shift == 0.0 {
                    1e-12 * scale
                } else {
                    shift * 100.0
                };
            }
            for i in 0..12 {
                out[13 * i] = 1.0 / (m[(i, i)].abs() + scale);
            }
            out
        })
        .collect()
}

/// The 12×12 blocks (row-major, e.g. [`invert_blocks`]' output) as the `ml_block_apply`
/// kernel reads them: 36 vec4s per block, row `j` in vec4s `3j, 3j + 1, 3j + 2`, rounded once
/// to f32.
pub fn pack_blocks(blocks: &[[f64; 144]]) -> Vec<GpuVec4> {
    blocks
        .iter()
        .flat_map(|b| {
            b.chunks_exact(4)
                .map(|c| [c[0] as f32, c[1] as f32, c[2] as f32, c[3] as f32])
        })
        .collect()
}

/// A symmetric sparse matrix as the `ml_bsr_hv` kernel reads it: per vertex row its 3×3 blocks
/// with both triangles stored (the kernel gathers per row: no scatter, no atomics), columns
/// increasing within a row, entries rounded once to f32. Units: those of the matrix (N/m for
/// H's base term; 1/(N/m) for the Jacobi preconditioner).
#[derive(Clone, Debug, Default)]
pub struct BsrArrays {
    /// Per-vertex row offsets into `cols` / `blocks` (`n + 1`).
    pub row_ptr: Vec<u32>,
    /// Block column (vertex) of each block.
    pub cols: Vec<u32>,
    /// The blocks, column-major as WGSL's `mat3x3<f32>`.
    pub blocks: Vec<GpuMat3>,
}

impl BsrArrays {
    /// The block rows of `m` (upper-triangular CSC of a symmetric `3n × 3n` matrix, e.g. H's
    /// base term): entry `(r, c)` and, off the diagonal, its mirror go into block
    /// `(r/3, c/3)`. Errors when `m`'s order is not a multiple of 3 or the blocks exceed u32.
    /// A caller converting many matrices on one pattern keeps a [`BsrLayout`] instead.
    pub fn from_sym(m: &SymSparse) -> Result<Self> {
        Ok(BsrLayout::new(m.pattern())?.arrays(m))
    }

    /// The block-diagonal matrix `diag(values)` (one 3×3 diagonal block per vertex; `values`
    /// has 3n entries): with the inverse of [`HessianOperator::diagonal`], the Jacobi
    /// preconditioner the full-space smoother uses.
    pub fn diagonal(values: &[f64]) -> Self {
        let nv = values.len() / 3;
        BsrArrays {
            row_ptr: (0..=nv as u32).collect(),
            cols: (0..nv as u32).collect(),
            blocks: values
                .chunks_exact(3)
                .map(|d| {
                    GpuMat3::from_rows([
                        [d[0] as f32, 0.0, 0.0],
                        [0.0, d[1] as f32, 0.0],
                        [0.0, 0.0, d[2] as f32],
                    ])
                })
                .collect(),
        }
    }
}

/// Where each entry of a symmetric sparse pattern lands in the block rows of [`BsrArrays`]:
/// built once per pattern (the elastic pattern of the lagged Hessian is the same for a whole
/// run), so converting a matrix's values is one pass over them with no search or map.
pub struct BsrLayout {
    pattern: Arc<SymmetricPattern>,
    row_ptr: Vec<u32>,
    cols: Vec<u32>,
    /// Per stored entry `k` at `(r, c)`: the block `(r/3, c/3)` and, off the diagonal, the
    /// mirror block `(c/3, r/3)` (`u32::MAX` on the diagonal).
    at: Vec<[u32; 2]>,
}

impl BsrLayout {
    /// The layout of `pattern` (see [`BsrArrays::from_sym`] for the errors).
    pub fn new(pattern: &Arc<SymmetricPattern>) -> Result<Self> {
        let n3 = pattern.n();
        if !n3.is_multiple_of(3) {
            return Err(JelloError::Invalid(format!(
                "block rows: matrix order {n3} is not a multiple of 3"
            )));
        }
        let nv = n3 / 3;
        let (cp, ri) = (pattern.col_ptr(), pattern.row_idx());
        let mut rows: Vec<Vec<u32>> = vec![Vec::new(); nv];
        for c in 0..n3 {
            for &r in &ri[cp[c]..cp[c + 1]] {
                rows[r / 3].push((c / 3) as u32);
                rows[c / 3].push((r / 3) as u32);
            }
        }
        for row in &mut rows {
            row.sort_unstable();
            row.dedup();
        }
        let total: usize = rows.iter().map(Vec::len).sum();
        if total > u32::MAX as usize {
            return Err(JelloError::Invalid(format!(
                "block rows: {total} blocks do not fit the device's u32 offsets"
            )));
        }
        let mut row_ptr = Vec::with_capacity(nv + 1);
        row_ptr.push(0u32);
        let mut cols = Vec::with_capacity(total);
        for row in &rows {
            cols.extend_from_slice(row);
            row_ptr.push(cols.len() as u32);
        }
        let block = |rv: usize, cv: usize| -> u32 {
            let (lo, hi) = (row_ptr[rv] as usize, row_ptr[rv + 1] as usize);
            // Present by construction: every entry put its column into its row above.
            lo as u32 + cols[lo..hi].binary_search(&(cv as u32)).unwrap_or(0) as u32
        };
        let mut at = Vec::with_capacity(pattern.nnz());
        for c in 0..n3 {
            for &r in &ri[cp[c]..cp[c + 1]] {
                let mirror = if r == c {
                    u32::MAX
                } else {
                    block(c / 3, r / 3)
                };
                at.push([block(r / 3, c / 3), mirror]);
            }
        }
        Ok(BsrLayout {
            pattern: pattern.clone(),
            row_ptr,
            cols,
            at,
        })
    }

    /// Whether `m` is on this layout's pattern (the same shared pattern, not an equal copy).
    pub fn fits(&self, m: &SymSparse) -> bool {
        Arc::ptr_eq(&self.pattern, m.pattern())
    }

    /// `m`'s block rows; `m` must be on this layout's pattern ([`Self::fits`]; panics on a
    /// pattern with another entry count).
    pub fn arrays(&self, m: &SymSparse) -> BsrArrays {
        assert_eq!(
            m.values().len(),
            self.at.len(),
            "block layout of another pattern"
        );
        let (cp, ri) = (self.pattern.col_ptr(), self.pattern.row_idx());
        let mut acc = vec![[[0.0f64; 3]; 3]; self.cols.len()];
        let vals = m.values();
        for c in 0..self.pattern.n() {
            for k in cp[c]..cp[c + 1] {
                let r = ri[k];
                let [b, mirror] = self.at[k];
                acc[b as usize][r % 3][c % 3] += vals[k];
                if mirror != u32::MAX {
                    acc[mirror as usize][c % 3][r % 3] += vals[k];
                }
            }
        }
        BsrArrays {
            row_ptr: self.row_ptr.clone(),
            cols: self.cols.clone(),
            blocks: acc
                .iter()
                .map(|b| GpuMat3::from_rows(b.map(|r| r.map(|x| x as f32))))
                .collect(),
        }
    }
}

/// H's element terms and IPC contact stencils as the `ml_element_hv` kernel reads them: four
/// vertices, one scale and a row-major 12×12 Hessian (f32, N/m) per term, the contact stencils
/// after the elements with scale 1. A stencil corner on an obstacle vertex (id ≥ the vertex
/// count, no DOF) gets zero rows and columns and borrows a model vertex of its own stencil as
/// its id, so it contributes exactly nothing, as in [`HessianOperator::apply`]; a stencil with
/// no model vertex is dropped.
#[derive(Clone, Debug, Default)]
pub struct DeviceTerms {
    /// The four vertices of each term (all below the vertex count).
    pub tets: Vec<[u32; 4]>,
    /// 144 f32 per term, row-major.
    pub hess: Vec<f32>,
    /// Multiplier per term (dimensionless).
    pub scale: Vec<f32>,
}

impl DeviceTerms {
    /// The terms of `elements` then `contact` over `nv` vertices (see the type's docs).
    pub fn new(
        elements: &[ElementTerm],
        contact: &[([u32; 4], SMatrix<f64, 12, 12>)],
        nv: usize,
    ) -> Self {
        let mut out = DeviceTerms::default();
        for t in elements {
            out.tets.push(t.vertices);
            out.hess.extend(t.hessian.iter().map(|&h| h as f32));
            out.scale.push(t.scale as f32);
        }
        for (ids, h) in contact {
            let Some(&own) = ids.iter().find(|&&v| (v as usize) < nv) else {
                continue;
            };
            let live = ids.map(|v| (v as usize) < nv);
            out.tets
                .push(ids.map(|v| if (v as usize) < nv { v } else { own }));
            for r in 0..12 {
                for c in 0..12 {
                    let keep = live[r / 3] && live[c / 3];
                    out.hess.push(if keep { h[(r, c)] as f32 } else { 0.0 });
                }
            }
            out.scale.push(1.0);
        }
        out
    }

    /// Term count.
    pub fn len(&self) -> usize {
        self.tets.len()
    }

    /// Whether there are no terms.
    pub fn is_empty(&self) -> bool {
        self.tets.is_empty()
    }
}
