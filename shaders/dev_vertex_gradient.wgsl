// Per vertex v < n, after `gather_gradient` wrote ∇Ψ into g (f0 = inertia weight 1/h², f1 = κ,
// f2 = d̂, f3 = 1/h² of the barrier weight κ·m/h²):
//   g[v] = free ? g[v] + m_v f0 (x − x̃) + Σ_o κ m_v f3 b'(d_o) ∇d_o : 0
//   out[u1 + g] = Σ_{v in group g} (|g[v]| · inv_c[v])²   (the characteristic norm's square sum)
#import params
#import obstacle
#import wg_reduce

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> x_tilde: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> vinfo: array<VertexInfo>;
@group(0) @binding(3) var<storage, read> contacts: array<Contact>;
@group(0) @binding(4) var<storage, read> inv_c: array<f32>;
@group(0) @binding(5) var<storage, read_write> g: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

// Per-vertex static data (mirrors jello::gpu::GpuVertexInfo).
struct VertexInfo {
    mass: f32,
    free: u32,
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let grp = linear_group(wid);
    let v = grp * 256u + lid.x;
    var r = 0.0;
    if v < P.n {
        let info = vinfo[v];
        if info.free != 0u {
            let m = info.mass;
            var gv = g[v].xyz + m * P.f0 * (x[v].xyz - x_tilde[v].xyz);
            let nc = arrayLength(&contacts) / P.n;
            for (var o = 0u; o < nc; o++) {
                let c = contacts[v * nc + o];
                if contact_kind(c) == OBSTACLE_NONE {
                    continue;
                }
                let de = contact_distance(c);
                if de.d < P.f2 {
                    gv += de.grad * (P.f1 * m * P.f3 * barrier(de.d, P.f2).y);
                }
            }
            g[v] = vec4<f32>(gv, 0.0);
            let w = length(gv) * inv_c[v];
            r = w * w;
        } else {
            g[v] = vec4<f32>(0.0);
        }
    }
    let s = wg_sum3(lid.x, vec3<f32>(r, 0.0, 0.0));
    if lid.x == 0u {
        out[P.u1 + grp] = s.x;
    }
}
