//! Tet-mesh helpers shared by the SMS precompute: validation, P1 geometry (volumes, gradients
//! of the barycentric hat functions), vertex adjacency and connected components.

use crate::{PrecomputeError, Result};

/// P1 geometry of every tet.
pub(crate) struct TetGeom {
    /// Rest volume of each tet (m³, positive whatever the vertex orientation).
    pub vol: Vec<f64>,
    /// Gradients of the four barycentric coordinates of each tet (1/m).
    pub grad: Vec<[[f64; 3]; 4]>,
    /// Lumped (vertex) volume: a quarter of each incident tet's volume (m³).
    pub vertex_vol: Vec<f64>,
}

/// Checks sizes, indices and values; every vertex must belong to a tet (an isolated vertex
/// has no Laplacian row, so neither distances nor weights exist there).
pub(crate) fn validate(
    x: &[[f64; 3]],
    tets: &[[u32; 4]],
    youngs: &[f64],
    pinned: &[bool],
) -> Result<()> {
    let inv = |s: String| Err(PrecomputeError::Invalid(s));
    if x.is_empty() {
        return inv("sms: `positions` is empty".into());
    }
    if tets.is_empty() {
        return inv("sms: `tets` is empty".into());
    }
    if youngs.len() != tets.len() {
        return inv(format!(
            "sms: `youngs` has {} values for {} tets",
            youngs.len(),
            tets.len()
        ));
    }
    if pinned.len() != x.len() {
        return inv(format!(
            "sms: `pinned` has {} flags for {} vertices",
            pinned.len(),
            x.len()
        ));
    }
    if let Some(v) = x.iter().position(|p| p.iter().any(|c| !c.is_finite())) {
        return inv(format!("sms: position of vertex {v} is not finite"));
    }
    if let Some(e) = youngs.iter().position(|&e| !(e.is_finite() && e > 0.0)) {
        return inv(format!(
            "sms: `youngs[{e}]` = {} is not a positive finite modulus",
            youngs[e]
        ));
    }
    let mut used = vec![false; x.len()];
    for (t, tet) in tets.iter().enumerate() {
        for &v in tet {
            if v as usize >= x.len() {
                return inv(format!("sms: tet {t} references vertex {v} of {}", x.len()));
            }
            used[v as usize] = true;
        }
    }
    if let Some(v) = used.iter().position(|&u| !u) {
        return inv(format!("sms: vertex {v} belongs to no tet"));
    }
    Ok(())
}

/// Volumes and barycentric gradients; a zero-volume tet is an error (its gradients are
/// undefined).
pub(crate) fn geometry(x: &[[f64; 3]], tets: &[[u32; 4]]) -> Result<TetGeom> {
    let mut vol = Vec::with_capacity(tets.len());
    let mut grad = Vec::with_capacity(tets.len());
    let mut vertex_vol = vec![0.0; x.len()];
    for (t, tet) in tets.iter().enumerate() {
        let p = tet.map(|v| x[v as usize]);
        let e = |k: usize| sub(p[k], p[0]);
        let (e1, e2, e3) = (e(1), e(2), e(3));
        let det = dot(e1, cross(e2, e3));
        let scale = norm(e1) * norm(e2) * norm(e3);
        if det.is_nan() || det.abs() <= 1e-14 * scale {
            return Err(PrecomputeError::Invalid(format!(
                "sms: tet {t} is degenerate (zero volume)"
            )));
        }
        // Rows of the inverse edge matrix are ∇λ1..3: (e2×e3, e3×e1, e1×e2) / det.
        let g1 = scl(cross(e2, e3), 1.0 / det);
        let g2 = scl(cross(e3, e1), 1.0 / det);
        let g3 = scl(cross(e1, e2), 1.0 / det);
        let g0 = scl(add(add(g1, g2), g3), -1.0);
        let v = det.abs() / 6.0;
        for &i in tet {
            vertex_vol[i as usize] += v / 4.0;
        }
        vol.push(v);
        grad.push([g0, g1, g2, g3]);
    }
    Ok(TetGeom {
        vol,
        grad,
        vertex_vol,
    })
}

/// Sorted vertex neighbours (sharing a tet edge), without the vertex itself.
pub(crate) fn vertex_adjacency(n: usize, tets: &[[u32; 4]]) -> Vec<Vec<u32>> {
    let mut adj: Vec<Vec<u32>> = vec![Vec::new(); n];
    for tet in tets {
        for a in 0..4 {
            for b in 0..4 {
                if a != b {
                    adj[tet[a] as usize].push(tet[b]);
                }
            }
        }
    }
    for l in &mut adj {
        l.sort_unstable();
        l.dedup();
    }
    adj
}

/// Tets incident to each vertex.
pub(crate) fn vertex_tets(n: usize, tets: &[[u32; 4]]) -> Vec<Vec<u32>> {
    let mut inc: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (t, tet) in tets.iter().enumerate() {
        for &v in tet {
            inc[v as usize].push(t as u32);
        }
    }
    inc
}

/// Connected components of the vertices selected by `keep` in the graph `adj` (only edges
/// between kept vertices count); returns a label per vertex (`u32::MAX` where not kept) and
/// the component count.
pub(crate) fn components(adj: &[Vec<u32>], keep: impl Fn(usize) -> bool) -> (Vec<u32>, usize) {
    let n = adj.len();
    let mut label = vec![u32::MAX; n];
    let mut count = 0;
    let mut stack = Vec::new();
    for s in 0..n {
        if label[s] != u32::MAX || !keep(s) {
            continue;
        }
        label[s] = count as u32;
        stack.push(s);
        while let Some(v) = stack.pop() {
            for &w in &adj[v] {
                let w = w as usize;
                if label[w] == u32::MAX && keep(w) {
                    label[w] = count as u32;
                    stack.push(w);
                }
            }
        }
        count += 1;
    }
    (label, count)
}

pub(crate) fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}
pub(crate) fn add(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
}
pub(crate) fn scl(a: [f64; 3], s: f64) -> [f64; 3] {
    [a[0] * s, a[1] * s, a[2] * s]
}
pub(crate) fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}
pub(crate) fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}
pub(crate) fn norm(a: [f64; 3]) -> f64 {
    dot(a, a).sqrt()
}
