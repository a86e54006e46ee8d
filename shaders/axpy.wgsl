// y[i] = f0 · x[i] + y[i] for i < n (flat f32 arrays; vec4 position buffers work with n = 4·nv).
#import params

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_group(wid) * 256u + lid.x;
    if i >= P.n {
        return;
    }
    y[i] = P.f0 * x[i] + y[i];
}
