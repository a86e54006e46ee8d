// Multilevel solver: the restriction q = Uᵀ P y (jello::solver::multilevel::Level::restrict), one
// workgroup of 64 invocations per handle h < n (n = number of handles), gathered over the
// handle's (vertex, weighted frame) list — no scatter, no atomics:
//   q[3h + r] = Σ_{k in hptr[h]..hptr[h+1], vertex v = hvertex[k] free} y[v][r] · wf_k   (r = 0, 1, 2)
// with wf_k = φ_vh·[x̄_v − o_h; 1], i.e. the 12 DOFs of y_v ⊗ [x̄_v − o_h; 1] weighted by φ.
// Invocation t sums entries hptr[h] + t, + 64, + 128, … in order; the 64 partial sums are then
// added by a tree with strides 32, 16, …, 1 (the order the CPU twin mirrors).
#import params
#import jgs2

@group(0) @binding(0) var<storage, read> y: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> hptr: array<u32>;
@group(0) @binding(2) var<storage, read> hvertex: array<u32>;
@group(0) @binding(3) var<storage, read> hframe: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> vinfo: array<VertexInfo>;
@group(0) @binding(5) var<storage, read_write> q: array<vec4<f32>>;

var<workgroup> part: array<array<vec4<f32>, 3>, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    // Uniform per workgroup (a whole workgroup is one handle), so the barriers below are reached
    // by every invocation or by none.
    let h = linear_group(wid);
    if h >= P.n {
        return;
    }
    let t = lid.x;
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    for (var k = hptr[h] + t; k < hptr[h + 1u]; k += 64u) {
        let v = hvertex[k];
        if vinfo[v].free != 0u {
            let f = hframe[k];
            let yv = y[v];
            a0 += yv.x * f;
            a1 += yv.y * f;
            a2 += yv.z * f;
        }
    }
    part[t][0] = a0;
    part[t][1] = a1;
    part[t][2] = a2;
    for (var s = 32u; s > 0u; s >>= 1u) {
        workgroupBarrier();
        if t < s {
            part[t][0] += part[t + s][0];
            part[t][1] += part[t + s][1];
            part[t][2] += part[t + s][2];
        }
    }
    workgroupBarrier();
    if t < 3u {
        q[3u * h + t] = part[0][t];
    }
}
