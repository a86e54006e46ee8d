// Surface triangles against spheres, seen through their corners' contact records
// (`obstacle.wgsl`: centre-relative, so distances near contact keep f32 precision): the closest
// pair (distance, barycentric coordinates of the triangle's point, unit normal) and a
// conservative time of impact of a moving triangle (additive CCD) — mirrors of the f64
// reference's triangle–sphere pair (src/problem/surface_contact.rs, `PairKind::TriangleSphere`)
// and `Obstacle::triangle_time_of_impact` (geometry.rs). Boxes are not handled on the device
// (`DeviceJgs2::new` refuses them). CPU twin: src/gpu/twins/surface.rs.
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

// A triangle in its sphere's frame: corners relative to the centre, `dist` the corners' recorded
// distances, the sphere's bounds [lo, hi] = [−R, R]³.
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
    f.lo = vec3<f32>(-c0.b.x);
    f.hi = vec3<f32>(c0.b.x);
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

// The closest pair of the triangle with corner records c0, c1, c2 (one sphere).
fn face_contact(c0: Contact, c1: Contact, c2: Contact) -> TriContact {
    return sphere_tri_contact(tri_frame(c0, c1, c2));
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

// Whether obstacles of this kind act on the surface triangles (spheres; the device runtime
// refuses boxes, whose IPC pairs — box corner–triangle, edge–edge — only the f64 reference has).
fn acts_on_faces(kind: u32) -> bool {
    return kind == OBSTACLE_SPHERE;
}
