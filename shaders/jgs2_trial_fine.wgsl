// Per vertex v < n: the fine parts of `jgs2_trial`'s positions, fine_new[v] = fine[v] +
// dirs[2n + v] (the move the trial wrote there; w = 0). Recorded after `jgs2_trial` when the
// positions keep fine parts (IPC contact): each position is then its step start's f32 value
// (fixed within the step) plus its fine part, the start's low part plus the step's
// displacement, so the contact kernels resolve it to the rounding of that displacement, not of
// the distance from the origin (shared/pair_record.wgsl, `pair_relative`).
#import params

@group(0) @binding(0) var<storage, read> fine: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> dirs: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> fine_new: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let v = linear_group(wid) * 64u + lid.x;
    let n = P.n;
    if v >= n {
        return;
    }
    fine_new[v] = vec4<f32>(fine[v].xyz + dirs[2u * n + v].xyz, 0.0);
}
