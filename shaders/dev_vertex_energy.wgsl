// Per vertex v < n (dynamic step; f0 = inertia weight 1/h², f1 = κ, f2 = d̂, f3 = 1/h² of the
// barrier weight κ·m/h²), with B_v(x) = Σ_o κ·m_v·f3·b(d_o) over the vertex's contact records
// (nc = len(contacts) / n):
//   u0 == 0 (difference): out[u1 + g] = Σ_{v in group g} ½ m_v f0 (x − x_s)·(x + x_s − 2x̃)
//                                                        + B_v(x) − vref[v]          (J)
//   u0 == 1 (reference):  vref[v] = B_v(x);  out[u1 + g] = Σ |B_v(x)|.
// The inertia part never forms ½m|x − x̃|²/h² (potential.rs inertia_difference).
#import params
#import obstacle
#import wg_reduce

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> x_start: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> x_tilde: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> vinfo: array<VertexInfo>;
@group(0) @binding(4) var<storage, read> contacts: array<Contact>;
@group(0) @binding(5) var<storage, read_write> vref: array<f32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

// Per-vertex static data (mirrors jello::gpu::GpuVertexInfo).
struct VertexInfo {
    mass: f32,
    free: u32,
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let g = linear_group(wid);
    let v = g * 256u + lid.x;
    var e = 0.0;
    if v < P.n {
        let m = vinfo[v].mass;
        let nc = arrayLength(&contacts) / P.n;
        var b = 0.0;
        for (var o = 0u; o < nc; o++) {
            let c = contacts[v * nc + o];
            if contact_kind(c) == OBSTACLE_NONE {
                continue;
            }
            let de = contact_distance(c);
            if de.d < P.f2 {
                b += P.f1 * m * P.f3 * barrier(de.d, P.f2).x;
            }
        }
        if P.u0 == 1u {
            vref[v] = b;
            e = abs(b);
        } else {
            let p = x[v].xyz;
            let s = x_start[v].xyz;
            e = 0.5 * m * P.f0 * dot(p - s, p + s - 2.0 * x_tilde[v].xyz) + (b - vref[v]);
        }
    }
    let s = wg_sum3(lid.x, vec3<f32>(e, 0.0, 0.0));
    if lid.x == 0u {
        out[P.u1 + g] = s.x;
    }
}
