// Records shared by the JGS2/VBD kernels (layouts in src/gpu/layout.rs) and the 3×3 Cholesky
// solve of the local systems. The CPU twin is src/gpu/twins/jgs2.rs.
#import mat3

// `jello::gpu::GpuVertexInfo` (8 bytes).
struct VertexInfo {
    mass: f32,
    // 1 = free, 0 = pinned.
    free: u32,
}

// `jello::gpu::GpuLocalSystem` (128 bytes): primary A·δ = −r and the fallback (VBD) system,
// both without the barrier curvature.
struct LocalSystem {
    a: mat3x3<f32>,
    r: vec4<f32>,
    af: mat3x3<f32>,
    rf: vec4<f32>,
}

// Exponent-bits test (WGSL has no isnan/isinf and may assume finite arithmetic in comparisons).
fn is_finite_f32(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u;
}

// A Cholesky pivot is usable when > 0 and finite (nalgebra: zero, negative or NaN fail).
fn pivot_ok(d: f32) -> bool {
    return is_finite_f32(d) && d > 0.0;
}

struct Solve3 {
    ok: bool,
    d: vec3<f32>,
}

// δ = −A⁻¹r by Cholesky on A's lower triangle (as nalgebra does); fails (ok = false) when a
// pivot is not > 0 (negative, zero or NaN) or δ is not finite.
fn chol_solve3(a: mat3x3<f32>, r: vec3<f32>) -> Solve3 {
    var out: Solve3;
    out.ok = false;
    out.d = vec3<f32>(0.0);
    // a[c][r] is row r, column c; the lower triangle is a[c][r] with r ≥ c.
    let d0 = a[0][0];
    if !pivot_ok(d0) {
        return out;
    }
    let l00 = sqrt(d0);
    let l10 = a[0][1] / l00;
    let l20 = a[0][2] / l00;
    let d1 = a[1][1] - l10 * l10;
    if !pivot_ok(d1) {
        return out;
    }
    let l11 = sqrt(d1);
    let l21 = (a[1][2] - l20 * l10) / l11;
    let d2 = a[2][2] - l20 * l20 - l21 * l21;
    if !pivot_ok(d2) {
        return out;
    }
    let l22 = sqrt(d2);
    // L y = r, Lᵀ z = y, δ = −z.
    let y0 = r.x / l00;
    let y1 = (r.y - l10 * y0) / l11;
    let y2 = (r.z - l20 * y0 - l21 * y1) / l22;
    let z2 = y2 / l22;
    let z1 = (y1 - l21 * z2) / l11;
    let z0 = (y0 - l10 * z1 - l20 * z2) / l00;
    let d = -vec3<f32>(z0, z1, z2);
    if !(is_finite_f32(d.x) && is_finite_f32(d.y) && is_finite_f32(d.z)) {
        return out;
    }
    out.ok = true;
    out.d = d;
    return out;
}
