// The curvature dᵀH d of a stored Hessian along a direction
// (jello::solver::backend::PotentialBackend::start_curvature), per group g of 256 items:
//   p[g] = Σ_{i in g} ( i < u0 ? d_eᵀ H_e d_e : 0 ) + ( i < u1 ? d_vᵀ K_v d_v : 0 )
// with e = v = i, H_e the 12×12 element Hessian (hess[144e + 12r + c], row-major, dofs
// vertex-major, as `elastic` writes it), d_e the direction at the element's four corners and
// K_v the per-vertex 3×3 block of the rest of the Hessian (inertia and barrier; zero on pinned
// vertices). One pass over max(elements, vertices) items; the host sums the groups with
// reduce_sum into a scalar slot.
#import params
#import wg_reduce

@group(0) @binding(0) var<storage, read> hess: array<f32>;
@group(0) @binding(1) var<storage, read> tets: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> d: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> kv: array<mat3x3<f32>>;
@group(0) @binding(4) var<storage, read_write> part: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let g = linear_group(wid);
    let i = g * 256u + lid.x;
    var acc = 0.0;
    if i < P.u0 {
        let t = tets[i];
        let c = array<vec3<f32>, 4>(d[t.x].xyz, d[t.y].xyz, d[t.z].xyz, d[t.w].xyz);
        let base = 144u * i;
        for (var r = 0u; r < 12u; r++) {
            var row = 0.0;
            for (var k = 0u; k < 12u; k++) {
                row += hess[base + 12u * r + k] * c[k / 3u][k % 3u];
            }
            acc += c[r / 3u][r % 3u] * row;
        }
    }
    if i < P.u1 {
        let dv = d[i].xyz;
        acc += dot(dv, kv[i] * dv);
    }
    let s = wg_sum3(lid.x, vec3<f32>(acc, 0.0, 0.0));
    if lid.x == 0u {
        part[g] = s.x;
    }
}
