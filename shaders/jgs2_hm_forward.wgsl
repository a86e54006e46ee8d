// H-matrix far field, forward transform (twins/hmatrix.rs: jgs2_hm_forward; blob layout there).
// Per basis column k < n: (c, a) = cols[k]; w_c[a] = Σ_r Q_c[r, a] x_c[r], x = the rest-frame
// gradients ĝ_j = frame[j] of c's tree positions (j = perm[q]), into hw at c's wv offset.
// One thread per column (not per node): a node's k_c columns run in parallel.
#import params
#import hmatrix

@group(0) @binding(0) var<storage, read> hm: array<u32>;
@group(0) @binding(1) var<storage, read> perm: array<u32>;
@group(0) @binding(2) var<storage, read> frame: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> hw: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let k = linear_group(wid) * 64u + lid.x;
    if k >= P.n {
        return;
    }
    let cols = hm[7];
    let c = hm[cols + 2u * k];
    let a = hm[cols + 2u * k + 1u];
    let nd = HM_HEADER + HM_NODE_WORDS * c;
    let start = hm[nd];
    let end = hm[nd + 1u];
    let m = 3u * (end - start);
    let basis = hm[nd + 4u] + a * m;
    var w = 0.0;
    for (var q = start; q < end; q++) {
        let g = frame[perm[q]].xyz;
        let s = basis + 3u * (q - start);
        w += hf(s) * g.x + hf(s + 1u) * g.y + hf(s + 2u) * g.z;
    }
    hw[hm[nd + 5u] + a] = w;
}
