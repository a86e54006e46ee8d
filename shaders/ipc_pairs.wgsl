// IPC contact pairs, one invocation per candidate pair i < n (the broad phase that finds the
// candidates stays on the CPU: crate::contact::broad). For pair i: the closest-feature type
// ptype[i], the squared distance dist[i] = d² (m²), and with d̂² = f0 (m²), κ = f1:
// energy[i] = κ·m·b(d²) (m the edge–edge mollifier, 1 for point–triangle); u0 & 1: the gradient
// grad[4i + k].xyz (k in the pair's vertex order, w = 0); u0 & 2: the Hessian hess[144i + 12r + c]
// (row-major, dofs vertex-major [x0 y0 z0 x1 …] — the elastic kernel's layout); u0 & 4: projected
// to PSD by cyclic Jacobi (shared/sym12.wgsl). d² ≥ d̂²: energy, gradient, Hessian 0; d² ≤ 0:
// energy 1e30 (read as +∞), derivatives 0. u1 > 0: positions in two parts, vertex v at
// x[v] + x[u1 + v], and the pair is evaluated relative to its first vertex (`pair_relative`,
// shared/pair_record.wgsl); u1 = 0: at x[v]. Formulas, type codes and precision: the twin
// src/gpu/twins/ipc.rs.
#import params
#import pair_record
#import ipc_pair
#import sym12

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> pairs: array<Pair>;
@group(0) @binding(2) var<storage, read_write> energy: array<f32>;
@group(0) @binding(3) var<storage, read_write> dist: array<f32>;
@group(0) @binding(4) var<storage, read_write> ptype: array<u32>;
@group(0) @binding(5) var<storage, read_write> grad: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> hess: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_group(wid) * 64u + lid.x;
    if i >= P.n {
        return;
    }
    let pr = pairs[i];
    let hs = array<vec3<f32>, 4>(x[pr.v.x].xyz, x[pr.v.y].xyz, x[pr.v.z].xyz, x[pr.v.w].xyz);
    var fs = array<vec3<f32>, 4>(vec3<f32>(0.0), vec3<f32>(0.0), vec3<f32>(0.0), vec3<f32>(0.0));
    let at = P.u1;
    if at > 0u {
        fs = array<vec3<f32>, 4>(x[at + pr.v.x].xyz, x[at + pr.v.y].xyz, x[at + pr.v.z].xyz, x[at + pr.v.w].xyz);
    }
    var xs = hs;
    if at > 0u {
        xs = pair_relative(hs, fs);
    }
    var code: u32;
    if pr.kind == 0u {
        code = pt_type(xs[0], xs[1], xs[2], xs[3]);
    } else {
        code = ee_type(xs[0], xs[1], xs[2], xs[3]);
    }
    let d = classified(xs, pr.kind, code);
    let d2 = d.value;
    dist[i] = d2;
    ptype[i] = code;
    let want_g = (P.u0 & 1u) != 0u;
    let want_h = (P.u0 & 2u) != 0u;
    let dhat2 = P.f0;
    let kappa = P.f1;
    if !(d2 < dhat2 && d2 > 0.0) {
        var e = 0.0;
        if d2 <= 0.0 {
            e = IPC_SENTINEL;
        }
        energy[i] = e;
        if want_g {
            for (var k = 0u; k < 4u; k++) {
                grad[4u * i + k] = vec4<f32>(0.0);
            }
        }
        if want_h {
            for (var k = 0u; k < 144u; k++) {
                hess[144u * i + k] = 0.0;
            }
        }
        return;
    }
    let bb = ipc_barrier(d2, dhat2);
    let b = bb.x;
    let db = bb.y;
    let ddb = bb.z;
    var ml: Moll;
    ml.on = false;
    if pr.kind == 1u {
        ml = ipc_mollifier(xs, pr.eps_x);
    }
    var m = 1.0;
    if ml.on {
        m = ml.m.x;
    }
    energy[i] = kappa * (m * b);
    if !want_g && !want_h {
        return;
    }
    var g = dist_gradient(d);
    if want_g {
        for (var v = 0u; v < 4u; v++) {
            var gi = vec4<f32>(0.0);
            for (var a = 0u; a < 3u; a++) {
                let k = 3u * v + a;
                var t = m * (db * g[k]);
                if ml.on {
                    t += b * (ml.m.y * ml.grad[k]);
                }
                gi[a] = kappa * t;
            }
            grad[4u * i + v] = gi;
        }
    }
    if want_h {
        dist_hessian(d);
        for (var p = 0u; p < 12u; p++) {
            for (var q = p; q < 12u; q++) {
                var t = m * (ddb * g[p] * g[q] + db * ipc_h[12u * p + q]);
                if ml.on {
                    let dm = ml.m.y;
                    let ddm = ml.m.z;
                    t += b * (ddm * ml.grad[p] * ml.grad[q] + dm * ipc_moll_hess(ml.u, ml.v, p, q)) + (dm * db) * (ml.grad[p] * g[q] + g[p] * ml.grad[q]);
                }
                t *= kappa;
                ipc_h[12u * p + q] = t;
                ipc_h[12u * q + p] = t;
            }
        }
        let base = 144u * i;
        for (var k = 0u; k < 144u; k++) {
            hess[base + k] = ipc_h[k];
        }
        if (P.u0 & 4u) != 0u {
            // H₊ = H − Σ_{λₖ<0} λₖvₖvₖᵀ (Jacobi on a private copy).
            sym12_a = ipc_h;
            sym12_eigen();
            var lam: array<f32, 12>;
            var has_neg = false;
            for (var k = 0u; k < 12u; k++) {
                lam[k] = min(sym12_a[13u * k], 0.0);
                has_neg = has_neg || lam[k] < 0.0;
            }
            if has_neg {
                for (var r = 0u; r < 12u; r++) {
                    for (var c = r; c < 12u; c++) {
                        var acc = 0.0;
                        for (var k = 0u; k < 12u; k++) {
                            acc += lam[k] * sym12_v[12u * r + k] * sym12_v[12u * c + k];
                        }
                        let y = hess[base + 12u * r + c] - acc;
                        hess[base + 12u * r + c] = y;
                        hess[base + 12u * c + r] = y;
                    }
                }
            }
        }
    }
}
