// Per listed vertex k < n: i = lists[u1 + k]; vertex i's JGS2 system and its VBD fallback
// (local.rs: jgs2_system, vbd_system; the barrier curvature is added by `vertex_solve`):
//   r  = g_i + R_i (Σ_near Ū_i[j]ᵀ ĝ_j + Σ_far (b_cᵀ G_c + Σ_k B_{c,k}ᵀ N_c[k]))
//   A  = R_i Â_i R_iᵀ + Σ_{e∋i} U_eᵀ K_e U_e,  U_e's corner blocks R_v Ū_i[v] R_iᵀ
//   Af = m_i/ĥ² I + Σ_{e∋i} K_e[i, i],  rf = g_i
// f0 = the inertia weight 1/ĥ² (1/h² under implicit Euler), u0 = number of vertices (offset of
// the node entries in `frame`: G_c at u0 + 4c, the first moments N_c[x|y|z] after it;
// jgs2_tree_sum.wgsl).
// blob (u32 words, floats bit-cast; built by `jello::solver::jgs2::pack_subspace`):
//   [4i..4i+4] = (off, n_inc, n_near, n_far | linear << 31 | hmatrix << 30); at off: Â_i (9,
//   row-major), m_i, then n_inc incident entries (4e + corner of i, s_0..s_3), n_near entries
//   (j, Ū_i[j] 9 row-major), n_far entries (node c, block b_c 9 row-major, and when linear the
//   slopes B_{c,x}, B_{c,y}, B_{c,z}, 9 each), with hmatrix one word: the `frame` index of
//   vertex i's H-matrix sum S_i (G ĝ)_i − ĝ_i (jgs2_hm_backward.wgsl), added to the sum as
//   local.rs adds `TreeFrame::far`; then extra blocks (v, 9). s_c is the word index of corner
//   c's 3×3 block (its vertex id at s_c − 1) or 0xffffffff for a zero block.
#import params
#import jgs2
#import hess_block

@group(0) @binding(0) var<storage, read> lists: array<u32>;
@group(0) @binding(1) var<storage, read> blob: array<u32>;
@group(0) @binding(2) var<storage, read> g: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> rot: array<mat3x3<f32>>;
@group(0) @binding(4) var<storage, read> frame: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> hess: array<f32>;
@group(0) @binding(6) var<storage, read_write> sys: array<LocalSystem>;

const ZERO_BLOCK: u32 = 0xffffffffu;

fn bf(i: u32) -> f32 {
    return bitcast<f32>(blob[i]);
}

// The row-major 3×3 block at word s as a (column-major) mat3x3.
fn blob_block(s: u32) -> mat3x3<f32> {
    return mat3x3<f32>(
        vec3<f32>(bf(s), bf(s + 3u), bf(s + 6u)),
        vec3<f32>(bf(s + 1u), bf(s + 4u), bf(s + 7u)),
        vec3<f32>(bf(s + 2u), bf(s + 5u), bf(s + 8u)),
    );
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let k = linear_group(wid) * 64u + lid.x;
    if k >= P.n {
        return;
    }
    let i = lists[P.u1 + k];
    let off = blob[4u * i];
    let n_inc = blob[4u * i + 1u];
    let n_near = blob[4u * i + 2u];
    let n_far = blob[4u * i + 3u] & 0x3fffffffu;
    let linear = (blob[4u * i + 3u] >> 31u) != 0u;
    let hmatrix = ((blob[4u * i + 3u] >> 30u) & 1u) != 0u;
    let far_words = select(10u, 37u, linear);
    let ri = rot[i];
    let rit = transpose(ri);
    // Gradient side: ĝ·B = Bᵀĝ.
    var acc = vec3<f32>(0.0);
    var p = off + 10u + 5u * n_inc;
    for (var j = 0u; j < n_near; j++) {
        acc += frame[blob[p]].xyz * blob_block(p + 1u);
        p += 10u;
    }
    for (var c = 0u; c < n_far; c++) {
        let node = P.u0 + 4u * blob[p];
        acc += frame[node].xyz * blob_block(p + 1u);
        if linear {
            for (var q = 0u; q < 3u; q++) {
                acc += frame[node + 1u + q].xyz * blob_block(p + 10u + 9u * q);
            }
        }
        p += far_words;
    }
    if hmatrix {
        acc += frame[blob[p]].xyz;
    }
    let gi = g[i].xyz;
    let r = gi + ri * acc;
    // Matrix side.
    var a = ri * blob_block(off) * rit;
    var af = mat3_identity() * (bf(off + 9u) * P.f0);
    for (var t = 0u; t < n_inc; t++) {
        let q = off + 10u + 5u * t;
        let ec = blob[q];
        let e = ec >> 2u;
        let ci = ec & 3u;
        af += hess_block(e, ci, ci);
        var u: array<mat3x3<f32>, 4>;
        var live: array<bool, 4>;
        for (var c = 0u; c < 4u; c++) {
            let s = blob[q + 1u + c];
            live[c] = s != ZERO_BLOCK;
            if live[c] {
                u[c] = rot[blob[s - 1u]] * blob_block(s) * rit;
            } else {
                u[c] = mat3_zero();
            }
        }
        for (var ca = 0u; ca < 4u; ca++) {
            if !live[ca] {
                continue;
            }
            var w = mat3_zero();
            for (var cb = 0u; cb < 4u; cb++) {
                if live[cb] {
                    w += hess_block(e, ca, cb) * u[cb];
                }
            }
            a += transpose(u[ca]) * w;
        }
    }
    sys[i] = LocalSystem(a, vec4<f32>(r, 0.0), af, vec4<f32>(gi, 0.0));
}
