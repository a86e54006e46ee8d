// Three dot products of two vec4 fields in one pass (jello::solver::backend::Backend::dots),
// per group g of 256 vertices:  p_ab[g] = Σ a·b,   p_aa[g] = Σ a·a,   p_bb[g] = Σ b·b, over xyz
// (all four lanes when u0 & 1: the multilevel solver's subspace vectors).
#import params
#import wg_reduce

@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> p_ab: array<f32>;
@group(0) @binding(3) var<storage, read_write> p_aa: array<f32>;
@group(0) @binding(4) var<storage, read_write> p_bb: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let g = linear_group(wid);
    let v = g * 256u + lid.x;
    var d = vec3<f32>(0.0);
    if v < P.n {
        if (P.u0 & 1u) != 0u {
            let av = a[v];
            let bv = b[v];
            d = vec3<f32>(dot(av, bv), dot(av, av), dot(bv, bv));
        } else {
            let av = a[v].xyz;
            let bv = b[v].xyz;
            d = vec3<f32>(dot(av, bv), dot(av, av), dot(bv, bv));
        }
    }
    let s = wg_sum3(lid.x, d);
    if lid.x == 0u {
        p_ab[g] = s.x;
        p_aa[g] = s.y;
        p_bb[g] = s.z;
    }
}
