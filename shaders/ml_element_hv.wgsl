// Multilevel solver: the cubature element terms of the Hessian-vector product
// (jello::solver::multilevel::HessianOperator::apply's element loop), one invocation per element
// term e < n, into per-corner outputs that `gather_gradient` then sums per vertex over the terms'
// vertex→(term, corner) CSR (no scatter, no atomics):
//   out[4e + a].xyz = free(v_a) ? scale[e] · Σ_b K_e[a, b] x̄_b : 0,   x̄_b = free(v_b) ? x[v_b] : 0
// with v = tets[e] and K_e[a, b] the 3×3 block (a, b) of the term's row-major 12×12 Hessian
// (`hess`, 144 f32 per term, N/m); out[4e + a].w = 0.
#import params
#import jgs2
#import hess_block

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> tets: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> hess: array<f32>;
@group(0) @binding(3) var<storage, read> scale: array<f32>;
@group(0) @binding(4) var<storage, read> vinfo: array<VertexInfo>;
@group(0) @binding(5) var<storage, read_write> out: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let e = linear_group(wid) * 64u + lid.x;
    if e >= P.n {
        return;
    }
    let t = tets[e];
    var xe: array<vec3<f32>, 4>;
    for (var b = 0u; b < 4u; b++) {
        xe[b] = vec3<f32>(0.0);
        if vinfo[t[b]].free != 0u {
            xe[b] = x[t[b]].xyz;
        }
    }
    let s = scale[e];
    for (var a = 0u; a < 4u; a++) {
        var acc = vec3<f32>(0.0);
        if vinfo[t[a]].free != 0u {
            for (var b = 0u; b < 4u; b++) {
                acc += hess_block(e, a, b) * xe[b];
            }
        }
        out[4u * e + a] = vec4<f32>(s * acc, 0.0);
    }
}
