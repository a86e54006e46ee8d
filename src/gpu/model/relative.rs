//! The one f64 → f32 conversion of positions: relative to an origin (the rest centroid), so a
//! body far from the world origin keeps f32 digits in its deformation.

use crate::gpu::layout::GpuVec4;

/// The point `p` (m) relative to `origin` (m) as an f32 vec4 (w = 0). The difference is taken
/// in f64 and rounded once.
pub fn relative_one(p: [f64; 3], origin: [f64; 3]) -> GpuVec4 {
    [
        (p[0] - origin[0]) as f32,
        (p[1] - origin[1]) as f32,
        (p[2] - origin[2]) as f32,
        0.0,
    ]
}

/// The flat positions `x` (3n, m) relative to `origin` as f32 vec4s (n of them).
pub fn relative(x: &[f64], origin: [f64; 3]) -> Vec<GpuVec4> {
    x.chunks_exact(3)
        .map(|p| relative_one([p[0], p[1], p[2]], origin))
        .collect()
}

/// The low part of `p` (m) relative to `origin` (m): what [`relative_one`]'s f32 dropped,
/// rounded to f32 (w = 0) — the pair (high, low) is the double-f32 position of
/// [`crate::gpu::twins::double_f32`], ~48 bits.
pub fn relative_low_one(p: [f64; 3], origin: [f64; 3]) -> GpuVec4 {
    let d = [0, 1, 2].map(|k| p[k] - origin[k]);
    [
        (d[0] - d[0] as f32 as f64) as f32,
        (d[1] - d[1] as f32 as f64) as f32,
        (d[2] - d[2] as f32 as f64) as f32,
        0.0,
    ]
}

/// The low parts ([`relative_low_one`]) of the flat positions `x` (3n, m) relative to `origin`.
pub fn relative_low(x: &[f64], origin: [f64; 3]) -> Vec<GpuVec4> {
    x.chunks_exact(3)
        .map(|p| relative_low_one([p[0], p[1], p[2]], origin))
        .collect()
}
