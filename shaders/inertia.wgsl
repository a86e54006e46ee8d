// Inertia term of the incremental potential, per vertex v < n, with f0 = 1/h² (s⁻²):
//   grad[v].xyz += m_v/h² · (x_v − x̃_v)          (N, added to what the buffer holds)
//   energy[v]    = m_v/(2h²) · |x_v − x̃_v|²       (J)
// grad.w is left untouched (the vec4 position layout's unused lane).
#import params

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> x_tilde: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> mass: array<f32>;
@group(0) @binding(3) var<storage, read_write> grad: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> energy: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let v = linear_group(wid) * 64u + lid.x;
    if v >= P.n {
        return;
    }
    let d = x[v].xyz - x_tilde[v].xyz;
    let k = mass[v] * P.f0;
    let gv = grad[v];
    grad[v] = vec4<f32>(gv.xyz + k * d, gv.w);
    energy[v] = 0.5 * k * dot(d, d);
}
