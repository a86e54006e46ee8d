// One IPC contact pair in f32: closest-feature classification, the classified squared distance
// with its exact gradient and Hessian, the log barrier and the edge–edge mollifier. The twin is
// src/gpu/twins/ipc.rs (formulas, type codes, the f32 parallel threshold and the precision
// analysis in its docs); it mirrors these functions operation for operation.

const IPC_PARALLEL_SIN2: f32 = 1.1920929e-7; // f32 machine epsilon
const IPC_TINY: f32 = 1.17549435e-38; // smallest normal f32
const IPC_SENTINEL: f32 = 1e30;

// ---- classification

// Closest feature of triangle abc to p (Ericson's walk): 0–2 corner, 3–5 edge k = (k, k+1), 6 face.
fn pt_type(p: vec3<f32>, a: vec3<f32>, b: vec3<f32>, c: vec3<f32>) -> u32 {
    let ab = b - a;
    let ac = c - a;
    let ap = p - a;
    let d1 = dot(ab, ap);
    let d2 = dot(ac, ap);
    if d1 <= 0.0 && d2 <= 0.0 {
        return 0u;
    }
    let bp = p - b;
    let d3 = dot(ab, bp);
    let d4 = dot(ac, bp);
    if d3 >= 0.0 && d4 <= d3 {
        return 1u;
    }
    let vc = d1 * d4 - d3 * d2;
    if vc <= 0.0 && d1 >= 0.0 && d3 <= 0.0 {
        return 3u;
    }
    let cp = p - c;
    let d5 = dot(ab, cp);
    let d6 = dot(ac, cp);
    if d6 >= 0.0 && d5 <= d6 {
        return 2u;
    }
    let vb = d5 * d2 - d1 * d6;
    if vb <= 0.0 && d2 >= 0.0 && d6 <= 0.0 {
        return 5u;
    }
    let va = d3 * d6 - d5 * d4;
    if va <= 0.0 && (d4 - d3) >= 0.0 && (d5 - d6) >= 0.0 {
        return 4u;
    }
    let denom = va + vb + vc;
    if abs(denom) <= IPC_TINY {
        // Degenerate (zero-area) triangle: the closest of its edges' closest points.
        var t = array<vec3<f32>, 3>(a, b, c);
        var best = 3.0e38;
        var code = 0u;
        for (var k = 0u; k < 3u; k++) {
            let k1 = (k + 1u) % 3u;
            let e0 = t[k];
            let e1 = t[k1];
            let s = point_segment_param(p, e0, e1);
            var f = 3u + k;
            if s <= 0.0 {
                f = k;
            } else if s >= 1.0 {
                f = k1;
            }
            let q = e0 + (e1 - e0) * s - p;
            let dist = dot(q, q);
            if dist < best {
                best = dist;
                code = f;
            }
        }
        return code;
    }
    return 6u;
}

// Clamped parameter of the point of segment e0e1 closest to p (0 for a zero-length segment).
fn point_segment_param(p: vec3<f32>, e0: vec3<f32>, e1: vec3<f32>) -> f32 {
    let d2 = e1 - e0;
    let e = dot(d2, d2);
    if e <= IPC_TINY {
        return 0.0;
    }
    return clamp(dot(d2, p - e0) / e, 0.0, 1.0);
}

// 0/1 endpoint, 2 interior.
fn pe_type(p: vec3<f32>, e0: vec3<f32>, e1: vec3<f32>) -> u32 {
    let t = point_segment_param(p, e0, e1);
    if t <= 0.0 {
        return 0u;
    }
    if t >= 1.0 {
        return 1u;
    }
    return 2u;
}

fn point_line_value(p: vec3<f32>, e0: vec3<f32>, e1: vec3<f32>) -> f32 {
    let c = cross(e0 - p, e1 - p);
    let e = e1 - e0;
    return dot(c, c) / dot(e, e);
}

fn ipc_end(x: f32) -> u32 {
    if x <= 0.0 {
        return 0u;
    }
    if x >= 1.0 {
        return 1u;
    }
    return 2u;
}

// Closest features of edges a0a1, b0b1: 2i + j endpoints, 4 + i aᵢ–interior of b, 6 + j bⱼ–interior
// of a, 8 both interiors.
fn ee_type(a0: vec3<f32>, a1: vec3<f32>, b0: vec3<f32>, b1: vec3<f32>) -> u32 {
    let u = a1 - a0;
    let v = b1 - b0;
    let uu = dot(u, u);
    let vv = dot(v, v);
    let n = cross(u, v);
    if uu <= IPC_TINY || vv <= IPC_TINY || dot(n, n) < IPC_PARALLEL_SIN2 * uu * vv {
        return ee_parallel_type(a0, a1, b0, b1);
    }
    let r = a0 - b0;
    let f = dot(v, r);
    let c = dot(u, r);
    let b = dot(u, v);
    // s = (b·f − c·vv)/(uu·vv − b²) as (n × v)·r / ‖n‖², without the cancellation (twin docs).
    let denom = dot(n, n);
    var s = 0.0;
    if denom > 0.0 {
        s = clamp(dot(cross(n, v), r) / denom, 0.0, 1.0);
    }
    var t = (b * s + f) / vv;
    if t < 0.0 {
        t = 0.0;
        s = clamp(-c / uu, 0.0, 1.0);
    } else if t > 1.0 {
        t = 1.0;
        s = clamp((b - c) / uu, 0.0, 1.0);
    }
    let es = ipc_end(s);
    let et = ipc_end(t);
    if es == 2u && et == 2u {
        return 8u;
    }
    if es == 2u {
        return 6u + et;
    }
    if et == 2u {
        return 4u + es;
    }
    return 2u * es + et;
}

// Parallel (or degenerate) edges: the closest of the four endpoint-to-segment pairs, the first
// on ties.
fn ee_parallel_type(a0: vec3<f32>, a1: vec3<f32>, b0: vec3<f32>, b1: vec3<f32>) -> u32 {
    var pts = array<vec3<f32>, 4>(a0, a1, b0, b1);
    var best = 3.0e38;
    var code = 0u;
    for (var k = 0u; k < 4u; k++) {
        let p = pts[k];
        var e0 = a0;
        var e1 = a1;
        if k < 2u {
            e0 = b0;
            e1 = b1;
        }
        let ty = pe_type(p, e0, e1);
        var d: f32;
        if ty == 2u {
            d = point_line_value(p, e0, e1);
        } else {
            var q = e0;
            if ty == 1u {
                q = e1;
            }
            let pq = p - q;
            d = dot(pq, pq);
        }
        let own = k % 2u;
        var ee: u32;
        if ty == 2u {
            ee = select(6u, 4u, k < 2u) + own;
        } else if k < 2u {
            ee = 2u * own + ty;
        } else {
            ee = 2u * ty + own;
        }
        if d < best {
            best = d;
            code = ee;
        }
    }
    return code;
}

// ---- distance with derivatives

// d = min_u ‖r‖², r = Σᵢ wᵢ(u)xᵢ: value, r and w at the minimiser, ∂wᵢ/∂u₀ (dw0[i]) and ∂wᵢ/∂u₁
// (dw1[i]), directions ∂r/∂uₖ (d0, d1), and the inverse Gram matrix (g11, g12, g22).
struct Dist {
    value: f32,
    r: vec3<f32>,
    w: vec4<f32>,
    dw0: vec4<f32>,
    dw1: vec4<f32>,
    d0: vec3<f32>,
    d1: vec3<f32>,
    ginv: vec3<f32>,
}

fn dist_zero() -> Dist {
    return Dist(0.0, vec3<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec3<f32>(0.0), vec3<f32>(0.0), vec3<f32>(0.0));
}

fn dist_point_point(st: array<vec3<f32>, 4>, i: u32, j: u32) -> Dist {
    var xs = st;
    let r = xs[i] - xs[j];
    var d = dist_zero();
    d.value = dot(r, r);
    d.r = r;
    d.w[i] = 1.0;
    d.w[j] = -1.0;
    return d;
}

fn dist_point_line(st: array<vec3<f32>, 4>, i: u32, j: u32, k: u32) -> Dist {
    var xs = st;
    let p = xs[i];
    let e0 = xs[j];
    let e1 = xs[k];
    let e = e1 - e0;
    let ee = dot(e, e);
    let alpha = dot(e, p - e0) / ee;
    var d = dist_zero();
    d.value = point_line_value(p, e0, e1);
    d.r = (p - e0) - e * alpha;
    d.w[i] = 1.0;
    d.w[j] = alpha - 1.0;
    d.w[k] = -alpha;
    d.dw0[j] = 1.0;
    d.dw0[k] = -1.0;
    d.d0 = -e;
    d.ginv.x = 1.0 / ee;
    return d;
}

struct Planar {
    value: f32,
    r: vec3<f32>,
    u1: f32,
    u2: f32,
    ginv: vec3<f32>,
}

// min over (u₁, u₂) of ‖w + u₁D₁ + u₂D₂‖², det G = ‖D₁ × D₂‖².
fn planar(w: vec3<f32>, d1: vec3<f32>, d2: vec3<f32>) -> Planar {
    let n = cross(d1, d2);
    let nn = dot(n, n);
    let h = dot(w, n);
    let g11 = dot(d1, d1);
    let g12 = dot(d1, d2);
    let g22 = dot(d2, d2);
    let r1 = -dot(d1, w);
    let r2 = -dot(d2, w);
    let u1 = (g22 * r1 - g12 * r2) / nn;
    let u2 = (g11 * r2 - g12 * r1) / nn;
    return Planar(h * h / nn, n * (h / nn), u1, u2, vec3<f32>(g22 / nn, -g12 / nn, g11 / nn));
}

fn dist_point_plane(st: array<vec3<f32>, 4>) -> Dist {
    let e1 = st[2] - st[1];
    let e2 = st[3] - st[1];
    let pl = planar(st[0] - st[1], -e1, -e2);
    return Dist(pl.value, pl.r, vec4<f32>(1.0, pl.u1 + pl.u2 - 1.0, -pl.u1, -pl.u2), vec4<f32>(0.0, 1.0, -1.0, 0.0), vec4<f32>(0.0, 1.0, 0.0, -1.0), -e1, -e2, pl.ginv);
}

fn dist_line_line(st: array<vec3<f32>, 4>) -> Dist {
    let u = st[1] - st[0];
    let v = st[3] - st[2];
    let pl = planar(st[0] - st[2], u, -v);
    return Dist(pl.value, pl.r, vec4<f32>(1.0 - pl.u1, pl.u1, pl.u2 - 1.0, -pl.u2), vec4<f32>(-1.0, 1.0, 0.0, 0.0), vec4<f32>(0.0, 0.0, 1.0, -1.0), u, -v, pl.ginv);
}

// The classified distance of pair kind (0 point–triangle, 1 edge–edge) and type code.
fn classified(st: array<vec3<f32>, 4>, kind: u32, code: u32) -> Dist {
    if kind == 0u {
        if code <= 2u {
            return dist_point_point(st, 0u, 1u + code);
        }
        if code <= 5u {
            let k = code - 3u;
            return dist_point_line(st, 0u, 1u + k, 1u + (k + 1u) % 3u);
        }
        return dist_point_plane(st);
    }
    if code <= 3u {
        return dist_point_point(st, code / 2u, 2u + code % 2u);
    }
    if code <= 5u {
        return dist_point_line(st, code - 4u, 2u, 3u);
    }
    if code <= 7u {
        return dist_point_line(st, code - 4u, 0u, 1u);
    }
    return dist_line_line(st);
}

// ∂d²/∂x = 2wᵢr.
fn dist_gradient(d: Dist) -> array<f32, 12> {
    var g: array<f32, 12>;
    var w = d.w;
    for (var i = 0u; i < 4u; i++) {
        let gi = d.r * (2.0 * w[i]);
        g[3u * i] = gi.x;
        g[3u * i + 1u] = gi.y;
        g[3u * i + 2u] = gi.z;
    }
    return g;
}

// The pair's 12×12 Hessian, module-scope private (GLSL would copy an array argument in and
// out of every call; see shared/sym12.wgsl).
var<private> ipc_h: array<f32, 144>;

// ∂²d²/∂x² = f_xx − 2MG⁻¹Mᵀ into ipc_h (upper triangle computed and mirrored).
fn dist_hessian(d: Dist) {
    var m0: array<f32, 12>;
    var m1: array<f32, 12>;
    var mg0: array<f32, 12>;
    var mg1: array<f32, 12>;
    var w = d.w;
    var dw0 = d.dw0;
    var dw1 = d.dw1;
    var r = d.r;
    var dir0 = d.d0;
    var dir1 = d.d1;
    for (var row = 0u; row < 12u; row++) {
        let i = row / 3u;
        let a = row % 3u;
        m0[row] = dw0[i] * r[a] + w[i] * dir0[a];
        m1[row] = dw1[i] * r[a] + w[i] * dir1[a];
        mg0[row] = m0[row] * d.ginv.x + m1[row] * d.ginv.y;
        mg1[row] = m0[row] * d.ginv.y + m1[row] * d.ginv.z;
    }
    for (var p = 0u; p < 12u; p++) {
        for (var q = p; q < 12u; q++) {
            var y = -2.0 * (mg0[p] * m0[q] + mg1[p] * m1[q]);
            if p % 3u == q % 3u {
                y += 2.0 * w[p / 3u] * w[q / 3u];
            }
            ipc_h[12u * p + q] = y;
            ipc_h[12u * q + p] = y;
        }
    }
}

// ---- barrier and mollifier

// ln(d/d̂) for 0 < d < d̂: 2 artanh((d − d̂)/(d + d̂)) by its series for d ≥ d̂/2, log below.
fn ipc_ln_ratio(d: f32, dhat: f32) -> f32 {
    if d >= 0.5 * dhat {
        let z = (d - dhat) / (d + dhat);
        let z2 = z * z;
        var s = 1.0 / 15.0;
        s = s * z2 + 1.0 / 13.0;
        s = s * z2 + 1.0 / 11.0;
        s = s * z2 + 1.0 / 9.0;
        s = s * z2 + 1.0 / 7.0;
        s = s * z2 + 1.0 / 5.0;
        s = s * z2 + 1.0 / 3.0;
        s = s * z2 + 1.0;
        return 2.0 * z * s;
    }
    return log(d / dhat);
}

// b(d), b′(d), b″(d) of −(d − d̂)² ln(d/d̂), 0 < d < d̂.
fn ipc_barrier(d: f32, dhat: f32) -> vec3<f32> {
    let r = d - dhat;
    let l = ipc_ln_ratio(d, dhat);
    let rd = r / d;
    return vec3<f32>(-r * r * l, -(2.0 * r * l + r * rd), -(2.0 * l + 4.0 * rd - rd * rd));
}

// The mollifier of c = ‖u × v‖² (`on` when c < ε×): m, m′, m″ and ∇c.
struct Moll {
    on: bool,
    m: vec3<f32>,
    grad: array<f32, 12>,
    u: vec3<f32>,
    v: vec3<f32>,
}

fn ipc_mollifier(st: array<vec3<f32>, 4>, eps: f32) -> Moll {
    var ml: Moll;
    let u = st[1] - st[0];
    let v = st[3] - st[2];
    let n = cross(u, v);
    let c = dot(n, n);
    ml.on = false;
    ml.m = vec3<f32>(1.0, 0.0, 0.0);
    ml.u = u;
    ml.v = v;
    if !(c < eps) {
        return ml;
    }
    ml.on = true;
    let uu = dot(u, u);
    let vv = dot(v, v);
    let uv = dot(u, v);
    let cu = (u * vv - v * uv) * 2.0;
    let cv = (v * uu - u * uv) * 2.0;
    for (var a = 0u; a < 3u; a++) {
        ml.grad[a] = -cu[a];
        ml.grad[3u + a] = cu[a];
        ml.grad[6u + a] = -cv[a];
        ml.grad[9u + a] = cv[a];
    }
    let r = c / eps;
    ml.m = vec3<f32>((2.0 - r) * r, 2.0 * (1.0 - r) / eps, -2.0 / (eps * eps));
    return ml;
}

// ∂²c/∂x² entry (p, q), p ≤ q.
fn ipc_moll_hess(uin: vec3<f32>, vin: vec3<f32>, p: u32, q: u32) -> f32 {
    var u = uin;
    var v = vin;
    let i = p / 3u;
    let a = p % 3u;
    let j = q / 3u;
    let b = q % 3u;
    var delta = 0.0;
    if a == b {
        delta = 1.0;
    }
    var y: f32;
    if i < 2u && j < 2u {
        y = 2.0 * (dot(v, v) * delta - v[a] * v[b]);
    } else if i >= 2u && j >= 2u {
        y = 2.0 * (dot(u, u) * delta - u[a] * u[b]);
    } else {
        // p ≤ q: a mixed entry has p on edge a and q on edge b.
        y = 2.0 * (2.0 * u[a] * v[b] - v[a] * u[b] - dot(u, v) * delta);
    }
    // u = a₁ − a₀, v = b₁ − b₀: vertex k enters with sign (−1, 1, −1, 1)ₖ.
    if (i % 2u == 0u) == (j % 2u == 0u) {
        return y;
    }
    return -y;
}
