//! Adjacency and colourings: consistent with the tets (checked by brute force), colourings valid,
//! and the validators reject broken colourings.

use jello::mesh::{
    ball, box_grid, check_colouring, check_tet_colouring, check_vertex_colouring, colour_tets,
    colour_vertices, read_mesh, ColouringKind, TetMesh, VertexAdjacency, VertexTets,
};
use std::collections::BTreeSet;

use crate::common;

/// A box grid with vertices renumbered by a fixed pseudo-random permutation (so nothing relies on
/// lattice order) plus one unreferenced vertex.
fn shuffled() -> TetMesh {
    let m = box_grid([0.0; 3], [1.0; 3], [3, 4, 2]);
    let n = m.num_vertices();
    let perm: Vec<u32> = (0..n).map(|i| ((i * 37 + 11) % n) as u32).collect();
    let mut positions = vec![[0.0; 3]; n];
    for (i, &p) in perm.iter().enumerate() {
        positions[p as usize] = m.positions[i];
    }
    positions.push([5.0; 3]);
    let tets = m.tets.iter().map(|t| t.map(|v| perm[v as usize])).collect();
    TetMesh { positions, tets }
}

fn meshes() -> Vec<(String, TetMesh)> {
    let mut v = vec![
        ("shuffled grid".to_string(), shuffled()),
        ("ball".to_string(), ball([0.0; 3], 1.0, 6)),
    ];
    if let Some(p) = common::shared_mesh("bunny_20k.node") {
        v.push(("bunny_20k".into(), read_mesh(&p).unwrap().mesh));
    }
    v
}

#[test]
fn vertex_tets_matches_tets() {
    for (name, m) in meshes() {
        let vt = VertexTets::new(&m);
        assert_eq!(vt.offsets.len(), m.num_vertices() + 1, "{name}");
        assert_eq!(vt.tets.len(), 4 * m.num_tets(), "{name}");
        assert_eq!(vt.local.len(), vt.tets.len());
        let mut seen = vec![[false; 4]; m.num_tets()];
        for v in 0..m.num_vertices() {
            let mut prev = None;
            for (t, l) in vt.of(v) {
                assert_eq!(m.tets[t as usize][l as usize], v as u32, "{name}");
                assert!(!seen[t as usize][l as usize]);
                seen[t as usize][l as usize] = true;
                assert!(prev < Some(t), "{name}: tets of a vertex ascend");
                prev = Some(t);
            }
        }
        assert!(
            seen.iter().flatten().all(|&s| s),
            "{name}: every corner listed"
        );
        let packed = vt.packed();
        assert!(packed
            .iter()
            .zip(vt.tets.iter().zip(&vt.local))
            .all(|(&p, (&t, &l))| p / 4 == t && p % 4 == l as u32));
    }
}

#[test]
fn vertex_adjacency_matches_brute_force() {
    for (name, m) in meshes() {
        let adj = VertexAdjacency::new(&m);
        let mut expect = vec![BTreeSet::new(); m.num_vertices()];
        for t in &m.tets {
            for &a in t {
                for &b in t {
                    if a != b {
                        expect[a as usize].insert(b);
                    }
                }
            }
        }
        for (v, e) in expect.iter().enumerate() {
            let got: Vec<u32> = adj.of(v).to_vec();
            let want: Vec<u32> = e.iter().copied().collect();
            assert_eq!(got, want, "{name}: vertex {v}");
        }
    }
}

#[test]
fn colourings_are_valid_and_small() {
    for (name, m) in meshes() {
        let vc = colour_vertices(&m);
        check_colouring(&m, ColouringKind::Vertices, &vc).unwrap();
        let tc = colour_tets(&m);
        check_colouring(&m, ColouringKind::Tets, &tc).unwrap();
        // The CSR form lists the same groups.
        let (offs, items) = tc.groups_csr();
        assert_eq!(offs.len(), tc.num_colours() + 1);
        for (c, g) in tc.groups.iter().enumerate() {
            assert_eq!(&items[offs[c] as usize..offs[c + 1] as usize], &g[..]);
        }
        // Greedy bounds: at most max degree + 1 colours.
        let adj = VertexAdjacency::new(&m);
        let max_deg = (0..m.num_vertices())
            .map(|v| adj.of(v).len())
            .max()
            .unwrap();
        assert!(vc.num_colours() <= max_deg + 1, "{name}");
        assert!(vc.num_colours() >= 4, "{name}: a tet needs 4 colours");
        println!(
            "{name}: {} vertex colours (max degree {max_deg}), {} tet colours",
            vc.num_colours(),
            tc.num_colours()
        );
    }
}

#[test]
fn validators_reject_bad_colourings() {
    let m = shuffled();
    let mut vc = colour_vertices(&m);
    // Give corner 1 of tet 0 the colour of corner 0 (groups updated consistently).
    let [a, b, _, _] = m.tets[0];
    let (ca, cb) = (vc.colour[a as usize], vc.colour[b as usize]);
    vc.groups[cb as usize].retain(|&x| x != b);
    vc.groups[ca as usize].push(b);
    vc.groups[ca as usize].sort();
    vc.colour[b as usize] = ca;
    assert!(check_vertex_colouring(&m, &vc).is_err());

    let mut tc = colour_tets(&m);
    // Two tets of the same cell share a vertex; force them to one colour.
    let (c0, c1) = (tc.colour[0], tc.colour[1]);
    tc.groups[c1 as usize].retain(|&x| x != 1);
    tc.groups[c0 as usize].push(1);
    tc.groups[c0 as usize].sort();
    tc.colour[1] = c0;
    assert!(check_tet_colouring(&m, &tc).is_err());

    // Groups that disagree with the colours are rejected too.
    let mut tc = colour_tets(&m);
    tc.groups[0].pop();
    assert!(check_tet_colouring(&m, &tc).is_err());
}
