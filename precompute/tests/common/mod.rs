//! Test fixtures: a box-grid tet mesh (Kuhn split, 6 tets per cell) and linear-elastic
//! element stiffness matrices computed independently of the crate under test.
#![allow(dead_code, clippy::needless_range_loop)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Box grid with `nx × ny × nz` cells of size `dx`; returns (positions, tets).
pub fn box_grid(nx: usize, ny: usize, nz: usize, dx: f64) -> (Vec<[f64; 3]>, Vec<[u32; 4]>) {
    let id = |i: usize, j: usize, k: usize| (i + (nx + 1) * (j + (ny + 1) * k)) as u32;
    let mut pos = Vec::new();
    for k in 0..=nz {
        for j in 0..=ny {
            for i in 0..=nx {
                pos.push([i as f64 * dx, j as f64 * dx, k as f64 * dx]);
            }
        }
    }
    let mut tets = Vec::new();
    // Kuhn split: the 6 monotone lattice paths from corner 000 to 111.
    let perms = [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ];
    for k in 0..nz {
        for j in 0..ny {
            for i in 0..nx {
                for p in perms {
                    let mut c = [0usize; 3];
                    let mut verts = [id(i, j, k); 4];
                    for (s, &axis) in p.iter().enumerate() {
                        c[axis] += 1;
                        verts[s + 1] = id(i + c[0], j + c[1], k + c[2]);
                    }
                    // orient positively
                    if signed_volume(&pos, &verts) < 0.0 {
                        verts.swap(2, 3);
                    }
                    tets.push(verts);
                }
            }
        }
    }
    (pos, tets)
}

pub fn signed_volume(pos: &[[f64; 3]], t: &[u32; 4]) -> f64 {
    let p = |a: u32| pos[a as usize];
    let (a, b, c, d) = (p(t[0]), p(t[1]), p(t[2]), p(t[3]));
    let e1 = [b[0] - a[0], b[1] - a[1], b[2] - a[2]];
    let e2 = [c[0] - a[0], c[1] - a[1], c[2] - a[2]];
    let e3 = [d[0] - a[0], d[1] - a[1], d[2] - a[2]];
    (e1[0] * (e2[1] * e3[2] - e2[2] * e3[1]) - e1[1] * (e2[0] * e3[2] - e2[2] * e3[0])
        + e1[2] * (e2[0] * e3[1] - e2[1] * e3[0]))
        / 6.0
}

/// Linear-elastic element stiffness K_e = V Bᵀ C B (row-major 12×12, DOFs vertex-major),
/// written from the strain-energy density ψ = μ ε:ε + λ/2 tr(ε)² with ε = sym(∇u).
pub fn linear_elastic_ke(pos: &[[f64; 3]], t: &[u32; 4], mu: f64, lambda: f64) -> [f64; 144] {
    let dm = nalgebra::Matrix3::from_fn(|r, c| pos[t[c + 1] as usize][r] - pos[t[0] as usize][r]);
    let vol = dm.determinant().abs() / 6.0;
    let dminv = dm.try_inverse().expect("degenerate tet");
    // gradients of the 4 barycentric shape functions
    let mut grad = [[0.0f64; 3]; 4];
    for a in 0..3 {
        for d in 0..3 {
            grad[a + 1][d] = dminv[(a, d)];
        }
    }
    for d in 0..3 {
        grad[0][d] = -(grad[1][d] + grad[2][d] + grad[3][d]);
    }
    // K[(a,i),(b,j)] = V (μ (δij ∇Na·∇Nb + ∂j Na ∂i Nb) + λ ∂i Na ∂j Nb)
    let mut k = [0.0; 144];
    for a in 0..4 {
        for b in 0..4 {
            let gg: f64 = (0..3).map(|d| grad[a][d] * grad[b][d]).sum();
            for i in 0..3 {
                for j in 0..3 {
                    let mut v = mu * grad[a][j] * grad[b][i] + lambda * grad[a][i] * grad[b][j];
                    if i == j {
                        v += mu * gg;
                    }
                    k[(3 * a + i) * 12 + 3 * b + j] = vol * v;
                }
            }
        }
    }
    k
}

pub fn lame(young: f64, poisson: f64) -> (f64, f64) {
    let mu = young / (2.0 * (1.0 + poisson));
    let lambda = young * poisson / ((1.0 + poisson) * (1.0 - 2.0 * poisson));
    (mu, lambda)
}

/// Per-element vertex mass shares (ρ V / 4 each) and their per-vertex sums.
pub fn lumped_mass(pos: &[[f64; 3]], tets: &[[u32; 4]], rho: f64) -> (Vec<[f64; 4]>, Vec<f64>) {
    let mut shares = Vec::with_capacity(tets.len());
    let mut m = vec![0.0; pos.len()];
    for t in tets {
        let s = rho * signed_volume(pos, t).abs() / 4.0;
        shares.push([s; 4]);
        for &v in t {
            m[v as usize] += s;
        }
    }
    (shares, m)
}

/// Random symmetric sparse matrix entries (upper triangle incl. diagonal), SPD by strict
/// diagonal dominance when `spd`, else with one negative diagonal entry.
pub fn random_sym_entries(
    n: usize,
    per_col: usize,
    seed: u64,
    spd: bool,
) -> Vec<(usize, usize, f64)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut off = std::collections::BTreeMap::new();
    for c in 0..n {
        for _ in 0..per_col {
            let r = rng.random_range(0..n);
            if r != c {
                let key = (r.min(c), r.max(c));
                off.insert(key, rng.random_range(-1.0..1.0));
            }
        }
    }
    let mut rowsum = vec![0.0; n];
    let mut out = Vec::new();
    for (&(r, c), &v) in &off {
        rowsum[r] += f64::abs(v);
        rowsum[c] += f64::abs(v);
        out.push((r, c, v));
    }
    for (i, s) in rowsum.iter().enumerate() {
        let mut d = s + 0.5 + rng.random_range(0.0..1.0);
        if !spd && i == n / 2 {
            d = -d;
        }
        out.push((i, i, d));
    }
    out
}
