//! Assembly by gather ([`GatherMap`], [`SymSparse::gather`]; by blocks, [`BlockGatherMap`],
//! [`SymSparse::gather_blocks`]) against the sequential scatter
//! ([`SymSparse::scatter_add`]) and a dense sum of the element matrices.
mod common;

use std::sync::Arc;

use jello_precompute::sparse::{
    pack_upper_blocks, packed_blocks, tet_dofs, BlockGatherMap, GatherMap, ScatterMap, SymSparse,
    SymmetricPattern, PARALLEL_MUL_NNZ,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Random (non-symmetric, so a wrong transpose shows) local matrices on a box grid, with and
/// without pinned DOFs: the gather and the block gather equal clear + scatter over all elements
/// bit for bit (same additions in the same order), and all equal the dense upper-triangular sum
/// to round-off.
#[test]
fn gather_equals_scatter_bit_for_bit_and_the_dense_sum() {
    let seed: u64 = rand::rng().random();
    println!("seed {seed}");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (pos, mut tets) = common::box_grid(5, 4, 3, 0.1);
    // Corners in random order, so the packed layout must orient blocks by global node index.
    for t in &mut tets {
        for c in (1..4).rev() {
            t.swap(c, rng.random_range(0..=c));
        }
    }
    let nv = pos.len();
    let n = 3 * nv;
    let pat = Arc::new(SymmetricPattern::from_elements(nv, 3, &tets).unwrap());
    let dofs = tet_dofs(&tets);
    let local: Vec<f64> = (0..tets.len() * 144)
        .map(|_| rng.random_range(-1.0..1.0))
        .collect();
    let mut packed = vec![0.0; tets.len() * 9 * packed_blocks(4)];
    for (e, t) in tets.iter().enumerate() {
        let full = &local[144 * e..144 * (e + 1)];
        pack_upper_blocks(t, full, &mut packed[90 * e..90 * (e + 1)]);
    }
    let fixed: Vec<bool> = (0..n).map(|d| d / 3 % 7 == 0).collect();
    for mask in [None, Some(&fixed[..])] {
        let map = ScatterMap::new(&pat, 12, &dofs, mask).unwrap();
        let gather = GatherMap::new(&map, pat.nnz()).unwrap();
        assert_eq!(gather.nnz(), pat.nnz());
        let mut scattered = SymSparse::zeros(pat.clone());
        for e in 0..tets.len() {
            scattered.scatter_add(&map, e, &local[144 * e..144 * (e + 1)]);
        }
        let mut gathered = SymSparse::zeros(pat.clone());
        gathered.values_mut().fill(f64::NAN); // every value must be overwritten
        gathered.gather(&gather, &local);
        let (a, b) = (scattered.values(), gathered.values());
        assert!(
            a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()),
            "gather differs from scatter"
        );
        let nodes: Option<Vec<bool>> = mask.map(|f| (0..nv).map(|v| f[3 * v]).collect());
        let blocks = BlockGatherMap::new(&pat, &tets, nodes.as_deref()).unwrap();
        assert_eq!(blocks.nnz(), pat.nnz());
        let mut by_blocks = SymSparse::zeros(pat.clone());
        by_blocks.values_mut().fill(f64::NAN);
        assert_eq!(blocks.packed_len(), 90);
        by_blocks.gather_blocks(&blocks, &packed);
        let c = by_blocks.values();
        if let Some(k) = (0..a.len()).find(|&k| a[k].to_bits() != c[k].to_bits()) {
            panic!(
                "block gather differs from scatter at value {k}: {} vs {}",
                c[k], a[k]
            );
        }
        // Dense reference: upper triangle of Σ_e P_eᵀ K_e P_e over the non-pinned DOFs.
        let mut dense = vec![0.0; n * n];
        for e in 0..tets.len() {
            let d = &dofs[12 * e..12 * (e + 1)];
            for i in 0..12 {
                for j in 0..12 {
                    let (r, c) = (d[i], d[j]);
                    let pinned = mask.is_some_and(|f| f[r] || f[c]);
                    if r <= c && !pinned {
                        dense[c * n + r] += local[144 * e + 12 * i + j];
                    }
                }
            }
        }
        let got = gathered.to_dense();
        for c in 0..n {
            for r in 0..=c {
                let (want, have) = (dense[c * n + r], got[c * n + r]);
                assert!(
                    (want - have).abs() <= 1e-12 * (1.0 + want.abs()),
                    "({r}, {c}): {have} vs {want}"
                );
            }
        }
    }
}

/// A pattern not laid out in 3×3 node blocks is refused with an error, not mis-gathered.
#[test]
fn block_gather_refuses_a_pattern_without_node_blocks() {
    let pat = SymmetricPattern::from_entries(6, [(0, 4)]).unwrap();
    let tets: [[u32; 4]; 0] = [];
    let err = BlockGatherMap::new(&pat, &tets, None).unwrap_err();
    assert!(err.to_string().contains("3×3 blocks"), "{err}");
}

/// A matrix that fills a few entries of a wide pattern (a random diagonal plus random
/// off-diagonal entries, some of them exact zeros, as a per-vertex Hessian term on the elastic
/// pattern): `without_zeros` keeps the whole diagonal and exactly the non-zero off-diagonal
/// entries, and its product and dense copy equal the original's bit for bit.
#[test]
fn without_zeros_keeps_the_diagonal_and_the_nonzeros_and_the_product() {
    let seed: u64 = rand::rng().random();
    println!("seed {seed}");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (pos, tets) = common::box_grid(4, 3, 3, 0.1);
    let nv = pos.len();
    let pat = Arc::new(SymmetricPattern::from_elements(nv, 3, &tets).unwrap());
    let mut m = SymSparse::zeros(pat.clone());
    let (cp, ri) = (pat.col_ptr(), pat.row_idx());
    let mut expected_nnz = 0;
    for c in 0..pat.n() {
        for (k, &r) in ri.iter().enumerate().take(cp[c + 1]).skip(cp[c]) {
            // Some diagonal entries zero too: the diagonal stays whatever its value.
            let fill = if r == c { 0.8 } else { 0.05 };
            if rng.random_bool(fill) {
                m.values_mut()[k] = rng.random_range(-2.0..2.0);
            }
            if r == c || m.values()[k] != 0.0 {
                expected_nnz += 1;
            }
        }
    }
    let c = m.without_zeros();
    assert_eq!(c.n(), m.n());
    assert_eq!(c.pattern().nnz(), expected_nnz);
    assert!(
        expected_nnz < pat.nnz() / 4,
        "the test matrix is not sparse in its pattern"
    );
    for i in 0..m.n() {
        assert!(c.pattern().find(i, i).is_some(), "diagonal {i} dropped");
    }
    assert_eq!(c.values().len(), expected_nnz);
    let (d0, d1) = (m.to_dense(), c.to_dense());
    assert!(d0.iter().zip(&d1).all(|(a, b)| a.to_bits() == b.to_bits()));
    let x: Vec<f64> = (0..m.n()).map(|_| rng.random_range(-1.0..1.0)).collect();
    let (mut y0, mut y1) = (vec![0.0; m.n()], vec![0.0; m.n()]);
    m.mul_vec(&x, &mut y0);
    c.mul_vec(&x, &mut y1);
    assert!(
        y0.iter().zip(&y1).all(|(a, b)| a.to_bits() == b.to_bits()),
        "products differ"
    );
}

/// A product large enough to run in parallel ([`PARALLEL_MUL_NNZ`]) on 1, 2, 3 and 4 rayon
/// threads against the sequential column scatter over the upper triangle (written out here):
/// one thread is the same bit for bit; more threads, whose column ranges are summed at the end,
/// agree entry by entry within 4·ε·(|A||x|)ᵢ (a few reordered additions); the same matrix after
/// `without_zeros` gives the same product.
#[test]
fn parallel_product_equals_the_sequential_scatter() {
    let seed: u64 = rand::rng().random();
    println!("seed {seed}");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (pos, tets) = common::box_grid(12, 12, 12, 0.1);
    let pat = Arc::new(SymmetricPattern::from_elements(pos.len(), 3, &tets).unwrap());
    assert!(
        pat.nnz() >= PARALLEL_MUL_NNZ,
        "{} entries: not the parallel path",
        pat.nnz()
    );
    let mut a = SymSparse::zeros(pat.clone());
    for v in a.values_mut() {
        *v = rng.random_range(-1.0..1.0);
    }
    // A third of the entries zero, so `without_zeros` has something to drop.
    for (k, v) in a.values_mut().iter_mut().enumerate() {
        if k % 3 == 0 {
            *v = 0.0;
        }
    }
    let n = a.n();
    let x: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    // The sequential reference: each stored (r, c) adds to y[r] and, off the diagonal, y[c].
    let (cp, ri) = (pat.col_ptr(), pat.row_idx());
    let mut want = vec![0.0; n];
    let mut abs = vec![0.0; n];
    for c in 0..n {
        let mut acc = 0.0;
        for (&r, &v) in ri[cp[c]..cp[c + 1]]
            .iter()
            .zip(&a.values()[cp[c]..cp[c + 1]])
        {
            abs[r] += (v * x[c]).abs();
            if r == c {
                acc += v * x[c];
            } else {
                abs[c] += (v * x[r]).abs();
                want[r] += v * x[c];
                acc += v * x[r];
            }
        }
        want[c] += acc;
    }
    let compact = a.without_zeros();
    for threads in 1..=4 {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        for (what, m) in [("full", &a), ("without zeros", &compact)] {
            let mut got = vec![f64::NAN; n];
            pool.install(|| m.mul_vec(&x, &mut got));
            if threads == 1 {
                assert!(
                    got.iter()
                        .zip(&want)
                        .all(|(p, q)| p.to_bits() == q.to_bits()),
                    "{what}, 1 thread: not the sequential product"
                );
            }
            for i in 0..n {
                let bound = 4.0 * f64::EPSILON * abs[i];
                assert!(
                    (got[i] - want[i]).abs() <= bound,
                    "{what}, {threads} threads, row {i}: {} vs {} (bound {bound:e})",
                    got[i],
                    want[i]
                );
            }
        }
    }
}
