//! The symmetric sparse product `SymSparse::mul_vec` — the full-space H·v of the multilevel
//! smoother and of every Newton-PCG, QN and PD solve — sequential (a one-thread rayon pool) and
//! parallel (the default pool: one column range per thread, summed), on the elastic pattern
//! of a box grid's tets (3 DOFs per vertex), so the speed-up stated in
//! `src/solver/multilevel/mod.rs` can be rerun.
//!
//! `cargo bench --bench sparse_product`. Env: `JELLO_BENCH_SPMV_CELLS` (cells per side,
//! default 27: 28³ vertices, 65,856 DOFs), `JELLO_BENCH_SPMV_REPS` (products per row, default
//! 200). Both rows come from one run; the ratio, not the times, carries across machines.

#[path = "common/report.rs"]
#[macro_use]
mod report;

use jello::mesh::box_grid;
use jello_precompute::sparse::{SymSparse, SymmetricPattern};
use std::sync::Arc;
use std::time::Instant;

fn env(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn main() {
    run();
    report::finish("sparse_product");
}

fn run() {
    let cells = env("JELLO_BENCH_SPMV_CELLS", 27);
    let reps = env("JELLO_BENCH_SPMV_REPS", 200).max(1);
    let mesh = box_grid([0.0; 3], [1.0; 3], [cells; 3]);
    let pattern =
        Arc::new(SymmetricPattern::from_elements(mesh.num_vertices(), 3, &mesh.tets).unwrap());
    // Deterministic, non-trivial values and vector (the timing does not depend on them).
    let values = (0..pattern.nnz())
        .map(|k| ((k * 7919) % 1000) as f64 / 1000.0 - 0.5)
        .collect();
    let a = SymSparse::from_values(pattern.clone(), values).unwrap();
    let n = a.n();
    let x: Vec<f64> = (0..n).map(|i| ((i * 31) % 97) as f64 / 97.0).collect();
    let time = |pool: &rayon::ThreadPool| -> (f64, Vec<f64>) {
        let mut y = vec![0.0; n];
        pool.install(|| {
            a.mul_vec(&x, &mut y); // warm-up (scratch vectors, caches)
            let t = Instant::now();
            for _ in 0..reps {
                a.mul_vec(&x, &mut y);
            }
            (t.elapsed().as_secs_f64() * 1e3 / reps as f64, y)
        })
    };
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let all = rayon::ThreadPoolBuilder::new().build().unwrap();
    let (t1, y1) = time(&one);
    let (tn, yn) = time(&all);
    let diff = y1
        .iter()
        .zip(&yn)
        .map(|(p, q)| (p - q).abs())
        .fold(0.0, f64::max);
    let scale = y1.iter().map(|v| v.abs()).fold(0.0, f64::max);
    out!(
        "\nSymSparse::mul_vec on a {cells}³-cell box grid's elastic pattern: {n} DOFs, {} stored \
         entries, {reps} products per row\n",
        pattern.nnz()
    );
    out!("| threads | ms per product | vs sequential |");
    out!("|---|---|---|");
    out!("| 1 (sequential) | {t1:.3} | 1× |");
    out!(
        "| {} (parallel) | {tn:.3} | {:.2}× faster |",
        all.current_num_threads(),
        t1 / tn
    );
    out!(
        "\nlargest difference between the two: {:.1e} of the largest entry",
        diff / scale
    );
}
