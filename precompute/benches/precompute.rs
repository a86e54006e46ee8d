//! JGS2 precompute bench on the shared armadillo meshes (skipped when missing).
//!
//! Linear-elastic rest Hessians (E = 1e5 Pa, ν = 0.4), ρ = 1000 kg/m³, h = 0.01 s, the top
//! 1% of vertices (by y) pinned. Prints: the precompute phases per mesh, nested dissection
//! vs AMD (analysis, factor, multi-RHS solve), and — on the smallest mesh — the cubature
//! residual versus the number of training poses.
//!
//! `PRECOMPUTE_BENCH_MESHES=armadillo_18k` restricts the meshes;
//! `PRECOMPUTE_BENCH_SWEEP=0` skips the pose sweep; `PRECOMPUTE_BENCH_ORDERINGS=0` skips the
//! ordering comparison. Each basis row is followed by a digest of the artifact with its timings
//! zeroed (FNV-1a of `artifact::encode`, streamed), so two builds of the code can be checked to produce
//! the same artifact byte for byte; `PRECOMPUTE_BENCH_SAVE=path` writes the artifact and
//! `PRECOMPUTE_BENCH_COMPARE=path` compares the run's with a saved one, number by number.
//! Issue 17's H-matrix far field: `PRECOMPUTE_BENCH_HMATRIX=global,local:60:0.1,...` builds it
//! alone once per listed `SKETCH[:SAMPLES[:LOCAL_EPS]]` (`HMatrixOptions`), in that order, and
//! prints where the build's time goes; `PRECOMPUTE_BENCH_HMATRIX_RUN=global|local` runs the
//! whole precompute with it (`Jgs2Options::far_hmatrix`, default options but the sketch)
//! instead of the default far field.
//!
//! Measured (issue 15, armadillo_114k, default options, 2 threads on this 2-core machine shared
//! with builds, so CPU-seconds rather than wall time; `/usr/bin/time -v`): with a fresh zeroed
//! solution block, solve workspace and tree-sized tables per batch and per vertex, 466 s user +
//! 99.6 s system and 44.2 million minor page faults; with them reused per worker
//! (`BatchScratch`), 466 s user + 13.8 s system and 2.5 million faults (−15% CPU), peak RSS
//! 3.89 GB, artifact digest `ecc89b394502721a` both times. Then (perf: 37% of the time in the
//! solve's scalar gathers and scatters of a column-major 65 MB block, 20% in its permutation
//! back, 11% in the tree sums reading `Ū` rows in random order, the digest's `encode` holding
//! two more copies of the 1 GB basis): the solve on row-major right-hand sides with zero
//! blocks skipped in the forward pass, batches in elimination order, `Ū`'s rows in tree order,
//! the unit right-hand sides set without a zero-filled block, the digest streamed. Measured
//! again (the machine shared as before): 492.7 s user + 21.6 s system, 490 s wall, 2.51
//! million faults, peak 3.89 GB before; 199.8 s user + 7.3 s system, 115 s wall, 1.97 million
//! faults, peak 1.88 GB (`time -v`'s maximum RSS in kB / 10⁶, as before; the input Hessians
//! dropped once `Jgs2Precompute` holds its own) after; phases factor / eigen / basis / cubature
//! 1.4 / 29.2 / 382.1 / 69.7 s before and 1.2 / 20.1 / 74.6 / 17.1 s after; digest
//! `ecc89b394502721a` unchanged. (On armadillo_18k the digest moves, `16f89a02d269680b` →
//! `22d53ea820169c69`: the same near/far structure, Â and S identical, the blocks within
//! 1.2e-16 of their largest value: the row-major products round differently in a few last
//! bits.)

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use jello_precompute::cholesky::{Ordering, SparseCholesky};
use jello_precompute::hmatrix::{partition, HMatrix, HMatrixOptions, Sketch};
use jello_precompute::jgs2::{Jgs2Input, Jgs2Options, Jgs2Precompute, Jgs2Stats};
use jello_precompute::sparse::{tet_dofs, ScatterMap, SymSparse, SymmetricPattern};
use jello_precompute::tree::ClusterTree;

/// ../shared/meshes beside the repository root (the precompute crate lives in precompute/).
fn mesh_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/meshes")
}

/// Minimal TetGen reader (.node: `n dim attrs markers` then `id x y z ...`; .ele: `n 4 attrs`
/// then `id a b c d ...`), 0- or 1-based (shifted by the first id).
type TetMeshData = (Vec<[f64; 3]>, Vec<[u32; 4]>);

fn read_tetgen(stem: &Path) -> Result<TetMeshData, String> {
    let rd = |ext: &str| -> Result<Vec<Vec<String>>, String> {
        let p = stem.with_extension(ext);
        let s = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        Ok(s.lines()
            .map(|l| {
                l.split('#')
                    .next()
                    .unwrap_or("")
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .filter(|t| !t.is_empty())
            .collect())
    };
    let node = rd("node")?;
    let ele = rd("ele")?;
    let num = |t: &str| t.parse::<f64>().map_err(|e| format!("bad number {t}: {e}"));
    let nn = num(&node[0][0])? as usize;
    let base = num(&node[1][0])? as usize;
    let mut pos = Vec::with_capacity(nn);
    for l in &node[1..=nn] {
        pos.push([num(&l[1])?, num(&l[2])?, num(&l[3])?]);
    }
    let ne = num(&ele[0][0])? as usize;
    let mut tets = Vec::with_capacity(ne);
    for l in &ele[1..=ne] {
        let mut t = [0u32; 4];
        for k in 0..4 {
            t[k] = (num(&l[1 + k])? as usize - base) as u32;
        }
        if common::signed_volume(&pos, &t) < 0.0 {
            t.swap(2, 3);
        }
        tets.push(t);
    }
    Ok((pos, tets))
}

struct Problem {
    pos: Vec<[f64; 3]>,
    tets: Vec<[u32; 4]>,
    ke: Vec<[f64; 144]>,
    shares: Vec<[f64; 4]>,
    pinned: Vec<bool>,
}

fn problem(name: &str) -> Option<Problem> {
    let (pos, tets) = match read_tetgen(&mesh_dir().join(name)) {
        Ok(m) => m,
        Err(e) => {
            println!("skipping {name}: {e}");
            return None;
        }
    };
    let (mu, la) = common::lame(1e5, 0.4);
    let ke = tets
        .iter()
        .map(|t| common::linear_elastic_ke(&pos, t, mu, la))
        .collect();
    let (shares, _) = common::lumped_mass(&pos, &tets, 1000.0);
    let mut ys: Vec<f64> = pos.iter().map(|p| p[1]).collect();
    ys.sort_by(f64::total_cmp);
    let cut = ys[ys.len() - 1 - ys.len() / 100];
    let pinned = pos.iter().map(|p| p[1] >= cut).collect();
    Some(Problem {
        pos,
        tets,
        ke,
        shares,
        pinned,
    })
}

fn input(p: &Problem) -> Jgs2Input<'_> {
    Jgs2Input {
        n_vertices: p.pos.len(),
        positions: &p.pos,
        tets: &p.tets,
        elem_hessians: &p.ke,
        elem_mass: &p.shares,
        h: 0.01,
        pinned: &p.pinned,
    }
}

fn orderings(p: &Problem) {
    let nv = p.pos.len();
    let pat = Arc::new(SymmetricPattern::from_elements(nv, 3, &p.tets).expect("pattern"));
    let map = ScatterMap::new(&pat, 12, &tet_dofs(&p.tets), None).expect("map");
    let mut a = SymSparse::zeros(pat.clone());
    for (e, ke) in p.ke.iter().enumerate() {
        a.scatter_add(&map, e, ke);
    }
    let mut md = vec![0.0; 3 * nv];
    for (t, s) in p.tets.iter().zip(&p.shares) {
        for a in 0..4 {
            for d in 0..3 {
                md[3 * t[a] as usize + d] += s[a] / 1e-4;
            }
        }
    }
    a.add_diagonal(&md);
    println!("| ordering | analyse s | factor s | L values | solve 1 RHS s | solve 96 RHS s |");
    println!("|---|---|---|---|---|---|");
    for (name, ord) in [
        (
            "METIS ND (vertex graph)",
            Ordering::NestedDissection { block: 3 },
        ),
        ("AMD", Ordering::Amd),
    ] {
        let t = Instant::now();
        let mut f = SparseCholesky::analyze(pat.clone(), ord).expect("analyse");
        let ta = t.elapsed().as_secs_f64();
        let t = Instant::now();
        f.refactor(&a).expect("factor");
        let tf = t.elapsed().as_secs_f64();
        let mut b: Vec<f64> = (0..3 * nv).map(|i| (i as f64).sin()).collect();
        let t = Instant::now();
        f.solve_in_place(&mut b).expect("solve");
        let t1 = t.elapsed().as_secs_f64();
        let mut bb: Vec<f64> = (0..3 * nv * 96).map(|i| ((i % 977) as f64).cos()).collect();
        let t = Instant::now();
        f.solve_many_in_place(&mut bb, 96).expect("solve");
        let t96 = t.elapsed().as_secs_f64();
        println!(
            "| {name} | {ta:.2} | {tf:.2} | {} | {t1:.4} | {t96:.3} |",
            f.factor_nnz()
        );
    }
}

fn sketch_kind(k: &str) -> Sketch {
    match k.trim() {
        "global" => Sketch::Global,
        "local" => Sketch::Local,
        other => panic!("H-matrix sketch: `global` or `local`, not `{other}`"),
    }
}

/// `PRECOMPUTE_BENCH_HMATRIX=global,local:60:0.1,...`: the H-matrix far field's build alone
/// (default options but the sketch and, after colons, the samples and `local_eps`) in the
/// given order, with where its time goes. Alternate the kinds
/// (`global,local,global,local`) to compare them on a shared machine.
fn hmatrix_builds(p: &Problem, pre: &Jgs2Precompute, kinds: &str) {
    let nv = p.pos.len();
    let free: Vec<u32> = (0..nv as u32).filter(|&v| !p.pinned[v as usize]).collect();
    let tree = ClusterTree::build(&p.pos, &free, Jgs2Options::default().leaf_size);
    // Per vertex, its longest incident element edge (the partition's element gap).
    let mut reach = vec![0.0f64; nv];
    for t in &p.tets {
        for &a in t {
            for &c in t {
                let (x, y) = (p.pos[a as usize], p.pos[c as usize]);
                let d =
                    ((x[0] - y[0]).powi(2) + (x[1] - y[1]).powi(2) + (x[2] - y[2]).powi(2)).sqrt();
                reach[a as usize] = reach[a as usize].max(d);
            }
        }
    }
    let part = partition(&tree, &p.pos, HMatrixOptions::default().eta, &reach);
    let mut dof_of_row: Vec<usize> = tree
        .perm
        .iter()
        .flat_map(|&v| (0..3).map(move |d| 3 * v as usize + d))
        .collect();
    dof_of_row.extend(
        (0..nv)
            .filter(|&v| p.pinned[v])
            .flat_map(|v| 3 * v..3 * v + 3),
    );
    println!(
        "\nH-matrix build alone ({} far blocks, {} tree nodes):\n\
         | sketch | active clusters | sketch s | sketch columns | local B mean / max / ∂B mean \
         | SVD s | coupling s | coupling columns | recompression s | sketch rank mean | total s \
         | rank mean / max | far KB/vertex |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        part.far.len(),
        tree.len()
    );
    for kind in kinds.split(',') {
        // `KIND[:SAMPLES[:LOCAL_EPS]]`.
        let f: Vec<&str> = kind.split(':').collect();
        let d = HMatrixOptions::default();
        let opts = HMatrixOptions {
            sketch: sketch_kind(f[0]),
            samples: f.get(1).and_then(|x| x.parse().ok()).unwrap_or(d.samples),
            local_eps: f.get(2).and_then(|x| x.parse().ok()).unwrap_or(d.local_eps),
            ..d
        };
        let t = Instant::now();
        let (hm, st) = HMatrix::build_with(
            pre.factor(),
            &tree,
            &dof_of_row,
            &part.far,
            &opts,
            Some((pre.hbar(), &p.pos)),
        )
        .expect("H-matrix build");
        let total = t.elapsed().as_secs_f64();
        let (mean, max) = hm.rank_stats();
        println!(
            "| {kind} | {} | {:.2} | {} | {:.0} / {} / {:.0} | {:.2} | {:.2} | {} | {:.2} | {:.1} \
             | {:.2} | {mean:.1} / {max} | {:.2} |",
            st.active,
            st.sketch_s,
            st.sketch_columns,
            st.local_mean,
            st.local_max,
            st.local_boundary_mean,
            st.svd_s,
            st.coupling_s,
            st.coupling_columns,
            st.recompress_s,
            st.sketch_rank_mean,
            total,
            hm.bytes_f32() as f64 / 1e3 / nv as f64
        );
    }
}

fn row(name: &str, nv: usize, s: &Jgs2Stats) {
    println!(
        "| {name} | {nv} | {} | {} | {:.2} | {:.1} | {:.1} | {:.1} | {:.1} | {:.0} | {:.3} / {:.3} / {:.3} / {:.3} | {:.0}% | {:.1} | {:.2} |",
        s.n_free,
        s.n_nodes,
        s.factor_s,
        s.basis_s,
        s.eigen_s,
        s.cubature_s,
        s.total_s,
        s.bytes_per_vertex,
        s.residual_min,
        s.residual_median,
        s.residual_p90,
        s.residual_max,
        100.0 * s.fraction_on_target,
        s.mean_near,
        s.mean_samples
    );
}

const HEADER: &str = "| mesh | vertices | free | tree nodes | factor s | basis s | eigen s | cubature s | total s | B/vertex | far residual min / med / p90 / max | ≤1% | near/vertex | samples/vertex |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|";

/// FNV-1a of the encoded artifact with every timing set to 0: equal for equal numerics.
/// Zeroes the timings in place and puts them back (no copy of the basis: the bench's peak
/// memory stays the precompute's).
fn digest(basis: &mut jello_precompute::jgs2::Jgs2Basis) -> u64 {
    let saved = basis.stats.clone();
    let s = &mut basis.stats;
    (s.factor_s, s.basis_s, s.eigen_s, s.cubature_s, s.total_s) = (0.0, 0.0, 0.0, 0.0, 0.0);
    let d = jello_precompute::artifact::encoded_fnv1a64(basis, 0);
    basis.stats = saved;
    d
}

/// Compares `basis` with the artifact at `path` (saved by another build with
/// `PRECOMPUTE_BENCH_SAVE`): the same near and far structure, and the largest difference of
/// each kind of number relative to the largest magnitude of that kind.
fn compare(basis: &jello_precompute::jgs2::Jgs2Basis, path: &Path) {
    let other = jello_precompute::artifact::read(path, 0).expect("read the saved artifact");
    let mut same_structure = basis.tree == other.tree;
    let mut diff = [0.0f64; 5];
    let mut scale = [0.0f64; 5];
    let mut upd = |q: usize, a: &[f64], b: &[f64]| {
        for (x, y) in a.iter().zip(b) {
            diff[q] = diff[q].max((x - y).abs());
            scale[q] = scale[q].max(x.abs());
        }
    };
    for (a, b) in basis.vertices.iter().zip(&other.vertices) {
        same_structure &= a.near_vertices == b.near_vertices && a.far_nodes == b.far_nodes;
        upd(0, &a.a_hat, &b.a_hat);
        upd(1, &a.schur, &b.schur);
        if a.near_vertices == b.near_vertices {
            upd(
                2,
                a.near_blocks.as_flattened(),
                b.near_blocks.as_flattened(),
            );
        }
        if a.far_nodes == b.far_nodes {
            upd(3, a.far_blocks.as_flattened(), b.far_blocks.as_flattened());
            upd(4, a.far_slopes.as_flattened(), b.far_slopes.as_flattened());
        }
    }
    let rel: Vec<String> = ["Â", "S", "near", "far", "slopes"]
        .iter()
        .zip(diff.iter().zip(&scale))
        .map(|(n, (d, s))| format!("{n} {:.1e}", d / s.max(f64::MIN_POSITIVE)))
        .collect();
    println!(
        "against {}: same near/far structure: {same_structure}; largest relative differences: {}",
        path.display(),
        rel.join(", ")
    );
}

/// The process's peak resident set so far (Linux `VmHWM`), MB; `None` elsewhere.
fn peak_rss_mb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024)
}

fn main() {
    let meshes = std::env::var("PRECOMPUTE_BENCH_MESHES")
        .unwrap_or_else(|_| "armadillo_18k,armadillo_114k".into());
    let sweep = std::env::var("PRECOMPUTE_BENCH_SWEEP")
        .map(|v| v != "0")
        .unwrap_or(true);
    println!("threads: {}", rayon::current_num_threads());
    let mut rows = Vec::new();
    for (mi, name) in meshes.split(',').enumerate() {
        let Some(mut p) = problem(name) else { continue };
        println!(
            "\n## {name}: {} vertices, {} tets, {} pinned",
            p.pos.len(),
            p.tets.len(),
            p.pinned.iter().filter(|x| **x).count()
        );
        if std::env::var("PRECOMPUTE_BENCH_ORDERINGS").map_or(true, |v| v != "0") {
            orderings(&p);
        }
        let pre = match Jgs2Precompute::new(&input(&p), Ordering::default()) {
            Ok(pre) => pre,
            Err(e) => {
                println!("precompute failed: {e}");
                continue;
            }
        };
        // As the solver's build does: `pre` holds its own H̄_e, so the input Hessians (129 MB on
        // armadillo_114k) need not add to the run's peak.
        p.ke = Vec::new();
        let peak_setup = peak_rss_mb();
        if let Ok(kinds) = std::env::var("PRECOMPUTE_BENCH_HMATRIX") {
            hmatrix_builds(&p, &pre, &kinds);
        }
        let opts = Jgs2Options {
            far_hmatrix: std::env::var("PRECOMPUTE_BENCH_HMATRIX_RUN").ok().map(|k| {
                HMatrixOptions {
                    sketch: sketch_kind(&k),
                    ..HMatrixOptions::default()
                }
            }),
            ..Jgs2Options::default()
        };
        let mut basis = pre.run(&opts).expect("jgs2");
        let peak_run = peak_rss_mb();
        println!("{HEADER}");
        row(name, p.pos.len(), &basis.stats);
        if opts.far_hmatrix.is_some() {
            let s = &basis.stats;
            println!(
                "H-matrix field: build {:.2} s, {} far blocks, rank mean {:.1} max {}",
                s.hmatrix_s, s.hmatrix_blocks, s.hmatrix_mean_rank, s.hmatrix_max_rank
            );
        }
        println!(
            "artifact digest (timings zeroed): {:016x}",
            digest(&mut basis)
        );
        if let Ok(path) = std::env::var("PRECOMPUTE_BENCH_SAVE") {
            jello_precompute::artifact::write(Path::new(&path), &basis, 0).expect("save");
        }
        if let Ok(path) = std::env::var("PRECOMPUTE_BENCH_COMPARE") {
            compare(&basis, Path::new(&path));
        }
        println!(
            "peak RSS (VmHWM, MB): {} after the input and factor, {} after the precompute, {} \
             after the digest",
            peak_setup.map_or("?".into(), |m| m.to_string()),
            peak_run.map_or("?".into(), |m| m.to_string()),
            peak_rss_mb().map_or("?".into(), |m| m.to_string())
        );
        rows.push((name.to_owned(), p.pos.len(), basis.stats.clone()));
        if sweep && mi == 0 {
            println!("\npose sweep on {name}:");
            println!("{HEADER}");
            for modes in [3, 6, 12] {
                let o = Jgs2Options {
                    n_modes: modes,
                    ..Jgs2Options::default()
                };
                let s = pre.run(&o).expect("jgs2").stats;
                row(&format!("{name}, {modes} poses"), p.pos.len(), &s);
            }
        }
    }
    let d = Jgs2Options::default();
    println!(
        "\n## summary (defaults: {} poses, {}-vertex leaves, far tolerance {}, far order {}, no \
         cubature compression)\n{HEADER}",
        d.n_modes, d.leaf_size, d.far_tolerance, d.far_order
    );
    for (n, nv, s) in &rows {
        row(n, *nv, s);
    }
}
