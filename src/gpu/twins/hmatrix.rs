//! Twins of the H-matrix far-field kernels (`shaders/jgs2_hm_*.wgsl`), f32, operation for
//! operation. The f64 reference is [`HMatrix::apply_tree_order`] followed by
//! `crate::solver::jgs2::hmatrix_far_field` (vertex `i`'s sum `S_i (G ĝ)_i − ĝ_i`).
//!
//! # The `hm` blob (u32 words, floats bit-cast; built by `DeviceJgs2::pack_hmatrix`)
//! ```text
//! [0..8]   header: n_nodes, n_perm, n_cols (Σ_c k_c), blocks_off, pairs_off, leaf_off,
//!          schur_off, cols_off
//! [8..]    per node c, HM_NODE_WORDS words: start, end (tree positions), parent (HM_NONE at the
//!          root), rank k_c, basis word offset (Q_c column-major 3|c| × k_c), wv offset (w_c and
//!          v_c in `hw`), node-block list word range [lo, hi), node-near list word range [lo, hi)
//! blocks   per far block (I < J): I, J, coupling word offset (S_IJ row-major k_I × k_J)
//! pairs    per near leaf pair (I ≤ J): I, J, near word offset (G[I, J] row-major 3|I| × 3|J|)
//! leaf     per tree position p: the leaf holding it
//! schur    per vertex: S_i, 9 floats row-major
//! cols     per basis column (c, a): two words
//! ```
//! followed by the node-block and node-near lists (block and pair ids) and the float data.
//! `hw` (f32) holds every `w_c` (`n_cols` floats, at each node's wv offset) and then every
//! `v_c` (the same offsets plus `n_cols`).
//!
//! [`HMatrix::apply_tree_order`]: jello_precompute::hmatrix::HMatrix::apply_tree_order

use crate::gpu::layout::{GpuVec4, Params};
use crate::{JelloError, Result};
use rayon::prelude::*;

pub use crate::gpu::abi::{HM_HEADER, HM_NODE_WORDS, HM_NONE, HM_PAIR_WORDS};

fn invalid(msg: String) -> JelloError {
    JelloError::Invalid(msg)
}

/// Bounds-checked reads of the blob (a bad blob is an error, never a panic).
struct Blob<'a>(&'a [u32]);

/// One node record.
#[derive(Clone, Copy)]
struct Node {
    start: usize,
    end: usize,
    parent: u32,
    rank: usize,
    basis: usize,
    wv: usize,
    blk: (usize, usize),
    near: (usize, usize),
}

impl Blob<'_> {
    fn u(&self, i: usize) -> Result<usize> {
        self.0
            .get(i)
            .map(|&w| w as usize)
            .ok_or_else(|| invalid(format!("hm blob: word {i} of {}", self.0.len())))
    }
    fn f(&self, i: usize) -> Result<f32> {
        self.0
            .get(i)
            .map(|&w| f32::from_bits(w))
            .ok_or_else(|| invalid(format!("hm blob: word {i} of {}", self.0.len())))
    }
    fn node(&self, c: usize) -> Result<Node> {
        if c >= self.u(0)? {
            return Err(invalid(format!("hm blob: node {c} of {}", self.u(0)?)));
        }
        let o = HM_HEADER + HM_NODE_WORDS * c;
        let nd = Node {
            start: self.u(o)?,
            end: self.u(o + 1)?,
            parent: self.u(o + 2)? as u32,
            rank: self.u(o + 3)?,
            basis: self.u(o + 4)?,
            wv: self.u(o + 5)?,
            blk: (self.u(o + 6)?, self.u(o + 7)?),
            near: (self.u(o + 8)?, self.u(o + 9)?),
        };
        // The parent precedes its children in the node order: the leaf-to-root walk ends. The
        // range, rank and basis must fit the blob, so no offset arithmetic below can overflow.
        let m = 3 * nd.end.saturating_sub(nd.start);
        let fits = nd
            .rank
            .checked_mul(m)
            .and_then(|q| q.checked_add(nd.basis))
            .is_some_and(|e| e <= self.0.len());
        if nd.start > nd.end
            || nd.end > self.u(1)?
            || nd.rank > m
            || !fits
            || (nd.parent != HM_NONE && nd.parent as usize >= c)
        {
            return Err(invalid(format!("hm blob: node {c} is inconsistent")));
        }
        Ok(nd)
    }
    /// A far block or near pair record: (I, J, word offset).
    fn pair(&self, table: usize, id: usize) -> Result<(usize, usize, usize)> {
        let o = self.u(table)? + HM_PAIR_WORDS * id;
        Ok((self.u(o)?, self.u(o + 1)?, self.u(o + 2)?))
    }
}

fn at<T: Copy>(a: &[T], i: usize, what: &str) -> Result<T> {
    a.get(i)
        .copied()
        .ok_or_else(|| invalid(format!("{what}: index {i} of {}", a.len())))
}

fn g3(frame: &[GpuVec4], perm: &[u32], q: usize) -> Result<[f32; 3]> {
    let j = at(perm, q, "hm perm")? as usize;
    let g = at(frame, j, "hm frame")?;
    Ok([g[0], g[1], g[2]])
}

/// Twin of `jgs2_hm_forward.wgsl`: per basis column k < n, `(c, a)` = the blob's column `k`,
/// `hw[wv_c + a] = Σ_r Q_c[r, a] x_c[r]` with `x` = the rest-frame gradients `frame[perm[q]]`
/// of c's tree positions q (the forward transform `w_c = Q_cᵀ x_c`).
pub fn jgs2_hm_forward(
    p: &Params,
    hm: &[u32],
    perm: &[u32],
    frame: &[GpuVec4],
    hw: &mut [f32],
) -> Result<()> {
    let b = Blob(hm);
    let cols = b.u(7)?;
    let out: Vec<Result<(usize, f32)>> = (0..p.n as usize)
        .into_par_iter()
        .map(|k| {
            let c = b.u(cols + 2 * k)?;
            let a = b.u(cols + 2 * k + 1)?;
            let nd = b.node(c)?;
            if a >= nd.rank {
                return Err(invalid(format!("jgs2_hm_forward: column {a} of node {c}")));
            }
            let m = 3 * (nd.end - nd.start);
            let mut w = 0.0f32;
            for q in nd.start..nd.end {
                let g = g3(frame, perm, q)?;
                let s = nd.basis + a * m + 3 * (q - nd.start);
                w += b.f(s)? * g[0] + b.f(s + 1)? * g[1] + b.f(s + 2)? * g[2];
            }
            Ok((nd.wv + a, w))
        })
        .collect();
    for r in out {
        let (i, w) = r?;
        *hw.get_mut(i)
            .ok_or_else(|| invalid(format!("jgs2_hm_forward: hw {i}")))? = w;
    }
    Ok(())
}

/// Twin of `jgs2_hm_coupling.wgsl`: per basis column k < n, `(c, a)`:
/// `hw[u0 + wv_c + a] = Σ_{blocks of c} (S_IJ w_J)[a]` where c = I, `(S_IJᵀ w_I)[a]` where
/// c = J — a gather over c's block list (`u0` = n_cols: the `v` half of `hw`).
pub fn jgs2_hm_coupling(p: &Params, hm: &[u32], hw: &mut [f32]) -> Result<()> {
    let b = Blob(hm);
    let cols = b.u(7)?;
    let half = p.u0 as usize;
    let w: &[f32] = hw;
    let out: Vec<Result<(usize, f32)>> = (0..p.n as usize)
        .into_par_iter()
        .map(|k| {
            let c = b.u(cols + 2 * k)?;
            let a = b.u(cols + 2 * k + 1)?;
            let nd = b.node(c)?;
            if a >= nd.rank || nd.wv + a >= half {
                return Err(invalid(format!("jgs2_hm_coupling: column {a} of node {c}")));
            }
            let mut v = 0.0f32;
            for e in nd.blk.0..nd.blk.1 {
                let (i, j, s) = b.pair(3, b.u(e)?)?;
                if i == c {
                    let nj = b.node(j)?;
                    for q in 0..nj.rank {
                        v += b.f(s + a * nj.rank + q)? * at(w, nj.wv + q, "hm w")?;
                    }
                } else {
                    let ni = b.node(i)?;
                    for q in 0..ni.rank {
                        v += b.f(s + q * nd.rank + a)? * at(w, ni.wv + q, "hm w")?;
                    }
                }
            }
            Ok((half + nd.wv + a, v))
        })
        .collect();
    for r in out {
        let (i, v) = r?;
        *hw.get_mut(i)
            .ok_or_else(|| invalid(format!("jgs2_hm_coupling: hw {i}")))? = v;
    }
    Ok(())
}

/// Twin of `jgs2_hm_backward.wgsl`: per tree position p < n, vertex `i = perm[p]` in leaf L:
/// `y` = L's near rows at p (`G[L, J] x_J`, and `G[I, L]ᵀ x_I` where L is the column) plus
/// `Σ_{c ∋ p} Q_c v_c` at p's rows over the nodes from L to the root, then
/// `frame[u1 + i] = S_i y − ĝ_i` (`u0` = n_cols, where `v` starts in `hw`).
pub fn jgs2_hm_backward(
    p: &Params,
    hm: &[u32],
    perm: &[u32],
    hw: &[f32],
    frame: &mut [GpuVec4],
) -> Result<()> {
    let b = Blob(hm);
    let (leaf, schur) = (b.u(5)?, b.u(6)?);
    let (half, base) = (p.u0 as usize, p.u1 as usize);
    let n = p.n as usize;
    // The outputs must not alias the gradients read (vertex ids of the listed positions).
    if let Some(&j) = perm.iter().take(n).find(|&&j| j as usize >= base) {
        return Err(invalid(format!(
            "jgs2_hm_backward: vertex {j} reads the output range from {base}"
        )));
    }
    let fr: &[GpuVec4] = frame;
    let out: Vec<Result<(usize, GpuVec4)>> = (0..n)
        .into_par_iter()
        .map(|pos| {
            let i = at(perm, pos, "hm perm")? as usize;
            let l = b.u(leaf + pos)?;
            let nl = b.node(l)?;
            if !(nl.start..nl.end).contains(&pos) {
                return Err(invalid(format!(
                    "jgs2_hm_backward: leaf {l} of position {pos}"
                )));
            }
            let mut y = [0.0f32; 3];
            for e in nl.near.0..nl.near.1 {
                let (ci, cj, g) = b.pair(4, b.u(e)?)?;
                let (ni, nj) = (b.node(ci)?, b.node(cj)?);
                let mj = 3 * (nj.end - nj.start);
                // The dense block must fit the blob (bounds every row offset below).
                let mi = 3 * (ni.end - ni.start);
                if mi
                    .checked_mul(mj)
                    .and_then(|x| x.checked_add(g))
                    .is_none_or(|e| e > hm.len())
                {
                    return Err(invalid(format!("jgs2_hm_backward: near pair {e} block")));
                }
                if ci == l {
                    let r0 = 3 * (pos - ni.start);
                    for (d, yd) in y.iter_mut().enumerate() {
                        let row = g + (r0 + d) * mj;
                        for q in nj.start..nj.end {
                            let x = g3(fr, perm, q)?;
                            let s = row + 3 * (q - nj.start);
                            *yd += b.f(s)? * x[0] + b.f(s + 1)? * x[1] + b.f(s + 2)? * x[2];
                        }
                    }
                }
                if cj == l && ci != cj {
                    let r0 = 3 * (pos - nj.start);
                    for (d, yd) in y.iter_mut().enumerate() {
                        for q in ni.start..ni.end {
                            let x = g3(fr, perm, q)?;
                            let s = g + 3 * (q - ni.start) * mj + r0 + d;
                            *yd += b.f(s)? * x[0] + b.f(s + mj)? * x[1] + b.f(s + 2 * mj)? * x[2];
                        }
                    }
                }
            }
            let mut c = l as u32;
            while c != HM_NONE {
                let nd = b.node(c as usize)?;
                if !(nd.start..nd.end).contains(&pos) {
                    return Err(invalid(format!("jgs2_hm_backward: node {c} lacks {pos}")));
                }
                let m = 3 * (nd.end - nd.start);
                let r = 3 * (pos - nd.start);
                for a in 0..nd.rank {
                    let va = at(hw, half + nd.wv + a, "hm v")?;
                    let s = nd.basis + a * m + r;
                    for (d, yd) in y.iter_mut().enumerate() {
                        *yd += b.f(s + d)? * va;
                    }
                }
                c = nd.parent;
            }
            let gi = at(fr, i, "hm frame")?;
            let s = schur + 9 * i;
            let mut far = [0.0f32; 4];
            for (d, (fd, g)) in far.iter_mut().zip(gi).take(3).enumerate() {
                *fd = b.f(s + 3 * d)? * y[0]
                    + b.f(s + 3 * d + 1)? * y[1]
                    + b.f(s + 3 * d + 2)? * y[2]
                    - g;
            }
            Ok((base + i, far))
        })
        .collect();
    for r in out {
        let (k, v) = r?;
        *frame
            .get_mut(k)
            .ok_or_else(|| invalid(format!("jgs2_hm_backward: frame {k}")))? = v;
    }
    Ok(())
}
