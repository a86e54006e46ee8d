// Per-vertex gather of element gradients over the vertex→element CSR (no atomics):
//   out[v].xyz = Σ_{k in offsets[v]..offsets[v+1]} elem_grad[4·tets[k] + local[k]].xyz
// summed in CSR order; out[v].w = 0. n = number of vertices.
#import params

@group(0) @binding(0) var<storage, read> elem_grad: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> offsets: array<u32>;
@group(0) @binding(2) var<storage, read> csr_tets: array<u32>;
@group(0) @binding(3) var<storage, read> csr_local: array<u32>;
@group(0) @binding(4) var<storage, read_write> out: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let v = linear_group(wid) * 64u + lid.x;
    if v >= P.n {
        return;
    }
    var acc = vec3<f32>(0.0);
    for (var k = offsets[v]; k < offsets[v + 1u]; k++) {
        acc += elem_grad[4u * csr_tets[k] + csr_local[k]].xyz;
    }
    out[v] = vec4<f32>(acc, 0.0);
}
