// The first-order effect of rounding the coordinates a set of terms reads (elements, contact
// pairs) to f32, per group g of 256 terms (the multilevel line search's round-off bound,
// jello::solver::multilevel::device_energy):
//   out[u1 + g] = Σ_{t in g} Σ_{c < 4} Σ_k |forces[4t + c].k|·|coords[stencils[t][c]].k|
// (N·m = J; the host multiplies by 2⁻²⁴, the relative error of rounding to nearest f32).
// `forces` are the terms' corner forces as `elastic`, `ipc_pairs` and `ipc_friction` write
// them; a stencil index past `coords` contributes 0 (the twin reports it as an error).
#import params
#import wg_reduce

@group(0) @binding(0) var<storage, read> forces: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> coords: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> stencils: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let g = linear_group(wid);
    let t = g * 256u + lid.x;
    var acc = 0.0;
    if t < P.n {
        let s = stencils[t];
        var ids = array<u32, 4>(s.x, s.y, s.z, s.w);
        let nc = arrayLength(&coords);
        for (var c = 0u; c < 4u; c++) {
            if ids[c] < nc {
                let f = abs(forces[4u * t + c].xyz);
                let p = abs(coords[ids[c]].xyz);
                acc += f.x * p.x + f.y * p.y + f.z * p.z;
            }
        }
    }
    let s = wg_sum3(lid.x, vec3<f32>(acc, 0.0, 0.0));
    if lid.x == 0u {
        out[P.u1 + g] = s.x;
    }
}
