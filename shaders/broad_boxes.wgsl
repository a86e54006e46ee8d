// Device broad phase, pass 1: each primitive's box (twins::broad::broad_boxes documents the
// rounding). Per primitive i of n (faces, edges, vertices; broad_grid's records): the box of its
// corners x[c] and, with u0 & 1 (swept), x[c] + dx[c], grown on every side by
//   g = f0 + 2⁻²⁰·(M + f0),  M = the largest |x| (+ |dx| when swept) coordinate of its corners,
// so it holds the exact box of the corners grown by f0 (m) despite f32 rounding. Writes
// boxes[2i] = lo, boxes[2i + 1] = hi (w = 0) and side[i] = the largest side (m).
#import params
#import broad_grid

@group(0) @binding(0) var<storage, read> prims: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> dx: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> boxes: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> side: array<f32>;

const BOX_SLACK: f32 = 9.5367431640625e-7;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_group(wid) * 256u + lid.x;
    if i >= P.n {
        return;
    }
    let c = prims[i];
    let swept = (P.u0 & 1u) != 0u;
    var lo = vec3<f32>(3.4028235e38);
    var hi = vec3<f32>(-3.4028235e38);
    var m = 0.0;
    for (var k = 0u; k < 3u; k++) {
        let p = x[c[k]].xyz;
        lo = min(lo, p);
        hi = max(hi, p);
        var a = abs(p);
        if swept {
            let d = dx[c[k]].xyz;
            let q = p + d;
            lo = min(lo, q);
            hi = max(hi, q);
            a += abs(d);
        }
        m = max(m, max(a.x, max(a.y, a.z)));
    }
    let g = P.f0 + BOX_SLACK * (m + P.f0);
    lo -= vec3<f32>(g);
    hi += vec3<f32>(g);
    boxes[2u * i] = vec4<f32>(lo, 0.0);
    boxes[2u * i + 1u] = vec4<f32>(hi, 0.0);
    let s = hi - lo;
    side[i] = max(s.x, max(s.y, s.z));
}
