//! Structured tet grids: boxes split into cells, each cell into 6 tets along a diagonal
//! (Kuhn / Freudenthal split). Using the same diagonal direction in neighbouring cells makes the
//! face diagonals agree, so the mesh is conforming.

use crate::mesh::TetMesh;

/// The 6 Kuhn tets of the unit cube as corner codes (bit 0 = x, bit 1 = y, bit 2 = z): one per
/// axis permutation, walking from corner 0 to corner 7 along the axes in that order.
const KUHN: [[u8; 4]; 6] = [
    [0, 1, 3, 7],
    [0, 1, 5, 7],
    [0, 2, 3, 7],
    [0, 2, 6, 7],
    [0, 4, 5, 7],
    [0, 4, 6, 7],
];

/// Builds `n[0] × n[1] × n[2]` cells of 6 tets over the grid points `coords(i, j, k)`. When
/// `mirror` is set, cells in the lower half along an axis use the diagonal mirrored across the
/// mid-plane (`n` must then be even), so every cell's diagonal points away from the grid centre.
/// Tets come out positively oriented as long as `coords` preserves orientation per cell.
pub(crate) fn kuhn_grid(
    n: [usize; 3],
    mirror: bool,
    coords: impl Fn(usize, usize, usize) -> [f64; 3],
) -> TetMesh {
    let (nx, ny, nz) = (n[0] + 1, n[1] + 1, n[2] + 1);
    let mut positions = Vec::with_capacity(nx * ny * nz);
    for k in 0..nz {
        for j in 0..ny {
            for i in 0..nx {
                positions.push(coords(i, j, k));
            }
        }
    }
    let id = |i: usize, j: usize, k: usize| (i + nx * (j + ny * k)) as u32;
    let mut mesh = TetMesh {
        positions,
        tets: Vec::with_capacity(6 * n[0] * n[1] * n[2]),
    };
    for k in 0..n[2] {
        for j in 0..n[1] {
            for i in 0..n[0] {
                let cell = [i, j, k];
                let flip: [u8; 3] = [0, 1, 2].map(|a| u8::from(mirror && 2 * cell[a] < n[a]));
                let corner = |code: u8| {
                    let b = [0, 1, 2].map(|a| ((code >> a) & 1) ^ flip[a]);
                    id(i + b[0] as usize, j + b[1] as usize, k + b[2] as usize)
                };
                for tet in KUHN {
                    mesh.tets.push(tet.map(corner));
                    let t = mesh.tets.len() - 1;
                    if mesh.signed_volume(t) < 0.0 {
                        mesh.tets[t].swap(2, 3);
                    }
                }
            }
        }
    }
    mesh
}

/// A box `[min, max]` (m) split into `cells[0] × cells[1] × cells[2]` cells of 6 tets each
/// (counts below 1 are taken as 1). Conforming, positively oriented, `(Π(cells)+1)` vertices on
/// a regular lattice. Needs `max > min` on every axis for non-degenerate tets.
pub fn box_grid(min: [f64; 3], max: [f64; 3], cells: [usize; 3]) -> TetMesh {
    let n = cells.map(|c| c.max(1));
    kuhn_grid(n, false, |i, j, k| {
        let idx = [i, j, k];
        // Interpolating from both ends puts the last lattice plane exactly on `max`.
        [0, 1, 2].map(|a| {
            let s = idx[a] as f64 / n[a] as f64;
            if idx[a] == n[a] {
                max[a]
            } else {
                min[a] + (max[a] - min[a]) * s
            }
        })
    })
}
