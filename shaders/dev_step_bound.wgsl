// The obstacle step filter along d from the current positions, per group g of 256 vertices:
//   part[g] = max_v (1 − α_v),  α_v = min(1, 0.9 × first time of impact of x_v + s·d_v with any
//   obstacle) from the vertex's contact records (nc = len(contacts) / n per vertex), 1 for d_v = 0
// — so 1 − max over the groups is the problem's max_obstacle_step over vertices (potential.rs).
#import params
#import obstacle
#import wg_reduce

@group(0) @binding(0) var<storage, read> d: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> contacts: array<Contact>;
@group(0) @binding(2) var<storage, read_write> part: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let g = linear_group(wid);
    let v = g * 256u + lid.x;
    var bound = 0.0;
    if v < P.n {
        let dv = d[v].xyz;
        if any(dv != vec3<f32>(0.0)) {
            bound = 1.0 - contact_step_bound(v, arrayLength(&contacts) / P.n, dv);
        }
    }
    let m = wg_max3(lid.x, vec3<f32>(bound, 0.0, 0.0));
    if lid.x == 0u {
        part[g] = m.x;
    }
}
