// IPC lagged friction, one invocation per lagged pair i < n (the pairs are lagged on the host:
// crate::contact::friction). Δxₖ = dx[vₖ] (m, the step displacement x − x̂ of vertex vₖ, kept
// as its own field: a difference of rounded f32 positions would lose the sticking regime);
// u = Σₖ (t[2k]·Δxₖ, t[2k+1]·Δxₖ) (m); y = ‖u‖; ε = f0 (m, ε_v·h); s = μλ (N):
//   energy[i] = s·f₀(y)                                   (J)
//   u0 & 1: grad[4i + k].xyz = s·(f₁(y)/y)·(u.x·t[2k] + u.y·t[2k+1])   (N, w = 0)
//   u0 & 2: hess[144i + 12r + c] = s·(Tᵀ C T)[r][c] (N/m, row-major, dofs vertex-major), T the
//           pair's 2×12 tangent map, C = (I − uuᵀ/y²)/y above ε, (f₁/y)·I − uuᵀ/(ε²y) below
//           (f₁/y·I at y = 0): PSD in both regimes, so no projection.
// f₀ and f₁/y as IPC's C¹ mollifier. The gradient's and Hessian's layouts are ipc_pairs', so
// ipc_gather sums them per vertex. Formulas and precision: the twin src/gpu/twins/friction.rs.
#import params

struct FrictionPair {
    v: vec4<u32>,
    s: f32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
    t: array<vec4<f32>, 8>,
}

@group(0) @binding(0) var<storage, read> dx: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> pairs: array<FrictionPair>;
@group(0) @binding(2) var<storage, read_write> energy: array<f32>;
@group(0) @binding(3) var<storage, read_write> grad: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> hess: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_group(wid) * 64u + lid.x;
    if i >= P.n {
        return;
    }
    let pr = pairs[i];
    var ux = 0.0;
    var uy = 0.0;
    for (var k = 0u; k < 4u; k++) {
        let d = dx[pr.v[k]].xyz;
        ux += dot(pr.t[2u * k].xyz, d);
        uy += dot(pr.t[2u * k + 1u].xyz, d);
    }
    let y = sqrt(ux * ux + uy * uy);
    let eps = P.f0;
    var f0: f32;
    var ratio: f32;
    if y >= eps {
        f0 = y;
        ratio = 1.0 / y;
    } else {
        let q = y / eps;
        f0 = eps * (q * q - q * q * q / 3.0 + 1.0 / 3.0);
        ratio = (2.0 - q) / eps;
    }
    energy[i] = pr.s * f0;
    if (P.u0 & 1u) != 0u {
        let c = pr.s * ratio;
        for (var k = 0u; k < 4u; k++) {
            grad[4u * i + k] = vec4<f32>((pr.t[2u * k].xyz * ux + pr.t[2u * k + 1u].xyz * uy) * c, 0.0);
        }
    }
    if (P.u0 & 2u) != 0u {
        // C (2×2, symmetric) scaled by s.
        var c00 = ratio;
        var c01 = 0.0;
        var c11 = ratio;
        if y >= eps {
            let iy3 = 1.0 / (y * y * y);
            c00 = ratio - ux * ux * iy3;
            c01 = -ux * uy * iy3;
            c11 = ratio - uy * uy * iy3;
        } else if y > 0.0 {
            let w = 1.0 / (eps * eps * y);
            c00 = ratio - ux * ux * w;
            c01 = -ux * uy * w;
            c11 = ratio - uy * uy * w;
        }
        c00 *= pr.s;
        c01 *= pr.s;
        c11 *= pr.s;
        for (var a = 0u; a < 4u; a++) {
            let ta = pr.t[2u * a].xyz;
            let sa = pr.t[2u * a + 1u].xyz;
            // Rows of (C T) for vertex a's columns are combined with vertex b's tangents.
            for (var b = 0u; b < 4u; b++) {
                let tb = pr.t[2u * b].xyz;
                let sb = pr.t[2u * b + 1u].xyz;
                for (var r = 0u; r < 3u; r++) {
                    // Row 3a + r: T[:, 3a + r] = (ta[r], sa[r]).
                    let p0 = ta[r] * c00 + sa[r] * c01;
                    let p1 = ta[r] * c01 + sa[r] * c11;
                    let base = 144u * i + 12u * (3u * a + r) + 3u * b;
                    for (var q = 0u; q < 3u; q++) {
                        hess[base + q] = p0 * tb[q] + p1 * sb[q];
                    }
                }
            }
        }
    }
}
