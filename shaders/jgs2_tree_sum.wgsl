// Per listed cluster-tree node k < n: c = lists[u1 + k], node = nodes[c] = (start, end, left,
// right). `frame` holds the rest-frame gradients ĝ_j of the u0 vertices, then 4 entries per
// node: G_c = Σ_{j∈c} ĝ_j and the first moments N_c[x|y|z] = Σ_{j∈c} r_{j,x|y|z} ĝ_j, with r_j =
// rest[j] the rest offset from the subspace origin. A leaf (left = right = 0xffffffff) sums its
// members perm[start..end], an inner node its two children. Dispatched level by level, the
// deepest first (local.rs: rest_frame_gradients).
#import params

@group(0) @binding(0) var<storage, read> lists: array<u32>;
@group(0) @binding(1) var<storage, read> nodes: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> perm: array<u32>;
@group(0) @binding(3) var<storage, read> rest: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> frame: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let k = linear_group(wid) * 64u + lid.x;
    if k >= P.n {
        return;
    }
    let c = lists[P.u1 + k];
    let node = nodes[c];
    var s = vec3<f32>(0.0);
    var mx = vec3<f32>(0.0);
    var my = vec3<f32>(0.0);
    var mz = vec3<f32>(0.0);
    if node.z == 0xffffffffu {
        for (var i = node.x; i < node.y; i++) {
            let j = perm[i];
            let gj = frame[j].xyz;
            let pj = rest[j].xyz;
            s += gj;
            mx += gj * pj.x;
            my += gj * pj.y;
            mz += gj * pj.z;
        }
    } else {
        let l = P.u0 + 4u * node.z;
        let r = P.u0 + 4u * node.w;
        s = frame[l].xyz + frame[r].xyz;
        mx = frame[l + 1u].xyz + frame[r + 1u].xyz;
        my = frame[l + 2u].xyz + frame[r + 2u].xyz;
        mz = frame[l + 3u].xyz + frame[r + 3u].xyz;
    }
    let o = P.u0 + 4u * c;
    frame[o] = vec4<f32>(s, 0.0);
    frame[o + 1u] = vec4<f32>(mx, 0.0);
    frame[o + 2u] = vec4<f32>(my, 0.0);
    frame[o + 3u] = vec4<f32>(mz, 0.0);
}
