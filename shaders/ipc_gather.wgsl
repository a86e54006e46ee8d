// Per-vertex gather of the contact pairs' outputs over the vertex→(pair, slot) CSR built on the
// host (VertexCsr::from_pairs; no atomics), summed in CSR order:
//   g[v].xyz += Σ pair_grad[4·pair + slot].xyz            (g[v].w = 0)
//   u0 & 1: hdiag[v] += Σ H_pair[3·slot.., 3·slot..]       (the 3×3 diagonal blocks)
// pair_grad / pair_hess are ipc_pairs' grad (4 vec4 per pair) and hess (144 f32 per pair,
// row-major). n = number of vertices gathered (rows of the CSR). Twin: twins::ipc::ipc_gather.
#import params

@group(0) @binding(0) var<storage, read> pair_grad: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> pair_hess: array<f32>;
@group(0) @binding(2) var<storage, read> offsets: array<u32>;
@group(0) @binding(3) var<storage, read> csr_pairs: array<u32>;
@group(0) @binding(4) var<storage, read> csr_slot: array<u32>;
@group(0) @binding(5) var<storage, read_write> g: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> hdiag: array<mat3x3<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let v = linear_group(wid) * 64u + lid.x;
    if v >= P.n {
        return;
    }
    let k0 = offsets[v];
    let k1 = offsets[v + 1u];
    var acc = vec3<f32>(0.0);
    for (var k = k0; k < k1; k++) {
        acc += pair_grad[4u * csr_pairs[k] + csr_slot[k]].xyz;
    }
    g[v] = vec4<f32>(g[v].xyz + acc, 0.0);
    if (P.u0 & 1u) != 0u {
        var hacc = mat3x3<f32>(vec3<f32>(0.0), vec3<f32>(0.0), vec3<f32>(0.0));
        for (var k = k0; k < k1; k++) {
            let base = 144u * csr_pairs[k] + 39u * csr_slot[k]; // 39 = 3·12 + 3
            for (var c = 0u; c < 3u; c++) {
                hacc[c] += vec3<f32>(pair_hess[base + c], pair_hess[base + 12u + c], pair_hess[base + 24u + c]);
            }
        }
        hdiag[v] = hdiag[v] + hacc;
    }
}
