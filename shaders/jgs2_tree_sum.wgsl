// Per listed cluster-tree node k < n: c = lists[u1 + k], node = nodes[c] = (start, end, left,
// right); frame[u0 + c] = Σ_{j ∈ perm[start..end]} frame[j] for a leaf (right = left =
// 0xffffffff), else frame[u0 + left] + frame[u0 + right]. u0 = number of vertices (frame holds
// the rest-frame gradients ĝ_j first, then the node sums G_c). Dispatched level by level, the
// deepest first (local.rs: rest_frame_gradients).
#import params

@group(0) @binding(0) var<storage, read> lists: array<u32>;
@group(0) @binding(1) var<storage, read> nodes: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> perm: array<u32>;
@group(0) @binding(3) var<storage, read_write> frame: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let k = linear_group(wid) * 64u + lid.x;
    if k >= P.n {
        return;
    }
    let c = lists[P.u1 + k];
    let node = nodes[c];
    var s = vec3<f32>(0.0);
    if node.z == 0xffffffffu {
        for (var i = node.x; i < node.y; i++) {
            s += frame[perm[i]].xyz;
        }
    } else {
        s = frame[P.u0 + node.z].xyz + frame[P.u0 + node.w].xyz;
    }
    frame[P.u0 + c] = vec4<f32>(s, 0.0);
}
