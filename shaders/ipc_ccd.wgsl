// Additive CCD (ACCD, Li, Kaufman, Jiang 2021; the CPU's crate::contact::ccd::additive_ccd),
// one invocation per candidate pair i < n (the Pair of ipc_pairs: kind 0 point–triangle
// (point, t0, t1, t2), kind 1 edge–edge (a0, a1, b0, b1), vertex indices). Vertex v moves
// linearly from x[v].xyz (m, f32 relative to the engine's origin) to x[v].xyz + dx[v].xyz over
// t ∈ [0, 1]. Params: f0 = separation ξ (m, ≥ 0), f1 = t_max (clamped to [0, 1]), f2 = η ∈ (0, 1)
// (AccdParams::rescaling), u0 = the iteration cap (AccdParams::max_iterations). Writes
// toi[i] ∈ [0, t_max] (t_max: no impact before it) and iters[i] (distance evaluations after the
// first; 0xffffffff with toi 0 when the start's gap bound is not positive: a touching pair, or
// one closer than f32 certifies, which a host may decide in f64). Conservative in f32: toi[i] never exceeds the first time the exact linear motion of the
// f32 inputs brings the pair to ξ, and the pair at toi[i] is farther than ξ — every gap is a
// rigorous lower bound (feature distances less their rounding bounds, region tests with
// rounding margins, a position-rounding term), l_p is inflated, and an advance is accepted only
// when it stays inside the certified interval. Derivation, constants and costs: the twin
// src/gpu/twins/ccd.rs, which mirrors these functions operation for operation. u1 > 0:
// positions in two parts, vertex v at x[v] + x[u1 + v], and the pair moves relative to its
// first vertex's start (`pair_relative`, shared/pair_record.wgsl), so the position-rounding
// term scales with the pair's size, not its distance from the origin; u1 = 0: from x[v].
#import params
#import pair_record

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> dx: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> pairs: array<Pair>;
@group(0) @binding(3) var<storage, read_write> toi: array<f32>;
@group(0) @binding(4) var<storage, read_write> iters: array<u32>;

const EPS: f32 = 1.1920929e-7; // f32 machine epsilon
const ROUND: f32 = 1.9073486e-6; // 16 ε
const NEAR: f32 = 2.3841858e-7; // 2 ε: a near point's displacement bound
const TINY: f32 = 1.17549435e-38; // smallest normal f32
const UNCERTIFIED: u32 = 0xffffffffu; // iters of a pair whose start is not certified apart
const FMAX: f32 = 3.40282347e38;

fn nrm(v: vec3<f32>) -> f32 {
    return sqrt(dot(v, v));
}

// A near point's parameter num/den clamped to [0, 1] (0 for NaN).
fn near_parameter(num: f32, den: f32) -> f32 {
    let s = num / den;
    if s > 0.0 {
        return min(s, 1.0);
    }
    return 0.0;
}

fn pp_lb(p: vec3<f32>, q: vec3<f32>) -> f32 {
    return nrm(p - q) * (1.0 - ROUND);
}

// Point–line distance from a = e0 − p, b = e1 − p, ee = ‖e1 − e0‖²: (value, rounding bound).
fn pl_parts(a: vec3<f32>, b: vec3<f32>, ee: f32) -> vec2<f32> {
    let c = cross(a, b);
    let val = sqrt(dot(c, c) / ee);
    return vec2<f32>(val, ROUND * (val + nrm(a) * nrm(b) / sqrt(ee)));
}

fn pl_lb(p: vec3<f32>, e0: vec3<f32>, e1: vec3<f32>, ee: f32) -> f32 {
    let d = pl_parts(e0 - p, e1 - p, ee);
    return d.x - d.y;
}

fn ps_lb(p: vec3<f32>, e0: vec3<f32>, e1: vec3<f32>) -> f32 {
    let ends = min(pp_lb(p, e0), pp_lb(p, e1));
    let e = e1 - e0;
    let ee = dot(e, e);
    if !(ee > TINY) {
        return ends - sqrt(max(ee, 0.0));
    }
    let a = p - e0;
    let num = dot(e, a);
    let le = sqrt(ee);
    let slack = ROUND * le * (nrm(a) + le);
    if num >= -slack && num <= ee + slack {
        return min(ends, pl_lb(p, e0, e1, ee));
    }
    return ends;
}

fn pt_lb(p: vec3<f32>, t0: vec3<f32>, t1: vec3<f32>, t2: vec3<f32>) -> f32 {
    let segs = min(min(ps_lb(p, t0, t1), ps_lb(p, t1, t2)), ps_lb(p, t2, t0));
    let e1 = t1 - t0;
    let e2 = t2 - t0;
    let n = cross(e1, e2);
    let nn = dot(n, n);
    if !(nn > TINY) {
        return segs;
    }
    let s12 = nrm(e1) * nrm(e2);
    var t = array<vec3<f32>, 3>(t0, t1, t2);
    for (var k = 0u; k < 3u; k++) {
        let ek = t[(k + 1u) % 3u] - t[k];
        let q = p - t[k];
        let side = dot(cross(ek, q), n);
        if side < -ROUND * (nrm(ek) * nrm(q) * s12) {
            return segs;
        }
    }
    let w = p - t0;
    let ln = sqrt(nn);
    let plane = (abs(dot(w, n)) / ln) * (1.0 - ROUND) - ROUND * (nrm(w) * s12 / ln);
    // The same plane distance from a point of the plane near p's projection.
    let a = near_parameter(dot(cross(e2, n), w), nn);
    let b = near_parameter(dot(cross(n, e1), w), nn);
    let wn = (w - e1 * a) - e2 * b;
    let slip = NEAR * (nrm(w) + a * nrm(e1) + b * nrm(e2));
    let near = (abs(dot(wn, n)) / ln) * (1.0 - ROUND) - ROUND * (nrm(wn) * s12 / ln) - slip;
    return min(segs, max(plane, near));
}

fn beyond(p0: vec3<f32>, p1: vec3<f32>, e0: vec3<f32>, e: vec3<f32>, ee: f32) -> bool {
    let le = sqrt(ee);
    let a0 = p0 - e0;
    let a1 = p1 - e0;
    let n0 = dot(e, a0);
    let n1 = dot(e, a1);
    let s0 = ROUND * le * (nrm(a0) + le);
    let s1 = ROUND * le * (nrm(a1) + le);
    return (n0 < -s0 && n1 < -s1) || (n0 > ee + s0 && n1 > ee + s1);
}

fn sq_lo(d: vec2<f32>) -> f32 {
    let l = max(d.x - d.y, 0.0);
    return l * l;
}

fn sq_hi(d: vec2<f32>) -> f32 {
    let h = d.x + d.y;
    return h * h;
}

// min over s ∈ [0, 1] of the distance from a0 + s(a1 − a0) to the line of b, from three samples.
fn parallel_lb(a0: vec3<f32>, a1: vec3<f32>, b0: vec3<f32>, b1: vec3<f32>, vv: f32) -> f32 {
    let am = (a0 + a1) * 0.5;
    let d0 = pl_parts(b0 - a0, b1 - a0, vv);
    let d1 = pl_parts(b0 - a1, b1 - a1, vv);
    var dm = pl_parts(b0 - am, b1 - am, vv);
    dm.y = dm.y + ROUND * nrm(am);
    let q0h = sq_hi(d0);
    let q1h = sq_hi(d1);
    let qmh = sq_hi(dm);
    let qml = sq_lo(dm);
    let k = 2.0 * ((q0h + q1h) - 2.0 * qml) + ROUND * (q0h + q1h + 2.0 * qmh);
    let low = min(min(sq_lo(d0), sq_lo(d1)), qml) * (1.0 - ROUND);
    return sqrt(max(low - max(k, 0.0) * 0.0625, 0.0)) * (1.0 - ROUND);
}

fn ee_lb(a0: vec3<f32>, a1: vec3<f32>, b0: vec3<f32>, b1: vec3<f32>) -> f32 {
    let ends = min(min(ps_lb(a0, b0, b1), ps_lb(a1, b0, b1)), min(ps_lb(b0, a0, a1), ps_lb(b1, a0, a1)));
    let u = a1 - a0;
    let v = b1 - b0;
    let uu = dot(u, u);
    let vv = dot(v, v);
    if !(uu > TINY && vv > TINY) {
        return ends - sqrt(max(min(uu, vv), 0.0));
    }
    if beyond(a0, a1, b0, v, vv) || beyond(b0, b1, a0, u, uu) {
        return ends;
    }
    let n = cross(u, v);
    let nn = dot(n, n);
    let r = a0 - b0;
    let lu = nrm(u);
    let lv = nrm(v);
    let lr = nrm(r);
    var line = max(parallel_lb(a0, a1, b0, b1, vv), parallel_lb(b0, b1, a0, a1, uu));
    if nn > TINY {
        let sn = dot(cross(n, v), r);
        let tn = dot(cross(n, u), r);
        let ss = ROUND * (lu * lv * (lv * lr + lu * lv));
        let ts = ROUND * (lu * lv * (lu * lr + lu * lv));
        if sn < -ss || sn > nn + ss || tn < -ts || tn > nn + ts {
            return ends;
        }
        let ln = sqrt(nn);
        let ll = (abs(dot(r, n)) / ln) * (1.0 - ROUND) - ROUND * (lr * lu * lv / ln);
        // The same line distance between near points of the two lines.
        let s = near_parameter(sn, nn);
        let t = near_parameter(tn, nn);
        let w = (r + u * s) - v * t;
        let slip = NEAR * (lr + s * lu + t * lv);
        let near = (abs(dot(w, n)) / ln) * (1.0 - ROUND) - ROUND * (nrm(w) * lu * lv / ln) - slip;
        line = max(max(line, ll), near);
    }
    return min(ends, line);
}

fn gap_at(kind: u32, xs: array<vec3<f32>, 4>, ds: array<vec3<f32>, 4>, tau: f32, pos: f32, xi: f32) -> f32 {
    var p: array<vec3<f32>, 4>;
    for (var k = 0u; k < 4u; k++) {
        p[k] = xs[k] + ds[k] * tau;
    }
    var d: f32;
    if kind == 0u {
        d = pt_lb(p[0], p[1], p[2], p[3]);
    } else {
        d = ee_lb(p[0], p[1], p[2], p[3]);
    }
    return (d - pos) - xi;
}

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
    let ds = array<vec3<f32>, 4>(dx[pr.v.x].xyz, dx[pr.v.y].xyz, dx[pr.v.z].xyz, dx[pr.v.w].xyz);
    let xi = P.f0;
    let t_max = clamp(P.f1, 0.0, 1.0);
    let eta = P.f2;
    var scale = 0.0;
    var input = 0.0;
    for (var k = 0u; k < 4u; k++) {
        scale = max(scale, nrm(xs[k]) + nrm(ds[k]));
        if at > 0u {
            input = max(input, nrm(xs[k]) + nrm(fs[k] - fs[0]));
        }
    }
    let pos = 4.0 * EPS * scale + 2.0 * EPS * input;
    var g = gap_at(pr.kind, xs, ds, 0.0, pos, xi);
    if !(g > 0.0) {
        // The start itself is not certified apart (touching, or closer than f32 resolves).
        toi[i] = 0.0;
        iters[i] = UNCERTIFIED;
        return;
    }
    let m = (ds[0] + ds[1] + ds[2] + ds[3]) * 0.25;
    var split = 2u;
    if pr.kind == 0u {
        split = 1u;
    }
    var l0 = 0.0;
    var l1 = 0.0;
    for (var k = 0u; k < 4u; k++) {
        let l = nrm(ds[k] - m);
        if k < split {
            l0 = max(l0, l);
        } else {
            l1 = max(l1, l);
        }
    }
    let lp = (l0 + l1) * (1.0 + ROUND);
    if lp == 0.0 {
        toi[i] = t_max;
        iters[i] = 0u;
        return;
    }
    if !(lp < FMAX) {
        toi[i] = 0.0;
        iters[i] = 0u;
        return;
    }
    let stop = (1.0 - eta) * g;
    var t = 0.0;
    var out_t = -1.0;
    var out_it = P.u0;
    for (var it = 1u; it <= P.u0; it++) {
        let cert = g / lp;
        let tau = min(t + eta * cert, t_max);
        if !(tau > t) || tau - t > cert * (1.0 - 4.0 * EPS) {
            out_t = t;
            out_it = it;
            break;
        }
        g = gap_at(pr.kind, xs, ds, tau, pos, xi);
        if !(g > 0.0) || (t > 0.0 && g < stop) {
            out_t = t;
            out_it = it;
            break;
        }
        t = tau;
        if t >= t_max {
            out_t = t_max;
            out_it = it;
            break;
        }
    }
    if out_t < 0.0 {
        out_t = t;
    }
    toi[i] = out_t;
    iters[i] = out_it;
}
