// Per vertex v < n, the vertex terms of the incremental potential (f0 = the inertia weight 1/ĥ²,
// f1 = κ, f2 = d̂, f3 = the barrier's 1/h²; f0 = f3 under implicit Euler, not under BDF2 —
// integrator.rs):
//   g[v].xyz   = free ? g[v].xyz (gathered ∇Ψ) + m/ĥ²(x − x̃) + Σ_o κm/h² b'(d_o)∇d_o : 0
//   venergy[v] = m/(2ĥ²)(x − x₀)·(x + x₀ − 2x̃) + Σ_o κm/h² b(d_o)          (J, every vertex)
//   hbar[v]    = Σ_o κm/h² (b''∇d∇dᵀ + [b' > 0] b'∇²d)                      (N/m)
// over the half-spaces and boxes o with d_o < d̂ (the point–plane and point–box distances;
// local.rs: vertex_gradient, barrier_hessian; potential.rs), from the vertex's contact records
// contacts[v·nc .. v·nc + nc], nc = len(contacts) / n. Spheres act on the surface triangles
// only, boxes on them and their edges too (`jgs2_face_terms`, `jgs2_edge_terms`, dispatched after
// this kernel); sphere records are skipped here.
// The inertia energy is relative to the step's start x₀ = x_start[v] (potential.rs:
// inertia_difference): E(x) − E(x₀) summed per vertex never forms ½m/ĥ²|x − x̃|², whose
// constant part (½‖ĥ²g‖²_M) would swamp the change at large h.
#import params
#import jgs2
#import obstacle

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> x_tilde: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> x_start: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> vinfo: array<VertexInfo>;
@group(0) @binding(4) var<storage, read> contacts: array<Contact>;
@group(0) @binding(5) var<storage, read_write> g: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> venergy: array<f32>;
@group(0) @binding(7) var<storage, read_write> hbar: array<mat3x3<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let v = linear_group(wid) * 64u + lid.x;
    if v >= P.n {
        return;
    }
    let p = x[v].xyz;
    let info = vinfo[v];
    let k = info.mass * P.f0;
    let xt = x_tilde[v].xyz;
    let d = p - xt;
    let p0 = x_start[v].xyz;
    var e = 0.5 * k * dot(p - p0, d + (p0 - xt));
    let wv = P.f1 * info.mass * P.f3;
    var gb = vec3<f32>(0.0);
    var hb = mat3_zero();
    let nc = arrayLength(&contacts) / P.n;
    for (var o = 0u; o < nc; o++) {
        let c = contacts[v * nc + o];
        if contact_kind(c) != OBSTACLE_HALF_SPACE && contact_kind(c) != OBSTACLE_BOX {
            continue;
        }
        let de = contact_distance(c);
        if de.d < P.f2 {
            let b = barrier(de.d, P.f2);
            e += wv * b.x;
            gb += de.grad * (wv * b.y);
            hb += outer_vv(de.grad, de.grad) * (wv * b.z);
            if b.y > 0.0 {
                hb += de.hess * (wv * b.y);
            }
        }
    }
    venergy[v] = e;
    hbar[v] = hb;
    if info.free != 0u {
        g[v] = vec4<f32>(g[v].xyz + k * d + gb, 0.0);
    } else {
        g[v] = vec4<f32>(0.0);
    }
}
