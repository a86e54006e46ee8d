// ADMM-PD scatter as a per-vertex gather over the vertex→element CSR (no atomics), one vertex
// per invocation, 256 per group:
//   rhs[v].xyz = Σ_k corner[8·tets[k] + local[k]]       (Σ w²Dᵀ(z − ū) at v)
//   s_v        = Σ_k corner[8·tets[k] + 4 + local[k]]   (DᵀW²(zⁿ⁺¹ − zⁿ) at v; 0 if pinned)
//   out[u1 + g] = Σ_{v in group g} |s_v|²               (the dual residual's partials)
// summed in CSR order; rhs[v].w = 0.
#import params
#import wg_reduce

struct VertexInfo {
    mass: f32,
    free: u32,
}

@group(0) @binding(0) var<storage, read> corner: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> offsets: array<u32>;
@group(0) @binding(2) var<storage, read> csr_tets: array<u32>;
@group(0) @binding(3) var<storage, read> csr_local: array<u32>;
@group(0) @binding(4) var<storage, read> vinfo: array<VertexInfo>;
@group(0) @binding(5) var<storage, read_write> rhs: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let g = linear_group(wid);
    let v = g * 256u + lid.x;
    var s2 = 0.0;
    if v < P.n {
        var acc = vec3<f32>(0.0);
        var dual = vec3<f32>(0.0);
        for (var k = offsets[v]; k < offsets[v + 1u]; k++) {
            let i = 8u * csr_tets[k] + csr_local[k];
            acc += corner[i].xyz;
            dual += corner[i + 4u].xyz;
        }
        rhs[v] = vec4<f32>(acc, 0.0);
        if vinfo[v].free != 0u {
            s2 = dot(dual, dual);
        }
    }
    let s = wg_sum3(lid.x, vec3<f32>(s2, 0.0, 0.0));
    if lid.x == 0u {
        out[P.u1 + g] = s.x;
    }
}
