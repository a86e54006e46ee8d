// Multilevel solver: the lift u = P U q of a subspace vector (jello::solver::multilevel::Level::lift),
// gathered per vertex v < n (n = number of vertices) over its (handle, weighted frame) list:
//   u[v].xyz = free_v ? Σ_{k in vptr[v]..vptr[v+1]} ( q[3h]·wf_k, q[3h+1]·wf_k, q[3h+2]·wf_k ) : 0
// with h = vhandle[k] and wf_k = φ_vh·[x̄_v − o_h; 1] (computed in f64 on the host, so the frame
// keeps f32 relative precision whatever the scene's coordinates); q holds per handle the three
// rows [A_h | t_h] of its 3×4 affine map as vec4s (the level's 12-DOF layout). Summed in CSR
// order; u[v].w = 0.
#import params
#import jgs2

@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> vptr: array<u32>;
@group(0) @binding(2) var<storage, read> vhandle: array<u32>;
@group(0) @binding(3) var<storage, read> vframe: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> vinfo: array<VertexInfo>;
@group(0) @binding(5) var<storage, read_write> u: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let v = linear_group(wid) * 64u + lid.x;
    if v >= P.n {
        return;
    }
    var acc = vec3<f32>(0.0);
    if vinfo[v].free != 0u {
        for (var k = vptr[v]; k < vptr[v + 1u]; k++) {
            let h = vhandle[k];
            let f = vframe[k];
            acc += vec3<f32>(dot(q[3u * h], f), dot(q[3u * h + 1u], f), dot(q[3u * h + 2u], f));
        }
    }
    u[v] = vec4<f32>(acc, 0.0);
}
