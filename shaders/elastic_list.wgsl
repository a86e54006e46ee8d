// Per listed element k < n: e = lists[u1 + k]; energy[e], grad[4e..4e+4], hess[144e..] exactly as
// the `elastic` kernel computes them for element e (u0 = its flags: 1 gradient, 2 Hessian,
// 4 PSD projection, 8 strict inversion with the J floor f0, 16 abs filter, 32 exact stable
// Neo-Hookeans). Refreshes the elements a
// Gauss–Seidel colour touched.
#import params
#import elastic_element

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> tets: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> dm_inv: array<mat3x3<f32>>;
@group(0) @binding(3) var<storage, read> elem: array<ElemParams>;
@group(0) @binding(4) var<storage, read> lists: array<u32>;
@group(0) @binding(5) var<storage, read_write> energy: array<f32>;
@group(0) @binding(6) var<storage, read_write> grad: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read_write> hess: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let k = linear_group(wid) * 64u + lid.x;
    if k >= P.n {
        return;
    }
    elastic_element(lists[P.u1 + k], P.u0, P.f0);
}
