//! Local stiffness-weighted biharmonic solves (SMS paper §3.5, Eq. 8–11).
//!
//! On a subdomain (a vertex set `S`), `K = L_k M⁻¹ L_k` with `L_k` the P1 Laplacian of the
//! tets lying wholly in `S`, tet `e` scaled by `E_e / E_softest`, and `M` the lumped volumes
//! of those tets. Rows of `L_k` at the mesh surface are kept as they are, which is the usual
//! natural (Neumann-type) boundary of the discrete bilaplacian: weights stay non-zero on the
//! object's surface. Dirichlet rows are eliminated and `K_FF u_F = −K_FD u_D` is solved by
//! sparse Cholesky (AMD).

use super::mesh::TetGeom;
use crate::cholesky::{Ordering, SparseCholesky};
use crate::sparse::{SymSparse, SymmetricPattern};
use crate::Result;
use std::sync::Arc;

pub(crate) struct LocalMesh<'a> {
    pub tets: &'a [[u32; 4]],
    pub geom: &'a TetGeom,
    /// Per-tet biharmonic stiffness `E_e / E_softest`.
    pub k: &'a [f64],
    pub adj: &'a [Vec<u32>],
    pub vertex_tets: &'a [Vec<u32>],
}

/// Solves the local biharmonic problem on vertex set `sub` with `u = 1` at `ones` and
/// `u = 0` at `zeros`, on the inner boundary (vertices of `sub` with a neighbour outside it)
/// and on any local piece that no Dirichlet value reaches (its `K` block would be singular;
/// zero is the compact-support answer there). A vertex listed in both `ones` and `zeros` is
/// 0. Returns the strictly positive part of `u` as (global vertex, value) pairs, i.e.
/// `u_pos = max(0, u)` without its zeros.
pub(crate) fn local_biharmonic(
    lm: &LocalMesh,
    sub: &[u32],
    ones: &[u32],
    zeros: &[u32],
    local_of: &mut [u32],
) -> Result<Vec<(u32, f64)>> {
    const NONE: u32 = u32::MAX;
    let ns = sub.len();
    for (i, &v) in sub.iter().enumerate() {
        local_of[v as usize] = i as u32;
    }
    // Local tets: every vertex in `sub`.
    let mut ltets: Vec<u32> = sub
        .iter()
        .flat_map(|&v| lm.vertex_tets[v as usize].iter().copied())
        .filter(|&t| {
            lm.tets[t as usize]
                .iter()
                .all(|&w| local_of[w as usize] != NONE)
        })
        .collect();
    ltets.sort_unstable();
    ltets.dedup();
    // Dirichlet state: 0 free, 1 → u = 1, 2 → u = 0.
    let mut state = vec![0u8; ns];
    for &v in ones {
        if local_of[v as usize] != NONE {
            state[local_of[v as usize] as usize] = 1;
        }
    }
    for &v in zeros {
        if local_of[v as usize] != NONE {
            state[local_of[v as usize] as usize] = 2;
        }
    }
    for (i, &v) in sub.iter().enumerate() {
        if lm.adj[v as usize]
            .iter()
            .any(|&w| local_of[w as usize] == NONE)
        {
            state[i] = 2;
        }
    }
    // Local Laplacian rows (local index, value) and lumped volumes.
    let mut lrow: Vec<Vec<(u32, f64)>> = vec![Vec::new(); ns];
    let mut mass = vec![0.0; ns];
    let mut parent: Vec<u32> = (0..ns as u32).collect();
    fn find(p: &mut [u32], mut a: u32) -> u32 {
        while p[a as usize] != a {
            p[a as usize] = p[p[a as usize] as usize];
            a = p[a as usize];
        }
        a
    }
    for &t in &ltets {
        let t = t as usize;
        let tet = lm.tets[t];
        let g = &lm.geom.grad[t];
        let s = lm.k[t] * lm.geom.vol[t];
        let loc = tet.map(|v| local_of[v as usize]);
        for a in 0..4 {
            mass[loc[a] as usize] += lm.geom.vol[t] / 4.0;
            let ra = find(&mut parent, loc[a]);
            let r0 = find(&mut parent, loc[0]);
            parent[ra as usize] = r0;
            for b in 0..4 {
                let val = s * super::mesh::dot(g[a], g[b]);
                let row = &mut lrow[loc[a] as usize];
                match row.iter_mut().find(|e| e.0 == loc[b]) {
                    Some(e) => e.1 += val,
                    None => row.push((loc[b], val)),
                }
            }
        }
    }
    // Vertices without a local tet, and local pieces without a Dirichlet value, are 0.
    let mut root_has_dirichlet = vec![false; ns];
    for i in 0..ns {
        if mass[i] == 0.0 {
            state[i] = 2;
        }
        if state[i] != 0 {
            let r = find(&mut parent, i as u32);
            root_has_dirichlet[r as usize] = true;
        }
    }
    for i in 0..ns {
        let r = find(&mut parent, i as u32);
        if !root_has_dirichlet[r as usize] {
            state[i] = 2;
        }
    }
    // Free numbering.
    let mut free_of = vec![NONE; ns];
    let mut free = Vec::new();
    for i in 0..ns {
        if state[i] == 0 {
            free_of[i] = free.len() as u32;
            free.push(i);
        }
    }
    let nf = free.len();
    let mut u = vec![0.0; ns];
    for i in 0..ns {
        if state[i] == 1 {
            u[i] = 1.0;
        }
    }
    if nf > 0 {
        // Rows of K restricted to free rows: K_f· = Σ_m L_fm / M_m · L_m·.
        let mut rows: Vec<Vec<(u32, f64)>> = Vec::with_capacity(nf);
        let mut scratch = vec![0.0; ns];
        let mut seen = vec![false; ns];
        let mut touched: Vec<u32> = Vec::new();
        let mut rhs = vec![0.0; nf];
        for (fi, &f) in free.iter().enumerate() {
            for &(m, lfm) in &lrow[f] {
                let c = lfm / mass[m as usize];
                for &(g, lmg) in &lrow[m as usize] {
                    if !seen[g as usize] {
                        seen[g as usize] = true;
                        touched.push(g);
                    }
                    scratch[g as usize] += c * lmg;
                }
            }
            let mut row = Vec::new();
            for &g in &touched {
                let val = scratch[g as usize];
                scratch[g as usize] = 0.0;
                seen[g as usize] = false;
                match state[g as usize] {
                    0 => row.push((free_of[g as usize], val)),
                    1 => rhs[fi] -= val,
                    _ => {}
                }
            }
            touched.clear();
            rows.push(row);
        }
        let pattern = Arc::new(SymmetricPattern::from_entries(
            nf,
            rows.iter()
                .enumerate()
                .flat_map(|(r, row)| row.iter().map(move |&(c, _)| (r, c as usize))),
        )?);
        let mut a = SymSparse::zeros(pattern.clone());
        for (r, row) in rows.iter().enumerate() {
            for &(c, val) in row {
                // K is symmetric: each unordered pair arrives twice; keep the upper one.
                if r <= c as usize {
                    if let Some(k) = pattern.find(r, c as usize) {
                        a.values_mut()[k] += val;
                    }
                }
            }
        }
        let chol = SparseCholesky::new(&a, Ordering::Amd)?;
        chol.solve_in_place(&mut rhs)?;
        for (fi, &f) in free.iter().enumerate() {
            u[f] = rhs[fi];
        }
    }
    for &v in sub {
        local_of[v as usize] = NONE;
    }
    Ok(sub
        .iter()
        .zip(&u)
        .filter(|(_, &val)| val > 0.0)
        .map(|(&v, &val)| (v, val))
        .collect())
}
