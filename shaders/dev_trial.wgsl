// A line-search trial from the current positions, per vertex v < n:
//   α = f0 / max(1, scal[u0])         (scale × the obstacle bound of dev_step_bound, stored as 1/α)
//   step[v] = α·d[v];  x_new[v] = x[v] + step[v];  contacts_new = contacts advanced by step[v]
//   out[u1 + g] = max_{v in group g} |step[v]|   (the dx stop rule's per-vertex move)
#import params
#import obstacle
#import wg_reduce

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> d: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> contacts: array<Contact>;
@group(0) @binding(3) var<storage, read> scal: array<f32>;
@group(0) @binding(4) var<storage, read_write> x_new: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> contacts_new: array<Contact>;
@group(0) @binding(6) var<storage, read_write> step: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let g = linear_group(wid);
    let v = g * 256u + lid.x;
    let alpha = P.f0 / max(1.0, scal[P.u0]);
    var moved = 0.0;
    if v < P.n {
        let s = alpha * d[v].xyz;
        step[v] = vec4<f32>(s, 0.0);
        x_new[v] = vec4<f32>(x[v].xyz + s, 0.0);
        let nc = arrayLength(&contacts) / P.n;
        for (var o = 0u; o < nc; o++) {
            let c = contacts[v * nc + o];
            if contact_kind(c) == OBSTACLE_NONE {
                contacts_new[v * nc + o] = c;
            } else {
                contacts_new[v * nc + o] = contact_advance(c, s);
            }
        }
        moved = length(s);
    }
    let m = wg_max3(lid.x, vec3<f32>(moved, 0.0, 0.0));
    if lid.x == 0u {
        out[P.u1 + g] = m.x;
    }
}
