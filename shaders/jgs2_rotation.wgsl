// Per vertex v < n: R_v = polar(F̄_v), F̄_v = Σ_{e∋v} V_e F_e / Σ V_e over the vertex→element CSR
// (identity for a vertex in no element; polar = U·Vᵀ of the signed SVD), and the rest-frame
// gradient frame[v] = (R_vᵀ g_v, 0) (local.rs: rotations, rest_frame_gradients). u0 & 1: keep
// the rotations in `rot` (a Gauss–Seidel sweep rotates once, at its start) and only refresh the
// rest-frame gradients.
#import params
#import linalg
#import material

@group(0) @binding(0) var<storage, read> f: array<mat3x3<f32>>;
@group(0) @binding(1) var<storage, read> elem: array<ElemParams>;
@group(0) @binding(2) var<storage, read> offsets: array<u32>;
@group(0) @binding(3) var<storage, read> csr_tets: array<u32>;
@group(0) @binding(4) var<storage, read> g: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> rot: array<mat3x3<f32>>;
@group(0) @binding(6) var<storage, read_write> frame: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let v = linear_group(wid) * 64u + lid.x;
    if v >= P.n {
        return;
    }
    if (P.u0 & 1u) != 0u {
        frame[v] = vec4<f32>(g[v].xyz * rot[v], 0.0);
        return;
    }
    var fs = mat3x3<f32>(vec3<f32>(0.0), vec3<f32>(0.0), vec3<f32>(0.0));
    var w = 0.0;
    for (var k = offsets[v]; k < offsets[v + 1u]; k++) {
        let e = csr_tets[k];
        let vol = elem[e].volume;
        fs += f[e] * vol;
        w += vol;
    }
    var r = mat3x3<f32>(vec3<f32>(1.0, 0.0, 0.0), vec3<f32>(0.0, 1.0, 0.0), vec3<f32>(0.0, 0.0, 1.0));
    if w != 0.0 {
        let sv = svd3(fs * (1.0 / w));
        r = sv.u * transpose(sv.v);
    }
    rot[v] = r;
    // Rᵀg as g·R (row vector times matrix).
    frame[v] = vec4<f32>(g[v].xyz * r, 0.0);
}
