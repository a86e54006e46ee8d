// Per vertex v < n (n = number of vertices), for u0 ≤ 3 direction vectors q stored one after the
// other in dirs (dirs[q·n + v]): the Hessian-vector product of the incremental potential at the
// cached state (local.rs: hess_vec), f0 = the inertia weight 1/ĥ²:
//   out[q·n + v] = free ? m_v/ĥ² d_v + H_b,v d_v + Σ_{(e, c) ∋ v} Σ_b K_e[c, b] d_{tet_e[b]} : 0
// gathered over the vertex→element CSR (packed[k] = 4e + c) — no scatter, no atomics.
#import params
#import jgs2
#import hess_block

@group(0) @binding(0) var<storage, read> hess: array<f32>;
@group(0) @binding(1) var<storage, read> tets: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> offsets: array<u32>;
@group(0) @binding(3) var<storage, read> packed: array<u32>;
@group(0) @binding(4) var<storage, read> vinfo: array<VertexInfo>;
@group(0) @binding(5) var<storage, read> hbar: array<mat3x3<f32>>;
@group(0) @binding(6) var<storage, read> dirs: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read_write> out: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let v = linear_group(wid) * 64u + lid.x;
    let n = P.n;
    if v >= n {
        return;
    }
    let nd = min(P.u0, 3u);
    let info = vinfo[v];
    if info.free == 0u {
        for (var q = 0u; q < nd; q++) {
            out[q * n + v] = vec4<f32>(0.0);
        }
        return;
    }
    let ms = info.mass * P.f0;
    let hb = hbar[v];
    var y: array<vec3<f32>, 3>;
    for (var q = 0u; q < nd; q++) {
        let dv = dirs[q * n + v].xyz;
        y[q] = dv * ms + hb * dv;
    }
    for (var k = offsets[v]; k < offsets[v + 1u]; k++) {
        let ec = packed[k];
        let e = ec >> 2u;
        let c = ec & 3u;
        let t = tets[e];
        for (var b = 0u; b < 4u; b++) {
            let kb = hess_block(e, c, b);
            let w = t[b];
            for (var q = 0u; q < nd; q++) {
                y[q] += kb * dirs[q * n + w].xyz;
            }
        }
    }
    for (var q = 0u; q < nd; q++) {
        out[q * n + v] = vec4<f32>(y[q], 0.0);
    }
}
