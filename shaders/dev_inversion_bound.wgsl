// The inversion filter of the step bound (jello::problem::StepProblem::step_limit), per element
// e < n, after dev_step_bound's maximum reached scal[u0]: with the obstacle bound
// α_o = 1 / max(1, scal[u0]) and the levels α_k = α_o·2^−k (k < 32),
//   bit k of the element's mask = the element keeps its orientation at x + α_k·d:
//     six_volume > 0 (u1 & 1 == 0), or, strict (u1 & 1), six_volume ≥ floor(J)·6·V_rest with
//     J = six_volume(x) / (6·V_rest) and floor(J) = min(J, max(0.1·J, 1e-8));
//   every bit set for an element not positively oriented at x (the f64 filter's `v0 <= 0`);
//   part[g] = AND of the masks over group g (256 elements).
// Levels 0..6 only without strict (bits 7..31 set): the f64 filter gives up below 1e-2·α_o
// there. dev_inversion_finish turns the groups' AND into the bound. Edges are formed as
// (x_i − x_0) + α(d_i − d_0), so the volume rounds with the element's size, not its position.
#import params
#import wg_reduce

@group(0) @binding(0) var<storage, read> tets: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> elem: array<ElemParams>;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> d: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> scal: array<f32>;
@group(0) @binding(5) var<storage, read_write> part: array<u32>;

// Per-element material record (mirrors shaders/shared/material.wgsl's ElemParams).
struct ElemParams {
    mu: f32,
    lambda: f32,
    volume: f32,
    model: u32,
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let g = linear_group(wid);
    let e = g * 256u + lid.x;
    var mask = 0xffffffffu;
    if e < P.n {
        let t = tets[e];
        let x0 = x[t.x].xyz;
        let d0 = d[t.x].xyz;
        let a = x[t.y].xyz - x0;
        let b = x[t.z].xyz - x0;
        let c = x[t.w].xyz - x0;
        let v0 = dot(a, cross(b, c));
        if v0 > 0.0 {
            let da = d[t.y].xyz - d0;
            let db = d[t.z].xyz - d0;
            let dc = d[t.w].xyz - d0;
            let strict = (P.u1 & 1u) != 0u;
            var floor_v = 0.0;
            var levels = 7u;
            if strict {
                let six_rest = 6.0 * elem[e].volume;
                let j = v0 / six_rest;
                floor_v = min(j, max(0.1 * j, 1e-8)) * six_rest;
                levels = 32u;
            }
            let alpha_o = 1.0 / max(1.0, scal[P.u0]);
            var alpha = alpha_o;
            for (var k = 0u; k < levels; k++) {
                let v = dot(a + alpha * da, cross(b + alpha * db, c + alpha * dc));
                var ok = v > 0.0;
                if strict {
                    ok = v >= floor_v;
                }
                if !ok {
                    mask &= ~(1u << k);
                }
                alpha *= 0.5;
            }
        }
    }
    let joint = wg_and(lid.x, mask);
    if lid.x == 0u {
        part[g] = joint;
    }
}
