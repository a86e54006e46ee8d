// Block (a, b) of element e's 12×12 Hessian in the kernel's `hess` binding (144 f32 per element,
// row-major, dofs vertex-major): rows 3a..3a+3, columns 3b..3b+3, as a column-major mat3x3.
fn hess_block(e: u32, a: u32, b: u32) -> mat3x3<f32> {
    let base = 144u * e + 36u * a + 3u * b;
    return mat3x3<f32>(
        vec3<f32>(hess[base], hess[base + 12u], hess[base + 24u]),
        vec3<f32>(hess[base + 1u], hess[base + 13u], hess[base + 25u]),
        vec3<f32>(hess[base + 2u], hess[base + 14u], hess[base + 26u]),
    );
}
