// ADMM-PD primal residual partials, one element per invocation, 256 per group:
//   out[u1 + g] = Σ_{e in group g} w2[e]·‖F_e(x) − z[e]‖²_F      (‖r‖² = ‖W(Dx − z)‖²)
#import params
#import linalg
#import wg_reduce

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> tets: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> dm_inv: array<mat3x3<f32>>;
@group(0) @binding(3) var<storage, read> w2: array<f32>;
@group(0) @binding(4) var<storage, read> z: array<mat3x3<f32>>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let g = linear_group(wid);
    let e = g * 256u + lid.x;
    var r = 0.0;
    if e < P.n {
        let t = tets[e];
        let f = deformation_gradient(x[t.x].xyz, x[t.y].xyz, x[t.z].xyz, x[t.w].xyz, dm_inv[e]);
        let d = f - z[e];
        r = w2[e] * (dot(d[0], d[0]) + dot(d[1], d[1]) + dot(d[2], d[2]));
    }
    let s = wg_sum3(lid.x, vec3<f32>(r, 0.0, 0.0));
    if lid.x == 0u {
        out[P.u1 + g] = s.x;
    }
}
