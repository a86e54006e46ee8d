// Per listed vertex k < n: i = lists[u1 + k]; x[i] += f0·d_i with d_i = dirs[i] (slot 0), and
// dxn[i] = f1·|d_i| (f1 = the total scale applied so far: Gauss–Seidel colours are applied with
// f0 = 1 and then corrected by f0 = next − scale when the energy safeguard halves them).
#import params

@group(0) @binding(0) var<storage, read> lists: array<u32>;
@group(0) @binding(1) var<storage, read> dirs: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> dxn: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let k = linear_group(wid) * 64u + lid.x;
    if k >= P.n {
        return;
    }
    let i = lists[P.u1 + k];
    let d = dirs[i].xyz;
    let p = x[i];
    x[i] = vec4<f32>(p.xyz + P.f0 * d, p.w);
    dxn[i] = P.f1 * length(d);
}
