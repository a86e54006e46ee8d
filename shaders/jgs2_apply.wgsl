// Per listed vertex k < n: i = lists[u1 + k]; x[i] += f0·d_i with d_i = dirs[i] (slot 0), its
// contact records advanced by the same move (nc = len(contacts) / len(x) per vertex), and
// dxn[i] = f1·|d_i| (f1 = the total scale applied so far: Gauss–Seidel colours are applied with
// f0 = 1 and then corrected by f0 = next − scale when the energy safeguard halves them).
// u0 = 1: the positions also have fine parts (fine[i]: the step start's low part plus the
// step's displacement, read by the contact kernels; shared/pair_record.wgsl), which take the
// same move; u0 = 0: fine is not read.
#import params
#import obstacle

@group(0) @binding(0) var<storage, read> lists: array<u32>;
@group(0) @binding(1) var<storage, read> dirs: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> contacts: array<Contact>;
@group(0) @binding(4) var<storage, read_write> dxn: array<f32>;
@group(0) @binding(5) var<storage, read_write> fine: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let k = linear_group(wid) * 64u + lid.x;
    if k >= P.n {
        return;
    }
    let i = lists[P.u1 + k];
    let d = dirs[i].xyz;
    let p = x[i];
    let s = P.f0 * d;
    x[i] = vec4<f32>(p.xyz + s, p.w);
    if P.u0 == 1u {
        fine[i] = vec4<f32>(fine[i].xyz + s, 0.0);
    }
    let nc = arrayLength(&contacts) / arrayLength(&x);
    for (var o = 0u; o < nc; o++) {
        contacts[i * nc + o] = contact_advance(contacts[i * nc + o], s);
    }
    dxn[i] = P.f1 * length(d);
}
