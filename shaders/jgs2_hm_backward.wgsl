// H-matrix far field, backward transform and per-vertex sum (twins/hmatrix.rs:
// jgs2_hm_backward; local.rs: hmatrix_far_field). Per tree position p < n, vertex i = perm[p] in
// leaf L = leaf[p]: y = L's dense near rows at p (G[L, J] x_J; G[I, L]ᵀ x_I where L is the
// column) + Σ over the nodes c from L to the root of (Q_c v_c) at p's rows, then
// frame[u1 + i] = S_i y − ĝ_i. u0 = n_cols (v starts at hw[u0]); u1 = the far sums' base in
// `frame` (after the gradients and node entries, so nothing read is written).
#import params
#import hmatrix

@group(0) @binding(0) var<storage, read> hm: array<u32>;
@group(0) @binding(1) var<storage, read> perm: array<u32>;
@group(0) @binding(2) var<storage, read> hw: array<f32>;
@group(0) @binding(3) var<storage, read_write> frame: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = linear_group(wid) * 64u + lid.x;
    if p >= P.n {
        return;
    }
    let i = perm[p];
    let l = hm[hm[5] + p];
    let nl = HM_HEADER + HM_NODE_WORDS * l;
    var y = array<f32, 3>(0.0, 0.0, 0.0);
    for (var e = hm[nl + 8u]; e < hm[nl + 9u]; e++) {
        let pr = hm[4] + HM_PAIR_WORDS * hm[e];
        let ci = hm[pr];
        let cj = hm[pr + 1u];
        let g = hm[pr + 2u];
        let ni = HM_HEADER + HM_NODE_WORDS * ci;
        let nj = HM_HEADER + HM_NODE_WORDS * cj;
        let si = hm[ni];
        let ei = hm[ni + 1u];
        let sj = hm[nj];
        let ej = hm[nj + 1u];
        let mj = 3u * (ej - sj);
        if ci == l {
            let r0 = 3u * (p - si);
            for (var d = 0u; d < 3u; d++) {
                let row = g + (r0 + d) * mj;
                for (var q = sj; q < ej; q++) {
                    let x = frame[perm[q]].xyz;
                    let s = row + 3u * (q - sj);
                    y[d] += hf(s) * x.x + hf(s + 1u) * x.y + hf(s + 2u) * x.z;
                }
            }
        }
        if cj == l && ci != cj {
            let r0 = 3u * (p - sj);
            for (var d = 0u; d < 3u; d++) {
                for (var q = si; q < ei; q++) {
                    let x = frame[perm[q]].xyz;
                    let s = g + 3u * (q - si) * mj + r0 + d;
                    y[d] += hf(s) * x.x + hf(s + mj) * x.y + hf(s + 2u * mj) * x.z;
                }
            }
        }
    }
    var c = l;
    loop {
        if c == HM_NONE {
            break;
        }
        let nd = HM_HEADER + HM_NODE_WORDS * c;
        let start = hm[nd];
        let m = 3u * (hm[nd + 1u] - start);
        let r = 3u * (p - start);
        let basis = hm[nd + 4u];
        let wv = P.u0 + hm[nd + 5u];
        for (var a = 0u; a < hm[nd + 3u]; a++) {
            let va = hw[wv + a];
            let s = basis + a * m + r;
            for (var d = 0u; d < 3u; d++) {
                y[d] += hf(s + d) * va;
            }
        }
        c = hm[nd + 2u];
    }
    let gi = frame[i].xyz;
    let s = hm[6] + 9u * i;
    var far = vec3<f32>(0.0);
    for (var d = 0u; d < 3u; d++) {
        far[d] = hf(s + 3u * d) * y[0] + hf(s + 3u * d + 1u) * y[1] + hf(s + 3u * d + 2u) * y[2]
            - gi[d];
    }
    frame[P.u1 + i] = vec4<f32>(far, 0.0);
}
