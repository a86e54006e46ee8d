// The off-diagonal part of contact pairs' Hessian-vector products: per pair i (one invocation)
// with its 12×12 Hessian hess[144i + 12r + c] (row-major, as ipc_pairs / ipc_friction write it)
// over the stencil stencils[i] (indices into d), and per corner a of the pair
//   out[4i + a].xyz = Σ_{b ≠ a} H[3a.., 3b..] · d[stencil[b]].xyz      (w = 0)
// — the coupling between a pair's vertices that the per-vertex diagonal blocks (gathered into
// the local systems' blocks, which hess_vec applies) leave out. ipc_gather then sums out per
// vertex over the pairs' CSR into the JGS2/VBD device model's H·d. n = number of pairs.
// Twin: twins::ipc::ipc_pair_hvp.
#import params

@group(0) @binding(0) var<storage, read> hess: array<f32>;
@group(0) @binding(1) var<storage, read> stencils: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> d: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_group(wid) * 64u + lid.x;
    if i >= P.n {
        return;
    }
    let s = stencils[i];
    let base = 144u * i;
    for (var a = 0u; a < 4u; a++) {
        var acc = vec3<f32>(0.0);
        for (var b = 0u; b < 4u; b++) {
            if b == a {
                continue;
            }
            let db = d[s[b]].xyz;
            for (var r = 0u; r < 3u; r++) {
                let row = base + 12u * (3u * a + r) + 3u * b;
                acc[r] += hess[row] * db.x + hess[row + 1u] * db.y + hess[row + 2u] * db.z;
            }
        }
        out[4u * i + a] = vec4<f32>(acc, 0.0);
    }
}
