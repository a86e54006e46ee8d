// x[i] = f0 · x[i] for i < n.
#import params

@group(0) @binding(0) var<storage, read_write> x: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_group(wid) * 256u + lid.x;
    if i >= P.n {
        return;
    }
    x[i] = P.f0 * x[i];
}
