// Per matrix e < n: signed SVD F_e = U·diag(σ)·Vᵀ; σ.w = 0.
#import params
#import linalg

@group(0) @binding(0) var<storage, read> f_in: array<mat3x3<f32>>;
@group(0) @binding(1) var<storage, read_write> u_out: array<mat3x3<f32>>;
@group(0) @binding(2) var<storage, read_write> s_out: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> v_out: array<mat3x3<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let e = linear_group(wid) * 64u + lid.x;
    if e >= P.n {
        return;
    }
    let r = svd3(f_in[e]);
    u_out[e] = r.u;
    s_out[e] = vec4<f32>(r.s, 0.0);
    v_out[e] = r.v;
}
