// Per element e < n, after `elastic` wrote energy[e] = V·Ψ(F) at x_new (G groups of 256):
//   u0 & 1 == 0 (difference): out[u1 + g]     = Σ (energy[e] − eref[e])              (J)
//                              out[u1 + G + g] = Σ [element forbidden at x_new]   (count)
//     forbidden: positive at x and not at x_new; with u0 & 2 (strict), positive at x and
//     J(x_new) below min(J, max(0.1 J, 1e-8)) of J = J(x) (potential.rs strict_volume_floor).
//   u0 & 1 == 1 (reference):  eref[e] = energy[e];  out[u1 + g] = Σ |energy[e]|,
//                              out[u1 + G + g] = 0.
// J = 6·signed volume / (6·rest volume).
#import params
#import wg_reduce

@group(0) @binding(0) var<storage, read> energy: array<f32>;
@group(0) @binding(1) var<storage, read_write> eref: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> x_new: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> tets: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read> elem: array<ElemParams>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

// Per-element material record (mirrors shaders/shared/material.wgsl's ElemParams).
struct ElemParams {
    mu: f32,
    lambda: f32,
    volume: f32,
    model: u32,
}

fn six_volume(p: array<vec3<f32>, 4>) -> f32 {
    return dot(p[1] - p[0], cross(p[2] - p[0], p[3] - p[0]));
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let g = linear_group(wid);
    let e = g * 256u + lid.x;
    var acc = vec3<f32>(0.0);
    if e < P.n {
        if (P.u0 & 1u) != 0u {
            eref[e] = energy[e];
            acc.x = abs(energy[e]);
        } else {
            acc.x = energy[e] - eref[e];
            let t = tets[e];
            let p0 = array<vec3<f32>, 4>(x[t.x].xyz, x[t.y].xyz, x[t.z].xyz, x[t.w].xyz);
            let p1 = array<vec3<f32>, 4>(x_new[t.x].xyz, x_new[t.y].xyz, x_new[t.z].xyz, x_new[t.w].xyz);
            let v0 = six_volume(p0);
            let v1 = six_volume(p1);
            if v0 > 0.0 {
                var ok = v1 > 0.0;
                if (P.u0 & 2u) != 0u {
                    let six_rest = 6.0 * elem[e].volume;
                    let j = v0 / six_rest;
                    let floor_j = min(j, max(0.1 * j, 1e-8));
                    ok = v1 >= floor_j * six_rest;
                }
                if !ok {
                    acc.y = 1.0;
                }
            }
        }
    }
    let s = wg_sum3(lid.x, acc);
    if lid.x == 0u {
        let groups = wg_groups(P.n);
        out[P.u1 + g] = s.x;
        out[P.u1 + groups + g] = s.y;
    }
}
