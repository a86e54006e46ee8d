//! Twins of the device CCD kernels (`shaders/ipc_ccd.wgsl`, `shaders/ipc_vertex_toi.wgsl`): f32,
//! operation for operation.
//!
//! # `ipc_ccd` (one invocation per candidate pair)
//! Additive CCD ([`crate::contact::ccd::additive_ccd`], ACCD of Li, Kaufman, Jiang 2021) of
//! candidate pair i (a [`GpuPair`]: point–triangle or edge–edge, vertex indices) whose vertices
//! move linearly from `x[v]` (m, f32 relative to the engine's origin) to `x[v] + dx[v]` over
//! t ∈ [0, 1]. Params: `f0` = separation ξ (m, ≥ 0), `f1` = t_max (clamped to [0, 1]), `f2` =
//! η ∈ (0, 1) ([`crate::contact::ccd::AccdParams::rescaling`]), `u0` = the iteration cap
//! ([`crate::contact::ccd::AccdParams::max_iterations`]). Writes `toi[i]` ∈ [0, t_max] (t_max:
//! no impact found before t_max) and `iters[i]`, the distance evaluations after the first (the
//! CPU's [`crate::contact::ccd::TimeOfImpact::iterations`]), or [`UNCERTIFIED`] with time 0
//! when the start's gap bound is not positive (touching, or closer than f32 certifies: a host
//! can decide such a pair in f64). The iteration is the CPU's: with
//! l_p = max‖Δx − m‖ over the first primitive + the same over the second, advance by
//! η·gap/l_p, re-evaluate, stop once the gap is below (1 − η) of the starting gap (returning the
//! previous time) or t reaches t_max; a start at or below ξ returns 0, no relative motion t_max.
//!
//! # Conservativeness in f32
//! The returned t never exceeds the first time the true distance of the trajectory (the exact
//! linear motion of the f32 inputs) reaches ξ, and the pair at t is farther than ξ. The f32
//! arithmetic keeps this because every quantity that the certificate [t, t + gap/l_p] rests on
//! is bounded on the safe side:
//! - **The gap is a rigorous lower bound** ([`pair_lower_bound`]), not the classified distance
//!   (whose f32 classification can pick a farther feature near region boundaries, and whose
//!   line–line value has no digits for nearly parallel edges). The pair distance is the minimum
//!   over candidate features of lower bounds with their own rounding bound subtracted:
//!   point–point ‖p − q‖·(1 − C), point–line ‖(e₀ − p) × (e₁ − p)‖/‖e‖ − C·‖e₀ − p‖‖e₁ − p‖/‖e‖,
//!   point–plane |w·n|/‖n‖ − C·‖w‖‖e₁‖‖e₂‖/‖n‖, line–line |r·n|/‖n‖ − C·‖r‖‖u‖‖v‖/‖n‖, with
//!   C = [`ROUND`] = 16·ε_f32 ≈ 1.9·10⁻⁶, several times the worst-case first-order rounding of
//!   each expression (≤ 13u, u = 2⁻²⁴, counting WGSL's 2.5-ulp division and inherited sqrt). A
//!   feature whose region the point could be in is included: the region tests (the projection
//!   parameter of a point on an edge, the point's side of each triangle edge, the lines' closest
//!   parameters) accept with the same kind of rounding margin, so a true region is never
//!   rejected; including an extra feature only lowers the minimum (the line or plane distance
//!   never exceeds the segment or triangle distance). Nearly parallel edges, where line–line's
//!   bound is useless (1/sinθ), take the parallel bound: the squared distance q(s) from
//!   a(s) to the line of b is a convex quadratic in s, so from bounds on q(0), q(½), q(1) its
//!   leading coefficient k = 2(q₀ − 2q_½ + q₁) is bounded above and min over [0, 1] of q is at
//!   least min(q₀, q_½, q₁) − k/16 (every s is within ¼ of a sample) — exact for parallel
//!   edges, and free of ‖u × v‖², whose absolute rounding swamps it there (and the same with the
//!   edges' roles swapped; the best of the valid bounds is taken). The interior test
//!   also rejects the line term when both ends of one edge project beyond the same end of the
//!   other, so collinear, separated edges are not stalled at distance 0.
//! - **Near points.** The plane and line–line bounds above lose C·‖w‖ (‖r‖ for edges): the
//!   normal's absolute rounding times the length of the vector projected on it, which runs
//!   from a triangle corner or an edge end — of the order of the pair's size L, so gaps below
//!   ~C·L (5e-8 m for 2.7 cm edges) certified nothing. The same distance is also taken from a
//!   vector between near points — w − a·e₁ − b·e₂ from the plane point with p's (clamped)
//!   projection parameters, r + s·u − t·v between the lines' (clamped) closest parameters —
//!   whose length is about the distance itself, so the normal's rounding costs C times the
//!   distance. Any parameters give a valid bound: the point a + s·e formed in f32 lies within
//!   1.5ε(‖a‖ + s‖e‖) of the exact line through a along the exact difference e rounds (the
//!   roundings of e, of s·e, of the sums), and [`NEAR`]·(…) = 2ε(…) is subtracted. The larger
//!   of the two bounds is taken, so nothing is lost where the corner one is tighter.
//! - **Positions**: x + t·Δx rounds by at most 2.01u(‖x‖ + ‖Δx‖) per vertex (t ≤ 1), which
//!   moves the distance by at most twice that; the gap subtracts 4ε·max(‖x‖ + ‖Δx‖). With
//!   positions in two parts (u1 > 0) the pair is first taken relative to its first vertex's
//!   start, r_k = (h_k − h_0) + (f_k − f_0) from the coarse parts h and fine parts f
//!   ([`pair_relative`]), each component within ε(|r_k| + |f_k − f_0|) of the exact
//!   difference, which moves the distance by at most 2ε·max(‖r_k‖ + ‖f_k − f_0‖), also
//!   subtracted; x is then r, and every term is of the pair's size, its motion and the fine
//!   parts (the step's displacement), not of its distance from the origin (4ε·‖x‖ is 1.07e-7
//!   m for a pair 0.22 m out — more than the gaps the barrier rests at;
//!   `solver::jgs2::device_ipc`, "κ and friction").
//! - **l_p** is an upper bound: any m (not only the exact mean) gives a valid Lipschitz
//!   constant, and the norms are inflated by (1 + C).
//! - **Advancing**: τ = t + η·gap/l_p is accepted only when τ − t (exact by Sterbenz) is at most
//!   (1 − 4ε)·gap/l_p, which covers the division's error; otherwise (steps at the f32
//!   resolution of t) the certified t is returned. τ is clamped to t_max (the CPU evaluates past
//!   it; here that would only widen the position bound).
//!
//! The price: gaps below the rounding bound (≈ C·L for pairs of size L, plus ~6ε·L) are not
//! resolved, so grazing motion closer than that counts as contact and stops early; nearly
//! parallel, overlapping edges keep up to k/16 ≈ ‖u‖²sin²θ/8 of slack in d². `tests/gpu/gpu_ccd.rs` reports the ratio of these
//! times to the f64 ACCD's on the adversarial CCD set.
//!
//! # `ipc_vertex_toi` (one invocation per vertex, 256 per workgroup)
//! Over the vertex→(pair, slot) CSR ([`crate::gpu::VertexCsr::from_pairs`]; offsets and pair
//! ids, the slots are not needed): `toi[v] = min(f0, min over the vertex's pairs of
//! pair_toi[pair])` — the per-vertex step bound of JGS2/VBD (f0 = t_max; a vertex in no pair
//! gets f0) — no atomics. Per workgroup g of 256 vertices, `part[g]` = max over its vertices of
//! 1/max(toi[v], 10⁻³⁰): the layout of `dev_step_bound`, so `reduce_max_abs` (non-negative
//! partials) finishes the global maximum M and the global minimum time is 1/M (reciprocals keep
//! a tiny time representable where t_max − t would round; 1/(1/t) is within 2 ulp of t, so a
//! host that needs a strict bound scales 1/M by 1 − 4ε).

use super::ipc::pair_relative;
use super::need;
use crate::gpu::{GpuPair, GpuVec4, Params};
use crate::{JelloError, Result};
use glam::Vec3;
use rayon::prelude::*;

/// The relative rounding bound C of the distance lower bounds (module docs): 16·ε_f32.
pub const ROUND: f32 = 16.0 * f32::EPSILON;
/// The displacement bound of a near point (module docs, "near points"): a point a + s·e formed
/// in f32 (s ∈ [0, 1]) lies within ε(‖a‖ + s‖e‖) of the exact line through the f32 a with the
/// exact direction e is rounded from; twice that.
const NEAR: f32 = 2.0 * f32::EPSILON;
/// Degenerate-length threshold (the smallest normal f32, as in `twins::ipc`).
const TINY: f32 = f32::MIN_POSITIVE;
/// `ipc_ccd`'s iteration count of a pair whose start is not certified apart (its gap bound is
/// not positive: touching, or closer than the f32 bounds resolve); its time is 0.
pub const UNCERTIFIED: u32 = u32::MAX;
/// Workgroup size of `ipc_vertex_toi` (vertices per partial).
pub const VERTEX_TOI_GROUP: usize = 256;

/// A near point's parameter num/den clamped to [0, 1] (any value keeps the bound valid; 0 for
/// NaN).
fn near_parameter(num: f32, den: f32) -> f32 {
    let s = num / den;
    if s > 0.0 {
        s.min(1.0)
    } else {
        0.0
    }
}

/// x ≤ y or either is NaN — the WGSL's `!(x > y)`, which sends NaN down the safe branch.
fn not_above(x: f32, y: f32) -> bool {
    x.partial_cmp(&y) != Some(std::cmp::Ordering::Greater)
}

fn norm(v: Vec3) -> f32 {
    v.dot(v).sqrt()
}

/// Lower bound of ‖p − q‖.
fn pp_lb(p: Vec3, q: Vec3) -> f32 {
    norm(p - q) * (1.0 - ROUND)
}

/// The distance from a point p to the line through e0, e1, given a = e0 − p, b = e1 − p (f32
/// differences of positions) and `ee` = ‖e₁ − e₀‖² > TINY: the value and its rounding bound.
fn pl_parts(a: Vec3, b: Vec3, ee: f32) -> (f32, f32) {
    let c = a.cross(b);
    let val = (c.dot(c) / ee).sqrt();
    (val, ROUND * (val + norm(a) * norm(b) / ee.sqrt()))
}

/// Lower bound of the distance from p to the line through e0, e1 (`ee` = ‖e₁ − e₀‖² > TINY).
fn pl_lb(p: Vec3, e0: Vec3, e1: Vec3, ee: f32) -> f32 {
    let (d, err) = pl_parts(e0 - p, e1 - p, ee);
    d - err
}

/// Lower bound of the distance from p to segment e0e1: the endpoints, and the line when the
/// projection parameter may lie in [0, 1].
fn ps_lb(p: Vec3, e0: Vec3, e1: Vec3) -> f32 {
    let ends = pp_lb(p, e0).min(pp_lb(p, e1));
    let e = e1 - e0;
    let ee = e.dot(e);
    if not_above(ee, TINY) {
        // ≈ a point: the segment lies within ‖e‖ of e0.
        return ends - ee.max(0.0).sqrt();
    }
    let a = p - e0;
    let num = e.dot(a);
    let le = ee.sqrt();
    let slack = ROUND * le * (norm(a) + le);
    if num >= -slack && num <= ee + slack {
        return ends.min(pl_lb(p, e0, e1, ee));
    }
    ends
}

/// Lower bound of the point–triangle distance of p and t0 t1 t2.
fn pt_lb(p: Vec3, t0: Vec3, t1: Vec3, t2: Vec3) -> f32 {
    let segs = ps_lb(p, t0, t1).min(ps_lb(p, t1, t2)).min(ps_lb(p, t2, t0));
    let e1 = t1 - t0;
    let e2 = t2 - t0;
    let n = e1.cross(e2);
    let nn = n.dot(n);
    if not_above(nn, TINY) {
        return segs;
    }
    let s12 = norm(e1) * norm(e2);
    let t = [t0, t1, t2];
    for k in 0..3 {
        let ek = t[(k + 1) % 3] - t[k];
        let q = p - t[k];
        let side = ek.cross(q).dot(n);
        if side < -ROUND * (norm(ek) * norm(q) * s12) {
            return segs;
        }
    }
    let w = p - t0;
    let ln = nn.sqrt();
    let plane = (w.dot(n).abs() / ln) * (1.0 - ROUND) - ROUND * (norm(w) * s12 / ln);
    // The same plane distance from a point of the plane near p's projection (module docs,
    // "near points"): its rounding scales with the distance, not with ‖w‖.
    let (a, b) = (
        near_parameter(e2.cross(n).dot(w), nn),
        near_parameter(n.cross(e1).dot(w), nn),
    );
    let wn = (w - e1 * a) - e2 * b;
    let slip = NEAR * (norm(w) + a * norm(e1) + b * norm(e2));
    let near = (wn.dot(n).abs() / ln) * (1.0 - ROUND) - ROUND * (norm(wn) * s12 / ln) - slip;
    segs.min(plane.max(near))
}

/// Whether both ends of `p0 p1` project beyond the same end of segment e0e1 (with a rounding
/// margin): then no point of p0p1 projects inside it.
fn beyond(p0: Vec3, p1: Vec3, e0: Vec3, e: Vec3, ee: f32) -> bool {
    let le = ee.sqrt();
    let a0 = p0 - e0;
    let a1 = p1 - e0;
    let n0 = e.dot(a0);
    let n1 = e.dot(a1);
    let s0 = ROUND * le * (norm(a0) + le);
    let s1 = ROUND * le * (norm(a1) + le);
    (n0 < -s0 && n1 < -s1) || (n0 > ee + s0 && n1 > ee + s1)
}

/// The parallel bound: a lower bound of min over s ∈ [0, 1] of the distance from
/// a(s) = a0 + s·(a1 − a0) to the line of b (`vv` = ‖b₁ − b₀‖² > TINY). Its square q(s) is a
/// convex quadratic; from its values at s = 0, ½, 1 (bounded below and above) its leading
/// coefficient is k = 2(q₀ − 2q_½ + q₁), and every s lies within ¼ of a sample, so
/// min q ≥ min(q₀, q_½, q₁) − k/16. Exact for parallel edges (k = 0), and it needs no
/// ‖u × v‖², whose rounding is absolute (~ε‖u‖‖v‖) and swamps it for nearly parallel edges.
fn parallel_lb(a0: Vec3, a1: Vec3, b0: Vec3, b1: Vec3, vv: f32) -> f32 {
    let am = (a0 + a1) * 0.5;
    let (d0, e0) = pl_parts(b0 - a0, b1 - a0, vv);
    let (d1, e1) = pl_parts(b0 - a1, b1 - a1, vv);
    let (dm, em) = pl_parts(b0 - am, b1 - am, vv);
    // The computed midpoint is within ε‖am‖ of the true one.
    let em = em + ROUND * norm(am);
    let lo = |d: f32, e: f32| {
        let l = (d - e).max(0.0);
        l * l
    };
    let hi = |d: f32, e: f32| {
        let h = d + e;
        h * h
    };
    let (q0h, q1h, qmh) = (hi(d0, e0), hi(d1, e1), hi(dm, em));
    let qml = lo(dm, em);
    let k = 2.0 * ((q0h + q1h) - 2.0 * qml) + ROUND * (q0h + q1h + 2.0 * qmh);
    let low = lo(d0, e0).min(lo(d1, e1)).min(qml) * (1.0 - ROUND);
    (low - k.max(0.0) * 0.0625).max(0.0).sqrt() * (1.0 - ROUND)
}

/// Lower bound of the edge–edge distance of a0a1 and b0b1.
fn ee_lb(a0: Vec3, a1: Vec3, b0: Vec3, b1: Vec3) -> f32 {
    let ends = ps_lb(a0, b0, b1)
        .min(ps_lb(a1, b0, b1))
        .min(ps_lb(b0, a0, a1))
        .min(ps_lb(b1, a0, a1));
    let u = a1 - a0;
    let v = b1 - b0;
    let uu = u.dot(u);
    let vv = v.dot(v);
    if not_above(uu, TINY) || not_above(vv, TINY) {
        // A (nearly) zero-length edge: the endpoint terms, less its length.
        return ends - uu.min(vv).max(0.0).sqrt();
    }
    if beyond(a0, a1, b0, v, vv) || beyond(b0, b1, a0, u, uu) {
        return ends;
    }
    let n = u.cross(v);
    let nn = n.dot(n);
    let r = a0 - b0;
    let (lu, lv, lr) = (norm(u), norm(v), norm(r));
    let mut line = parallel_lb(a0, a1, b0, b1, vv).max(parallel_lb(b0, b1, a0, a1, uu));
    if nn > TINY {
        // The lines' closest parameters s = (n × v)·r / ‖n‖², t = (n × u)·r / ‖n‖².
        let sn = n.cross(v).dot(r);
        let tn = n.cross(u).dot(r);
        let ss = ROUND * (lu * lv * (lv * lr + lu * lv));
        let ts = ROUND * (lu * lv * (lu * lr + lu * lv));
        if sn < -ss || sn > nn + ss || tn < -ts || tn > nn + ts {
            return ends;
        }
        let ln = nn.sqrt();
        let ll = (r.dot(n).abs() / ln) * (1.0 - ROUND) - ROUND * (lr * lu * lv / ln);
        // The same line distance between near points of the two lines (module docs, "near
        // points"): its rounding scales with the distance, not with ‖r‖.
        let (s, t) = (near_parameter(sn, nn), near_parameter(tn, nn));
        let w = (r + u * s) - v * t;
        let slip = NEAR * (lr + s * lu + t * lv);
        let near = (w.dot(n).abs() / ln) * (1.0 - ROUND) - ROUND * (norm(w) * lu * lv / ln) - slip;
        line = line.max(ll).max(near);
    }
    ends.min(line)
}

/// Lower bound of the distance of pair kind `kind` (0 point–triangle, 1 edge–edge) at `x`.
pub fn pair_lower_bound(kind: u32, x: &[Vec3; 4]) -> f32 {
    if kind == GpuPair::POINT_TRIANGLE {
        pt_lb(x[0], x[1], x[2], x[3])
    } else {
        ee_lb(x[0], x[1], x[2], x[3])
    }
}

/// The gap lower bound at time τ: the pair's distance bound at x + τ·Δx, less the position
/// rounding bound `pos` and ξ.
fn gap_at(kind: u32, x: &[Vec3; 4], dx: &[Vec3; 4], tau: f32, pos: f32, xi: f32) -> f32 {
    let xs = [0, 1, 2, 3].map(|k| x[k] + dx[k] * tau);
    (pair_lower_bound(kind, &xs) - pos) - xi
}

/// One pair's conservative time of impact and iteration count (module docs): `x` the pair's
/// start, `dx` its moves, `input` (m) a bound on how far the rounding of `x` itself (when it
/// was formed by [`pair_relative`]) moves the distance — 0 for positions taken as they are.
#[allow(clippy::too_many_arguments)]
pub fn accd_f32(
    kind: u32,
    x: &[Vec3; 4],
    input: f32,
    dx: &[Vec3; 4],
    xi: f32,
    t_max: f32,
    eta: f32,
    max_iterations: u32,
) -> (f32, u32) {
    let t_max = t_max.clamp(0.0, 1.0);
    let mut scale = 0.0f32;
    for k in 0..4 {
        scale = scale.max(norm(x[k]) + norm(dx[k]));
    }
    let pos = 4.0 * f32::EPSILON * scale + 2.0 * f32::EPSILON * input;
    let mut g = gap_at(kind, x, dx, 0.0, pos, xi);
    if not_above(g, 0.0) {
        return (0.0, UNCERTIFIED);
    }
    let m = (dx[0] + dx[1] + dx[2] + dx[3]) * 0.25;
    let split = if kind == GpuPair::POINT_TRIANGLE {
        1
    } else {
        2
    };
    let mut l0 = 0.0f32;
    let mut l1 = 0.0f32;
    for (k, d) in dx.iter().enumerate() {
        let l = norm(*d - m);
        if k < split {
            l0 = l0.max(l);
        } else {
            l1 = l1.max(l);
        }
    }
    let lp = (l0 + l1) * (1.0 + ROUND);
    if lp == 0.0 {
        return (t_max, 0);
    }
    if not_above(f32::MAX, lp) {
        return (0.0, 0);
    }
    let stop = (1.0 - eta) * g;
    let mut t = 0.0f32;
    for it in 1..=max_iterations {
        let cert = g / lp;
        let tau = (t + eta * cert).min(t_max);
        if not_above(tau, t) || tau - t > cert * (1.0 - 4.0 * f32::EPSILON) {
            return (t, it);
        }
        g = gap_at(kind, x, dx, tau, pos, xi);
        if not_above(g, 0.0) || (t > 0.0 && g < stop) {
            return (t, it);
        }
        t = tau;
        if t >= t_max {
            return (t_max, it);
        }
    }
    (t, max_iterations)
}

fn v3(p: &GpuVec4) -> Vec3 {
    Vec3::new(p[0], p[1], p[2])
}

/// Twin of `ipc_ccd.wgsl` (module docs): per pair i < n, `toi[i]` ∈ [0, t_max] and `iters[i]`
/// from start positions `x` (m) and displacements `dx` (m). f0 = ξ (m), f1 = t_max, f2 = η,
/// u0 = the iteration cap, u1 > 0: positions in two parts, vertex v at `x[v] + x[u1 + v]`,
/// taken relative to the pair's first vertex ([`pair_relative`]); 0: `x[v]` as they are.
pub fn ipc_ccd(
    p: &Params,
    x: &[GpuVec4],
    dx: &[GpuVec4],
    pairs: &[GpuPair],
    toi: &mut [f32],
    iters: &mut [u32],
) -> Result<()> {
    let n = p.n as usize;
    need(pairs.len(), n, "ipc_ccd pairs")?;
    need(toi.len(), n, "ipc_ccd toi")?;
    need(iters.len(), n, "ipc_ccd iters")?;
    let at = p.u1 as usize;
    let nv = if at > 0 {
        need(x.len(), 2 * at, "ipc_ccd x (with fine parts)")?;
        at.min(dx.len())
    } else {
        x.len().min(dx.len())
    };
    if let Some((i, pr)) = pairs[..n]
        .iter()
        .enumerate()
        .find(|(_, pr)| pr.v.iter().any(|&v| v as usize >= nv) || pr.kind > GpuPair::EDGE_EDGE)
    {
        return Err(JelloError::Invalid(format!(
            "ipc_ccd: pair {i} = {:?} (kind {}) indexes past {nv} vertices or has an unknown kind",
            pr.v, pr.kind
        )));
    }
    toi[..n]
        .par_iter_mut()
        .zip(iters[..n].par_iter_mut())
        .enumerate()
        .for_each(|(i, (t, it))| {
            let pr = &pairs[i];
            let hs = pr.v.map(|v| v3(&x[v as usize]));
            let fs = if at > 0 {
                pr.v.map(|v| v3(&x[at + v as usize]))
            } else {
                [Vec3::ZERO; 4]
            };
            let (xs, input) = if at > 0 {
                let xs = pair_relative(&hs, &fs);
                let input = (0..4).fold(0.0f32, |m, k| m.max(norm(xs[k]) + norm(fs[k] - fs[0])));
                (xs, input)
            } else {
                (hs, 0.0)
            };
            let ds = pr.v.map(|v| v3(&dx[v as usize]));
            (*t, *it) = accd_f32(pr.kind, &xs, input, &ds, p.f0, p.f1, p.f2, p.u0);
        });
    Ok(())
}

/// Twin of `ipc_vertex_toi.wgsl` (module docs): for vertex v < n, `toi[v]` = min(f0, the
/// `pair_toi` of its CSR row), and per group g of [`VERTEX_TOI_GROUP`] vertices `part[g]` = the
/// maximum of 1/max(toi, 10⁻³⁰) over them.
pub fn ipc_vertex_toi(
    p: &Params,
    pair_toi: &[f32],
    offsets: &[u32],
    csr_pairs: &[u32],
    toi: &mut [f32],
    part: &mut [f32],
) -> Result<()> {
    let n = p.n as usize;
    need(toi.len(), n, "ipc_vertex_toi toi")?;
    need(
        part.len(),
        n.div_ceil(VERTEX_TOI_GROUP),
        "ipc_vertex_toi part",
    )?;
    need(offsets.len(), n + 1, "ipc_vertex_toi offsets")?;
    let end = offsets[n] as usize;
    need(csr_pairs.len(), end, "ipc_vertex_toi csr_pairs")?;
    if let Some(v) = (0..n).find(|&v| offsets[v] > offsets[v + 1]) {
        return Err(JelloError::Invalid(format!(
            "ipc_vertex_toi: CSR offsets decrease at vertex {v}"
        )));
    }
    if let Some(k) = (offsets[0] as usize..end).find(|&k| csr_pairs[k] as usize >= pair_toi.len()) {
        return Err(JelloError::Invalid(format!(
            "ipc_vertex_toi: CSR entry {k} = pair {} past {} pairs",
            csr_pairs[k],
            pair_toi.len()
        )));
    }
    toi[..n].par_iter_mut().enumerate().for_each(|(v, tv)| {
        let mut m = p.f0;
        for k in offsets[v] as usize..offsets[v + 1] as usize {
            m = m.min(pair_toi[csr_pairs[k] as usize]);
        }
        *tv = m;
    });
    part[..n.div_ceil(VERTEX_TOI_GROUP)]
        .par_iter_mut()
        .enumerate()
        .for_each(|(g, pg)| {
            let vs = g * VERTEX_TOI_GROUP..((g + 1) * VERTEX_TOI_GROUP).min(n);
            *pg = toi[vs]
                .iter()
                .fold(0.0f32, |a, &t| a.max(1.0 / t.max(1e-30)));
        });
    Ok(())
}
