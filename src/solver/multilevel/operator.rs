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
use crate::gpu::GpuVec4;
use jello_precompute::sparse::SymSparse;
use nalgebra::{SMatrix, SVector};
use rayon::prelude::*;

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
                if fixed[r] {
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
