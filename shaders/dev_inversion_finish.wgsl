// Finishes the inversion filter of the step bound (after dev_inversion_bound): one workgroup
// ANDs the u1 group masks of part into M and, with S = scal[u0] (dev_step_bound's maximum, the
// obstacle bound's reciprocal), writes the bound's reciprocal scal[u0] = max(1, S)·2^k for k the
// lowest set bit of M below the filter's levels (7, or 32 when strict: u0 >> 16 & 1) — the
// first level α_o·2^−k at which every element keeps its orientation, as the f64 filter halves.
// Without such a level: the obstacle bound alone (not strict: the f64 filter gives up below
// 1e-2·α_o and lets the line search decide), or α_o·2^−32 (strict). u0 & 0xffff = the slot.
#import params
#import wg_reduce

@group(0) @binding(0) var<storage, read> part: array<u32>;
@group(0) @binding(1) var<storage, read_write> scal: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
    var mask = 0xffffffffu;
    for (var i = lid.x; i < P.u1; i += 256u) {
        mask &= part[i];
    }
    let joint = wg_and(lid.x, mask);
    if lid.x == 0u {
        let slot = P.u0 & 0xffffu;
        let strict = ((P.u0 >> 16u) & 1u) != 0u;
        var levels = 7u;
        if strict {
            levels = 32u;
        }
        var m = joint;
        if levels < 32u {
            m &= (1u << levels) - 1u;
        }
        let base = max(1.0, scal[slot]);
        if m != 0u {
            scal[slot] = ldexp(base, i32(firstTrailingBit(m)));
        } else if strict {
            scal[slot] = ldexp(base, 32);
        }
    }
}
