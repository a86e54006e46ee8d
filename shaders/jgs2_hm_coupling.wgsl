// H-matrix far field, coupling (twins/hmatrix.rs: jgs2_hm_coupling). Per basis column k < n:
// (c, a) = cols[k]; v_c[a] = Σ over c's far blocks of (S_IJ w_J)[a] where c = I and
// (S_IJᵀ w_I)[a] where c = J: a gather over c's block list, so no two threads write one entry
// (no atomics). u0 = n_cols: w is hw[0..u0), v is hw[u0..2·u0).
#import params
#import hmatrix

@group(0) @binding(0) var<storage, read> hm: array<u32>;
@group(0) @binding(1) var<storage, read_write> hw: array<f32>;

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
    let kc = hm[nd + 3u];
    var v = 0.0;
    for (var e = hm[nd + 6u]; e < hm[nd + 7u]; e++) {
        let blk = hm[3] + HM_PAIR_WORDS * hm[e];
        let i = hm[blk];
        let j = hm[blk + 1u];
        let s = hm[blk + 2u];
        if i == c {
            let nj = HM_HEADER + HM_NODE_WORDS * j;
            let kj = hm[nj + 3u];
            let wj = hm[nj + 5u];
            for (var q = 0u; q < kj; q++) {
                v += hf(s + a * kj + q) * hw[wj + q];
            }
        } else {
            let ni = HM_HEADER + HM_NODE_WORDS * i;
            let ki = hm[ni + 3u];
            let wi = hm[ni + 5u];
            for (var q = 0u; q < ki; q++) {
                v += hf(s + q * kc + a) * hw[wi + q];
            }
        }
    }
    hw[P.u0 + hm[nd + 5u] + a] = v;
}
