// The trust-box step bound of the device IPC step filter: the candidate pair list of a JGS2/VBD
// device step holds every pair that can come within d̂ while each vertex stays inside its box
// (`IpcContact::candidates_around`), so a move must not leave it. Per vertex v < n, 256 per
// workgroup, with lo = boxes[2v], hi = boxes[2v + 1] (xyz, m, relative to the origin; the host
// rounds them inward) and the move x[v] → x[v] + α·step[v]:
//   α_v = min(1, min over axes k with step_k ≠ 0 of (bound_k − x_k)/step_k)
// (bound_k = hi_k for step_k > 0, lo_k for step_k < 0): the largest α ≤ 1 that keeps the vertex
// in its box, times 1 − 8ε_f32 (≥ 0) when below 1; then
//   bound[v] = max(bound[v], 1/max(α_v, 1e-30))     (folded into the step's other bounds)
//   part[g]  = max over workgroup g's vertices of 1/max(α_v, 1e-30)
// so reduce_max_abs over part gives the trust box's own bound (the host tells from it whether
// the box, not a time of impact, limited the step). Twin: twins::trust::ipc_trust.
#import params
#import wg_reduce

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> step: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> boxes: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> bound: array<f32>;
@group(0) @binding(4) var<storage, read_write> part: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let g = linear_group(wid);
    let v = g * 256u + lid.x;
    var inv = 0.0;
    if v < P.n {
        let p = x[v].xyz;
        let d = step[v].xyz;
        let lo = boxes[2u * v].xyz;
        let hi = boxes[2u * v + 1u].xyz;
        var alpha = 1.0;
        for (var k = 0u; k < 3u; k++) {
            if d[k] > 0.0 {
                alpha = min(alpha, (hi[k] - p[k]) / d[k]);
            } else if d[k] < 0.0 {
                alpha = min(alpha, (lo[k] - p[k]) / d[k]);
            }
        }
        if alpha < 1.0 {
            // 8 ε_f32 short of the face: (hi − x)/step rounds up by a few ulp.
            alpha = max(alpha * 0.99999905, 0.0);
        }
        inv = 1.0 / max(alpha, 1e-30);
        bound[v] = max(bound[v], inv);
    }
    let r = wg_max3(lid.x, vec3<f32>(inv, 0.0, 0.0));
    if lid.x == 0u {
        part[g] = r.x;
    }
}
