//! Greedy graph colourings for conflict-free parallel updates: vertices (conflict when they share
//! a tet — Gauss–Seidel / block-descent sweeps) and tets (conflict when they share a vertex —
//! scatter-adds without atomics).

use super::adjacency::{VertexAdjacency, VertexTets};
use crate::error::{JelloError, Result};
use crate::mesh::TetMesh;

/// A colouring: a colour per item and the items of each colour.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Colouring {
    /// Colour of each item (0-based).
    pub colour: Vec<u32>,
    /// `groups[c]`: the items of colour `c`, ascending.
    pub groups: Vec<Vec<u32>>,
}

impl Colouring {
    /// Number of colours used.
    pub fn num_colours(&self) -> usize {
        self.groups.len()
    }

    /// The groups as CSR (`offsets` of length `num_colours + 1`, `items` concatenated), ready
    /// to upload as two GPU buffers: colour `c` is `items[offsets[c]..offsets[c+1]]`.
    pub fn groups_csr(&self) -> (Vec<u32>, Vec<u32>) {
        let mut offsets = Vec::with_capacity(self.groups.len() + 1);
        let mut items = Vec::with_capacity(self.colour.len());
        offsets.push(0);
        for g in &self.groups {
            items.extend_from_slice(g);
            offsets.push(items.len() as u32);
        }
        (offsets, items)
    }

    fn from_colours(colour: Vec<u32>) -> Self {
        let nc = colour.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
        let mut groups = vec![Vec::new(); nc];
        for (i, &c) in colour.iter().enumerate() {
            groups[c as usize].push(i as u32);
        }
        Colouring { colour, groups }
    }
}

/// First-fit greedy colouring of a CSR graph in index order.
fn greedy(n: usize, neighbours: impl Fn(usize, &mut dyn FnMut(usize))) -> Vec<u32> {
    const NONE: u32 = u32::MAX;
    let mut colour = vec![NONE; n];
    // `stamp[c] == i` marks colour c as taken by a neighbour of item i.
    let mut stamp: Vec<usize> = Vec::new();
    for i in 0..n {
        neighbours(i, &mut |j| {
            let c = colour[j];
            if c != NONE {
                let c = c as usize;
                if c >= stamp.len() {
                    stamp.resize(c + 1, usize::MAX);
                }
                stamp[c] = i;
            }
        });
        let c = (0..)
            .find(|&c| c >= stamp.len() || stamp[c] != i)
            .unwrap_or(0);
        colour[i] = c as u32;
    }
    colour
}

/// Greedy colouring of the vertices: two vertices that share a tet get different colours.
pub fn colour_vertices(mesh: &TetMesh) -> Colouring {
    let adj = VertexAdjacency::new(mesh);
    Colouring::from_colours(greedy(mesh.positions.len(), |v, f| {
        for &u in adj.of(v) {
            f(u as usize);
        }
    }))
}

/// Greedy colouring of the tets: two tets that share a vertex get different colours.
pub fn colour_tets(mesh: &TetMesh) -> Colouring {
    let vt = VertexTets::new(mesh);
    Colouring::from_colours(greedy(mesh.tets.len(), |t, f| {
        for &v in &mesh.tets[t] {
            for (u, _) in vt.of(v as usize) {
                if u as usize != t {
                    f(u as usize);
                }
            }
        }
    }))
}

/// What a [`Colouring`] colours, for [`check_colouring`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColouringKind {
    /// Vertices; conflict when they share a tet.
    Vertices,
    /// Tets; conflict when they share a vertex.
    Tets,
}

/// Checks a colouring of either kind (see [`check_vertex_colouring`], [`check_tet_colouring`]).
pub fn check_colouring(mesh: &TetMesh, kind: ColouringKind, c: &Colouring) -> Result<()> {
    match kind {
        ColouringKind::Vertices => check_vertex_colouring(mesh, c),
        ColouringKind::Tets => check_tet_colouring(mesh, c),
    }
}

fn check_groups(c: &Colouring, n: usize) -> Result<()> {
    if c.colour.len() != n {
        return Err(JelloError::Invalid(format!(
            "colouring has {} colours for {n} items",
            c.colour.len()
        )));
    }
    let mut seen = vec![false; n];
    for (k, g) in c.groups.iter().enumerate() {
        for &i in g {
            let i = i as usize;
            if i >= n || seen[i] || c.colour[i] as usize != k {
                return Err(JelloError::Invalid(format!(
                    "colour group {k} lists item {i} wrongly (out of range, repeated or of another colour)"
                )));
            }
            seen[i] = true;
        }
    }
    if let Some(i) = seen.iter().position(|&s| !s) {
        return Err(JelloError::Invalid(format!(
            "item {i} is in no colour group"
        )));
    }
    Ok(())
}

/// Checks a vertex colouring against the tets directly: every pair of corners of every tet has
/// different colours, and the groups match the colours.
pub fn check_vertex_colouring(mesh: &TetMesh, c: &Colouring) -> Result<()> {
    check_groups(c, mesh.positions.len())?;
    for (t, tet) in mesh.tets.iter().enumerate() {
        for a in 0..4 {
            for b in a + 1..4 {
                if c.colour[tet[a] as usize] == c.colour[tet[b] as usize] {
                    return Err(JelloError::Invalid(format!(
                        "vertices {} and {} of tet {t} share colour {}",
                        tet[a], tet[b], c.colour[tet[a] as usize]
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Checks a tet colouring: no vertex is used by two tets of the same colour (checked by sorting
/// `(vertex, colour)` pairs, independent of the adjacency used to build it), groups consistent.
pub fn check_tet_colouring(mesh: &TetMesh, c: &Colouring) -> Result<()> {
    check_groups(c, mesh.tets.len())?;
    let mut pairs: Vec<(u32, u32)> = mesh
        .tets
        .iter()
        .enumerate()
        .flat_map(|(t, tet)| tet.map(|v| (v, c.colour[t])))
        .collect();
    pairs.sort_unstable();
    if let Some(w) = pairs.windows(2).find(|w| w[0] == w[1]) {
        return Err(JelloError::Invalid(format!(
            "vertex {} is shared by two tets of colour {}",
            w[0].0, w[0].1
        )));
    }
    Ok(())
}
