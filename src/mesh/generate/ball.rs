//! A tetrahedral ball, made by mapping a cube grid onto the sphere.

use super::grid::kuhn_grid;
use crate::mesh::TetMesh;

/// A ball of `radius` (m) about `center`, with about `resolution` cells across its diameter
/// (rounded up to an even number, at least 2).
///
/// Construction: a Kuhn grid of `[-1,1]³` whose cell diagonals all point away from the centre
/// (mirrored per octant — otherwise some corner cells would have all four vertices on the
/// sphere and flatten), then each point `p` is moved along its ray by
/// `p ↦ p · (1 + (‖p‖∞/‖p‖₂ − 1)·‖p‖∞)`: the identity at the centre, the cube surface onto the
/// unit sphere, and monotone along every ray (so no tet inverts). Positively oriented, no
/// degenerate tets; the polyhedral volume approaches `4/3 π r³` from below as resolution grows.
pub fn ball(center: [f64; 3], radius: f64, resolution: usize) -> TetMesh {
    let n = resolution.max(2).div_ceil(2) * 2;
    let half = n / 2;
    // Orient the tets on the straight lattice, then bend it: the map preserves orientation.
    let mut mesh = kuhn_grid([n; 3], true, |i, j, k| {
        // Lattice coordinate in [-1,1], exact at the centre and the faces.
        [i, j, k].map(|a| (a as f64 - half as f64) / half as f64)
    });
    for q in &mut mesh.positions {
        let p = *q;
        let inf = p.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let two = (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]).sqrt();
        let f = if inf == 0.0 {
            0.0
        } else {
            1.0 + (inf / two - 1.0) * inf
        };
        *q = [0, 1, 2].map(|a| center[a] + radius * p[a] * f);
    }
    mesh
}
