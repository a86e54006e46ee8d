// Surface triangles against spheres and boxes, seen through their corners' contact records
// (`obstacle.wgsl`: obstacle-relative, so distances near contact keep f32 precision): the closest
// pair (distance, barycentric coordinates of the triangle's point, unit normal), the overlap test
// and a conservative time of impact of a moving triangle (additive CCD) — mirrors of
// src/problem/geometry.rs (`Obstacle::triangle_contact`, `triangle_distance`,
// `triangle_time_of_impact`). CPU twin: src/gpu/twins/surface.rs.
//
// Kernels importing it bind `contacts` (record o of vertex v at v·nc + o), `vfaces` (the surface
// triangles of vertex v at vfaces[vfaces[v] .. vfaces[v + 1]]) and `tris` (per triangle xyz its
// corners, w the bits of its surface mass in kg), and call `face_corner`, `face_contact`,
// `face_toi` with records read from `contacts`.
#import obstacle

const TRI_CCD_ITERS: u32 = 200u;

// The closest pair of a triangle and an obstacle.
struct TriContact {
    // Distance, m (≤ 0: the triangle touches or enters the obstacle).
    d: f32,
    // Barycentric coordinates of the triangle's closest point.
    bary: vec3<f32>,
    // Unit vector from the obstacle's closest point to the triangle's (0 when d ≤ 0).
    normal: vec3<f32>,
}

// A triangle in its obstacle's frame. Sphere: corners relative to the centre, `dist` the corners'
// recorded distances, the sphere spans [lo, hi] = [−R, R]³. Box: per axis the corners relative
// to the face nearer corner 0 (an exact translation: near that face the coordinates are small
// and precise), the box spans [lo, hi].
struct TriFrame {
    p0: vec3<f32>,
    p1: vec3<f32>,
    p2: vec3<f32>,
    dist: vec3<f32>,
    lo: vec3<f32>,
    hi: vec3<f32>,
    kind: u32,
}

fn tri_frame(c0: Contact, c1: Contact, c2: Contact) -> TriFrame {
    var f: TriFrame;
    f.kind = contact_kind(c0);
    f.dist = vec3<f32>(c0.a.w, c1.a.w, c2.a.w);
    if f.kind == OBSTACLE_SPHERE {
        f.p0 = c0.a.xyz;
        f.p1 = c1.a.xyz;
        f.p2 = c2.a.xyz;
        f.lo = vec3<f32>(-c0.b.x);
        f.hi = vec3<f32>(c0.b.x);
    } else {
        for (var k = 0u; k < 3u; k++) {
            let size = c0.a[k] + c0.b[k];
            if c0.a[k] <= c0.b[k] {
                f.p0[k] = c0.a[k];
                f.p1[k] = c1.a[k];
                f.p2[k] = c2.a[k];
                f.lo[k] = 0.0;
                f.hi[k] = size;
            } else {
                f.p0[k] = -c0.b[k];
                f.p1[k] = -c1.b[k];
                f.p2[k] = -c2.b[k];
                f.lo[k] = -size;
                f.hi[k] = 0.0;
            }
        }
    }
    return f;
}

// Barycentric coordinates of the point of triangle abc closest to p (Ericson, Real-Time
// Collision Detection §5.1.5); a degenerate triangle gives its nearest corner.
fn tri_closest_bary(p: vec3<f32>, a: vec3<f32>, b: vec3<f32>, c: vec3<f32>) -> vec3<f32> {
    let ab = b - a;
    let ac = c - a;
    let ap = p - a;
    let d1 = dot(ab, ap);
    let d2 = dot(ac, ap);
    if d1 <= 0.0 && d2 <= 0.0 {
        return vec3<f32>(1.0, 0.0, 0.0);
    }
    let bp = p - b;
    let d3 = dot(ab, bp);
    let d4 = dot(ac, bp);
    if d3 >= 0.0 && d4 <= d3 {
        return vec3<f32>(0.0, 1.0, 0.0);
    }
    let vc = d1 * d4 - d3 * d2;
    if vc <= 0.0 && d1 >= 0.0 && d3 <= 0.0 {
        let v = d1 / (d1 - d3);
        return vec3<f32>(1.0 - v, v, 0.0);
    }
    let cp = p - c;
    let d5 = dot(ab, cp);
    let d6 = dot(ac, cp);
    if d6 >= 0.0 && d5 <= d6 {
        return vec3<f32>(0.0, 0.0, 1.0);
    }
    let vb = d5 * d2 - d1 * d6;
    if vb <= 0.0 && d2 >= 0.0 && d6 <= 0.0 {
        let w = d2 / (d2 - d6);
        return vec3<f32>(1.0 - w, 0.0, w);
    }
    let va = d3 * d6 - d5 * d4;
    if va <= 0.0 && (d4 - d3) >= 0.0 && (d5 - d6) >= 0.0 {
        let w = (d4 - d3) / ((d4 - d3) + (d5 - d6));
        return vec3<f32>(0.0, 1.0 - w, w);
    }
    let denom = va + vb + vc;
    if abs(denom) <= 1e-30 {
        let la = dot(ap, ap);
        let lb = dot(bp, bp);
        let lc = dot(cp, cp);
        if la <= lb && la <= lc {
            return vec3<f32>(1.0, 0.0, 0.0);
        }
        if lb <= lc {
            return vec3<f32>(0.0, 1.0, 0.0);
        }
        return vec3<f32>(0.0, 0.0, 1.0);
    }
    let v = vb / denom;
    let w = vc / denom;
    return vec3<f32>(1.0 - v - w, v, w);
}

// Closest points of segments p0p1 and q0q1 (Ericson §5.1.9): (s, t, distance) with the points
// p0 + s(p1 − p0) and q0 + t(q1 − q0).
fn segment_closest(p0: vec3<f32>, p1: vec3<f32>, q0: vec3<f32>, q1: vec3<f32>) -> vec3<f32> {
    let d1 = p1 - p0;
    let d2 = q1 - q0;
    let r = p0 - q0;
    let a = dot(d1, d1);
    let e = dot(d2, d2);
    let f = dot(d2, r);
    let eps = 1e-30;
    var s = 0.0;
    var t = 0.0;
    if a <= eps && e <= eps {
        s = 0.0;
        t = 0.0;
    } else if a <= eps {
        t = clamp(f / e, 0.0, 1.0);
    } else {
        let c = dot(d1, r);
        if e <= eps {
            s = clamp(-c / a, 0.0, 1.0);
        } else {
            let b = dot(d1, d2);
            let denom = a * e - b * b;
            if denom > 0.0 {
                s = clamp((b * f - c * e) / denom, 0.0, 1.0);
            }
            t = (b * s + f) / e;
            if t < 0.0 {
                t = 0.0;
                s = clamp(-c / a, 0.0, 1.0);
            } else if t > 1.0 {
                t = 1.0;
                s = clamp((b - c) / a, 0.0, 1.0);
            }
        }
    }
    return vec3<f32>(s, t, length((p0 + d1 * s) - (q0 + d2 * t)));
}

// Sphere: the closest point q of the triangle to the centre, and its distance |q| − R from the
// corners' recorded distances d_k: |q|² − R² = Σ w_k d_k (d_k + 2R) − Σ_{j<k} w_j w_k |p_j − p_k|²
// (exact for q = Σ w_k p_k), so |q| is never subtracted from R.
fn sphere_tri_contact(f: TriFrame) -> TriContact {
    var out: TriContact;
    let w = tri_closest_bary(vec3<f32>(0.0), f.p0, f.p1, f.p2);
    let e01 = f.p1 - f.p0;
    let e02 = f.p2 - f.p0;
    let e12 = f.p2 - f.p1;
    let q = f.p0 + e01 * w.y + e02 * w.z;
    let len = length(q);
    let r = f.hi.x;
    let dk = f.dist;
    let num = w.x * dk.x * (dk.x + 2.0 * r) + w.y * dk.y * (dk.y + 2.0 * r) + w.z * dk.z * (dk.z + 2.0 * r)
        - (w.x * w.y * dot(e01, e01) + w.x * w.z * dot(e02, e02) + w.y * w.z * dot(e12, e12));
    out.d = num / (len + r);
    out.bary = w;
    out.normal = vec3<f32>(0.0);
    if len > 0.0 && out.d > 0.0 {
        out.normal = q / len;
    }
    return out;
}

// Whether the triangle meets the closed box [lo, hi]: the separating-axis test over the box's
// face normals, the triangle's normal and the 9 edge cross products (Akenine-Möller 2001).
fn tri_box_overlap(f: TriFrame) -> bool {
    let c = (f.lo + f.hi) * 0.5;
    let h = (f.hi - f.lo) * 0.5;
    let v0 = f.p0 - c;
    let v1 = f.p1 - c;
    let v2 = f.p2 - c;
    var axes: array<vec3<f32>, 13>;
    axes[0] = vec3<f32>(1.0, 0.0, 0.0);
    axes[1] = vec3<f32>(0.0, 1.0, 0.0);
    axes[2] = vec3<f32>(0.0, 0.0, 1.0);
    let e0 = v1 - v0;
    let e1 = v2 - v1;
    let e2 = v0 - v2;
    axes[3] = cross(e0, e1);
    var n = 4u;
    for (var k = 0u; k < 3u; k++) {
        axes[n] = cross(axes[k], e0);
        axes[n + 1u] = cross(axes[k], e1);
        axes[n + 2u] = cross(axes[k], e2);
        n += 3u;
    }
    for (var i = 0u; i < 13u; i++) {
        let axis = axes[i];
        if dot(axis, axis) <= 1e-30 {
            continue;
        }
        let a = dot(v0, axis);
        let b = dot(v1, axis);
        let cc = dot(v2, axis);
        let r = h.x * abs(axis.x) + h.y * abs(axis.y) + h.z * abs(axis.z);
        if min(a, min(b, cc)) > r || max(a, max(b, cc)) < -r {
            return false;
        }
    }
    return true;
}

fn box_corner(f: TriFrame, i: u32) -> vec3<f32> {
    return select(f.lo, f.hi, vec3<bool>((i & 1u) != 0u, (i & 2u) != 0u, (i & 4u) != 0u));
}

fn tri_corner(f: TriFrame, k: u32) -> vec3<f32> {
    if k == 0u {
        return f.p0;
    }
    if k == 1u {
        return f.p1;
    }
    return f.p2;
}

fn unit3(k: u32) -> vec3<f32> {
    return vec3<f32>(select(0.0, 1.0, k == 0u), select(0.0, 1.0, k == 1u), select(0.0, 1.0, k == 2u));
}

// Box: overlap → d = 0; else the least of the corners against the box, the box's corners against
// the triangle and the triangle's edges against the box's edges (exact for disjoint convex
// polytopes), first strict minimum in that order.
fn box_tri_contact(f: TriFrame) -> TriContact {
    var out: TriContact;
    out.d = 0.0;
    out.bary = vec3<f32>(1.0, 0.0, 0.0);
    out.normal = vec3<f32>(0.0);
    if tri_box_overlap(f) {
        return out;
    }
    var best = bitcast<f32>(0x7f800000u);
    var bp = vec3<f32>(0.0);
    var bq = vec3<f32>(0.0);
    for (var k = 0u; k < 3u; k++) {
        let p = tri_corner(f, k);
        let q = clamp(p, f.lo, f.hi);
        let d = length(p - q);
        if d < best {
            best = d;
            out.bary = unit3(k);
            bp = p;
            bq = q;
        }
    }
    let e01 = f.p1 - f.p0;
    let e02 = f.p2 - f.p0;
    for (var i = 0u; i < 8u; i++) {
        let q = box_corner(f, i);
        let w = tri_closest_bary(q, f.p0, f.p1, f.p2);
        let p = f.p0 + e01 * w.y + e02 * w.z;
        let d = length(p - q);
        if d < best {
            best = d;
            out.bary = w;
            bp = p;
            bq = q;
        }
    }
    for (var i = 0u; i < 8u; i++) {
        for (var k = 0u; k < 3u; k++) {
            if (i & (1u << k)) != 0u {
                continue;
            }
            let q0 = box_corner(f, i);
            let q1 = box_corner(f, i | (1u << k));
            for (var a = 0u; a < 3u; a++) {
                let b = (a + 1u) % 3u;
                let pa = tri_corner(f, a);
                let pb = tri_corner(f, b);
                let st = segment_closest(pa, pb, q0, q1);
                if st.z < best {
                    best = st.z;
                    out.bary = unit3(a) * (1.0 - st.x) + unit3(b) * st.x;
                    bp = pa + (pb - pa) * st.x;
                    bq = q0 + (q1 - q0) * st.y;
                }
            }
        }
    }
    out.d = best;
    if best > 0.0 {
        out.normal = (bp - bq) / best;
    }
    return out;
}

// The closest pair of the triangle with corner records c0, c1, c2 (one bounded obstacle).
fn face_contact(c0: Contact, c1: Contact, c2: Contact) -> TriContact {
    let f = tri_frame(c0, c1, c2);
    if f.kind == OBSTACLE_SPHERE {
        return sphere_tri_contact(f);
    }
    return box_tri_contact(f);
}

// A lower bound on the distance between the triangle (moved by d0, d1, d2: its swept bounds)
// and the obstacle: the largest gap between their axis-aligned bounds (≤ 0 when they meet).
fn face_bounds_gap(c0: Contact, c1: Contact, c2: Contact, d0: vec3<f32>, d1: vec3<f32>, d2: vec3<f32>) -> f32 {
    let f = tri_frame(c0, c1, c2);
    let lo = min(min(min(f.p0, f.p1), min(f.p2, f.p0 + d0)), min(f.p1 + d1, f.p2 + d2));
    let hi = max(max(max(f.p0, f.p1), max(f.p2, f.p0 + d0)), max(f.p1 + d1, f.p2 + d2));
    let gap = max(f.lo - hi, lo - f.hi);
    return max(gap.x, max(gap.y, gap.z));
}

// A conservative time of impact t ∈ [0, 1] of the triangle moving linearly by d0, d1, d2 (per
// corner) against the records' static obstacle, keeping a separation h = min(thickness, ½ the
// starting distance) — and none at all (0) for a move toward the obstacle from within the
// thickness, so repeated moves cannot ratchet a gap down below it: additive CCD on the distance
// minus h — advance by 0.9·gap / (largest
// corner speed), which no point of the triangle can close, until the gap falls below 10% of the
// starting gap (then that t) or t reaches 1; 0 when it starts in contact; at most TRI_CCD_ITERS
// advances. The moved corners' records are the start's advanced by d_k·t (`contact_advance`),
// so gaps keep their precision. (thickness 0: the f64 reference's `triangle_time_of_impact`;
// the kernels pass a small one so that gaps stay above what f32 resolves.)
fn face_toi(c0: Contact, c1: Contact, c2: Contact, d0: vec3<f32>, d1: vec3<f32>, d2: vec3<f32>, thickness: f32) -> f32 {
    let speed = max(length(d0), max(length(d1), length(d2)));
    if speed == 0.0 {
        return 1.0;
    }
    let start = face_contact(c0, c1, c2);
    let g0 = start.d;
    if g0 <= 0.0 {
        return 0.0;
    }
    if g0 < thickness {
        // Already inside the separation: a move that brings the closest points nearer
        // (∂d/∂t = n·Σ bary_k d_k ≤ 0) is refused, a receding one keeps half the gap.
        let b = start.bary;
        if dot(start.normal, d0 * b.x + d1 * b.y + d2 * b.z) <= 0.0 {
            return 0.0;
        }
    }
    let h = min(thickness, 0.5 * g0);
    let goal = 0.1 * (g0 - h);
    var t = 0.0;
    var gap = g0 - h;
    for (var i = 0u; i < TRI_CCD_ITERS; i++) {
        let dt = 0.9 * gap / speed;
        if t + dt >= 1.0 {
            return 1.0;
        }
        t += dt;
        gap = face_contact(contact_advance(c0, d0 * t), contact_advance(c1, d1 * t), contact_advance(c2, d2 * t)).d - h;
        if gap < goal {
            return t;
        }
    }
    return t;
}

// Which corner (0, 1, 2) of triangle `tri` vertex v is (3 when none).
fn face_corner(tri: vec4<u32>, v: u32) -> u32 {
    if tri.x == v {
        return 0u;
    }
    if tri.y == v {
        return 1u;
    }
    if tri.z == v {
        return 2u;
    }
    return 3u;
}

fn is_bounded(kind: u32) -> bool {
    return kind == OBSTACLE_SPHERE || kind == OBSTACLE_BOX;
}
