//! JGS2 precompute: Eq. 23 vs Eq. 8, subspace identities, the near/far split against an
//! independent recomputation from dense `Ū_i`, cubature weights and residuals, group-wise
//! (Gauss–Seidel) subspaces.
#![allow(clippy::needless_range_loop)]
mod common;

use jello_precompute::cholesky::Ordering;
use jello_precompute::jgs2::{ubar_schur_dense, Jgs2Input, Jgs2Options, Jgs2Precompute};

struct Beam {
    pos: Vec<[f64; 3]>,
    tets: Vec<[u32; 4]>,
    ke: Vec<[f64; 144]>,
    shares: Vec<[f64; 4]>,
    pinned: Vec<bool>,
    h: f64,
}

fn beam(nx: usize, ny: usize, nz: usize, young: f64) -> Beam {
    let (pos, tets) = common::box_grid(nx, ny, nz, 0.05);
    let (mu, la) = common::lame(young, 0.4);
    let ke = tets
        .iter()
        .map(|t| common::linear_elastic_ke(&pos, t, mu, la))
        .collect();
    let (shares, _) = common::lumped_mass(&pos, &tets, 1000.0);
    let pinned = pos.iter().map(|p| p[0] == 0.0).collect();
    Beam {
        pos,
        tets,
        ke,
        shares,
        pinned,
        h: 0.01,
    }
}

fn input(b: &Beam) -> Jgs2Input<'_> {
    Jgs2Input {
        n_vertices: b.pos.len(),
        positions: &b.pos,
        tets: &b.tets,
        elem_hessians: &b.ke,
        elem_mass: &b.shares,
        h: b.h,
        pinned: &b.pinned,
    }
}

fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0, |m, x| m.max(x.abs()))
}

#[test]
fn hbar_is_sum_of_element_hessians_on_free_dofs() {
    let b = beam(4, 2, 2, 1e5);
    let pre = Jgs2Precompute::new(&input(&b), Ordering::default()).unwrap();
    let n = 3 * b.pos.len();
    let mut d = vec![0.0; n * n];
    for (e, t) in b.tets.iter().enumerate() {
        for a in 0..4 {
            for bb in 0..4 {
                for i in 0..3 {
                    for j in 0..3 {
                        let (r, c) = (3 * t[a] as usize + i, 3 * t[bb] as usize + j);
                        let mut v = b.ke[e][(3 * a + i) * 12 + 3 * bb + j];
                        if r == c {
                            v += b.shares[e][a] / (b.h * b.h);
                        }
                        d[c * n + r] += v;
                    }
                }
            }
        }
    }
    let hd = pre.hbar().to_dense();
    let scale = max_abs(&d);
    for r in 0..n {
        for c in 0..n {
            let fixed = b.pinned[r / 3] || b.pinned[c / 3];
            let want = if fixed {
                if r == c {
                    1.0
                } else {
                    0.0
                }
            } else {
                d[c * n + r]
            };
            assert!((hd[c * n + r] - want).abs() < 1e-12 * scale, "({r},{c})");
        }
    }
}

#[test]
fn eq23_matches_schur_form_and_subspace_identities() {
    for young in [1e4, 1e7] {
        let b = beam(5, 2, 2, young);
        let pre = Jgs2Precompute::new(&input(&b), Ordering::default()).unwrap();
        let n = 3 * b.pos.len();
        let hd = pre.hbar().to_dense();
        let free: Vec<usize> = (0..b.pos.len()).filter(|&v| !b.pinned[v]).collect();
        for &i in free.iter().step_by(5) {
            let u = pre.ubar_dense_for_vertex(i).unwrap();
            let us = ubar_schur_dense(&hd, n, i).unwrap();
            let diff: f64 = u
                .iter()
                .zip(&us)
                .map(|(p, q)| (p - q).powi(2))
                .sum::<f64>()
                .sqrt();
            let norm: f64 = us.iter().map(|q| q * q).sum::<f64>().sqrt();
            assert!(
                diff <= 1e-10 * norm,
                "E={young} vertex {i}: {}",
                diff / norm
            );
            // S_i Ū_i = I
            for c in 0..3 {
                for r in 0..3 {
                    let want = if r == c { 1.0 } else { 0.0 };
                    assert!((u[c * n + 3 * i + r] - want).abs() < 1e-12);
                }
            }
            // H̄ Ū_i = 0 off the local rows
            let mut hu = vec![0.0; n];
            let hscale = max_abs(&hd);
            for c in 0..3 {
                pre.hbar().mul_vec(&u[c * n..(c + 1) * n], &mut hu);
                let local = &hu[3 * i..3 * i + 3];
                for (r, v) in hu.iter().enumerate() {
                    if r / 3 != i {
                        assert!(v.abs() < 1e-10 * hscale, "row {r}: {v}");
                    }
                }
                assert!(
                    max_abs(local) > 1e-3 * hscale,
                    "local rows carry the Schur complement"
                );
            }
            // pinned rows of Ū are zero
            for v in (0..b.pos.len()).filter(|&v| b.pinned[v]) {
                for c in 0..3 {
                    for d in 0..3 {
                        assert_eq!(u[c * n + 3 * v + d], 0.0);
                    }
                }
            }
        }
        assert!(pre.ubar_dense_for_vertex(0).is_err(), "vertex 0 is pinned");
    }
}

/// Column-major `n × 3` rows of vertex `j`: `Ū[j]` as a row-major 3×3 block.
fn row(u: &[f64], n: usize, j: usize) -> [f64; 9] {
    let mut b = [0.0; 9];
    for d in 0..3 {
        for c in 0..3 {
            b[3 * d + c] = u[c * n + 3 * j + d];
        }
    }
    b
}

/// Least-squares fit of the rows of `u` over `members` (positions `pos`), computed densely and
/// independently of the precompute: `(mean, slopes)` with `row_j ≈ mean + Σ_k (p_j − p̄)_k
/// slope_k` (slopes zero for ≤ 4 members, as the precompute's rule), plus the fit's
/// deviation (Frobenius norm over the node).
fn linear_fit(
    u: &[f64],
    n: usize,
    pos: &[[f64; 3]],
    members: &[u32],
    linear: bool,
) -> ([f64; 9], [f64; 27], f64) {
    let m = members.len();
    let mut pc = [0.0; 3];
    for &j in members {
        for d in 0..3 {
            pc[d] += pos[j as usize][d] / m as f64;
        }
    }
    let x = nalgebra::DMatrix::from_fn(m, 4, |r, c| {
        if c == 0 {
            1.0
        } else {
            pos[members[r] as usize][c - 1] - pc[c - 1]
        }
    });
    let y = nalgebra::DMatrix::from_fn(m, 9, |r, q| row(u, n, members[r] as usize)[q]);
    let cols = if linear && m > 4 { 4 } else { 1 };
    let xs = x.columns(0, cols).into_owned();
    let coef = xs.clone().svd(true, true).solve(&y, 1e-12).unwrap();
    let resid = &y - &xs * &coef;
    let mut mean = [0.0; 9];
    let mut slopes = [0.0; 27];
    for q in 0..9 {
        mean[q] = coef[(0, q)];
        for k in 1..cols {
            slopes[9 * (k - 1) + q] = coef[(k, q)];
        }
    }
    (mean, slopes, resid.norm())
}

/// The fitted row of member `p` (rest position) of a far sample `(block, slopes)` about `pc`.
fn fitted(block: &[f64; 9], slopes: Option<&[f64; 27]>, p: [f64; 3], pc: [f64; 3]) -> [f64; 9] {
    let mut r = *block;
    if let Some(sl) = slopes {
        for k in 0..3 {
            for q in 0..9 {
                r[q] += (p[k] - pc[k]) * sl[9 * k + q];
            }
        }
    }
    r
}

fn centroid(pos: &[[f64; 3]], members: &[u32]) -> [f64; 3] {
    let mut pc = [0.0; 3];
    for &j in members {
        for d in 0..3 {
            pc[d] += pos[j as usize][d] / members.len() as f64;
        }
    }
    pc
}

fn frob(b: &[f64]) -> f64 {
    b.iter().map(|x| x * x).sum::<f64>().sqrt()
}

/// Every free vertex's record against its dense `Ū_i`: near rows are exact, far samples are
/// least-squares linear fits (mean and slopes) over nodes within the tolerance, near ∪ far
/// nodes ∪ {i} cover every free vertex exactly once, `S_i` is the Schur complement and
/// `Â_i = S_i − Σ_{e∋i} Ū_eᵀK̄_eŪ_e`; the first-order near field lies within the mean one's.
#[test]
fn near_far_split_matches_an_independent_recomputation() {
    for young in [1e4, 1e7] {
        let b = beam(9, 2, 2, young);
        let pre = Jgs2Precompute::new(&input(&b), Ordering::default()).unwrap();
        let opts = Jgs2Options {
            leaf_size: 4,
            ..Jgs2Options::default()
        };
        let basis = pre.run(&opts).unwrap();
        let tree = &basis.tree;
        let n = 3 * b.pos.len();
        let hd = pre.hbar().to_dense();
        let free: Vec<usize> = (0..b.pos.len()).filter(|&v| !b.pinned[v]).collect();
        // The tree covers the free vertices once, nodes are unions of their children.
        let mut perm = tree.perm.clone();
        perm.sort_unstable();
        assert_eq!(perm, free.iter().map(|&v| v as u32).collect::<Vec<_>>());
        for c in 0..tree.len() {
            if let Some((l, r)) = tree.children[c] {
                assert_eq!(tree.start[c], tree.start[l as usize]);
                assert_eq!(tree.end[l as usize], tree.start[r as usize]);
                assert_eq!(tree.end[r as usize], tree.end[c]);
            } else {
                assert!(tree.members(c).len() <= opts.leaf_size);
            }
        }
        let (mut near_total, mut far_total) = (0, 0);
        for &i in &free {
            let rec = &basis.vertices[i];
            let u = pre.ubar_dense_for_vertex(i).unwrap();
            let own = frob(&row(&u, n, i));
            // Coverage: every free vertex exactly once.
            let mut count = vec![0usize; b.pos.len()];
            count[i] += 1;
            for (&j, blk) in rec.near_vertices.iter().zip(&rec.near_blocks) {
                count[j as usize] += 1;
                let want = row(&u, n, j as usize);
                let err: f64 = blk.iter().zip(&want).map(|(p, q)| (p - q).abs()).sum();
                assert!(err < 1e-12 * own, "vertex {i}: near row {j} off by {err}");
            }
            assert_eq!(rec.far_slopes.len(), rec.far_nodes.len(), "first order");
            for (q, (&c, &w)) in rec.far_nodes.iter().zip(&rec.far_weights).enumerate() {
                assert_eq!(w, 1.0, "no cubature compression by default");
                let members = tree.members(c as usize);
                for &j in members {
                    count[j as usize] += 1;
                }
                let (mean, slopes, dev) = linear_fit(&u, n, &b.pos, members, true);
                assert!(
                    dev <= opts.far_tolerance * own * (1.0 + 1e-9) + 1e-12 * own,
                    "vertex {i}: far node {c} deviates {dev} > tolerance"
                );
                let err: f64 = rec.far_blocks[q]
                    .iter()
                    .zip(&mean)
                    .map(|(p, q)| (p - q).abs())
                    .sum();
                assert!(
                    err < 1e-10 * own,
                    "vertex {i}: far node {c} mean off by {err}"
                );
                // Slopes (1/m) times the beam's 0.05 m cells are row-sized.
                let err: f64 = rec.far_slopes[q]
                    .iter()
                    .zip(&slopes)
                    .map(|(p, q)| (p - q).abs())
                    .sum();
                assert!(
                    err * 0.05 < 1e-8 * own,
                    "vertex {i}: far node {c} slopes off by {err}"
                );
            }
            for &v in &free {
                // Nodes whose rows are all negligible may be dropped.
                let tiny = frob(&row(&u, n, v)) < 1e-10 * own;
                assert!(
                    count[v] == 1 || (count[v] == 0 && tiny),
                    "vertex {i}: free vertex {v} counted {} times",
                    count[v]
                );
            }
            // S_i = Ū_iᵀ H̄ Ū_i, computed densely.
            let mut s = [0.0; 9];
            for a in 0..3 {
                for c in 0..3 {
                    for r in 0..n {
                        for q in 0..n {
                            s[3 * a + c] += u[a * n + r] * hd[q * n + r] * u[c * n + q];
                        }
                    }
                }
            }
            let sn = frob(&s);
            let err: f64 = rec.schur.iter().zip(&s).map(|(p, q)| (p - q).abs()).sum();
            assert!(
                err < 1e-8 * sn,
                "vertex {i}: Schur complement off by {err} of {sn}"
            );
            // Â = S − Σ_{e∋i} Ū_eᵀ K̄_e Ū_e with K̄_e = the input element Hessian.
            let mut a_hat = s;
            for (e, t) in b.tets.iter().enumerate() {
                if !t.contains(&(i as u32)) {
                    continue;
                }
                let mut ue = [[0.0; 3]; 12];
                for (k, &v) in t.iter().enumerate() {
                    let r = row(&u, n, v as usize);
                    for d in 0..3 {
                        for c in 0..3 {
                            ue[3 * k + d][c] = r[3 * d + c];
                        }
                    }
                }
                for a in 0..3 {
                    for c in 0..3 {
                        let mut v = 0.0;
                        for p in 0..12 {
                            for q in 0..12 {
                                v += ue[p][a] * b.ke[e][p * 12 + q] * ue[q][c];
                            }
                        }
                        a_hat[3 * a + c] -= v;
                    }
                }
            }
            let err: f64 = rec
                .a_hat
                .iter()
                .zip(&a_hat)
                .map(|(p, q)| (p - q).abs())
                .sum();
            assert!(err < 1e-8 * sn, "vertex {i}: Â off by {err}");
            near_total += rec.near_vertices.len();
            far_total += rec.far_nodes.len();
        }
        eprintln!(
            "E = {young}: {} free vertices, {} tree nodes, mean near field {:.1}, mean far samples {:.1}, far residual median {:.4} max {:.4}",
            free.len(),
            tree.len(),
            near_total as f64 / free.len() as f64,
            far_total as f64 / free.len() as f64,
            basis.stats.residual_median,
            basis.stats.residual_max
        );
        // A stiff body's subspace spreads further: more of the mesh is near or sampled.
        if young == 1e4 {
            assert!(far_total > 0, "a soft body has far samples");
        }
        let sloped = basis
            .vertices
            .iter()
            .flat_map(|r| &r.far_slopes)
            .filter(|s| s.iter().any(|x| *x != 0.0))
            .count();
        assert!(sloped > 0, "E = {young}: no far sample has a slope");
        // A linear fit deviates no more than the mean, so every node that is far at order 0
        // is far at order 1 too: the first-order near field is a subset of the mean one's.
        let mean_only = pre
            .run(&Jgs2Options {
                far_order: 0,
                ..opts.clone()
            })
            .unwrap();
        let mut near0 = 0;
        for &i in &free {
            let (r0, r1) = (&mean_only.vertices[i], &basis.vertices[i]);
            assert!(r0.far_slopes.is_empty());
            for j in &r1.near_vertices {
                assert!(
                    r0.near_vertices.binary_search(j).is_ok(),
                    "vertex {i}: {j} near at order 1 only"
                );
            }
            near0 += r0.near_vertices.len();
        }
        eprintln!(
            "E = {young}: {sloped} sloped samples; mean near field {:.1} at order 0",
            near0 as f64 / free.len() as f64
        );
    }
}

/// Cubature compression (`max_samples > 0`): at most that many samples, weights ≥ 0, every
/// sample a far node of the uncompressed split, and the reported residual equal to one
/// recomputed from the training poses (which the test builds independently from the
/// eigen-pairs and `H̄`).
#[test]
fn cubature_compression_weights_and_residuals() {
    let b = beam(12, 2, 2, 1e6);
    let pre = Jgs2Precompute::new(&input(&b), Ordering::default()).unwrap();
    let base = Jgs2Options {
        leaf_size: 4,
        n_modes: 12,
        ..Jgs2Options::default()
    };
    let exact = pre.run(&base).unwrap();
    let n = 3 * b.pos.len();
    let poses = pre.training_poses(base.n_modes, &base.eigen).unwrap();
    let k = poses.values.len();
    let hq: Vec<Vec<f64>> = (0..k)
        .map(|t| {
            let mut y = vec![0.0; n];
            pre.hbar()
                .mul_vec(&poses.vectors[t * n..(t + 1) * n], &mut y);
            y
        })
        .collect();
    let mut residuals = Vec::new();
    for samples in [2, 4] {
        let opts = Jgs2Options {
            max_samples: samples,
            ..base.clone()
        };
        let basis = pre.run(&opts).unwrap();
        for (i, rec) in basis.vertices.iter().enumerate() {
            if b.pinned[i] {
                continue;
            }
            let full = &exact.vertices[i];
            assert!(rec.far_nodes.len() <= samples.max(full.far_nodes.len().min(samples)));
            assert!(rec.far_weights.iter().all(|w| w.is_finite() && *w >= 0.0));
            for &c in &rec.far_nodes {
                assert!(
                    full.far_nodes.contains(&c),
                    "samples come from the far nodes"
                );
            }
            assert_eq!(rec.near_vertices, full.near_vertices);
            if full.far_nodes.len() <= samples {
                continue;
            }
            // Independent residual: poses' far field vs the samples.
            let u = pre.ubar_dense_for_vertex(i).unwrap();
            let near: std::collections::HashSet<u32> = rec
                .near_vertices
                .iter()
                .copied()
                .chain([i as u32])
                .collect();
            let (mut num, mut den) = (0.0, 0.0);
            let mut used = 0;
            let norms: Vec<f64> = (0..k)
                .map(|t| {
                    let mut tot = [0.0; 3];
                    for j in 0..b.pos.len() {
                        let r = row(&u, n, j);
                        for c in 0..3 {
                            tot[c] += (0..3).map(|d| r[3 * d + c] * hq[t][3 * j + d]).sum::<f64>();
                        }
                    }
                    frob(&tot)
                })
                .collect();
            let top = norms.iter().fold(0.0f64, |m, x| m.max(*x));
            for t in 0..k {
                if norms[t] <= 1e-12 * top {
                    continue;
                }
                used += 1;
                let mut far = [0.0; 3];
                for j in 0..b.pos.len() {
                    if near.contains(&(j as u32)) {
                        continue;
                    }
                    let r = row(&u, n, j);
                    for c in 0..3 {
                        far[c] += (0..3).map(|d| r[3 * d + c] * hq[t][3 * j + d]).sum::<f64>();
                    }
                }
                let mut approx = [0.0; 3];
                for (q, (&c, blk)) in rec.far_nodes.iter().zip(&rec.far_blocks).enumerate() {
                    let members = basis.tree.members(c as usize);
                    let pc = centroid(&b.pos, members);
                    for &j in members {
                        let r = fitted(blk, rec.far_slopes.get(q), b.pos[j as usize], pc);
                        for cc in 0..3 {
                            approx[cc] += (0..3)
                                .map(|d| r[3 * d + cc] * hq[t][3 * j as usize + d])
                                .sum::<f64>();
                        }
                    }
                }
                for c in 0..3 {
                    num += ((far[c] - approx[c]) / norms[t]).powi(2);
                }
                den += 1.0;
            }
            let _ = den;
            let rel = num.sqrt() / (used as f64).sqrt();
            assert!(
                (rel - rec.far_residual).abs() < 1e-6 * (1.0 + rel),
                "vertex {i}: reported residual {} vs recomputed {rel}",
                rec.far_residual
            );
        }
        eprintln!(
            "≤ {samples} samples: far residual min {:.4} median {:.4} p90 {:.4} max {:.4}, {:.2} samples/vertex, {:.0}% on the 1% target",
            basis.stats.residual_min,
            basis.stats.residual_median,
            basis.stats.residual_p90,
            basis.stats.residual_max,
            basis.stats.mean_samples,
            100.0 * basis.stats.fraction_on_target
        );
        residuals.push(basis.stats.residual_median);
    }
    assert!(
        residuals[1] <= residuals[0] * (1.0 + 1e-9),
        "more samples must not fit worse: {residuals:?}"
    );
}

/// Group-wise subspaces (Gauss–Seidel): `Ū_i` is the identity at `i`, zero on the other
/// vertices of its group and on pinned ones, and harmonic (`H̄Ū_i = 0`) on every other row;
/// the stored Schur complement is `Ū_iᵀH̄Ū_i`.
#[test]
fn group_wise_subspaces_hold_the_group_fixed() {
    let b = beam(6, 2, 2, 1e6);
    let pre = Jgs2Precompute::new(&input(&b), Ordering::default()).unwrap();
    let nv = b.pos.len();
    // Greedy colouring of the vertex graph.
    let mut adj = vec![std::collections::BTreeSet::new(); nv];
    for t in &b.tets {
        for &a in t {
            for &c in t {
                if a != c {
                    adj[a as usize].insert(c);
                }
            }
        }
    }
    let mut colour = vec![usize::MAX; nv];
    for v in 0..nv {
        let used: Vec<usize> = adj[v].iter().map(|&w| colour[w as usize]).collect();
        colour[v] = (0..).find(|c| !used.contains(c)).unwrap();
    }
    let nc = colour.iter().max().unwrap() + 1;
    let groups: Vec<Vec<u32>> = (0..nc)
        .map(|c| {
            (0..nv as u32)
                .filter(|&v| colour[v as usize] == c)
                .collect()
        })
        .collect();
    let opts = Jgs2Options {
        leaf_size: 4,
        far_tolerance: 0.0, // everything near: the test reads the full Ū rows back
        ..Jgs2Options::default()
    };
    let basis = pre.run_grouped(&opts, &groups).unwrap();
    let n = 3 * nv;
    let hd = pre.hbar().to_dense();
    let hscale = max_abs(&hd);
    for (i, rec) in basis.vertices.iter().enumerate() {
        if b.pinned[i] {
            continue;
        }
        let mut u = vec![0.0; 3 * n];
        for c in 0..3 {
            u[c * n + 3 * i + c] = 1.0;
        }
        for (&j, blk) in rec.near_vertices.iter().zip(&rec.near_blocks) {
            for d in 0..3 {
                for c in 0..3 {
                    u[c * n + 3 * j as usize + d] = blk[3 * d + c];
                }
            }
        }
        let group = &groups[colour[i]];
        for &g in group {
            if g as usize != i {
                assert!(
                    frob(&row(&u, n, g as usize)) == 0.0,
                    "vertex {i}: group member {g} moves"
                );
            }
        }
        for c in 0..3 {
            let mut hu = vec![0.0; n];
            pre.hbar().mul_vec(&u[c * n..(c + 1) * n], &mut hu);
            for (r, v) in hu.iter().enumerate() {
                let w = r / 3;
                if w != i && !b.pinned[w] && group.binary_search(&(w as u32)).is_err() {
                    assert!(
                        v.abs() < 1e-9 * hscale,
                        "vertex {i}: row {r} not harmonic: {v}"
                    );
                }
            }
            for a in 0..3 {
                let s: f64 = (0..n).map(|r| u[a * n + r] * hu[r]).sum();
                assert!(
                    (s - rec.schur[3 * a + c]).abs() < 1e-9 * hscale,
                    "vertex {i}: Schur ({a},{c})"
                );
            }
        }
    }
    // A colouring with two vertices of one element in a group is rejected.
    let mut bad = groups.clone();
    let t = b.tets[0];
    let g0 = colour[t[0] as usize];
    bad[g0].push(t[1]);
    bad[g0].sort_unstable();
    let g1 = colour[t[1] as usize];
    bad[g1].retain(|&v| v != t[1]);
    assert!(pre.run_grouped(&opts, &bad).is_err());
}

#[test]
fn bad_input_is_an_error() {
    let b = beam(2, 1, 1, 1e5);
    let mut inp = input(&b);
    inp.h = 0.0;
    assert!(Jgs2Precompute::new(&inp, Ordering::default()).is_err());
    let inp = Jgs2Input {
        positions: &b.pos[1..],
        ..input(&b)
    };
    assert!(Jgs2Precompute::new(&inp, Ordering::default()).is_err());
    let short = &b.ke[..b.ke.len() - 1];
    let inp = Jgs2Input {
        elem_hessians: short,
        ..input(&b)
    };
    assert!(Jgs2Precompute::new(&inp, Ordering::default()).is_err());
    let mut tets = b.tets.clone();
    tets[0][1] = 10_000;
    let inp = Jgs2Input {
        tets: &tets,
        ..input(&b)
    };
    assert!(Jgs2Precompute::new(&inp, Ordering::default()).is_err());
    let mut ke = b.ke.clone();
    ke[0][5] = f64::NAN;
    let inp = Jgs2Input {
        elem_hessians: &ke,
        ..input(&b)
    };
    assert!(Jgs2Precompute::new(&inp, Ordering::default()).is_err());
    // an indefinite element makes H̄ non-SPD: error, not panic
    let mut ke = b.ke.clone();
    for x in ke.iter_mut() {
        for y in x.iter_mut() {
            *y *= -1e6;
        }
    }
    let inp = Jgs2Input {
        elem_hessians: &ke,
        ..input(&b)
    };
    assert!(Jgs2Precompute::new(&inp, Ordering::default()).is_err());
}

/// Issue 17's H-matrix of `G = H̄⁻¹`: the block partition covers every ordered pair of free
/// vertices exactly once (near leaf pair or one far block, never both) and no element joins a
/// far pair; the H-matrix product matches the dense `G` (from unit solves) with an error that
/// falls as ε falls.
#[test]
fn hmatrix_partition_covers_pairs_once_and_product_matches_dense_g() {
    use jello_precompute::hmatrix::{partition, HMatrix, HMatrixOptions, Sketch};
    use jello_precompute::tree::ClusterTree;
    let b = beam(16, 3, 3, 1e5);
    let pre = Jgs2Precompute::new(&input(&b), Ordering::default()).unwrap();
    let nv = b.pos.len();
    let n = 3 * nv;
    let free: Vec<u32> = (0..nv as u32).filter(|&v| !b.pinned[v as usize]).collect();
    let tree = ClusterTree::build(&b.pos, &free, 8);
    let mut reach = vec![0.0f64; nv];
    for t in &b.tets {
        for a in 0..4 {
            for c in 0..4 {
                let (p, q) = (b.pos[t[a] as usize], b.pos[t[c] as usize]);
                let d =
                    ((p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2) + (p[2] - q[2]).powi(2)).sqrt();
                reach[t[a] as usize] = reach[t[a] as usize].max(d);
            }
        }
    }
    let part = partition(&tree, &b.pos, 1.0, &reach);
    assert!(!part.far.is_empty(), "a 17-vertex-long beam has far blocks");
    // Coverage, in tree positions.
    let nf = free.len();
    let mut pos_of = vec![usize::MAX; nv];
    for (p, &v) in tree.perm.iter().enumerate() {
        pos_of[v as usize] = p;
    }
    let mut leaf_at = vec![0usize; nf];
    for c in 0..tree.len() {
        if tree.children[c].is_none() {
            for p in tree.start[c]..tree.end[c] {
                leaf_at[p as usize] = c;
            }
        }
    }
    let mut cover = vec![0u8; nf * nf];
    for (l, js) in part.near.iter().enumerate() {
        for &j in js {
            for p in tree.start[l]..tree.end[l] {
                for q in tree.start[j as usize]..tree.end[j as usize] {
                    cover[p as usize * nf + q as usize] += 1;
                }
            }
        }
        if !js.is_empty() {
            assert!(js.contains(&(l as u32)), "leaf {l} is near itself");
        }
    }
    for &(i, j) in &part.far {
        assert!(i < j);
        for p in tree.start[i as usize]..tree.end[i as usize] {
            for q in tree.start[j as usize]..tree.end[j as usize] {
                cover[p as usize * nf + q as usize] += 1;
                cover[q as usize * nf + p as usize] += 1;
            }
        }
    }
    assert!(
        cover.iter().all(|&c| c == 1),
        "every ordered pair exactly once"
    );
    for t in &b.tets {
        for &a in t {
            for &c in t {
                let (pa, pc) = (pos_of[a as usize], pos_of[c as usize]);
                if pa != usize::MAX && pc != usize::MAX {
                    let near = part.near[leaf_at[pa]].contains(&(leaf_at[pc] as u32));
                    assert!(near, "element vertices {a} and {c} are in a far pair");
                }
            }
        }
    }
    // Dense G from unit solves, and the rows of the tree-ordered layout.
    let mut g = vec![0.0; n * n];
    for c in 0..n {
        g[c * n + c] = 1.0;
    }
    pre.factor().solve_many_in_place(&mut g, n).unwrap();
    let mut dof_of_row: Vec<usize> = tree
        .perm
        .iter()
        .flat_map(|&v| (0..3).map(move |d| 3 * v as usize + d))
        .collect();
    dof_of_row.extend(
        (0..nv)
            .filter(|&v| b.pinned[v])
            .flat_map(|v| 3 * v..3 * v + 3),
    );
    let x: Vec<f64> = (0..3 * nf)
        .map(|r| ((r * 7919) % 101) as f64 / 50.0 - 1.0)
        .collect();
    let mut y_ref = vec![0.0; 3 * nf];
    for r in 0..3 * nf {
        y_ref[r] = (0..3 * nf)
            .map(|c| g[dof_of_row[c] * n + dof_of_row[r]] * x[c])
            .sum();
    }
    let norm = |v: &[f64]| v.iter().map(|a| a * a).sum::<f64>().sqrt();
    let pairs: Vec<(u32, u32)> = part
        .near
        .iter()
        .enumerate()
        .flat_map(|(i, js)| {
            js.iter()
                .filter(move |&&j| j as usize >= i)
                .map(move |&j| (i as u32, j))
        })
        .collect();
    for sketch in [Sketch::Global, Sketch::Local] {
        let mut errors = Vec::new();
        for eps in [1e-2, 1e-4, 1e-6] {
            // The local operator's numerical rank exceeds the far block's (the sketch caps
            // both at `samples`), so the local sketch gets the samples its rank at ε = 1e-6
            // needs.
            let opts = HMatrixOptions {
                eps,
                sketch,
                samples: match sketch {
                    Sketch::Global => HMatrixOptions::default().samples,
                    Sketch::Local => 120,
                },
                ..HMatrixOptions::default()
            };
            let (mut hm, _) = HMatrix::build_with(
                pre.factor(),
                &tree,
                &dof_of_row,
                &part.far,
                &opts,
                Some((pre.hbar(), &b.pos)),
            )
            .unwrap();
            hm.set_near(&tree, &pairs, |i, j| {
                let (ri, rj) = (3 * tree.start[i] as usize, 3 * tree.start[j] as usize);
                let (mi, mj) = (3 * tree.members(i).len(), 3 * tree.members(j).len());
                let mut out = vec![0.0; mi * mj];
                for r in 0..mi {
                    for c in 0..mj {
                        out[r * mj + c] = g[dof_of_row[rj + c] * n + dof_of_row[ri + r]];
                    }
                }
                out
            });
            let y = hm.apply_tree_order(&tree, &x);
            let err =
                norm(&y.iter().zip(&y_ref).map(|(a, b)| a - b).collect::<Vec<_>>()) / norm(&y_ref);
            let (mean, max) = hm.rank_stats();
            eprintln!(
            "{sketch:?} ε {eps:e}: |G_H x − G x| / |G x| = {err:.3e}, rank mean {mean:.1} max {max}"
        );
            // Written tolerance: truncating each basis at ε·σ_1 leaves a far-field error of a
            // small multiple of ε, and the far field is a part of |G x|.
            assert!(err <= 10.0 * eps, "ε {eps}: relative error {err:.3e} > 10ε");
            errors.push(err);
        }
        assert!(
            errors.windows(2).all(|w| w[1] < 0.1 * w[0]),
            "{sketch:?}: the error must fall with ε: {errors:?}"
        );
    }
}

/// Issue 17's local sketch: the range of `G[I, far(I)]` lies in that of the local operator
/// `u_∂B ↦ (−H̄_BB⁻¹ H̄_{B,∂B} u_∂B)_I`, so each cluster's basis sketched from it captures the
/// cluster's whole far row block (from dense unit solves) to a small multiple of ε, like the
/// global sketch's; without `H̄` and the positions the local sketch is an error, not a panic.
#[test]
fn hmatrix_local_sketch_bases_capture_the_far_row_blocks() {
    use jello_precompute::hmatrix::{partition, HMatrix, HMatrixOptions, Sketch};
    use jello_precompute::tree::ClusterTree;
    let b = beam(24, 4, 4, 1e5);
    let pre = Jgs2Precompute::new(&input(&b), Ordering::default()).unwrap();
    let nv = b.pos.len();
    let n = 3 * nv;
    let free: Vec<u32> = (0..nv as u32).filter(|&v| !b.pinned[v as usize]).collect();
    let tree = ClusterTree::build(&b.pos, &free, 8);
    let mut reach = vec![0.0f64; nv];
    for t in &b.tets {
        for &a in t {
            for &c in t {
                let (p, q) = (b.pos[a as usize], b.pos[c as usize]);
                let d =
                    ((p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2) + (p[2] - q[2]).powi(2)).sqrt();
                reach[a as usize] = reach[a as usize].max(d);
            }
        }
    }
    let part = partition(&tree, &b.pos, 1.0, &reach);
    assert!(!part.far.is_empty(), "a 25-vertex-long beam has far blocks");
    let mut g = vec![0.0; n * n];
    for c in 0..n {
        g[c * n + c] = 1.0;
    }
    pre.factor().solve_many_in_place(&mut g, n).unwrap();
    let mut dof_of_row: Vec<usize> = tree
        .perm
        .iter()
        .flat_map(|&v| (0..3).map(move |d| 3 * v as usize + d))
        .collect();
    dof_of_row.extend(
        (0..nv)
            .filter(|&v| b.pinned[v])
            .flat_map(|v| 3 * v..3 * v + 3),
    );
    let eps = 1e-3;
    // Samples enough that no basis is capped by them: the test is about the ranges.
    let local = HMatrixOptions {
        eps,
        samples: 120,
        sketch: Sketch::Local,
        ..HMatrixOptions::default()
    };
    assert!(
        HMatrix::build(pre.factor(), &tree, &dof_of_row, &part.far, &local).is_err(),
        "the local sketch without H̄ is an error"
    );
    assert!(
        HMatrix::build_with(
            pre.factor(),
            &tree,
            &dof_of_row,
            &part.far,
            &local,
            Some((pre.hbar(), &b.pos[..nv - 1])),
        )
        .is_err(),
        "positions that do not match H̄ are an error"
    );
    for sketch in [Sketch::Global, Sketch::Local] {
        let opts = HMatrixOptions { sketch, ..local };
        let (hm, _) = HMatrix::build_with(
            pre.factor(),
            &tree,
            &dof_of_row,
            &part.far,
            &opts,
            Some((pre.hbar(), &b.pos)),
        )
        .unwrap();
        let mut worst = 0.0f64;
        for c in 0..tree.len() {
            let (r0, m) = (3 * tree.start[c] as usize, 3 * tree.members(c).len());
            // G[I, far(I)]: the columns of every far partner.
            let cols: Vec<usize> = part
                .far
                .iter()
                .filter_map(|&(i, j)| match (i as usize == c, j as usize == c) {
                    (true, _) => Some(j as usize),
                    (_, true) => Some(i as usize),
                    _ => None,
                })
                .flat_map(|p| 3 * tree.start[p] as usize..3 * tree.end[p] as usize)
                .collect();
            if cols.is_empty() {
                continue;
            }
            let k = hm.rank[c] as usize;
            let q = &hm.basis[hm.basis_ptr[c]..hm.basis_ptr[c + 1]];
            let (mut res2, mut all2) = (0.0, 0.0);
            for &col in &cols {
                let a: Vec<f64> = (0..m)
                    .map(|r| g[dof_of_row[col] * n + dof_of_row[r0 + r]])
                    .collect();
                let mut res = a.clone();
                for t in 0..k {
                    let qt = &q[t * m..(t + 1) * m];
                    let w: f64 = qt.iter().zip(&a).map(|(x, y)| x * y).sum();
                    for (r, x) in res.iter_mut().zip(qt) {
                        *r -= w * x;
                    }
                }
                res2 += res.iter().map(|x| x * x).sum::<f64>();
                all2 += a.iter().map(|x| x * x).sum::<f64>();
            }
            worst = worst.max((res2 / all2).sqrt());
        }
        let (mean, max) = hm.rank_stats();
        eprintln!(
            "{sketch:?} ε {eps:e}: worst |(1 − QQᵀ) G[I, far]| / |G[I, far]| = {worst:.3e}, \
             rank mean {mean:.1} max {max}"
        );
        // Written tolerance: the bases are truncated at ε·σ_1 of a sketch of the far block
        // (or of an operator whose range holds it), so a small multiple of ε remains.
        assert!(
            worst <= 10.0 * eps,
            "{sketch:?}: far row block residual {worst:.3e} > 10ε"
        );
    }
}

/// Issue 17: the JGS2 basis pass builds the global-sketch H-matrix from the columns of `G` it
/// solves anyway (`StreamBuild`: tree-ordered batches, the sketch and the couplings as
/// products with those columns, batches in flight on several threads waiting for the bases
/// they need). Its product must match the dense `G` as closely as the solving build
/// (`HMatrix::build`, one solve per cluster for the sketch and one for the couplings) does,
/// with the same ranks give or take, and the same bits whatever the thread count.
#[test]
fn hmatrix_streamed_from_the_basis_pass_matches_dense_g_like_the_solved_build() {
    use jello_precompute::hmatrix::{HMatrix, HMatrixOptions};
    let b = beam(16, 3, 3, 1e5);
    let pre = Jgs2Precompute::new(&input(&b), Ordering::default()).unwrap();
    let nv = b.pos.len();
    // Half the beam's 272 vertices per large batch.
    const BIG: usize = 150;
    let n = 3 * nv;
    // Dense G from unit solves.
    let mut g = vec![0.0; n * n];
    for c in 0..n {
        g[c * n + c] = 1.0;
    }
    pre.factor().solve_many_in_place(&mut g, n).unwrap();
    let mut errors = Vec::new();
    for eps in [1e-2, 1e-4] {
        let hopts = HMatrixOptions {
            eps,
            ..HMatrixOptions::default()
        };
        // Small batches: many clusters span several batches, and with 4 threads a batch
        // often needs the basis of a cluster still in flight. Large ones: a batch holds far
        // pairs of its own clusters (the later one needs the earlier one's basis).
        let run = |threads: usize, batch_vertices: usize| {
            let opts = Jgs2Options {
                far_hmatrix: Some(hopts),
                batch_vertices,
                ..Jgs2Options::default()
            };
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| pre.run(&opts).unwrap())
        };
        let (one, four, big) = (run(1, 4), run(4, 4), run(2, BIG));
        let hs = four.far_hmatrix.as_ref().expect("an H-matrix run has one");
        assert_eq!(
            one.far_hmatrix.as_ref(),
            Some(hs),
            "ε {eps:e}: 1 and 4 threads give other bits"
        );
        assert_eq!(one.vertices, four.vertices, "ε {eps:e}: per-vertex records");
        // Other batches only reorder sums (round-off): compared through the product below.
        let hb = big.far_hmatrix.as_ref().expect("an H-matrix run has one");
        // The case is exercised: some far pair lies inside one batch (a maximal subtree of at
        // most `BIG` vertices).
        let t = &big.tree;
        let batch_of = |mut c: usize| {
            while t.parent[c] != u32::MAX
                && t.end[t.parent[c] as usize] - t.start[t.parent[c] as usize] <= BIG as u32
            {
                c = t.parent[c] as usize;
            }
            c
        };
        assert!(
            hb.blocks
                .iter()
                .any(|&(i, j)| batch_of(i as usize) == batch_of(j as usize)),
            "no far pair inside a {BIG}-vertex batch"
        );
        assert!(!hs.blocks.is_empty() && hs.rank.iter().any(|&k| k > 0));
        let tree = &four.tree;
        let mut dof_of_row: Vec<usize> = tree
            .perm
            .iter()
            .flat_map(|&v| (0..3).map(move |d| 3 * v as usize + d))
            .collect();
        dof_of_row.extend(
            (0..nv)
                .filter(|&v| b.pinned[v])
                .flat_map(|v| 3 * v..3 * v + 3),
        );
        let mut solved =
            HMatrix::build(pre.factor(), tree, &dof_of_row, &hs.blocks, &hopts).unwrap();
        // The same exact near field for both (the run's, from its columns of G).
        solved.near_pairs = hs.near_pairs.clone();
        solved.near_ptr = hs.near_ptr.clone();
        solved.near = hs.near.clone();
        solved.node_near = hs.node_near.clone();
        solved.node_near_ptr = hs.node_near_ptr.clone();
        let seed = 0x5eed_u64 ^ eps.to_bits();
        eprintln!("streamed vs solved H-matrix, ε {eps:e}: x from seed {seed:#x}");
        let mut state = seed;
        let x: Vec<f64> = (0..3 * tree.perm.len())
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
            })
            .collect();
        let mut y_ref = vec![0.0; x.len()];
        for (r, y) in y_ref.iter_mut().enumerate() {
            *y = (0..x.len())
                .map(|c| g[dof_of_row[c] * n + dof_of_row[r]] * x[c])
                .sum();
        }
        let norm = |v: &[f64]| v.iter().map(|a| a * a).sum::<f64>().sqrt();
        let err = |h: &HMatrix| {
            let y = h.apply_tree_order(tree, &x);
            norm(&y.iter().zip(&y_ref).map(|(a, b)| a - b).collect::<Vec<_>>()) / norm(&y_ref)
        };
        let e_solved = err(&solved);
        let rank_mean = |h: &HMatrix| h.rank_stats().0;
        for (what, h) in [("4-vertex batches", hs), ("large batches", hb)] {
            let e = err(h);
            eprintln!(
                "  {what}: |G_H x − G x| / |G x| = {e:.3e} (solved build {e_solved:.3e}); \
                 mean rank {:.2} (solved {:.2})",
                rank_mean(h),
                rank_mean(&solved)
            );
            // Written tolerance: as the solved build's (a small multiple of ε, see
            // `hmatrix_partition_covers_pairs_once_and_product_matches_dense_g`).
            assert!(
                e <= 10.0 * eps,
                "ε {eps:e}, {what}: relative error {e:.3e} > 10ε"
            );
            errors.push((what, e));
        }
    }
    // The error falls with ε (100× smaller ε, at least 10× smaller error).
    for what in ["4-vertex batches", "large batches"] {
        let e: Vec<f64> = errors
            .iter()
            .filter(|(w, _)| *w == what)
            .map(|p| p.1)
            .collect();
        assert!(
            e[1] < 0.1 * e[0],
            "{what}: the error must fall with ε: {e:?}"
        );
    }
}
