// The obstacle step filter along d from the current positions, per group g of 256 vertices:
//   part[g] = max_v 1/α_v,  α_v = min(1, 0.9 × first time of impact of x_v + s·d_v with any
//   obstacle) from the vertex's contact records (nc = len(contacts) / n per vertex); 0 for d_v = 0
// — so 1 / max(1, max over the groups) is the problem's max_obstacle_step over vertices
// (potential.rs). The reciprocal keeps a tiny α (a vertex next to an obstacle) representable,
// where 1 − α rounds to 1 below 6e-8 and would freeze the line search at α = 0 (as it once froze
// JGS2: jgs2_combine.wgsl); α below 1e-30 reads as 1e-30.
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
            bound = 1.0 / max(contact_step_bound(v, arrayLength(&contacts) / P.n, dv), 1e-30);
        }
    }
    let m = wg_max3(lid.x, vec3<f32>(bound, 0.0, 0.0));
    if lid.x == 0u {
        part[g] = m.x;
    }
}
