// Surface triangles and edges against spheres and boxes, seen through their corners' contact
// records (`obstacle.wgsl`: centre- or face-relative, so distances near contact keep f32
// precision): the closest pair of a triangle and a sphere, of a box corner and a triangle, of a
// surface edge and a box edge (distance, the surface point's weights on its corners, unit
// normal), the triangle–box distance, and a conservative time of impact of a moving triangle
// (additive CCD) — mirrors of the f64 reference's pairs (src/problem/surface_contact.rs:
// `PairKind::TriangleSphere`, `CornerTriangle`, `EdgeEdge`) and of geometry.rs
// (`triangle_box_distance`, `Obstacle::triangle_time_of_impact`). CPU twin:
// src/gpu/twins/surface.rs.
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

// A triangle in its obstacle's frame: corners relative to a sphere's centre (`dist` the corners'
// recorded distances, the bounds [lo, hi] = [−R, R]³) or to a box's min corner (the bounds
// [0, max − min]).
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
    f.p0 = c0.a.xyz;
    f.p1 = c1.a.xyz;
    f.p2 = c2.a.xyz;
    if f.kind == OBSTACLE_BOX {
        f.lo = vec3<f32>(0.0);
        f.hi = box_extent(c0);
    } else {
        f.lo = vec3<f32>(-c0.b.x);
        f.hi = vec3<f32>(c0.b.x);
    }
    return f;
}

// A box's extent max − min from one of its records.
fn box_extent(c: Contact) -> vec3<f32> {
    return c.a.xyz + c.b.xyz;
}

// The offset of a record's vertex from box corner `corner` (bit k set: the max face along axis
// k): per axis x − min (a) or x − max (−b), each exact in the record.
fn box_offset(c: Contact, corner: u32) -> vec3<f32> {
    var p = c.a.xyz;
    for (var k = 0u; k < 3u; k++) {
        if ((corner >> k) & 1u) != 0u {
            p[k] = -c.b[k];
        }
    }
    return p;
}

// Box edge e (0..12, surface_contact.rs's BOX_EDGES): along axis e / 4, from the corner with
// that axis's bit clear and the other two bits from e % 4 (low bit first).
fn box_edge_axis(e: u32) -> u32 {
    return e / 4u;
}
fn box_edge_from(e: u32) -> u32 {
    let k = e / 4u;
    let r = e % 4u;
    return (r & ((1u << k) - 1u)) | ((r >> k) << (k + 1u));
}

// The closest points of segment p0p1 and the box edge from 0 to len·e_k (k the axis): s on the
// segment and r = the segment's point minus the edge's. Ericson's segment–segment algorithm
// (§5.1.9, geometry.rs's `segment_closest`) with its terms written out for an axis-aligned second
// segment — a·e − b² = len²·|u⊥|² and b·f − c·e = −len²·(u⊥·p0⊥), ⊥ the components off axis k —
// so near-parallel edges (where a·e − b² cancels) keep f32 precision; the off-axis part of r is
// p0⊥ + s·u⊥, its axis part 0 unless t is clamped.
struct AxisPair {
    s: f32,
    r: vec3<f32>,
}

fn segment_axis_closest(p0: vec3<f32>, p1: vec3<f32>, k: u32, len: f32) -> AxisPair {
    let u = p1 - p0;
    var u_off = u;
    u_off[k] = 0.0;
    var p_off = p0;
    p_off[k] = 0.0;
    let a = dot(u, u);
    let e = len * len;
    let eps = 1e-30;
    var s = 0.0;
    var t = 0.0;
    var clamped = true;
    if a <= eps && e <= eps {
        s = 0.0;
    } else if a <= eps {
        t = clamp(p0[k] / len, 0.0, 1.0);
        clamped = t != p0[k] / len;
    } else {
        let c = dot(u, p0);
        if e <= eps {
            s = clamp(-c / a, 0.0, 1.0);
        } else {
            let den = dot(u_off, u_off);
            if den > 0.0 {
                s = clamp(-dot(u_off, p_off) / den, 0.0, 1.0);
            }
            t = (p0[k] + s * u[k]) / len;
            clamped = false;
            if t < 0.0 {
                t = 0.0;
                s = clamp(-c / a, 0.0, 1.0);
                clamped = true;
            } else if t > 1.0 {
                t = 1.0;
                s = clamp((u[k] * len - c) / a, 0.0, 1.0);
                clamped = true;
            }
        }
    }
    var out: AxisPair;
    out.s = s;
    out.r = p_off + u_off * s;
    if clamped {
        out.r[k] = p0[k] + s * u[k] - t * len;
    }
    return out;
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

// Box corner `corner` and the triangle with corner records c0, c1, c2: the triangle's point
// nearest the corner (surface_contact.rs's corner–triangle pair), from the corners' offsets to
// it.
fn corner_tri_contact(c0: Contact, c1: Contact, c2: Contact, corner: u32) -> TriContact {
    var out: TriContact;
    let p0 = box_offset(c0, corner);
    let p1 = box_offset(c1, corner);
    let p2 = box_offset(c2, corner);
    let w = tri_closest_bary(vec3<f32>(0.0), p0, p1, p2);
    let q = p0 + (p1 - p0) * w.y + (p2 - p0) * w.z;
    let len = length(q);
    out.d = len;
    out.bary = w;
    out.normal = vec3<f32>(0.0);
    if len > 0.0 {
        out.normal = q / len;
    }
    return out;
}

// Whether the triangle (box-centre-relative corners v0, v1, v2) meets the box of half extent h:
// the separating-axis test over the box's face normals, the triangle's normal and the nine edge
// cross products (geometry.rs's `triangle_box_overlap`).
fn tri_box_separated(v0: vec3<f32>, v1: vec3<f32>, v2: vec3<f32>, h: vec3<f32>, axis: vec3<f32>) -> bool {
    if dot(axis, axis) <= 1e-30 {
        return false;
    }
    let p = vec3<f32>(dot(v0, axis), dot(v1, axis), dot(v2, axis));
    let r = dot(h, abs(axis));
    return min(p.x, min(p.y, p.z)) > r || max(p.x, max(p.y, p.z)) < -r;
}
fn tri_box_overlap(c0: Contact, c1: Contact, c2: Contact) -> bool {
    let h = box_extent(c0) * 0.5;
    let v0 = (c0.a.xyz - c0.b.xyz) * 0.5;
    let v1 = (c1.a.xyz - c1.b.xyz) * 0.5;
    let v2 = (c2.a.xyz - c2.b.xyz) * 0.5;
    let e0 = v1 - v0;
    let e1 = v2 - v1;
    let e2 = v0 - v2;
    for (var k = 0u; k < 3u; k++) {
        var a = vec3<f32>(0.0);
        a[k] = 1.0;
        if tri_box_separated(v0, v1, v2, h, a) || tri_box_separated(v0, v1, v2, h, cross(a, e0))
            || tri_box_separated(v0, v1, v2, h, cross(a, e1)) || tri_box_separated(v0, v1, v2, h, cross(a, e2)) {
            return false;
        }
    }
    return !tri_box_separated(v0, v1, v2, h, cross(e0, e1));
}

// The triangle–box distance (0 when they meet) and its closest pair: the least of the corners
// against the box, the box's corners against the triangle and the triangle's edges against the
// box's edges — exact for disjoint convex polytopes (geometry.rs's `triangle_box_distance`).
fn box_tri_contact(c0: Contact, c1: Contact, c2: Contact) -> TriContact {
    var out: TriContact;
    out.d = 0.0;
    out.bary = vec3<f32>(1.0, 0.0, 0.0);
    out.normal = vec3<f32>(0.0);
    if tri_box_overlap(c0, c1, c2) {
        return out;
    }
    out.d = bitcast<f32>(0x7f800000u);
    for (var k = 0u; k < 3u; k++) {
        var c = c0;
        if k == 1u {
            c = c1;
        } else if k == 2u {
            c = c2;
        }
        let pd = contact_distance(c);
        if pd.d < out.d {
            out.d = pd.d;
            out.bary = vec3<f32>(0.0);
            out.bary[k] = 1.0;
            out.normal = pd.grad;
        }
    }
    for (var corner = 0u; corner < 8u; corner++) {
        let ct = corner_tri_contact(c0, c1, c2, corner);
        if ct.d < out.d {
            out = ct;
        }
    }
    let ext = box_extent(c0);
    for (var e = 0u; e < 12u; e++) {
        let first = box_edge_from(e);
        let k = box_edge_axis(e);
        var p = array<vec3<f32>, 3>(box_offset(c0, first), box_offset(c1, first), box_offset(c2, first));
        for (var a = 0u; a < 3u; a++) {
            let b = (a + 1u) % 3u;
            let st = segment_axis_closest(p[a], p[b], k, ext[k]);
            let d = length(st.r);
            if d < out.d {
                out.d = d;
                out.bary = vec3<f32>(0.0);
                out.bary[a] = 1.0 - st.s;
                out.bary[b] = st.s;
                out.normal = vec3<f32>(0.0);
                if d > 0.0 {
                    out.normal = st.r / d;
                }
            }
        }
    }
    return out;
}

// The closest pair of the triangle with corner records c0, c1, c2 and their obstacle (a sphere
// or a box).
fn face_contact(c0: Contact, c1: Contact, c2: Contact) -> TriContact {
    if contact_kind(c0) == OBSTACLE_BOX {
        return box_tri_contact(c0, c1, c2);
    }
    return sphere_tri_contact(tri_frame(c0, c1, c2));
}

// A surface edge (records ca, cb of its ends) and box edge e: the closest pair (distance, the
// edge's parameter s and the box edge's t, unit normal from the box's point to the edge's), and
// IPC's mollifier on c = |(b − a) × (q1 − q0)|² with ε× = 1e-3·`rest_sq`·|q1 − q0|² (the
// edge's squared rest length; surface_contact.rs's edge–edge pair, mollifier.rs): m and
// ∂m/∂b = −∂m/∂a.
struct EdgeContact {
    d: f32,
    s: f32,
    normal: vec3<f32>,
    m: f32,
    dm: vec3<f32>,
}

fn box_edge_contact(ca: Contact, cb: Contact, e: u32, rest_sq: f32) -> EdgeContact {
    var out: EdgeContact;
    let first = box_edge_from(e);
    let k = box_edge_axis(e);
    let len = box_extent(ca)[k];
    let a = box_offset(ca, first);
    let b = box_offset(cb, first);
    let st = segment_axis_closest(a, b, k, len);
    out.d = length(st.r);
    out.s = st.s;
    out.normal = vec3<f32>(0.0);
    if out.d > 0.0 {
        out.normal = st.r / out.d;
    }
    // (b − a) × q1 = len·(b − a) × e_k: c = len²·(the squared components of b − a off axis k),
    // ∂c/∂(b − a) = 2·len²·(b − a with its axis-k component zeroed).
    var u = b - a;
    u[k] = 0.0;
    let len2 = len * len;
    let c = len2 * dot(u, u);
    let eps = 1e-3 * rest_sq * len2;
    out.m = 1.0;
    out.dm = vec3<f32>(0.0);
    if c < eps {
        let r = c / eps;
        out.m = (2.0 - r) * r;
        out.dm = u * (2.0 * len2) * (2.0 * (1.0 - r) / eps);
    }
    return out;
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

// Whether obstacles of this kind act on the surface triangles (spheres and boxes).
fn acts_on_faces(kind: u32) -> bool {
    return kind == OBSTACLE_SPHERE || kind == OBSTACLE_BOX;
}
