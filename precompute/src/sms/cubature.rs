//! Modal moment-fitting cubature (SMS paper §3.8, Alg. 3) and the N_cg rule (§3.7).
//!
//! Per partition `p` (elements `E_p`, see [`element_partition`]) the covering functions are
//! the skinning weights `φ_h` of every handle that is non-zero at a vertex of an element of
//! `E_p` (optionally times the affine factors, [`CubatureTargets`]). An element's value of a
//! function is the mean of its four vertex values (the paper's barycentre rule). The targets
//! are `1`, each function and each product of two (degree 2, Eq. 16–17), integrated by the
//! full rule `b_α = Σ_{e∈E_p} vol_e Π_{i∈α} f_i(e)` (Eq. 19). The reduced rule is the
//! non-negative `w` (Lawson–Hanson, [`crate::nnls`]) on a sampled subset `S ⊂ E_p` that
//! minimises `‖A_S w − b‖`, grown by residual-driven sampling until the relative fit error
//! `‖A w − b‖ / ‖b‖` is at most [`CubatureOptions::tolerance`].
//!
//! Choices the paper leaves open (each with the reason):
//! - **Element → partition**: partitions are vertex sets, the rule needs element sets; an
//!   element goes to the partition holding most of its four vertices, ties to the smallest
//!   partition id. Every element lies in exactly one partition, so the per-partition rules
//!   add up to a rule for the whole mesh. A partition can own no element (then its rule is
//!   empty and its error 0).
//! - **What `u_i` is**: the scalar skinning weights by default ([`CubatureTargets::Weights`]).
//!   The paper's remark that "a single constant basis yields a rank-1 matrix and so 1
//!   sample" only holds for the scalar weights (the affine columns `φ·(x − o)` are never
//!   constant). [`CubatureTargets::WeightsAffine`] adds `φ_h·(x − o_h)/L_p` (`L_p` the
//!   partition's bounding-box diagonal, so every target is O(1) and the residual norm weighs
//!   them alike; the scaling changes no exactness).
//! - The pinned pseudo-weight `φ_D` is not a DOF and is not a target; the constant `1` is a
//!   target in its own right (with pins `Σ_h φ_h ≠ 1` near them).
//! - **Sampling is deterministic**: the paper draws `n` elements at random with probability
//!   `∝ ρ_k = (A_kᵀ r)²`; here the `n` unsampled elements of largest `ρ_k` are added (ties to
//!   the smaller element id), starting from `r = −b`. Same scores, no random state, so a
//!   rebuild reproduces the cached rule bit for bit. `n_init` = `n` =
//!   [`CubatureOptions::batch`] (the paper gives neither; default 8); once the sampled set
//!   holds twice as many elements as there are (independent) targets, each round doubles it
//!   instead, which bounds the cost of a partition that does not converge early.
//! - **Orthonormalised targets**: before fitting, the targets are replaced by an orthonormal
//!   basis of their span under the full rule: with the thin SVD `A = U Σ Vᵀ` over all the
//!   partition's elements, the fit uses `Ã = Σ_r⁻¹ U_rᵀ A`, `b̃ = Σ_r⁻¹ U_rᵀ b`, keeping the
//!   singular values above 1e-12 of the largest. The raw products are nearly dependent
//!   (partition of unity: `Σ_j φ_i φ_j = φ_i`; near-constant weights in stiff material), and
//!   the crate's NNLS works on the normal equations, so on the raw system it stalls near
//!   `cond(A)²·ε` (measured: one 2566-element stiff partition never reached 1e-9 and fell
//!   back to the full rule after 107 s; orthonormalised, 36 samples, error 7e-15, whole
//!   cubature phase 0.15 s). Exactness for `Ã` is exactness for every original target up
//!   to the dropped directions (below 1e-12 relative). Sampling scores use `Ã` and `r̃`;
//!   the stop test and the reported error use the original `A`, `b` and norm.
//! - **Tolerance**: the paper's 1e-9 (relative, Euclidean norm over the targets).
//! - **Full-rule fallback**: when every element is sampled and NNLS (on the normal
//!   equations, so its floor is about `cond(A)²·ε`) still misses the tolerance, the
//!   partition keeps the full rule (`w_e = vol_e`, exact by construction); counted in
//!   [`SmsCubature::full_rule_partitions`].
//! - Only the non-zero weights are stored (NNLS leaves most sampled elements at 0).
//!
//! N_cg (§3.7): for each partition the largest number of edge hops (BFS over tet edges
//! inside the partition; partitions are connected) from its centroid vertex to one of its
//! vertices; the mean over partitions is snapped to the closer of 20 and 40 (a mean of
//! exactly 30 goes to 40: more smoothing is the safe side, cf. the paper's kooshball).

use std::collections::VecDeque;

use rayon::prelude::*;

use super::mesh;
use super::SmsBasis;
use crate::nnls::nnls_from;
use crate::{PrecomputeError, Result};

/// Which functions the moment fitting targets (with their products up to degree 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CubatureTargets {
    /// The covering handles' skinning weights `φ_h` (dimensionless).
    Weights,
    /// `φ_h` and `φ_h·(x − o_h)/L_p` for each covering handle (the 4 scalar factors of a
    /// handle's 3×12 block, scaled to O(1)).
    WeightsAffine,
}

/// Options of the cubature fit.
#[derive(Clone, Debug, PartialEq)]
pub struct CubatureOptions {
    /// Relative fit error `‖A w − b‖/‖b‖` to reach per partition (paper: 1e-9).
    pub tolerance: f64,
    /// Elements added per sampling round, also the initial sample count (≥ 1; default 8).
    pub batch: usize,
    /// Target functions.
    pub targets: CubatureTargets,
}

impl Default for CubatureOptions {
    fn default() -> Self {
        Self {
            tolerance: 1e-9,
            batch: 8,
            targets: CubatureTargets::Weights,
        }
    }
}

/// Fit figures of one partition's rule.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PartitionFit {
    /// Elements of the partition.
    pub elements: u32,
    /// Target integrals (rows of `A`).
    pub targets: u32,
    /// Elements sampled (columns of `A` in the last NNLS solve).
    pub sampled: u32,
    /// Elements with a non-zero weight (stored samples).
    pub samples: u32,
    /// Relative fit error `‖A w − b‖/‖b‖` of the stored weights (dimensionless).
    pub fit_error: f64,
    /// The partition kept the full rule (NNLS missed the tolerance with every element).
    pub full_rule: bool,
}

/// Per-partition sparse cubature: element ids and non-negative weights (m³), in partition
/// order, element ids ascending within a partition.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SmsCubature {
    /// CSR offsets per partition (length `m + 1`).
    pub ptr: Vec<usize>,
    /// Sampled element (tet) ids.
    pub element: Vec<u32>,
    /// Weights (m³, > 0), replacing the element volume in the elastic Hessian sum.
    pub weight: Vec<f64>,
    /// Fit figures per partition.
    pub fits: Vec<PartitionFit>,
}

impl SmsCubature {
    /// Stored samples over all partitions.
    pub fn n_samples(&self) -> usize {
        self.element.len()
    }

    /// Largest relative fit error over the partitions.
    pub fn max_fit_error(&self) -> f64 {
        self.fits.iter().map(|f| f.fit_error).fold(0.0, f64::max)
    }

    /// Partitions that kept the full rule.
    pub fn full_rule_partitions(&self) -> usize {
        self.fits.iter().filter(|f| f.full_rule).count()
    }

    /// (element, weight) pairs of partition `p`.
    pub fn partition_rule(&self, p: usize) -> impl Iterator<Item = (u32, f64)> + '_ {
        let r = self.ptr[p]..self.ptr[p + 1];
        self.element[r.clone()]
            .iter()
            .copied()
            .zip(self.weight[r].iter().copied())
    }

    /// Heap bytes of the rule.
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<usize>() * self.ptr.len()
            + 4 * self.element.len()
            + 8 * self.weight.len()
            + std::mem::size_of::<PartitionFit>() * self.fits.len()
    }
}

/// Partition of each element: the partition holding most of its vertices, ties to the
/// smallest id. `part` is the vertex partition (ids `< m`).
pub fn element_partition(part: &[u32], tets: &[[u32; 4]]) -> Result<Vec<u32>> {
    tets.iter()
        .enumerate()
        .map(|(e, t)| {
            let mut ids = [0u32; 4];
            for (k, &v) in t.iter().enumerate() {
                ids[k] = *part.get(v as usize).ok_or_else(|| {
                    PrecomputeError::Invalid(format!(
                        "cubature: tet {e} references vertex {v} of {}",
                        part.len()
                    ))
                })?;
            }
            ids.sort_unstable();
            // Longest run in the sorted ids; the first (smallest id) wins ties.
            let (mut best, mut best_n, mut i) = (ids[0], 0, 0);
            while i < 4 {
                let mut j = i;
                while j < 4 && ids[j] == ids[i] {
                    j += 1;
                }
                if j - i > best_n {
                    best_n = j - i;
                    best = ids[i];
                }
                i = j;
            }
            Ok(best)
        })
        .collect()
}

/// The fitting data of one partition: its elements, the column `A_e` (targets at element
/// `e`) of each, row-major by element, and the full-rule targets `b`.
pub struct FitData {
    /// Elements of the partition (ascending).
    pub elements: Vec<u32>,
    /// Target count (rows).
    pub rows: usize,
    /// `elements.len() × rows` values, element-major: column `k` of `A` is
    /// `a[k·rows..(k+1)·rows]`.
    pub a: Vec<f64>,
    /// Full-rule target integrals `b = Σ_e vol_e A_e` (m³).
    pub b: Vec<f64>,
}

/// Builds `A` and `b` of partition `p`: `elements` its tets, `vol` all tet volumes (m³).
pub fn fit_data(
    basis: &SmsBasis,
    tets: &[[u32; 4]],
    vol: &[f64],
    elements: &[u32],
    targets: CubatureTargets,
) -> FitData {
    // Covering handles.
    let mut handles: Vec<u32> = elements
        .iter()
        .flat_map(|&e| tets[e as usize].iter())
        .flat_map(|&v| basis.vertex_weights(v as usize).map(|(h, _)| h))
        .collect();
    handles.sort_unstable();
    handles.dedup();
    let per = match targets {
        CubatureTargets::Weights => 1,
        CubatureTargets::WeightsAffine => 4,
    };
    let nf = per * handles.len();
    // Length scale of the affine factors: the partition's bounding-box diagonal.
    let scale = if per == 4 {
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        for &e in elements {
            for &v in &tets[e as usize] {
                for c in 0..3 {
                    lo[c] = lo[c].min(basis.rest[v as usize][c]);
                    hi[c] = hi[c].max(basis.rest[v as usize][c]);
                }
            }
        }
        let d = mesh::norm(mesh::sub(hi, lo));
        if d > 0.0 {
            1.0 / d
        } else {
            1.0
        }
    } else {
        1.0
    };
    let rows = 1 + nf + nf * (nf + 1) / 2;
    let mut a = vec![0.0; elements.len() * rows];
    let mut b = vec![0.0; rows];
    let mut f = vec![0.0; nf];
    for (k, &e) in elements.iter().enumerate() {
        f.fill(0.0);
        for &v in &tets[e as usize] {
            for (h, w) in basis.vertex_weights(v as usize) {
                let i = handles.binary_search(&h).unwrap_or(0);
                f[per * i] += 0.25 * w;
                if per == 4 {
                    let y = mesh::sub(basis.rest[v as usize], basis.origin[h as usize]);
                    for c in 0..3 {
                        f[per * i + 1 + c] += 0.25 * w * y[c] * scale;
                    }
                }
            }
        }
        let col = &mut a[k * rows..(k + 1) * rows];
        col[0] = 1.0;
        col[1..=nf].copy_from_slice(&f);
        let mut r = 1 + nf;
        for i in 0..nf {
            for j in i..nf {
                col[r] = f[i] * f[j];
                r += 1;
            }
        }
        let ve = vol[e as usize];
        for (bi, &ai) in b.iter_mut().zip(col.iter()) {
            *bi += ve * ai;
        }
    }
    FitData {
        elements: elements.to_vec(),
        rows,
        a,
        b,
    }
}

/// Relative error `‖Σ_k w_k A_k − b‖/‖b‖` of weights `w` on local columns `cols`.
pub fn fit_error(d: &FitData, cols: &[usize], w: &[f64]) -> f64 {
    let mut r = d.b.iter().map(|x| -x).collect::<Vec<f64>>();
    for (&k, &wk) in cols.iter().zip(w) {
        for (ri, &ai) in r.iter_mut().zip(&d.a[k * d.rows..(k + 1) * d.rows]) {
            *ri += wk * ai;
        }
    }
    let nb = d.b.iter().map(|x| x * x).sum::<f64>().sqrt();
    r.iter().map(|x| x * x).sum::<f64>().sqrt() / nb
}

/// Singular values of the full-rule matrix below this fraction of the largest are dropped
/// when the targets are orthonormalised (their share of any target is below it too).
const RANK_CUTOFF: f64 = 1e-12;

/// The targets in an orthonormal basis of their span: `Ã = Σ_r⁻¹ U_rᵀ A`, `b̃ = Σ_r⁻¹ U_rᵀ b`
/// from the thin SVD `A = U Σ Vᵀ` over all of the partition's elements, so that `Ã` over all
/// elements is `V_rᵀ` (orthonormal rows, read off the SVD). Returns (`r`, `Ã` element-major,
/// `b̃`). faer's blocked, parallel SVD: on `contact_hetero`'s 29,012-element, 741-target
/// partition (resolution 26) nalgebra's (unblocked, then `U_rᵀA` formed column by column)
/// made most of the fit's 57.6 s; now 18.5 s.
fn orthonormal_targets(d: &FitData) -> (usize, Vec<f64>, Vec<f64>) {
    let ne = d.elements.len();
    let a = faer::Mat::<f64>::from_fn(d.rows, ne, |i, k| d.a[k * d.rows + i]);
    let Ok(svd) = a.thin_svd() else {
        return (d.rows, d.a.clone(), d.b.clone());
    };
    let (u, v) = (svd.U(), svd.V());
    let sv: Vec<f64> = (0..d.rows.min(ne)).map(|i| svd.S()[i]).collect();
    let smax = sv.iter().copied().fold(0.0, f64::max);
    let keep: Vec<usize> = (0..sv.len())
        .filter(|&i| sv[i] > RANK_CUTOFF * smax)
        .collect();
    let r = keep.len();
    let mut at = vec![0.0; ne * r];
    let mut bt = vec![0.0; r];
    for (q, &i) in keep.iter().enumerate() {
        bt[q] = (0..d.rows).map(|row| u[(row, i)] * d.b[row]).sum::<f64>() / sv[i];
        for k in 0..ne {
            at[k * r + q] = v[(k, i)];
        }
    }
    (r, at, bt)
}

/// Alg. 3 on one partition: returns the stored (element, weight) pairs and the fit figures.
fn fit_partition(
    d: &FitData,
    vol: &[f64],
    opts: &CubatureOptions,
) -> (Vec<(u32, f64)>, PartitionFit) {
    let ne = d.elements.len();
    let mut fit = PartitionFit {
        elements: ne as u32,
        targets: d.rows as u32,
        ..Default::default()
    };
    if ne == 0 {
        return (Vec::new(), fit);
    }
    let (rows, at, bt) = orthonormal_targets(d);
    let mut in_set = vec![false; ne];
    let mut set: Vec<usize> = Vec::new();
    let mut w: Vec<f64> = Vec::new();
    let mut r: Vec<f64> = bt.iter().map(|x| -x).collect();
    let mut err = f64::INFINITY;
    let mut mat = Vec::new();
    while set.len() < ne {
        // Scores ρ_k = (Ã_kᵀ r̃)² of the unsampled elements; take the `batch` largest.
        let mut cand: Vec<(f64, usize)> = (0..ne)
            .filter(|&k| !in_set[k])
            .map(|k| {
                let s: f64 = at[k * rows..(k + 1) * rows]
                    .iter()
                    .zip(&r)
                    .map(|(x, y)| x * y)
                    .sum();
                (s * s, k)
            })
            .collect();
        // The paper's fixed n while the set is small; past twice the target count the set
        // doubles per round, so a partition that needs many samples (or all of them, before
        // the full-rule fallback) costs O(log) NNLS solves rather than O(elements / n).
        let n = if set.len() < 2 * rows {
            opts.batch
        } else {
            set.len()
        };
        let take = n.max(1).min(cand.len());
        cand.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
        for &(_, k) in &cand[..take] {
            in_set[k] = true;
            set.push(k);
        }
        mat.clear();
        for &k in &set {
            mat.extend_from_slice(&at[k * rows..(k + 1) * rows]);
        }
        // Warm-started from the last round's weights (the set only grows, in order).
        let mut start = std::mem::take(&mut w);
        start.resize(set.len(), 0.0);
        w = nnls_from(&mat, rows, set.len(), &bt, &start).w;
        r = bt.iter().map(|x| -x).collect();
        for (&k, &wk) in set.iter().zip(&w) {
            if wk != 0.0 {
                for (ri, &ai) in r.iter_mut().zip(&at[k * rows..(k + 1) * rows]) {
                    *ri += wk * ai;
                }
            }
        }
        // The stop test uses the original targets and norm.
        err = fit_error(d, &set, &w);
        if err <= opts.tolerance {
            break;
        }
    }
    fit.sampled = set.len() as u32;
    let mut out: Vec<(u32, f64)> = if err <= opts.tolerance {
        set.iter()
            .zip(&w)
            .filter(|(_, &wk)| wk > 0.0)
            .map(|(&k, &wk)| (d.elements[k], wk))
            .collect()
    } else {
        fit.full_rule = true;
        d.elements.iter().map(|&e| (e, vol[e as usize])).collect()
    };
    out.sort_unstable_by_key(|x| x.0);
    // Report the error of what is stored, recomputed from the stored pairs.
    let local: Vec<usize> = out
        .iter()
        .map(|(e, _)| d.elements.binary_search(e).unwrap_or(0))
        .collect();
    let ws: Vec<f64> = out.iter().map(|x| x.1).collect();
    fit.fit_error = fit_error(d, &local, &ws);
    fit.samples = out.len() as u32;
    (out, fit)
}

/// Fits the per-partition cubature of `basis` on the mesh `tets` (the mesh the basis was
/// built on). Errors on bad options or a mesh that does not match the basis.
pub fn fit_cubature(
    basis: &SmsBasis,
    tets: &[[u32; 4]],
    opts: &CubatureOptions,
) -> Result<SmsCubature> {
    if !(opts.tolerance.is_finite() && opts.tolerance > 0.0) {
        return Err(PrecomputeError::Invalid(format!(
            "cubature: `tolerance` = {} must be positive",
            opts.tolerance
        )));
    }
    if opts.batch == 0 {
        return Err(PrecomputeError::Invalid(
            "cubature: `batch` must be at least 1".into(),
        ));
    }
    let geom = mesh::geometry(&basis.rest, tets)?;
    let epart = element_partition(&basis.partition.part, tets)?;
    let m = basis.n_handles();
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); m];
    for (e, &p) in epart.iter().enumerate() {
        members[p as usize].push(e as u32);
    }
    let fitted: Vec<(Vec<(u32, f64)>, PartitionFit)> = members
        .par_iter()
        .map(|el| {
            let d = fit_data(basis, tets, &geom.vol, el, opts.targets);
            fit_partition(&d, &geom.vol, opts)
        })
        .collect();
    let mut cub = SmsCubature {
        ptr: vec![0],
        ..Default::default()
    };
    for (pairs, fit) in fitted {
        for (e, w) in pairs {
            cub.element.push(e);
            cub.weight.push(w);
        }
        cub.ptr.push(cub.element.len());
        cub.fits.push(fit);
    }
    Ok(cub)
}

/// The N_cg rule's figures.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NcgRule {
    /// Per partition: most edge hops from its centroid vertex to one of its vertices.
    pub radius: Vec<u32>,
    /// Mean of `radius` (hops).
    pub mean_radius: f64,
    /// The full-space PCG iteration count in use (the snap of `mean_radius`, or the override).
    pub n_cg: usize,
    /// Whether `n_cg` came from [`super::SmsOptions::n_cg`] rather than the rule.
    pub overridden: bool,
}

/// The paper's snap: the closer of 20 and 40 to `mean_radius` (30 → 40).
pub fn snap_n_cg(mean_radius: f64) -> usize {
    if mean_radius < 30.0 {
        20
    } else {
        40
    }
}

/// Per partition, the BFS radius in tet-edge hops from `centroid[p]` over the vertices of
/// partition `p` (`part`: partition per vertex). Errors where a centroid lies outside its
/// partition or a partition is not connected.
pub fn partition_radii(
    n_vertices: usize,
    tets: &[[u32; 4]],
    part: &[u32],
    centroid: &[u32],
) -> Result<Vec<u32>> {
    if part.len() != n_vertices {
        return Err(PrecomputeError::Invalid(format!(
            "n_cg: `part` has {} entries for {n_vertices} vertices",
            part.len()
        )));
    }
    if let Some((e, _)) = tets
        .iter()
        .enumerate()
        .find(|(_, t)| t.iter().any(|&v| v as usize >= n_vertices))
    {
        return Err(PrecomputeError::Invalid(format!(
            "n_cg: tet {e} references a vertex outside 0..{n_vertices}"
        )));
    }
    let m = centroid.len();
    if let Some(v) = part.iter().position(|&p| p as usize >= m) {
        return Err(PrecomputeError::Invalid(format!(
            "n_cg: vertex {v} is in partition {} of {m}",
            part[v]
        )));
    }
    let adj = mesh::vertex_adjacency(n_vertices, tets);
    let mut size = vec![0usize; m];
    for &p in part {
        size[p as usize] += 1;
    }
    let mut hops = vec![u32::MAX; n_vertices];
    let mut queue = VecDeque::new();
    let mut radius = Vec::with_capacity(m);
    for (p, &c) in centroid.iter().enumerate() {
        if c as usize >= n_vertices || part[c as usize] as usize != p {
            return Err(PrecomputeError::Invalid(format!(
                "n_cg: centroid {c} of partition {p} is not in it"
            )));
        }
        hops[c as usize] = 0;
        queue.push_back(c);
        let (mut reached, mut far) = (0usize, 0u32);
        while let Some(v) = queue.pop_front() {
            reached += 1;
            let hv = hops[v as usize];
            far = far.max(hv);
            for &w in &adj[v as usize] {
                if part[w as usize] as usize == p && hops[w as usize] == u32::MAX {
                    hops[w as usize] = hv + 1;
                    queue.push_back(w);
                }
            }
        }
        if reached != size[p] {
            return Err(PrecomputeError::Invalid(format!(
                "n_cg: partition {p} is not connected ({reached} of {} vertices reached)",
                size[p]
            )));
        }
        radius.push(far);
    }
    Ok(radius)
}

/// The rule: radii, their mean and the snapped count (or `override_n_cg`).
pub fn ncg_rule(
    n_vertices: usize,
    tets: &[[u32; 4]],
    part: &[u32],
    centroid: &[u32],
    override_n_cg: Option<usize>,
) -> Result<NcgRule> {
    let radius = partition_radii(n_vertices, tets, part, centroid)?;
    let mean_radius = if radius.is_empty() {
        0.0
    } else {
        radius.iter().map(|&r| r as f64).sum::<f64>() / radius.len() as f64
    };
    Ok(NcgRule {
        n_cg: override_n_cg.unwrap_or_else(|| snap_n_cg(mean_radius)),
        overridden: override_n_cg.is_some(),
        radius,
        mean_radius,
    })
}
