// Element e's energy, gradient and Hessian (`flags` = the kernels' u0), reading and writing the
// including kernel's bindings `x`, `tets`, `dm_inv`, `elem`, `energy`, `grad`, `hess`. The body
// of both `elastic` (every element) and `elastic_list` (listed elements); their twins run
// `twins::elastic`. With flag 64 only the Hessian's four diagonal 3×3 blocks are written (the
// others keep what they held): what plain VBD reads. With flag 8 (strict inversion) an element whose J = det F is below
// `j_floor` gets the energy ELASTIC_STRICT_SENTINEL instead (its gradient and Hessian as
// usual): the host reads sums that large as +∞, so a line search never accepts such a state.
#import linalg
#import material

const ELASTIC_INV_SQRT2: f32 = 0.70710678118654752;
const ELASTIC_STRICT_SENTINEL: f32 = 1e30;

// Eigenmode m of the stress derivative (0–2 scaling, 3–5 flip, 6–8 twist; Smith et al. 2019):
// its matrix Q_m (unit Frobenius norm) and its eigenvalue, filtered as the flags say.
struct ElasticMode {
    q: mat3x3<f32>,
    lam: f32,
}

fn elastic_mode(m: u32, eig: Eig3, u: mat3x3<f32>, v: mat3x3<f32>, ev: SigmaEval, exact: bool, absolute: bool, project: bool) -> ElasticMode {
    var r: ElasticMode;
    if m < 3u {
        let d = eig.vectors[m];
        r.q = u * mat3x3<f32>(vec3<f32>(d.x, 0.0, 0.0), vec3<f32>(0.0, d.y, 0.0), vec3<f32>(0.0, 0.0, d.z)) * transpose(v);
        r.lam = eig.values[m];
    } else {
        let pair = (m - 3u) % 3u;
        var i = 0u;
        var jj = 1u;
        if pair == 1u {
            jj = 2u;
        } else if pair == 2u {
            i = 1u;
            jj = 2u;
        }
        let a = outer3(u[i], v[jj]);
        let b = outer3(u[jj], v[i]);
        if m < 6u {
            r.q = (a + b) * ELASTIC_INV_SQRT2;
            r.lam = ev.flip[pair];
        } else {
            r.q = (a - b) * ELASTIC_INV_SQRT2;
            r.lam = ev.twist[pair];
        }
    }
    if exact {
        // unfiltered
    } else if absolute {
        r.lam = abs(r.lam);
    } else if project {
        r.lam = max(r.lam, 0.0);
    }
    return r;
}

// Writes vol · blk as the 3×3 block (a, b) of element `base / 144`'s Hessian (row-major
// 12 × 12) and, for a ≠ b, its transpose as the block (b, a).
fn elastic_write_block(base: u32, a: u32, b: u32, vol: f32, blk: mat3x3<f32>) {
    for (var r = 0u; r < 3u; r++) {
        for (var c = 0u; c < 3u; c++) {
            hess[base + (3u * a + r) * 12u + 3u * b + c] = vol * blk[c][r];
            if a != b {
                hess[base + (3u * b + c) * 12u + 3u * a + r] = vol * blk[c][r];
            }
        }
    }
}

fn elastic_element(e: u32, flags: u32, j_floor: f32) {
    let t = tets[e];
    let dmi = dm_inv[e];
    let f = deformation_gradient(x[t.x].xyz, x[t.y].xyz, x[t.z].xyz, x[t.w].xyz, dmi);
    var sv = svd3(f);
    let p = elem[e];
    let ev = sigma_eval(p.model, p.mu, p.lambda, sv.s);
    let vol = p.volume;
    var psi = ev.psi;
    var pk1 = sv.u * mat3x3<f32>(vec3<f32>(ev.grad.x, 0.0, 0.0), vec3<f32>(0.0, ev.grad.y, 0.0), vec3<f32>(0.0, 0.0, ev.grad.z)) * transpose(sv.v);
    if p.model == MODEL_LINEAR {
        // ε = sym(F) − I; Ψ = μ‖ε‖² + λ/2·tr(ε)²; P = 2με + λ·tr(ε)·I.
        let ident = mat3x3<f32>(vec3<f32>(1.0, 0.0, 0.0), vec3<f32>(0.0, 1.0, 0.0), vec3<f32>(0.0, 0.0, 1.0));
        let eps = (f + transpose(f)) * 0.5 - ident;
        let tr = eps[0][0] + eps[1][1] + eps[2][2];
        psi = p.mu * (dot(eps[0], eps[0]) + dot(eps[1], eps[1]) + dot(eps[2], eps[2])) + 0.5 * p.lambda * tr * tr;
        pk1 = eps * (2.0 * p.mu) + ident * (p.lambda * tr);
        sv.u = ident;
        sv.v = ident;
    }
    energy[e] = vol * psi;
    if (flags & 8u) != 0u && dot(f[0], cross(f[1], f[2])) < j_floor {
        energy[e] = ELASTIC_STRICT_SENTINEL;
    }
    let dmit = transpose(dmi);
    if (flags & 1u) != 0u {
        let g = (pk1 * dmit) * vol;
        grad[4u * e] = vec4<f32>(-(g[0] + g[1] + g[2]), 0.0);
        grad[4u * e + 1u] = vec4<f32>(g[0], 0.0);
        grad[4u * e + 2u] = vec4<f32>(g[1], 0.0);
        grad[4u * e + 3u] = vec4<f32>(g[2], 0.0);
    }
    if (flags & 2u) != 0u {
        let project = (flags & 4u) != 0u;
        let absolute = (flags & 16u) != 0u;
        // Flag 32: the stable Neo-Hookeans keep their exact Hessian, whose diagonal blocks are
        // PSD at every F (material/stress.rs: stress_and_exact_block): plain VBD reads only those.
        let exact = (flags & 32u) != 0u && p.model <= MODEL_STABLE_NEO_HOOKEAN_VBD;
        let eig = sym_eig3(ev.hess);
        let u = sv.u;
        let v = sv.v;
        let base = 144u * e;
        // The blocks accumulated mode by mode in named registers (no per-mode arrays, which
        // would live in memory); the Hessian is symmetric, so the six blocks above the diagonal
        // are computed once and written with their transposes below it. Flag 64: the four
        // diagonal blocks only.
        let diagonal_only = (flags & 64u) != 0u;
        let z = mat3x3<f32>(vec3<f32>(0.0), vec3<f32>(0.0), vec3<f32>(0.0));
        var h00 = z;
        var h11 = z;
        var h22 = z;
        var h33 = z;
        var h01 = z;
        var h02 = z;
        var h03 = z;
        var h12 = z;
        var h13 = z;
        var h23 = z;
        for (var m = 0u; m < 9u; m++) {
            let md = elastic_mode(m, eig, u, v, ev, exact, absolute, project);
            let wm = md.q * dmit;
            let w0 = -(wm[0] + wm[1] + wm[2]);
            let l = md.lam;
            h00 += outer3(w0, w0) * l;
            h11 += outer3(wm[0], wm[0]) * l;
            h22 += outer3(wm[1], wm[1]) * l;
            h33 += outer3(wm[2], wm[2]) * l;
            if !diagonal_only {
                h01 += outer3(w0, wm[0]) * l;
                h02 += outer3(w0, wm[1]) * l;
                h03 += outer3(w0, wm[2]) * l;
                h12 += outer3(wm[0], wm[1]) * l;
                h13 += outer3(wm[0], wm[2]) * l;
                h23 += outer3(wm[1], wm[2]) * l;
            }
        }
        elastic_write_block(base, 0u, 0u, vol, h00);
        elastic_write_block(base, 1u, 1u, vol, h11);
        elastic_write_block(base, 2u, 2u, vol, h22);
        elastic_write_block(base, 3u, 3u, vol, h33);
        if !diagonal_only {
            elastic_write_block(base, 0u, 1u, vol, h01);
            elastic_write_block(base, 0u, 2u, vol, h02);
            elastic_write_block(base, 0u, 3u, vol, h03);
            elastic_write_block(base, 1u, 2u, vol, h12);
            elastic_write_block(base, 1u, 3u, vol, h13);
            elastic_write_block(base, 2u, 3u, vol, h23);
        }
    }
}
