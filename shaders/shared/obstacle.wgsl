// Static obstacles (half-space, box, sphere) seen from one vertex: a `Contact` record holds only
// obstacle-relative quantities (`jello::gpu::GpuContact`, 32 bytes), computed in f64 on the host
// at the step's start and advanced with every position update (`contact_advance`), so distances
// of 1e-7 m keep f32 relative precision. From it: the signed distance with derivatives, the time
// of impact of a straight move, and the IPC log-barrier — mirrors of src/problem/obstacle.rs.
// CPU twin: src/gpu/twins/jgs2.rs. `contact_step_bound` reads the kernel's `contacts` binding
// (record o of vertex v at v·nc + o).
#import mat3

const OBSTACLE_HALF_SPACE: u32 = 0u;
const OBSTACLE_BOX: u32 = 1u;
const OBSTACLE_SPHERE: u32 = 2u;
const OBSTACLE_NONE: u32 = 0xffffffffu;

struct Contact {
    // Half-space: unit normal, w = d. Sphere: x − centre, w = d. Box: x − min.
    a: vec4<f32>,
    // Sphere: x = radius. Box: xyz = max − x. w: the kind's bits.
    b: vec4<f32>,
}

struct DistanceEval {
    // Signed distance (negative inside), m.
    d: f32,
    // ∂d/∂x.
    grad: vec3<f32>,
    // ∂²d/∂x², 1/m.
    hess: mat3x3<f32>,
}

fn contact_kind(c: Contact) -> u32 {
    return bitcast<u32>(c.b.w);
}

fn contact_distance(c: Contact) -> DistanceEval {
    var r: DistanceEval;
    r.d = 0.0;
    r.grad = vec3<f32>(0.0);
    r.hess = mat3_zero();
    let kind = contact_kind(c);
    if kind == OBSTACLE_HALF_SPACE {
        r.d = c.a.w;
        r.grad = c.a.xyz;
    } else if kind == OBSTACLE_SPHERE {
        let len = max(length(c.a.xyz), 1e-30);
        let n = c.a.xyz / len;
        r.d = c.a.w;
        r.grad = n;
        r.hess = (mat3_identity() - outer_vv(n, n)) * (1.0 / len);
    } else if kind == OBSTACLE_BOX {
        let ql = c.a.xyz;
        let qh = c.b.xyz;
        // x − clamp(x, min, max), per coordinate from the offsets to the faces.
        var q = vec3<f32>(0.0);
        var clamped = 0u;
        for (var k = 0u; k < 3u; k++) {
            if ql[k] < 0.0 {
                q[k] = ql[k];
                clamped++;
            } else if qh[k] < 0.0 {
                q[k] = -qh[k];
                clamped++;
            }
        }
        let len = length(q);
        if len > 0.0 {
            let n = q / len;
            if clamped > 1u {
                var p = mat3_identity() - outer_vv(n, n);
                for (var k = 0u; k < 3u; k++) {
                    if ql[k] >= 0.0 && qh[k] >= 0.0 {
                        // Free coordinate: the distance does not change along it.
                        for (var j = 0u; j < 3u; j++) {
                            p[j][k] = 0.0;
                            p[k][j] = 0.0;
                        }
                    }
                }
                r.hess = p * (1.0 / len);
            }
            r.d = len;
            r.grad = n;
        } else {
            // Inside: negative distance to the nearest face.
            var best = bitcast<f32>(0x7f800000u);
            var g = vec3<f32>(0.0);
            for (var k = 0u; k < 3u; k++) {
                if ql[k] < best {
                    best = ql[k];
                    g = vec3<f32>(0.0);
                    g[k] = -1.0;
                }
                if qh[k] < best {
                    best = qh[k];
                    g = vec3<f32>(0.0);
                    g[k] = 1.0;
                }
            }
            r.d = -best;
            r.grad = g;
        }
    }
    return r;
}

// The largest t ∈ [0, 1] such that x + s·dx, s ∈ [0, t), stays outside (1: never enters).
fn contact_toi(c: Contact, dx: vec3<f32>) -> f32 {
    let kind = contact_kind(c);
    if kind == OBSTACLE_HALF_SPACE {
        let v = dot(c.a.xyz, dx);
        if v < 0.0 {
            return clamp(c.a.w / -v, 0.0, 1.0);
        }
        return 1.0;
    }
    if kind == OBSTACLE_SPHERE {
        // |p + t dx|² = R²: a t² + 2 b t + c0 = 0 with c0 = |p|² − R² = d (d + 2R).
        let a = dot(dx, dx);
        let b = dot(c.a.xyz, dx);
        let c0 = c.a.w * (c.a.w + 2.0 * c.b.x);
        if a == 0.0 || b >= 0.0 {
            return 1.0;
        }
        let disc = b * b - a * c0;
        if disc < 0.0 {
            return 1.0;
        }
        return clamp((-b - sqrt(disc)) / a, 0.0, 1.0);
    }
    if kind == OBSTACLE_BOX {
        var t_enter = 0.0;
        var t_exit = 1.0;
        for (var k = 0u; k < 3u; k++) {
            if dx[k] == 0.0 {
                if c.a[k] < 0.0 || c.b[k] < 0.0 {
                    return 1.0;
                }
            } else {
                let t0 = -c.a[k] / dx[k];
                let t1 = c.b[k] / dx[k];
                t_enter = max(t_enter, min(t0, t1));
                t_exit = min(t_exit, max(t0, t1));
            }
        }
        if t_enter <= t_exit {
            return clamp(t_enter, 0.0, 1.0);
        }
        return 1.0;
    }
    return 1.0;
}

// The record after the vertex moves by dx.
fn contact_advance(c: Contact, dx: vec3<f32>) -> Contact {
    var r = c;
    let kind = contact_kind(c);
    if kind == OBSTACLE_HALF_SPACE {
        r.a.w = c.a.w + dot(c.a.xyz, dx);
    } else if kind == OBSTACLE_SPHERE {
        // |p + dx| − |p| = (2p·dx + dx·dx) / (|p + dx| + |p|), no cancellation.
        let p = c.a.xyz;
        let pn = p + dx;
        let den = length(pn) + length(p);
        if den > 0.0 {
            r.a.w = c.a.w + (2.0 * dot(p, dx) + dot(dx, dx)) / den;
        }
        r.a = vec4<f32>(pn, r.a.w);
    } else if kind == OBSTACLE_BOX {
        r.a = vec4<f32>(c.a.xyz + dx, c.a.w);
        r.b = vec4<f32>(c.b.xyz - dx, c.b.w);
    }
    return r;
}

// Step fraction that keeps vertex v's move dx outside every obstacle: min(1, 0.9 × first time
// of impact); nc records per vertex.
fn contact_step_bound(v: u32, nc: u32, dx: vec3<f32>) -> f32 {
    var alpha = 1.0;
    for (var o = 0u; o < nc; o++) {
        let c = contacts[v * nc + o];
        if contact_kind(c) == OBSTACLE_NONE {
            continue;
        }
        let toi = contact_toi(c, dx);
        if toi < 1.0 {
            alpha = min(alpha, 0.9 * toi);
        }
    }
    return alpha;
}

// b(d), b'(d), b''(d) of the IPC barrier −(d − d̂)² ln(d/d̂) (0 beyond d̂, +∞ at d ≤ 0).
fn barrier(d: f32, dhat: f32) -> vec3<f32> {
    if d >= dhat {
        return vec3<f32>(0.0);
    }
    if d <= 0.0 {
        let inf = bitcast<f32>(0x7f800000u);
        return vec3<f32>(inf, -inf, inf);
    }
    let r = d - dhat;
    let l = log(d / dhat);
    return vec3<f32>(-r * r * l, -(2.0 * r * l + r * r / d), -(2.0 * l + 4.0 * r / d - r * r / (d * d)));
}
