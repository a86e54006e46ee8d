// Small 3×3 helpers (twins in src/gpu/twins/jgs2.rs use glam's equivalents).

fn mat3_identity() -> mat3x3<f32> {
    return mat3x3<f32>(vec3<f32>(1.0, 0.0, 0.0), vec3<f32>(0.0, 1.0, 0.0), vec3<f32>(0.0, 0.0, 1.0));
}

fn mat3_zero() -> mat3x3<f32> {
    return mat3x3<f32>(vec3<f32>(0.0), vec3<f32>(0.0), vec3<f32>(0.0));
}

// a·bᵀ.
fn outer_vv(a: vec3<f32>, b: vec3<f32>) -> mat3x3<f32> {
    return mat3x3<f32>(a * b.x, a * b.y, a * b.z);
}
