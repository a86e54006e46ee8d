// Per-vertex gather of the diagonal 3×3 blocks of the element Hessians over the CSR:
//   out[v] = Σ_k H_e[3l..3l+3, 3l..3l+3] with e = tets[k], l = local[k], summed in CSR order.
// Element Hessians are 144 f32 each, row-major 12×12, dofs vertex-major [x0 y0 z0 x1 …].
// out is column-major mat3x3 (48-byte stride). n = number of vertices.
#import params

@group(0) @binding(0) var<storage, read> elem_hess: array<f32>;
@group(0) @binding(1) var<storage, read> offsets: array<u32>;
@group(0) @binding(2) var<storage, read> csr_tets: array<u32>;
@group(0) @binding(3) var<storage, read> csr_local: array<u32>;
@group(0) @binding(4) var<storage, read_write> out: array<mat3x3<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let v = linear_group(wid) * 64u + lid.x;
    if v >= P.n {
        return;
    }
    var acc = mat3x3<f32>(vec3<f32>(0.0), vec3<f32>(0.0), vec3<f32>(0.0));
    for (var k = offsets[v]; k < offsets[v + 1u]; k++) {
        let base = 144u * csr_tets[k] + 39u * csr_local[k]; // 39 = 3·12 + 3: next diagonal block
        for (var c = 0u; c < 3u; c++) {
            acc[c] += vec3<f32>(elem_hess[base + c], elem_hess[base + 12u + c], elem_hess[base + 24u + c]);
        }
    }
    out[v] = acc;
}
