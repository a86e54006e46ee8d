//! JGS2 precompute: Eq. 23 vs Eq. 8, subspace identities, cubature fit.
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

#[test]
fn cubature_fit_is_consistent_with_an_independent_recomputation() {
    let b = beam(6, 2, 2, 1e5);
    let pre = Jgs2Precompute::new(&input(&b), Ordering::default()).unwrap();
    // The paper's gradient-only fit, whose residual this test recomputes independently.
    let opts = Jgs2Options {
        fit_hessian: false,
        ..Jgs2Options::default()
    };
    let basis = pre.run(&opts).unwrap();
    let st = &basis.stats;
    eprintln!("beam 6x2x2 cubature stats (defaults): {st:?}");
    let n = 3 * b.pos.len();
    let poses = pre.training_poses(opts.n_modes, &opts.eigen).unwrap();
    let k = poses.values.len();
    assert_eq!(st.n_modes, k);
    let mut on_target = 0;
    let free: Vec<usize> = (0..b.pos.len()).filter(|&v| !b.pinned[v]).collect();
    for (v, rec) in basis.vertices.iter().enumerate() {
        if b.pinned[v] {
            assert!(rec.elements.is_empty());
            continue;
        }
        assert!(!rec.elements.is_empty() && rec.elements.len() <= opts.max_elements);
        assert_eq!(rec.elements.len(), rec.weights.len());
        assert_eq!(rec.elements.len(), rec.blocks.len());
        assert!(rec.weights.iter().all(|w| *w > 0.0));
        let u = pre.ubar_dense_for_vertex(v).unwrap();
        // recompute the fit independently: b_t summed over ALL elements not incident to v
        let ub = |e: usize| -> [[f64; 3]; 12] {
            let mut m = [[0.0; 3]; 12];
            for a in 0..4 {
                for d in 0..3 {
                    for c in 0..3 {
                        m[3 * a + d][c] = u[c * n + 3 * b.tets[e][a] as usize + d];
                    }
                }
            }
            m
        };
        let contrib = |e: usize, t: usize| -> [f64; 3] {
            let he = pre.element_hessian(e);
            let mut ue = [0.0; 12];
            for a in 0..4 {
                for d in 0..3 {
                    ue[3 * a + d] = poses.vector(t)[3 * b.tets[e][a] as usize + d];
                }
            }
            let m = ub(e);
            let mut out = [0.0; 3];
            for r in 0..12 {
                let hr: f64 = (0..12).map(|c| he[r * 12 + c] * ue[c]).sum();
                for c in 0..3 {
                    out[c] += m[r][c] * hr;
                }
            }
            out
        };
        let mut num = 0.0;
        let mut den = 0.0;
        for t in 0..k {
            let mut bt = [0.0; 3];
            for e in 0..b.tets.len() {
                if !b.tets[e].contains(&(v as u32)) {
                    let c = contrib(e, t);
                    for d in 0..3 {
                        bt[d] += c[d];
                    }
                }
            }
            let nb = (bt[0] * bt[0] + bt[1] * bt[1] + bt[2] * bt[2]).sqrt();
            let mut fit = [0.0; 3];
            for (j, &e) in rec.elements.iter().enumerate() {
                assert!(
                    !b.tets[e as usize].contains(&(v as u32)),
                    "local element chosen"
                );
                let c = contrib(e as usize, t);
                for d in 0..3 {
                    fit[d] += rec.weights[j] * c[d];
                }
            }
            for d in 0..3 {
                num += ((fit[d] - bt[d]) / nb).powi(2);
                den += (bt[d] / nb).powi(2);
            }
        }
        let rel = (num / den).sqrt();
        assert!(
            (rel - rec.residual).abs() < 1e-8,
            "vertex {v}: recomputed {rel} vs stored {}",
            rec.residual
        );
        // stored blocks are the rows of Ū
        for (j, &e) in rec.elements.iter().enumerate() {
            let m = ub(e as usize);
            for r in 0..12 {
                for c in 0..3 {
                    assert_eq!(rec.blocks[j][r * 3 + c], m[r][c]);
                }
            }
        }
        if rec.residual <= opts.target_residual {
            on_target += 1;
        }
    }
    let frac = on_target as f64 / free.len() as f64;
    assert!((frac - st.fraction_on_target).abs() < 1e-12);
    assert!(
        st.residual_min <= st.residual_median
            && st.residual_median <= st.residual_p90
            && st.residual_p90 <= st.residual_max
    );
    assert!(
        st.residual_max < 1.0,
        "every free vertex's fit improves on no cubature at all"
    );
}

/// The Eq. 18 fit has 3k equations (k poses) and |S_i| unknowns, so the residual reachable
/// with ≤ 6 elements depends on k. Measured on this beam (see the crate report): with 24
/// poses the median is ~30%; the paper's "< 1% with 4–6 elements" holds only for ~3 poses.
#[test]
fn cubature_residual_distribution_versus_poses_and_elements() {
    let b = beam(8, 3, 3, 1e5);
    let pre = Jgs2Precompute::new(&input(&b), Ordering::default()).unwrap();
    let run = |modes: usize, maxe: usize| {
        let opts = Jgs2Options {
            n_modes: modes,
            max_elements: maxe,
            fit_hessian: false,
            ..Jgs2Options::default()
        };
        let st = pre.run(&opts).unwrap().stats;
        eprintln!(
            "beam 8x3x3, {modes} poses, ≤{maxe} elements: residual min {:.4} median {:.4} p90 {:.4} max {:.4}, ≤1%: {:.0}%, mean elements {:.2}",
            st.residual_min,
            st.residual_median,
            st.residual_p90,
            st.residual_max,
            100.0 * st.fraction_on_target,
            st.mean_elements
        );
        st
    };
    let few = run(3, 6);
    assert!(
        few.residual_median <= 0.02,
        "3 poses, 6 elements: median {}",
        few.residual_median
    );
    let m6 = run(24, 6);
    let m12 = run(24, 12);
    assert!(
        m12.residual_median < 0.8 * m6.residual_median,
        "more elements must fit better"
    );
    assert!(m6.mean_elements > 5.0 && m6.mean_elements <= 6.0);
}

#[test]
fn bad_input_is_an_error() {
    let b = beam(2, 1, 1, 1e5);
    let mut inp = input(&b);
    inp.h = 0.0;
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
