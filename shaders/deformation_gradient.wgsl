// Per element e < n: F_e = Ds·Dm⁻¹ (column-major mat3x3, 48-byte stride).
#import params
#import linalg

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> tets: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> dm_inv: array<mat3x3<f32>>;
@group(0) @binding(3) var<storage, read_write> f_out: array<mat3x3<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let e = linear_group(wid) * 64u + lid.x;
    if e >= P.n {
        return;
    }
    let t = tets[e];
    f_out[e] = deformation_gradient(x[t.x].xyz, x[t.y].xyz, x[t.z].xyz, x[t.w].xyz, dm_inv[e]);
}
