//! Broad-phase cost versus surface size (src/contact/broad.rs) and the intersection check
//! (src/contact/intersect.rs): generated boxes of n³ cells (12 n² surface triangles) and the
//! shared armadillo / bunny meshes (18k/20k and 110k/114k tets, skipped when ../shared is
//! absent). Per case: the collision mesh build, point–triangle + edge–edge candidates at rest
//! (d̂ = 10⁻³ × bounding-box diagonal, the scene default) and swept (every vertex displaced by a
//! random vector of up to half the mean edge length, as a large Newton step), and
//! `intersecting_pairs`; times are the median of `JELLO_BENCH_CONTACT_REPS` runs (default 7)
//! on rayon's default pool. Then a least-squares fit of log(time) against log(faces) over all
//! cases gives the scaling exponent of each column, and a sweep of the grid's cell factor on the
//! largest box and the largest shared surface (time, entries, pairs sharing a cell).
//!
//! `cargo bench --bench contact`. Env: `JELLO_BENCH_CONTACT_REPS`, `JELLO_BENCH_CONTACT_MAX_N`
//! (largest generated box, default 96).

#[path = "common/report.rs"]
#[macro_use]
mod report;

use jello::contact::{candidates, candidates_with, intersecting_pairs, BroadParams, CollisionMesh};
use jello::material::{Material, MaterialModel};
use jello::mesh::{box_grid, read_mesh, TetMesh};
use jello::problem::{BarrierParams, Body, Model};
use std::path::Path;
use std::time::Instant;

type P = [f64; 3];

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn model_of(mesh: TetMesh) -> Model {
    let (nv, nt) = (mesh.num_vertices(), mesh.num_tets());
    let mat = Material::from_young_poisson(MaterialModel::StableNeoHookean, 1e5, 0.3).unwrap();
    Model::new(
        mesh,
        vec![Body {
            name: "body".into(),
            vertices: 0..nv,
            tets: 0..nt,
        }],
        vec![mat; nt],
        vec![1000.0; nt],
        [0.0; 3],
        vec![],
        vec![],
        BarrierParams {
            dhat: 1e-3,
            kappa: 1.0,
        },
    )
    .unwrap()
}

/// Median wall time of `reps` runs of `f`, ms.
fn median_ms(reps: usize, mut f: impl FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..reps.max(1))
        .map(|_| {
            let t0 = Instant::now();
            f();
            t0.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

/// A deterministic pseudo-random value in [−1, 1) (splitmix64), so runs are comparable.
fn hash01(i: u64) -> f64 {
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}

struct Row {
    case: String,
    faces: usize,
    edges: usize,
    build_ms: f64,
    rest_ms: f64,
    rest_pairs: (usize, usize),
    swept_ms: f64,
    swept_pairs: (usize, usize),
    tested: usize,
    intersect_ms: f64,
}

/// A case's collision mesh and query inputs, kept for the cell-factor sweep.
struct Prepared {
    case: String,
    m: CollisionMesh,
    x: Vec<P>,
    dx: Vec<P>,
    dhat: f64,
}

fn run_case(case: &str, mesh: TetMesh, reps: usize) -> (Row, Prepared) {
    let diag = mesh
        .bounding_box()
        .map(|(lo, hi)| ((0..3).map(|k| (hi[k] - lo[k]).powi(2)).sum::<f64>()).sqrt())
        .unwrap_or(1.0);
    let model = model_of(mesh);
    let t0 = Instant::now();
    let m = CollisionMesh::from_model(&model).unwrap();
    let build_ms = t0.elapsed().as_secs_f64() * 1e3;
    let x = model.mesh.positions.clone();
    let half = 0.5 * m.mean_edge_length();
    let dx: Vec<P> = (0..x.len() as u64)
        .map(|v| [0, 1, 2].map(|k| half * hash01(3 * v + k)))
        .collect();
    let dhat = 1e-3 * diag;
    let mut rest = None;
    let rest_ms = median_ms(reps, || {
        rest = Some(candidates(&m, &x, None, dhat).unwrap())
    });
    let rest = rest.unwrap();
    let mut swept = None;
    let swept_ms = median_ms(reps, || {
        swept = Some(candidates(&m, &x, Some(&dx), dhat).unwrap())
    });
    let swept = swept.unwrap();
    let mut hits = 0;
    let intersect_ms = median_ms(reps, || hits = intersecting_pairs(&m, &x).unwrap().len());
    assert_eq!(hits, 0, "{case}: the rest surface intersects itself");
    let row = Row {
        case: case.to_string(),
        faces: m.faces.len(),
        edges: m.edges.len(),
        build_ms,
        rest_ms,
        rest_pairs: (rest.pt.len(), rest.ee.len()),
        swept_ms,
        swept_pairs: (swept.pt.len(), swept.ee.len()),
        tested: swept.stats.tested,
        intersect_ms,
    };
    let prepared = Prepared {
        case: case.to_string(),
        m,
        x,
        dx,
        dhat,
    };
    (row, prepared)
}

/// Least-squares slope of log y against log x.
fn exponent(x: &[f64], y: &[f64]) -> f64 {
    let lx: Vec<f64> = x.iter().map(|v| v.ln()).collect();
    let ly: Vec<f64> = y.iter().map(|v| v.ln()).collect();
    let n = lx.len() as f64;
    let (mx, my) = (lx.iter().sum::<f64>() / n, ly.iter().sum::<f64>() / n);
    let sxy: f64 = lx.iter().zip(&ly).map(|(a, b)| (a - mx) * (b - my)).sum();
    let sxx: f64 = lx.iter().map(|a| (a - mx).powi(2)).sum();
    sxy / sxx
}

fn main() {
    run();
    report::finish("contact");
}

fn run() {
    let reps = env_usize("JELLO_BENCH_CONTACT_REPS", 7);
    let max_n = env_usize("JELLO_BENCH_CONTACT_MAX_N", 96);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    out!(
        "contact broad phase: {} rayon threads, load average at start {}",
        rayon::current_num_threads(),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut cases: Vec<(String, TetMesh)> = [8usize, 16, 32, 48, 64, 96]
        .into_iter()
        .filter(|&n| n <= max_n)
        .map(|n| (format!("box {n}³"), box_grid([0.0; 3], [1.0; 3], [n, n, n])))
        .collect();
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/meshes");
    for name in ["armadillo_18k", "bunny_20k", "armadillo_114k", "bunny_110k"] {
        let p = shared.join(format!("{name}.node"));
        if p.exists() {
            cases.push((name.to_string(), read_mesh(&p).unwrap().mesh));
        } else {
            out!("note: {} absent, skipped", p.display());
        }
    }
    let mut rows = Vec::new();
    // The cell-factor sweep runs on the largest box and the largest shared mesh.
    let mut sweep: Vec<Prepared> = Vec::new();
    for (case, mesh) in cases {
        let is_box = case.starts_with("box");
        let (row, p) = run_case(&case, mesh, reps);
        match sweep
            .iter_mut()
            .find(|s| s.case.starts_with("box") == is_box)
        {
            Some(s) if s.m.faces.len() >= p.m.faces.len() => {}
            Some(s) => *s = p,
            None => sweep.push(p),
        }
        rows.push(row);
    }
    out!(
        "\n| case | faces | edges | mesh build ms | rest ms | rest pt+ee | swept ms | swept pt+ee | swept pairs sharing a cell | intersect ms |"
    );
    out!("|---|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        out!(
            "| {} | {} | {} | {:.1} | {:.2} | {}+{} | {:.2} | {}+{} | {} | {:.2} |",
            r.case,
            r.faces,
            r.edges,
            r.build_ms,
            r.rest_ms,
            r.rest_pairs.0,
            r.rest_pairs.1,
            r.swept_ms,
            r.swept_pairs.0,
            r.swept_pairs.1,
            r.tested,
            r.intersect_ms
        );
    }
    let faces: Vec<f64> = rows.iter().map(|r| r.faces as f64).collect();
    let col = |f: &dyn Fn(&Row) -> f64| rows.iter().map(f).collect::<Vec<f64>>();
    // Small cases are dominated by fixed costs (thread start-up): fit on ≥ 2,000 faces too.
    let big: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].faces >= 2000).collect();
    let sub = |v: &[f64]| big.iter().map(|&i| v[i]).collect::<Vec<f64>>();
    out!("\nscaling exponent of time in the number of faces (least squares on log–log):");
    out!("| column | all cases | faces ≥ 2,000 |");
    out!("|---|---|---|");
    for (name, v) in [
        ("mesh build", col(&|r| r.build_ms)),
        ("broad phase at rest", col(&|r| r.rest_ms)),
        ("broad phase swept", col(&|r| r.swept_ms)),
        (
            "swept candidates",
            col(&|r| (r.swept_pairs.0 + r.swept_pairs.1) as f64),
        ),
        ("intersection check", col(&|r| r.intersect_ms)),
    ] {
        let sub_fit = if big.len() >= 3 {
            format!("{:.2}", exponent(&sub(&faces), &sub(&v)))
        } else {
            "–".into()
        };
        out!("| {name} | {:.2} | {sub_fit} |", exponent(&faces, &v));
    }
    for Prepared {
        case,
        m,
        x,
        dx,
        dhat,
    } in sweep
    {
        out!("\ncell factor sweep on {case} ({} faces):", m.faces.len());
        out!("| cell factor | rest ms | swept ms | swept entries | swept pairs sharing a cell | pairs sharing a cell per candidate |");
        out!("|---|---|---|---|---|---|");
        for f in [0.5, 1.0, 1.5, 2.0, 3.0, 4.0] {
            let params = BroadParams { cell_factor: f };
            let rest_ms = median_ms(reps, || {
                candidates_with(&m, &x, None, dhat, params).unwrap();
            });
            let mut c = None;
            let ms = median_ms(reps, || {
                c = Some(candidates_with(&m, &x, Some(&dx), dhat, params).unwrap())
            });
            let c = c.unwrap();
            let n = (c.pt.len() + c.ee.len()).max(1);
            out!(
                "| {f} | {rest_ms:.2} | {ms:.2} | {} | {} | {:.1} |",
                c.stats.entries,
                c.stats.tested,
                c.stats.tested as f64 / n as f64
            );
        }
    }
}
