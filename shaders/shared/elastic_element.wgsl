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

// Writes the 3×3 block (a, a) of element `base / 144`'s Hessian (row-major 12 × 12).
fn elastic_write_block(base: u32, a: u32, blk: mat3x3<f32>) {
    for (var r = 0u; r < 3u; r++) {
        for (var c = 0u; c < 3u; c++) {
            hess[base + (3u * a + r) * 12u + 3u * a + c] = blk[c][r];
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
        if (flags & 64u) != 0u {
            // Flag 64: the four diagonal blocks only, accumulated mode by mode (no per-mode
            // arrays: VBD's per-colour refresh runs this for every touched element, and the
            // 9 × 4 vectors of the full path live in memory rather than registers).
            var d0 = mat3x3<f32>(vec3<f32>(0.0), vec3<f32>(0.0), vec3<f32>(0.0));
            var d1 = d0;
            var d2 = d0;
            var d3 = d0;
            for (var m = 0u; m < 9u; m++) {
                let md = elastic_mode(m, eig, u, v, ev, exact, absolute, project);
                let wm = md.q * dmit;
                let w0 = -(wm[0] + wm[1] + wm[2]);
                d0 += outer3(w0, w0) * md.lam;
                d1 += outer3(wm[0], wm[0]) * md.lam;
                d2 += outer3(wm[1], wm[1]) * md.lam;
                d3 += outer3(wm[2], wm[2]) * md.lam;
            }
            elastic_write_block(base, 0u, d0 * vol);
            elastic_write_block(base, 1u, d1 * vol);
            elastic_write_block(base, 2u, d2 * vol);
            elastic_write_block(base, 3u, d3 * vol);
            return;
        }
        var lam: array<f32, 9>;
        var w: array<array<vec3<f32>, 4>, 9>;
        for (var m = 0u; m < 9u; m++) {
            let md = elastic_mode(m, eig, u, v, ev, exact, absolute, project);
            lam[m] = md.lam;
            let wm = md.q * dmit;
            w[m][0] = -(wm[0] + wm[1] + wm[2]);
            w[m][1] = wm[0];
            w[m][2] = wm[1];
            w[m][3] = wm[2];
        }
        for (var a = 0u; a < 4u; a++) {
            for (var b = 0u; b < 4u; b++) {
                var blk = mat3x3<f32>(vec3<f32>(0.0), vec3<f32>(0.0), vec3<f32>(0.0));
                for (var m = 0u; m < 9u; m++) {
                    blk += outer3(w[m][a], w[m][b]) * lam[m];
                }
                for (var r = 0u; r < 3u; r++) {
                    for (var c = 0u; c < 3u; c++) {
                        hess[base + (3u * a + r) * 12u + 3u * b + c] = vol * blk[c][r];
                    }
                }
            }
        }
    }
}
