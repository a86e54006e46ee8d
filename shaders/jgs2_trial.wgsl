// Per vertex v < n: the line-search trial of the safeguarded Jacobi iteration with
// a = f0 / scal[u1] (f0 the backtracking factor, scal[u1] = max_v bound[v] from
// `jgs2_combine`):
//   x_new[v] = x[v] + a·step[v];  contacts_new = contacts advanced by a·step[v];
//   dirs[2n + v] = a·step[v] (the "previous step" direction);
//   dxn[v] = |a·step[v]| (per-vertex move for the Dx stop rule).
#import params
#import obstacle

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> step: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> scal: array<f32>;
@group(0) @binding(3) var<storage, read> contacts: array<Contact>;
@group(0) @binding(4) var<storage, read_write> x_new: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> contacts_new: array<Contact>;
@group(0) @binding(6) var<storage, read_write> dirs: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read_write> dxn: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let v = linear_group(wid) * 64u + lid.x;
    let n = P.n;
    if v >= n {
        return;
    }
    let a = P.f0 / scal[P.u1];
    let s = step[v].xyz * a;
    x_new[v] = vec4<f32>(x[v].xyz + s, 0.0);
    let nc = arrayLength(&contacts) / n;
    for (var o = 0u; o < nc; o++) {
        contacts_new[v * nc + o] = contact_advance(contacts[v * nc + o], s);
    }
    dirs[2u * n + v] = vec4<f32>(s, 0.0);
    dxn[v] = length(s);
}
