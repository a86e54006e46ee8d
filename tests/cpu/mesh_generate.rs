//! Generators: box grids and balls are conforming, positively oriented, closed, of the right
//! volume; transforms do what they say.

use jello::mesh::{ball, box_grid, surface, MeshInfo, TetMesh, TET_FACES};
use std::collections::HashMap;

/// Face key → number of tets using it.
fn face_counts(m: &TetMesh) -> HashMap<[u32; 3], usize> {
    let mut h = HashMap::new();
    for t in &m.tets {
        for f in TET_FACES {
            let mut k = f.map(|i| t[i]);
            k.sort();
            *h.entry(k).or_insert(0) += 1;
        }
    }
    h
}

/// Edge key → number of surface triangles using it.
fn surface_edge_counts(m: &TetMesh) -> HashMap<(u32, u32), usize> {
    let mut h = HashMap::new();
    for t in surface(m).triangles {
        for (a, b) in [(t[0], t[1]), (t[1], t[2]), (t[2], t[0])] {
            *h.entry((a.min(b), a.max(b))).or_insert(0) += 1;
        }
    }
    h
}

/// Σ over boundary triangles of (centroid · normal · area) / 3: the enclosed volume when the
/// surface is closed and wound outward (divergence theorem with F = x / 3).
fn divergence_volume(m: &TetMesh) -> f64 {
    let mut v = 0.0;
    for t in surface(m).triangles {
        let [a, b, c] = t.map(|i| m.positions[i as usize]);
        // (b-a)×(c-a) = 2 · area · normal.
        let u = [b[0] - a[0], b[1] - a[1], b[2] - a[2]];
        let w = [c[0] - a[0], c[1] - a[1], c[2] - a[2]];
        let n2 = [
            u[1] * w[2] - u[2] * w[1],
            u[2] * w[0] - u[0] * w[2],
            u[0] * w[1] - u[1] * w[0],
        ];
        let cen = [0, 1, 2].map(|k| (a[k] + b[k] + c[k]) / 3.0);
        v += (cen[0] * n2[0] + cen[1] * n2[1] + cen[2] * n2[2]) / 2.0 / 3.0;
    }
    v
}

#[test]
fn box_grid_volume_orientation_conformity() {
    let (lo, hi) = ([-0.5, 0.25, 1.0], [1.5, 1.0, 1.6]);
    let n = [4usize, 3, 5];
    let m = box_grid(lo, hi, n);
    let box_vol = (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
    assert_eq!(m.num_vertices(), 5 * 4 * 6);
    assert_eq!(m.num_tets(), 6 * 4 * 3 * 5);
    assert!(
        (m.total_volume() - box_vol).abs() < 1e-14 * box_vol,
        "{}",
        m.total_volume()
    );
    let cell_vol = box_vol / (4 * 3 * 5) as f64;
    for t in 0..m.num_tets() {
        // Every Kuhn tet has exactly a sixth of its cell's volume.
        assert!(
            (m.signed_volume(t) - cell_vol / 6.0).abs() < 1e-14,
            "tet {t}"
        );
    }
    assert_eq!(m.bounding_box(), Some((lo, hi)));
    m.validate().unwrap();
    let mut bad = m.clone();
    bad.tets[7].swap(0, 1);
    assert!(bad.validate().unwrap_err().to_string().contains("tet 7"));
    let mut bad = m.clone();
    bad.positions[3][1] = f64::NAN;
    assert!(bad.validate().is_err());
    let mut bad = m.clone();
    bad.tets[2][3] = 10_000;
    assert!(bad
        .validate()
        .unwrap_err()
        .to_string()
        .contains("out of range"));
    // Conforming: every face is used by one tet (boundary) or two (interior); the boundary
    // faces are exactly the 2 triangles of each boundary quad.
    let fc = face_counts(&m);
    assert!(fc.values().all(|&c| c == 1 || c == 2));
    let boundary = fc.values().filter(|&&c| c == 1).count();
    assert_eq!(boundary, 4 * (n[0] * n[1] + n[1] * n[2] + n[2] * n[0]));
    for (k, &c) in &fc {
        if c == 1 {
            // Boundary faces lie on the box's faces.
            let on_face = (0..3).any(|a| {
                k.iter().all(|&v| m.positions[v as usize][a] == lo[a])
                    || k.iter().all(|&v| m.positions[v as usize][a] == hi[a])
            });
            assert!(on_face, "boundary face {k:?} is not on the box surface");
        }
    }
    // Closed, outward, sphere-like.
    assert!(surface_edge_counts(&m).values().all(|&c| c == 2));
    let s = surface(&m);
    assert_eq!(s.euler_characteristic(), 2);
    assert!((divergence_volume(&m) - box_vol).abs() < 1e-12);
    let q = MeshInfo::new(&m).quality;
    assert!(q[0] > 0.0 && q[2] <= 1.0 + 1e-12, "{q:?}");
}

#[test]
fn box_grid_single_cell_and_clamped_counts() {
    let m = box_grid([0.0; 3], [1.0; 3], [0, 1, 1]);
    assert_eq!(m.num_tets(), 6);
    assert!((m.total_volume() - 1.0).abs() < 1e-15);
    assert_eq!(surface(&m).triangles.len(), 12);
}

#[test]
fn ball_volume_quality_and_surface() {
    let (c, r) = ([0.3, -1.0, 2.0], 0.4);
    for res in [2usize, 7, 16] {
        let m = ball(c, r, res);
        assert!(
            (0..m.num_tets()).all(|t| m.signed_volume(t) > 0.0),
            "res {res}"
        );
        let exact = 4.0 / 3.0 * std::f64::consts::PI * r * r * r;
        let v = m.total_volume();
        // Inscribed polyhedron: below the sphere's volume.
        assert!(v < exact, "res {res}: {v} vs {exact}");
        let fc = face_counts(&m);
        assert!(fc.values().all(|&k| k == 1 || k == 2), "res {res}");
        assert!(
            surface_edge_counts(&m).values().all(|&k| k == 2),
            "res {res}"
        );
        assert_eq!(surface(&m).euler_characteristic(), 2, "res {res}");
        assert!((divergence_volume(&m) - v).abs() < 1e-12, "res {res}");
        // All boundary vertices on the sphere, all vertices inside it.
        for &b in &surface(&m).vertices {
            let p = m.positions[b as usize];
            let d = ((p[0] - c[0]).powi(2) + (p[1] - c[1]).powi(2) + (p[2] - c[2]).powi(2)).sqrt();
            assert!((d - r).abs() < 1e-12, "res {res}: boundary vertex at {d}");
        }
        let info = MeshInfo::new(&m);
        println!(
            "ball res {res}: {} tets, volume error {:.2}%, quality min {:.3} mean {:.3}",
            m.num_tets(),
            100.0 * (exact - v) / exact,
            info.quality[0],
            info.quality[1]
        );
        if res == 16 {
            assert!((exact - v) / exact < 0.03, "{v} vs {exact}");
            // Even at the cube corners the mapped tets stay far from flat.
            assert!(info.quality[0] > 0.5, "{:?}", info.quality);
        }
    }
}

#[test]
fn transforms() {
    let base = box_grid([0.0; 3], [2.0, 1.0, 0.5], [2, 2, 1]);
    let vol = base.total_volume();

    let mut m = base.clone();
    m.translate([1.0, -2.0, 3.0]);
    assert_eq!(m.bounding_box(), Some(([1.0, -2.0, 3.0], [3.0, -1.0, 3.5])));

    // 90° about z maps (x, y) to (-y, x); about the origin.
    let mut m = base.clone();
    m.rotate([0.0, 0.0, 2.0], 90.0).unwrap();
    for (p, q) in m.positions.iter().zip(&base.positions) {
        assert!((p[0] + q[1]).abs() < 1e-12 && (p[1] - q[0]).abs() < 1e-12 && p[2] == q[2]);
    }
    assert!((m.total_volume() - vol).abs() < 1e-12);
    // A rotation about an arbitrary axis keeps all edge lengths and orientation.
    let mut m = base.clone();
    m.rotate_about([1.0, 2.0, -0.5], 37.0, [0.3, 0.3, 0.3])
        .unwrap();
    assert!((0..m.num_tets()).all(|t| (m.signed_volume(t) - base.signed_volume(t)).abs() < 1e-12));
    assert!(m.rotate([0.0; 3], 10.0).is_err());
    assert!(m.rotate([1.0, 0.0, 0.0], f64::NAN).is_err());

    let mut m = base.clone();
    m.scale(3.0).unwrap();
    assert!((m.total_volume() - 27.0 * vol).abs() < 1e-12);
    assert!(m.scale(0.0).is_err() && m.scale(-1.0).is_err());

    // Mirroring along one axis keeps tets positive (orientation repaired).
    let mut m = base.clone();
    m.scale_xyz([-1.0, 2.0, 1.0]).unwrap();
    assert!((0..m.num_tets()).all(|t| m.signed_volume(t) > 0.0));
    assert!((m.total_volume() - 2.0 * vol).abs() < 1e-12);
    assert!(m.scale_xyz([1.0, 0.0, 1.0]).is_err());

    let mut m = base.clone();
    m.fit_largest_extent(0.5).unwrap();
    let (lo, hi) = m.bounding_box().unwrap();
    assert!(((hi[0] - lo[0]) - 0.5).abs() < 1e-15);
    assert!(((hi[1] - lo[1]) - 0.25).abs() < 1e-15);
    // About the bbox centre (1, 0.5, 0.25).
    let c = [0, 1, 2].map(|k| 0.5 * (lo[k] + hi[k]));
    assert!(
        (c[0] - 1.0).abs() < 1e-15 && (c[1] - 0.5).abs() < 1e-15 && (c[2] - 0.25).abs() < 1e-15
    );
    assert!(TetMesh::default().fit_largest_extent(1.0).is_err());
}
