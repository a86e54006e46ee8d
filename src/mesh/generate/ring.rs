//! A ring (a hoop): an annulus of rectangular cross-section swept around the y axis.

use super::grid::kuhn_grid;
use crate::mesh::TetMesh;

/// A ring about the vertical axis through `center` (m): radii from `inner` to `outer` (m,
/// 0 < inner < outer) and `height` (m) along y, split into `cells = [around, radial, axial]`
/// cells of 6 tets (around at least 3, the others at least 1). The Kuhn grid is laid out in
/// (angle, radius, height) and closed at the seam: the last ring of lattice points is the
/// first (the same diagonal in every cell makes the seam conforming like every other face).
/// Positively oriented, `around·(radial+1)·(axial+1)` vertices.
pub fn ring(center: [f64; 3], inner: f64, outer: f64, height: f64, cells: [usize; 3]) -> TetMesh {
    let n = [cells[0].max(3), cells[1].max(1), cells[2].max(1)];
    let point = |i: usize, j: usize, k: usize| {
        // i wraps so the seam's points are bit-identical to the first column's.
        let phi = std::f64::consts::TAU * (i % n[0]) as f64 / n[0] as f64;
        let r = if j == n[1] {
            outer
        } else {
            inner + (outer - inner) * j as f64 / n[1] as f64
        };
        let y = if k == n[2] {
            0.5 * height
        } else {
            -0.5 * height + height * k as f64 / n[2] as f64
        };
        [
            center[0] + r * phi.cos(),
            center[1] + y,
            center[2] - r * phi.sin(),
        ]
    };
    let open = kuhn_grid(n, false, point);
    // Weld the seam: lattice column i = n₀ becomes column 0, then drop its points.
    let (nx, ny) = (n[0] + 1, n[1] + 1);
    let weld = |v: u32| {
        let v = v as usize;
        let (i, rest) = (v % nx, v / nx);
        let i = if i == n[0] { 0 } else { i };
        // Compact numbering over the n₀ remaining columns.
        (i + n[0] * rest) as u32
    };
    let mut positions = vec![[0.0; 3]; n[0] * ny * (n[2] + 1)];
    for (v, p) in open.positions.iter().enumerate() {
        positions[weld(v as u32) as usize] = *p;
    }
    TetMesh {
        positions,
        tets: open.tets.iter().map(|t| t.map(weld)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_is_closed_conforming_and_has_its_volume() {
        let (inner, outer, height) = (0.07, 0.12, 0.04);
        let m = ring([0.1, 0.2, -0.3], inner, outer, height, [24, 2, 2]);
        assert_eq!(m.num_vertices(), 24 * 3 * 3);
        assert_eq!(m.num_tets(), 24 * 2 * 2 * 6);
        let vols: Vec<f64> = (0..m.num_tets()).map(|t| m.signed_volume(t)).collect();
        assert!(vols.iter().all(|&v| v > 0.0), "an inverted or flat tet");
        // A polygonal annulus of 24 sides: area ½·24·sin(2π/24)·(R² − r²).
        let n = 24.0;
        let area = 0.5 * n * (std::f64::consts::TAU / n).sin() * (outer * outer - inner * inner);
        let total: f64 = vols.iter().sum();
        assert!(
            (total - area * height).abs() < 1e-12 * total,
            "{total} vs {}",
            area * height
        );
        // Closed and conforming: every triangle face is shared by two tets or lies on the
        // boundary, and the boundary is a closed surface (each boundary edge in two boundary
        // faces) — a seam left open would add boundary faces inside the ring.
        let mut faces = std::collections::HashMap::new();
        for t in &m.tets {
            for f in [
                [t[0], t[1], t[2]],
                [t[0], t[1], t[3]],
                [t[0], t[2], t[3]],
                [t[1], t[2], t[3]],
            ] {
                let mut f = f;
                f.sort_unstable();
                *faces.entry(f).or_insert(0) += 1;
            }
        }
        assert!(faces.values().all(|&c| c <= 2));
        let boundary: Vec<[u32; 3]> = faces
            .iter()
            .filter(|(_, &c)| c == 1)
            .map(|(f, _)| *f)
            .collect();
        // The boundary: inner and outer walls (24 × 2 quads each), top and bottom (24 × 2
        // quads each), two triangles per quad.
        assert_eq!(boundary.len(), 2 * (24 * 2 * 4));
        let mut edges = std::collections::HashMap::new();
        for f in &boundary {
            for (a, b) in [(f[0], f[1]), (f[1], f[2]), (f[0], f[2])] {
                *edges.entry((a.min(b), a.max(b))).or_insert(0) += 1;
            }
        }
        assert!(edges.values().all(|&c| c == 2), "the surface has a hole");
    }
}
