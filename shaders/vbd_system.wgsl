// Per listed vertex k < n: i = lists[u1 + k]; vertex i's VBD system (local.rs: vbd_system,
// without the barrier curvature, which `vertex_solve` adds), f0 = the inertia weight 1/ĥ²
// (1/h² under implicit Euler):
//   A = m_i/ĥ² I + Σ_{(e, c) ∈ CSR row i} K_e[c, c],  r = g_i
// written as both the primary and the fallback system. packed[k] = 4e + c (VertexTets::packed).
#import params
#import jgs2
#import hess_block

@group(0) @binding(0) var<storage, read> lists: array<u32>;
@group(0) @binding(1) var<storage, read> vinfo: array<VertexInfo>;
@group(0) @binding(2) var<storage, read> g: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> hess: array<f32>;
@group(0) @binding(4) var<storage, read> offsets: array<u32>;
@group(0) @binding(5) var<storage, read> packed: array<u32>;
@group(0) @binding(6) var<storage, read_write> sys: array<LocalSystem>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let k = linear_group(wid) * 64u + lid.x;
    if k >= P.n {
        return;
    }
    let i = lists[P.u1 + k];
    var a = mat3_identity() * (vinfo[i].mass * P.f0);
    for (var q = offsets[i]; q < offsets[i + 1u]; q++) {
        let ec = packed[q];
        let c = ec & 3u;
        a += hess_block(ec >> 2u, c, c);
    }
    let r = vec4<f32>(g[i].xyz, 0.0);
    sys[i] = LocalSystem(a, r, a, r);
}
