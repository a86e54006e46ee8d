// 3×3 linear algebra in f32 shared by the element kernels. The CPU twins in
// src/gpu/twins/linalg.rs mirror these functions operation for operation.

// Number of cyclic Jacobi sweeps. Jacobi converges quadratically; 6 sweeps bring the
// off-diagonal of a symmetric 3×3 below f32 rounding for any conditioning we meet.
const JACOBI_SWEEPS: u32 = 6u;

struct Eig3 {
    // Eigenvalues, sorted descending.
    values: vec3<f32>,
    // Orthonormal eigenvectors as columns, det = +1.
    vectors: mat3x3<f32>,
}

// One Jacobi rotation zeroing a[q][p] (= a[p][q]) of the symmetric matrix *a; V ← V·J.
fn jacobi_rotate(a: ptr<function, mat3x3<f32>>, v: ptr<function, mat3x3<f32>>, p: u32, q: u32) {
    let apq = (*a)[q][p];
    if abs(apq) <= 1e-30 {
        return;
    }
    let theta = ((*a)[q][q] - (*a)[p][p]) / (2.0 * apq);
    var t: f32;
    if abs(theta) > 1e15 {
        // θ² would overflow; t ≈ 1/(2θ).
        t = 0.5 / theta;
    } else {
        t = sign_nonzero(theta) / (abs(theta) + sqrt(theta * theta + 1.0));
    }
    let c = 1.0 / sqrt(t * t + 1.0);
    let s = t * c;
    var j = mat3x3<f32>(vec3<f32>(1.0, 0.0, 0.0), vec3<f32>(0.0, 1.0, 0.0), vec3<f32>(0.0, 0.0, 1.0));
    j[p][p] = c;
    j[q][q] = c;
    j[q][p] = s;
    j[p][q] = -s;
    var r = transpose(j) * (*a) * j;
    r[q][p] = 0.0;
    r[p][q] = 0.0;
    *a = r;
    *v = (*v) * j;
}

fn sign_nonzero(x: f32) -> f32 {
    if x < 0.0 {
        return -1.0;
    }
    return 1.0;
}

// Eigen-decomposition of a symmetric 3×3 by cyclic Jacobi; eigenvalues sorted descending,
// eigenvector matrix made a rotation (det +1) by flipping the last column when needed.
fn sym_eig3(m: mat3x3<f32>) -> Eig3 {
    var a = m;
    var v = mat3x3<f32>(vec3<f32>(1.0, 0.0, 0.0), vec3<f32>(0.0, 1.0, 0.0), vec3<f32>(0.0, 0.0, 1.0));
    for (var sweep = 0u; sweep < JACOBI_SWEEPS; sweep++) {
        jacobi_rotate(&a, &v, 0u, 1u);
        jacobi_rotate(&a, &v, 0u, 2u);
        jacobi_rotate(&a, &v, 1u, 2u);
    }
    var d = vec3<f32>(a[0][0], a[1][1], a[2][2]);
    // Sorting network on (d, columns of v), descending.
    if d.x < d.y {
        d = d.yxz;
        v = mat3x3<f32>(v[1], v[0], v[2]);
    }
    if d.x < d.z {
        d = d.zyx;
        v = mat3x3<f32>(v[2], v[1], v[0]);
    }
    if d.y < d.z {
        d = d.xzy;
        v = mat3x3<f32>(v[0], v[2], v[1]);
    }
    if determinant(v) < 0.0 {
        v[2] = -v[2];
    }
    return Eig3(d, v);
}

struct Svd3 {
    u: mat3x3<f32>,
    // Signed singular values: s.x ≥ s.y ≥ |s.z|, s.z < 0 iff det F < 0.
    s: vec3<f32>,
    v: mat3x3<f32>,
}

// Givens rotation acting on rows i and k that zeroes b[col][k] against b[col][i].
fn givens(b: mat3x3<f32>, col: u32, i: u32, k: u32) -> mat3x3<f32> {
    let x = b[col][i];
    let y = b[col][k];
    let r = sqrt(x * x + y * y);
    var c = 1.0;
    var s = 0.0;
    if r > 1e-30 {
        c = x / r;
        s = y / r;
    }
    var g = mat3x3<f32>(vec3<f32>(1.0, 0.0, 0.0), vec3<f32>(0.0, 1.0, 0.0), vec3<f32>(0.0, 0.0, 1.0));
    g[i][i] = c;
    g[k][k] = c;
    g[k][i] = s;
    g[i][k] = -s;
    return g;
}

// Signed (rotation-variant) SVD F = U·diag(s)·Vᵀ with U, V rotations (McAdams-style):
// V from the Jacobi eigenvectors of FᵀF, then Givens QR of B = F·V gives U and the s with
// their signs; σ is read from R, not from √eig(FᵀF), so small σ keep relative accuracy.
fn svd3(f: mat3x3<f32>) -> Svd3 {
    let e = sym_eig3(transpose(f) * f);
    let v = e.vectors;
    var b = f * v;
    var q = mat3x3<f32>(vec3<f32>(1.0, 0.0, 0.0), vec3<f32>(0.0, 1.0, 0.0), vec3<f32>(0.0, 0.0, 1.0));
    let g1 = givens(b, 0u, 0u, 1u);
    b = g1 * b;
    q = g1 * q;
    let g2 = givens(b, 0u, 0u, 2u);
    b = g2 * b;
    q = g2 * q;
    let g3 = givens(b, 1u, 1u, 2u);
    b = g3 * b;
    q = g3 * q;
    return Svd3(transpose(q), vec3<f32>(b[0][0], b[1][1], b[2][2]), v);
}

// F = Ds·Dm⁻¹ with Ds = [x1−x0, x2−x0, x3−x0] (columns).
fn deformation_gradient(x0: vec3<f32>, x1: vec3<f32>, x2: vec3<f32>, x3: vec3<f32>, dm_inv: mat3x3<f32>) -> mat3x3<f32> {
    let ds = mat3x3<f32>(x1 - x0, x2 - x0, x3 - x0);
    return ds * dm_inv;
}
