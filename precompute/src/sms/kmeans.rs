//! Material-aware K-means partitions (SMS paper §3.6): kmeans++ seeding and Lloyd
//! relaxation on stiffness-weighted heat geodesics, with over-sampling and pruning of small
//! clusters, then a connectivity repair.

use super::geodesic::HeatGeodesic;
use super::mesh;
use crate::rng::SplitMix64;
use crate::{PrecomputeError, Result};
use rayon::prelude::*;
use std::collections::HashMap;

/// Options of the partitioning. Defaults follow the paper where it gives a value.
#[derive(Clone, Debug)]
pub struct PartitionOptions {
    /// Final number of partitions (= SMS handles); ≥ 1 and ≤ the number of vertices.
    pub k: usize,
    /// Jump-penalty factor `c` (dimensionless, paper 0.1–0.5): metric stiffness of tets at
    /// material interfaces, as a fraction of the softest material.
    pub jump_factor: f64,
    /// Over-sampling: K-means starts with `ceil(oversample · k)` clusters (≥ 1.0).
    pub oversample: f64,
    /// Prune every this many Lloyd iterations (paper: 10; 5 for the kooshball).
    pub prune_every: usize,
    /// A cluster is a pruning candidate when `median volume / its volume` exceeds this
    /// (paper: 1.75).
    pub prune_ratio: f64,
    /// Lloyd iterations at most (it stops earlier when the centres stop moving).
    pub max_iters: usize,
    /// Seed of the deterministic kmeans++ draws.
    pub seed: u64,
}

impl PartitionOptions {
    /// Paper defaults for `k` partitions: c = 0.25, 1.5× over-sampling, pruning every 10
    /// iterations at ratio 1.75, at most 60 Lloyd iterations, seed 0.
    pub fn new(k: usize) -> Self {
        Self {
            k,
            jump_factor: 0.25,
            oversample: 1.5,
            prune_every: 10,
            prune_ratio: 1.75,
            max_iters: 60,
            seed: 0,
        }
    }
}

/// A vertex partition.
#[derive(Clone, Debug, PartialEq)]
pub struct Partitioning {
    /// Partition of each vertex.
    pub part: Vec<u32>,
    /// Centroid vertex of each partition (the handle's location).
    pub centroid: Vec<u32>,
    /// Sorted neighbour partitions of each partition (sharing a tet edge, i.e. adjacent
    /// through a tet face or edge).
    pub neighbours: Vec<Vec<u32>>,
    /// Lloyd iterations run.
    pub lloyd_iters: usize,
    /// Vertices moved by the connectivity repair.
    pub repaired_vertices: usize,
}

pub(crate) struct Ctx<'a> {
    pub x: &'a [[f64; 3]],
    pub adj: &'a [Vec<u32>],
    pub vvol: &'a [f64],
    pub pinned: &'a [bool],
    pub component: &'a [u32],
}

/// Geodesic distance fields by source vertex, kept while their source is a centre. Lloyd
/// moves few centres once it settles, `assign` runs up to three times per iteration on the
/// same centres, and the seeding already computed the first fields: each field is computed
/// once per source instead of once per call. Missing fields are computed in parallel (one
/// heat and one Poisson solve each on the shared factors). A field depends only on its
/// source, so the labels are those of recomputing every field, bit for bit.
struct Fields<'g> {
    geo: &'g HeatGeodesic,
    map: HashMap<usize, Vec<f64>>,
    /// Fields computed so far (distance solves).
    computed: usize,
}

impl<'g> Fields<'g> {
    fn new(geo: &'g HeatGeodesic) -> Self {
        Fields {
            geo,
            map: HashMap::new(),
            computed: 0,
        }
    }

    /// The field of `s` (0 at `s` itself), computed now.
    fn compute(geo: &HeatGeodesic, s: usize) -> Result<Vec<f64>> {
        let mut d = vec![0.0; geo.n()];
        geo.distance(s, &mut d)?;
        d[s] = 0.0;
        Ok(d)
    }

    /// Keeps the fields of `centres` only and computes the missing ones.
    fn prepare(&mut self, centres: &[usize]) -> Result<()> {
        self.map.retain(|s, _| centres.contains(s));
        let mut missing: Vec<usize> = centres
            .iter()
            .copied()
            .filter(|s| !self.map.contains_key(s))
            .collect();
        missing.sort_unstable();
        missing.dedup();
        let geo = self.geo;
        let fields: Vec<Result<Vec<f64>>> =
            missing.par_iter().map(|&s| Self::compute(geo, s)).collect();
        for (s, f) in missing.into_iter().zip(fields) {
            self.map.insert(s, f?);
            self.computed += 1;
        }
        Ok(())
    }

    /// The field of `s` (after [`Self::prepare`] with `s` among the centres, or computed and
    /// stored now).
    fn get(&mut self, s: usize) -> Result<&[f64]> {
        if !self.map.contains_key(&s) {
            let d = Self::compute(self.geo, s)?;
            self.map.insert(s, d);
            self.computed += 1;
        }
        Ok(&self.map[&s])
    }
}

/// Nearest-centre labels.
fn assign(fields: &mut Fields, centres: &[usize], n: usize) -> Result<Vec<u32>> {
    fields.prepare(centres)?;
    let mut label = vec![u32::MAX; n];
    let mut best = vec![f64::INFINITY; n];
    for (c, &s) in centres.iter().enumerate() {
        let d = fields.get(s)?;
        for v in 0..n {
            // Strict `<` (first centre wins ties) keeps the result deterministic; the
            // centre itself always wins its own vertex (distance 0, set by `Fields`, and other
            // centres reach it at ≥ 0 with ties broken by index: centres are distinct).
            if d[v] < best[v] || (v == s) {
                best[v] = if v == s { -1.0 } else { d[v] };
                label[v] = c as u32;
            }
        }
    }
    Ok(label)
}

/// Volume centroid of each cluster snapped to the nearest vertex of the cluster, preferring
/// free (unpinned) vertices so that a handle's `u = 1` never sits on a pin.
fn centroids(ctx: &Ctx, label: &[u32], m: usize) -> Vec<usize> {
    let mut acc = vec![[0.0; 4]; m];
    for (v, &l) in label.iter().enumerate() {
        let w = ctx.vvol[v];
        let a = &mut acc[l as usize];
        for i in 0..3 {
            a[i] += w * ctx.x[v][i];
        }
        a[3] += w;
    }
    let mut best = vec![(usize::MAX, true, f64::INFINITY); m];
    for (v, &l) in label.iter().enumerate() {
        let a = acc[l as usize];
        let c = [a[0] / a[3], a[1] / a[3], a[2] / a[3]];
        let d = mesh::norm(mesh::sub(ctx.x[v], c));
        let key = (ctx.pinned[v], d);
        let b = &mut best[l as usize];
        if b.0 == usize::MAX || key < (b.1, b.2) {
            *b = (v, ctx.pinned[v], d);
        }
    }
    best.into_iter().map(|b| b.0).collect()
}

fn cluster_volumes(ctx: &Ctx, label: &[u32], m: usize) -> Vec<f64> {
    let mut vol = vec![0.0; m];
    for (v, &l) in label.iter().enumerate() {
        vol[l as usize] += ctx.vvol[v];
    }
    vol
}

/// Clusters whose mesh component has no other cluster must survive pruning (a component
/// with no centre would have no distance to any centre).
fn only_in_component(ctx: &Ctx, centres: &[usize]) -> Vec<bool> {
    let n_comp = ctx
        .component
        .iter()
        .map(|&c| c as usize + 1)
        .max()
        .unwrap_or(0);
    let mut count = vec![0usize; n_comp];
    for &s in centres {
        count[ctx.component[s] as usize] += 1;
    }
    centres
        .iter()
        .map(|&s| count[ctx.component[s] as usize] == 1)
        .collect()
}

/// kmeans++ (Arthur & Vassilvitskii) with the geodesic: each new seed is drawn with
/// probability ∝ vertex volume · D², D the distance to the nearest seed so far. A vertex of a
/// mesh component that has no seed yet (D = ∞) is taken first, so every object gets one.
fn seed(fields: &mut Fields, ctx: &Ctx, m: usize, rng: &mut SplitMix64) -> Result<Vec<usize>> {
    let n = ctx.x.len();
    let total: f64 = ctx.vvol.iter().sum();
    let pick = |w: &dyn Fn(usize) -> f64, sum: f64, rng: &mut SplitMix64| {
        let mut r = rng.next_f64() * sum;
        let mut last = 0;
        for v in 0..n {
            let wv = w(v);
            if wv > 0.0 {
                last = v;
                if r < wv {
                    return v;
                }
                r -= wv;
            }
        }
        last
    };
    let first = pick(&|v| ctx.vvol[v], total, rng);
    let mut centres = vec![first];
    let mut dmin = vec![f64::INFINITY; n];
    while centres.len() < m {
        let s = *centres.last().unwrap_or(&first);
        let d = fields.get(s)?;
        for v in 0..n {
            dmin[v] = dmin[v].min(d[v]);
        }
        for &c in &centres {
            dmin[c] = 0.0;
        }
        let next = if let Some(v) = (0..n).find(|&v| dmin[v].is_infinite()) {
            v
        } else {
            let sum: f64 = (0..n).map(|v| ctx.vvol[v] * dmin[v] * dmin[v]).sum();
            if sum.is_nan() || sum <= 0.0 {
                break; // every vertex is a centre already
            }
            pick(&|v| ctx.vvol[v] * dmin[v] * dmin[v], sum, rng)
        };
        if centres.contains(&next) {
            break;
        }
        centres.push(next);
    }
    Ok(centres)
}

/// K-means partition into exactly `opts.k` connected vertex partitions.
pub(crate) fn kmeans(
    geo: &HeatGeodesic,
    ctx: &Ctx,
    opts: &PartitionOptions,
) -> Result<Partitioning> {
    let n = ctx.x.len();
    let k = opts.k;
    let m0 = ((opts.oversample.max(1.0) * k as f64).ceil() as usize).clamp(k, n);
    let mut rng = SplitMix64::new(opts.seed ^ 0x5EED_5EED_5EED_5EED);
    let mut fields = Fields::new(geo);
    let mut centres = seed(&mut fields, ctx, m0, &mut rng)?;
    let mut label = assign(&mut fields, &centres, n)?;
    let mut iters = 0;
    for it in 1..=opts.max_iters {
        iters = it;
        let mut pruned = false;
        if opts.prune_every > 0 && it % opts.prune_every == 0 && centres.len() > k {
            pruned = prune(ctx, &mut centres, &label, opts.prune_ratio, k);
        }
        if pruned {
            label = assign(&mut fields, &centres, n)?;
        }
        let new = centroids(ctx, &label, centres.len());
        let moved = new != centres;
        centres = new;
        label = assign(&mut fields, &centres, n)?;
        if !moved && !pruned {
            if centres.len() == k {
                break;
            }
            // Converged while still over-sampled: drop the smallest cluster and go on
            // relaxing (the pruning rule found no candidate, so the clusters are balanced).
            if !drop_smallest(ctx, &mut centres, &label) {
                break;
            }
            label = assign(&mut fields, &centres, n)?;
        }
    }
    // Still over-sampled after the iteration budget: drop the smallest clusters one by one.
    while centres.len() > k {
        if !drop_smallest(ctx, &mut centres, &label) {
            break;
        }
        label = assign(&mut fields, &centres, n)?;
        centres = centroids(ctx, &label, centres.len());
        label = assign(&mut fields, &centres, n)?;
    }
    let repaired = repair_connectivity(ctx, &mut label, centres.len());
    // Drop partitions left empty, renumber densely.
    let m = centres.len();
    let mut used = vec![false; m];
    for &l in &label {
        used[l as usize] = true;
    }
    let mut remap = vec![u32::MAX; m];
    let mut next = 0u32;
    for c in 0..m {
        if used[c] {
            remap[c] = next;
            next += 1;
        }
    }
    for l in &mut label {
        *l = remap[*l as usize];
    }
    let m = next as usize;
    let centroid = centroids(ctx, &label, m)
        .into_iter()
        .map(|v| v as u32)
        .collect();
    let mut neighbours = vec![Vec::new(); m];
    for (v, nb) in ctx.adj.iter().enumerate() {
        for &w in nb {
            let (a, b) = (label[v], label[w as usize]);
            if a != b {
                neighbours[a as usize].push(b);
            }
        }
    }
    for l in &mut neighbours {
        l.sort_unstable();
        l.dedup();
    }
    Ok(Partitioning {
        part: label,
        centroid,
        neighbours,
        lloyd_iters: iters,
        repaired_vertices: repaired,
    })
}

/// Removes the smallest cluster that is not the only one of its mesh component; false when
/// there is none.
fn drop_smallest(ctx: &Ctx, centres: &mut Vec<usize>, label: &[u32]) -> bool {
    let vol = cluster_volumes(ctx, label, centres.len());
    let keep = only_in_component(ctx, centres);
    let victim = (0..centres.len())
        .filter(|&c| !keep[c])
        .min_by(|&a, &b| vol[a].total_cmp(&vol[b]));
    match victim {
        Some(v) => {
            centres.remove(v);
            true
        }
        None => false,
    }
}

/// Deletes every pruning candidate (median volume / volume > ratio), smallest first, but
/// never below `k` clusters and never the only cluster of a mesh component (the paper's
/// "delete the n smallest candidates" with n left open: we take all of them).
fn prune(ctx: &Ctx, centres: &mut Vec<usize>, label: &[u32], ratio: f64, k: usize) -> bool {
    let vol = cluster_volumes(ctx, label, centres.len());
    let mut sorted = vol.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let keep = only_in_component(ctx, centres);
    let mut cand: Vec<usize> = (0..centres.len())
        .filter(|&c| !keep[c] && median > ratio * vol[c])
        .collect();
    cand.sort_by(|&a, &b| vol[a].total_cmp(&vol[b]));
    cand.truncate(centres.len() - k);
    if cand.is_empty() {
        return false;
    }
    cand.sort_unstable();
    for &c in cand.iter().rev() {
        centres.remove(c);
    }
    true
}

/// Makes every partition connected in the vertex graph: while a partition has more than one
/// piece, its pieces other than the largest (by volume) are handed to the neighbouring
/// partition they share most edges with. A handed-over piece touches that partition, so the
/// receiving piece stays connected and the total piece count drops; the loop terminates.
/// Returns the number of vertices moved. (A piece without any neighbouring partition is a
/// whole mesh component; that cannot be split off a cluster since K-means never assigns
/// across components.)
fn repair_connectivity(ctx: &Ctx, label: &mut [u32], m: usize) -> usize {
    let n = label.len();
    let mut moved = 0;
    loop {
        // Pieces: components of the graph restricted to same-label edges.
        let mut piece = vec![u32::MAX; n];
        let mut piece_label = Vec::new();
        let mut piece_vol = Vec::new();
        let mut stack = Vec::new();
        for s in 0..n {
            if piece[s] != u32::MAX {
                continue;
            }
            let p = piece_label.len() as u32;
            piece[s] = p;
            stack.push(s);
            let mut vol = 0.0;
            while let Some(v) = stack.pop() {
                vol += ctx.vvol[v];
                for &w in &ctx.adj[v] {
                    let w = w as usize;
                    if piece[w] == u32::MAX && label[w] == label[s] {
                        piece[w] = p;
                        stack.push(w);
                    }
                }
            }
            piece_label.push(label[s]);
            piece_vol.push(vol);
        }
        if piece_label.len() <= m {
            return moved;
        }
        let mut main = vec![usize::MAX; m];
        for (p, &l) in piece_label.iter().enumerate() {
            let c = &mut main[l as usize];
            if *c == usize::MAX || piece_vol[p] > piece_vol[*c] {
                *c = p;
            }
        }
        // Smallest stray piece first.
        let stray = (0..piece_label.len())
            .filter(|&p| main[piece_label[p] as usize] != p)
            .min_by(|&a, &b| piece_vol[a].total_cmp(&piece_vol[b]));
        let Some(stray) = stray else { return moved };
        let mut votes = vec![0usize; m];
        for v in 0..n {
            if piece[v] as usize == stray {
                for &w in &ctx.adj[v] {
                    if piece[w as usize] as usize != stray {
                        votes[label[w as usize] as usize] += 1;
                    }
                }
            }
        }
        let target = (0..m)
            .filter(|&c| votes[c] > 0)
            .max_by_key(|&c| (votes[c], usize::MAX - c));
        let Some(target) = target else {
            // Unreachable by construction (see above); stop rather than loop.
            return moved;
        };
        for v in 0..n {
            if piece[v] as usize == stray {
                label[v] = target as u32;
                moved += 1;
            }
        }
    }
}

/// Checks `k` against the mesh: ≥ 1, ≤ vertex count, ≥ number of mesh components.
pub(crate) fn check_k(k: usize, n: usize, n_components: usize) -> Result<()> {
    if k == 0 {
        return Err(PrecomputeError::Invalid(
            "sms: `k` (partition count) must be ≥ 1".into(),
        ));
    }
    if k > n {
        return Err(PrecomputeError::Invalid(format!(
            "sms: `k` = {k} exceeds the vertex count {n}"
        )));
    }
    if k < n_components {
        return Err(PrecomputeError::Invalid(format!(
            "sms: `k` = {k} is smaller than the number of mesh components {n_components} (one handle each at least)"
        )));
    }
    Ok(())
}

/// The integration tests' fixtures (the Kuhn-split box grid), shared with the unit tests.
#[cfg(test)]
#[path = "../../tests/common/mod.rs"]
mod common;

#[cfg(test)]
mod tests {
    use super::common;
    use super::*;

    /// A path 0–1–…–7 labelled [0 0 1 1 0 0 1 1]: both partitions come in two pieces. After
    /// the repair every partition must be one piece (checked by walking the path).
    #[test]
    fn repair_makes_partitions_connected() {
        let n = 8;
        let adj: Vec<Vec<u32>> = (0..n)
            .map(|v: usize| {
                let mut l = Vec::new();
                if v > 0 {
                    l.push(v as u32 - 1);
                }
                if v + 1 < n {
                    l.push(v as u32 + 1);
                }
                l
            })
            .collect();
        let x: Vec<[f64; 3]> = (0..n).map(|v| [v as f64, 0.0, 0.0]).collect();
        // Unequal volumes so that the largest piece of each partition is unambiguous.
        let vvol = [1.0, 1.0, 1.0, 1.0, 3.0, 3.0, 0.5, 0.5];
        let pinned = vec![false; n];
        let component = vec![0u32; n];
        let ctx = Ctx {
            x: &x,
            adj: &adj,
            vvol: &vvol,
            pinned: &pinned,
            component: &component,
        };
        let mut label = vec![0, 0, 1, 1, 0, 0, 1, 1];
        let moved = repair_connectivity(&ctx, &mut label, 2);
        assert!(moved > 0);
        // Each label appears as one contiguous run on the path.
        let runs = 1 + label.windows(2).filter(|w| w[0] != w[1]).count();
        let distinct = {
            let mut l = label.clone();
            l.sort_unstable();
            l.dedup();
            l.len()
        };
        assert_eq!(runs, distinct, "labels {label:?} not contiguous");
        // Partition 0's main piece is {4, 5} (volume 6): it must still be labelled 0.
        assert_eq!(&label[4..6], &[0, 0]);
    }

    /// The field cache returns, for every centre, the field a fresh solve gives (bit for bit),
    /// computes each source once while it stays a centre, and drops the fields of centres
    /// that left.
    #[test]
    fn fields_are_fresh_solves_computed_once_per_centre() {
        let (x, tets) = common::box_grid(8, 3, 3, 0.1);
        let geo = HeatGeodesic::new(&x, &tets, &vec![1.0; tets.len()]).unwrap();
        let n = x.len();
        let fresh = |s: usize| {
            let mut d = vec![0.0; n];
            geo.distance(s, &mut d).unwrap();
            d[s] = 0.0;
            d
        };
        let mut fields = Fields::new(&geo);
        let a = [3, 40, 77, 120];
        let b = [40, 120, 9, 143];
        fields.prepare(&a).unwrap();
        assert_eq!(fields.computed, 4);
        fields.prepare(&a).unwrap();
        assert_eq!(
            fields.computed, 4,
            "the same centres again: nothing to solve"
        );
        fields.prepare(&b).unwrap();
        assert_eq!(fields.computed, 6, "two new centres, two kept");
        assert_eq!(
            fields.map.len(),
            4,
            "the fields of centres 3 and 77 are dropped"
        );
        for s in b {
            assert!(
                fields.get(s).unwrap() == fresh(s).as_slice(),
                "field of {s} differs from a fresh solve"
            );
        }
        assert_eq!(fields.computed, 6);
        // The labels of `assign` are the nearest centre by the fresh fields.
        let label = assign(&mut fields, &b, n).unwrap();
        let f: Vec<Vec<f64>> = b.iter().map(|&s| fresh(s)).collect();
        for v in 0..n {
            let l = label[v] as usize;
            for (c, fc) in f.iter().enumerate() {
                assert!(
                    f[l][v] <= fc[v],
                    "vertex {v}: centre {c} is nearer than {l}"
                );
            }
        }
    }
}
