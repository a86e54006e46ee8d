//! Assembly by gather ([`GatherMap`], [`SymSparse::gather`]; by blocks, [`BlockGatherMap`],
//! [`SymSparse::gather_blocks`]) against the sequential scatter
//! ([`SymSparse::scatter_add`]) and a dense sum of the element matrices.
mod common;

use std::sync::Arc;

use jello_precompute::sparse::{
    pack_upper_blocks, packed_blocks, tet_dofs, BlockGatherMap, GatherMap, ScatterMap, SymSparse,
    SymmetricPattern,
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
