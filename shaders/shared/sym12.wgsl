// Eigen-decomposition of a symmetric 12×12 by cyclic Jacobi in f32, on the invocation's private
// matrices sym12_a (row-major, both halves) and sym12_v: Numerical Recipes' rotation (the
// τ = s/(1 + c) update), fixed cyclic order (0,1), (0,2), …, (10,11), SYM12_SWEEPS sweeps, a
// rotation skipped only when its off-diagonal entry is exactly 0; both halves written with the
// same value. The twin is src/gpu/twins/sym12.rs (method, sweep count and measured accuracy in
// its docs). The matrices are module-scope `var<private>` rather than pointer arguments: GLSL
// passes array arguments by copy-in/copy-out, which made the GL driver's compile ~20× slower.

const SYM12_SWEEPS: u32 = 10u;

var<private> sym12_a: array<f32, 144>;
var<private> sym12_v: array<f32, 144>;

fn sym12_sign_nonzero(x: f32) -> f32 {
    if x < 0.0 {
        return -1.0;
    }
    return 1.0;
}

// One rotation zeroing a[p][q]; V ← V·J.
fn sym12_rotate(p: u32, q: u32) {
    let apq = sym12_a[12u * p + q];
    if apq == 0.0 {
        return;
    }
    let app = sym12_a[13u * p];
    let aqq = sym12_a[13u * q];
    let theta = (aqq - app) / (2.0 * apq);
    var t: f32;
    if abs(theta) > 1e15 {
        // θ² would overflow; t ≈ 1/(2θ).
        t = 0.5 / theta;
    } else {
        t = sym12_sign_nonzero(theta) / (abs(theta) + sqrt(theta * theta + 1.0));
    }
    let c = 1.0 / sqrt(t * t + 1.0);
    let s = t * c;
    let tau = s / (1.0 + c);
    sym12_a[13u * p] = app - t * apq;
    sym12_a[13u * q] = aqq + t * apq;
    sym12_a[12u * p + q] = 0.0;
    sym12_a[12u * q + p] = 0.0;
    for (var k = 0u; k < 12u; k++) {
        if k == p || k == q {
            continue;
        }
        let akp = sym12_a[12u * k + p];
        let akq = sym12_a[12u * k + q];
        let nkp = akp - s * (akq + tau * akp);
        let nkq = akq + s * (akp - tau * akq);
        sym12_a[12u * k + p] = nkp;
        sym12_a[12u * p + k] = nkp;
        sym12_a[12u * k + q] = nkq;
        sym12_a[12u * q + k] = nkq;
    }
    for (var k = 0u; k < 12u; k++) {
        let vkp = sym12_v[12u * k + p];
        let vkq = sym12_v[12u * k + q];
        sym12_v[12u * k + p] = vkp - s * (vkq + tau * vkp);
        sym12_v[12u * k + q] = vkq + s * (vkp - tau * vkq);
    }
}

// In place on sym12_a: its diagonal becomes the eigenvalues (unsorted), column k of sym12_v
// (sym12_v[12i + k]) the eigenvector of sym12_a[13k].
fn sym12_eigen() {
    for (var i = 0u; i < 144u; i++) {
        sym12_v[i] = 0.0;
    }
    for (var i = 0u; i < 12u; i++) {
        sym12_v[13u * i] = 1.0;
    }
    for (var sweep = 0u; sweep < SYM12_SWEEPS; sweep++) {
        for (var p = 0u; p < 11u; p++) {
            for (var q = p + 1u; q < 12u; q++) {
                sym12_rotate(p, q);
            }
        }
    }
}
