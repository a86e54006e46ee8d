// The device backend's fused vector update (jello::solver::backend::Backend::combine), per
// vertex v < n (vec4 fields, w = 0):
//   c = f0·A − f1·R,  A = scal[a] (1 without a),  R = scal[num]/scal[den] (0 without num, and
//       whenever scal[den] ≤ 0 or is not finite; scal[num] alone without den)
//   y[v] = c·x[v]            (flags & 1: set)        y[v] += c·x[v]   (else)
//   part[g] = Σ_{v in group g} z[v]·y[v]   (flags & 2, after the update; 256 vertices a group)
//   scal[store] = R          (invocation 0 of group 0, when store is given)
// With flags & 4 all four lanes are updated and dotted (the multilevel solver's subspace vectors,
// three full vec4s per handle); otherwise xyz, and y.w = 0.
// Slots (10 bits each, 1023 = none): u0 = a | num << 10 | den << 20, u1 = store | flags << 10.
// The store slot is never one of the slots read (the host checks), so the write cannot race.
#import params
#import wg_reduce

@group(0) @binding(0) var<storage, read_write> scal: array<f32>;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> z: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> part: array<f32>;

const NONE: u32 = 1023u;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let g = linear_group(wid);
    let v = g * 256u + lid.x;
    let ia = P.u0 & 1023u;
    let inum = (P.u0 >> 10u) & 1023u;
    let iden = (P.u0 >> 20u) & 1023u;
    let istore = P.u1 & 1023u;
    let flags = P.u1 >> 10u;
    var a = 1.0;
    if ia != NONE {
        a = scal[ia];
    }
    var r = 0.0;
    if inum != NONE {
        if iden != NONE {
            let den = scal[iden];
            if den > 0.0 && den < 3.4e38 {
                r = scal[inum] / den;
            }
        } else {
            r = scal[inum];
        }
    }
    let c = P.f0 * a - P.f1 * r;
    var d = 0.0;
    if v < P.n {
        if (flags & 4u) != 0u {
            var yv = c * x[v];
            if (flags & 1u) == 0u {
                yv += y[v];
            }
            y[v] = yv;
            d = dot(z[v], yv);
        } else {
            var yv = c * x[v].xyz;
            if (flags & 1u) == 0u {
                yv += y[v].xyz;
            }
            y[v] = vec4<f32>(yv, 0.0);
            d = dot(z[v].xyz, yv);
        }
    }
    if (flags & 2u) != 0u {
        let s = wg_sum3(lid.x, vec3<f32>(d, 0.0, 0.0));
        if lid.x == 0u {
            part[g] = s.x;
        }
    }
    if g == 0u && lid.x == 0u && istore != NONE {
        scal[istore] = r;
    }
}
