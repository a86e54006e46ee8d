//! Distances between position vectors, shared by the benches that compare a solver's answer
//! with a reference (`#[path = "common/distance.rs"] mod distance;`).

/// The largest vertex distance between two position vectors (3n, same layout), m.
pub fn max_distance(a: &[f64], b: &[f64]) -> f64 {
    a.chunks_exact(3)
        .zip(b.chunks_exact(3))
        .map(|(p, q)| {
            ((p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2) + (p[2] - q[2]).powi(2)).sqrt()
        })
        .fold(0.0, f64::max)
}
