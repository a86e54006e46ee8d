// Static obstacles (half-space, box, sphere), their signed distance with derivatives, the time
// of impact of a straight vertex move, and the IPC log-barrier — f32 mirrors of
// src/problem/obstacle.rs. The CPU twin is src/gpu/twins/jgs2.rs (`obstacle_*`, `barrier`).
// Records are `jello::gpu::GpuObstacle` (48 bytes); coordinates relative to the solver origin.
// `obstacle_step_bound` loops over the kernel's `obstacles` binding.
#import mat3

const OBSTACLE_HALF_SPACE: u32 = 0u;
const OBSTACLE_BOX: u32 = 1u;
const OBSTACLE_SPHERE: u32 = 2u;
const OBSTACLE_NONE: u32 = 0xffffffffu;

struct Obstacle {
    kind: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
    // Half-space: unit normal, w = offset. Box: min. Sphere: centre, w = radius.
    a: vec4<f32>,
    // Box: max.
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

fn obstacle_distance(o: Obstacle, x: vec3<f32>) -> DistanceEval {
    var r: DistanceEval;
    r.hess = mat3_zero();
    if o.kind == OBSTACLE_HALF_SPACE {
        r.d = dot(o.a.xyz, x) - o.a.w;
        r.grad = o.a.xyz;
    } else if o.kind == OBSTACLE_SPHERE {
        let q = x - o.a.xyz;
        let len = max(length(q), 1e-30);
        let n = q / len;
        r.d = len - o.a.w;
        r.grad = n;
        r.hess = (mat3_identity() - outer_vv(n, n)) * (1.0 / len);
    } else {
        let lo = o.a.xyz;
        let hi = o.b.xyz;
        let closest = clamp(x, lo, hi);
        let q = x - closest;
        let len = length(q);
        if len > 0.0 {
            let n = q / len;
            var clamped = 0u;
            for (var k = 0u; k < 3u; k++) {
                if x[k] < lo[k] || x[k] > hi[k] {
                    clamped++;
                }
            }
            if clamped > 1u {
                var p = mat3_identity() - outer_vv(n, n);
                for (var k = 0u; k < 3u; k++) {
                    if x[k] >= lo[k] && x[k] <= hi[k] {
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
                let dl = x[k] - lo[k];
                let dh = hi[k] - x[k];
                if dl < best {
                    best = dl;
                    g = vec3<f32>(0.0);
                    g[k] = -1.0;
                }
                if dh < best {
                    best = dh;
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
fn obstacle_toi(o: Obstacle, x: vec3<f32>, dx: vec3<f32>) -> f32 {
    if o.kind == OBSTACLE_HALF_SPACE {
        let d = dot(o.a.xyz, x) - o.a.w;
        let v = dot(o.a.xyz, dx);
        if v < 0.0 {
            return clamp(d / -v, 0.0, 1.0);
        }
        return 1.0;
    }
    if o.kind == OBSTACLE_SPHERE {
        let q = x - o.a.xyz;
        let a = dot(dx, dx);
        let b = dot(q, dx);
        let c0 = dot(q, q) - o.a.w * o.a.w;
        if a == 0.0 || b >= 0.0 {
            return 1.0;
        }
        let disc = b * b - a * c0;
        if disc < 0.0 {
            return 1.0;
        }
        return clamp((-b - sqrt(disc)) / a, 0.0, 1.0);
    }
    if o.kind == OBSTACLE_BOX {
        var t_enter = 0.0;
        var t_exit = 1.0;
        for (var k = 0u; k < 3u; k++) {
            if dx[k] == 0.0 {
                if x[k] < o.a[k] || x[k] > o.b[k] {
                    return 1.0;
                }
            } else {
                let t0 = (o.a[k] - x[k]) / dx[k];
                let t1 = (o.b[k] - x[k]) / dx[k];
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

// Step fraction that keeps x + α·dx outside every obstacle: min(1, 0.9 × first time of impact).
fn obstacle_step_bound(x: vec3<f32>, dx: vec3<f32>) -> f32 {
    var alpha = 1.0;
    for (var k = 0u; k < arrayLength(&obstacles); k++) {
        let o = obstacles[k];
        if o.kind == OBSTACLE_NONE {
            continue;
        }
        let toi = obstacle_toi(o, x, dx);
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
