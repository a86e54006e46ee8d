// Per vertex v < n: the safeguarded Jacobi step step_v = f0·d0_v + f1·d1_v + f2·d2_v (dirs slots
// of n entries each) and bound[v] = 1/α_v (≥ 1), α_v = min(1, 0.9 × first time of impact of
// x_v + s·step_v with any obstacle (contact records, nc = len(contacts) / n per vertex), 1 for a
// zero step — so max_v bound[v] = 1/α with α the problem's max_obstacle_step (potential.rs).
// The reciprocal keeps a tiny α (a vertex next to an obstacle) representable, where 1 − α
// would round it to 0 below 6e-8 and freeze the whole step; α below 1e-30 reads as 1e-30.
#import params
#import obstacle

@group(0) @binding(0) var<storage, read> dirs: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> contacts: array<Contact>;
@group(0) @binding(2) var<storage, read_write> step: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> bound: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let v = linear_group(wid) * 64u + lid.x;
    let n = P.n;
    if v >= n {
        return;
    }
    let s = P.f0 * dirs[v].xyz + P.f1 * dirs[n + v].xyz + P.f2 * dirs[2u * n + v].xyz;
    step[v] = vec4<f32>(s, 0.0);
    var alpha = 1.0;
    if any(s != vec3<f32>(0.0)) {
        alpha = contact_step_bound(v, arrayLength(&contacts) / n, s);
    }
    bound[v] = 1.0 / max(alpha, 1e-30);
}
