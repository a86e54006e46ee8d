// Per vertex v < n, the edge–edge barrier of its surface edges against the boxes' edges, added
// to what `jgs2_vertex_terms` and `jgs2_face_terms` wrote (f1 = κ, f2 = d̂, f3 = the barrier's
// 1/h²). For every surface edge e of v (vedges[vedges[v] .. vedges[v + 1]]; edges[e] = its ends
// a, b, the bits of its mass share m_e in kg and of its squared rest length in m²), every box o
// (records nc = len(contacts) / n per vertex) whose bounds, grown by d̂, the edge meets, and
// every box edge k (0..12) whose closest pair with e (`box_edge_contact`) is nearer than d̂ with
// a mollifier m > 0: with w = κ m_e/h², s the pair's parameter on e, λ = 1 − s at a, s at b,
// J = λ·n (∂d/∂x_v) and ∂m/∂x_v (−∂m/∂b at a):
//   g[v].xyz   += w (m b'(d) J + b(d) ∂m/∂x_v)   (free vertices only)
//   venergy[v] += w m b(d) / 2                    (each end takes half)
//   hbar[v]    += w m b''(d) J Jᵀ                 (the Gauss–Newton diagonal block)
// (surface_contact.rs: the edge–edge pair; potential.rs: face_barrier_at_vertex). A pair on or
// through a box edge (d ≤ 0) makes venergy[v] = +∞ and adds no force.
#import params
#import jgs2
#import surface

@group(0) @binding(0) var<storage, read> contacts: array<Contact>;
@group(0) @binding(1) var<storage, read> vedges: array<u32>;
@group(0) @binding(2) var<storage, read> edges: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> vinfo: array<VertexInfo>;
@group(0) @binding(4) var<storage, read_write> g: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> venergy: array<f32>;
@group(0) @binding(6) var<storage, read_write> hbar: array<mat3x3<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let v = linear_group(wid) * 64u + lid.x;
    if v >= P.n {
        return;
    }
    let nc = arrayLength(&contacts) / P.n;
    let dhat = P.f2;
    var e = 0.0;
    var gb = vec3<f32>(0.0);
    var hb = mat3_zero();
    for (var j = vedges[v]; j < vedges[v + 1u]; j++) {
        let edge = edges[vedges[j]];
        let at_a = edge.x == v;
        let w = P.f1 * bitcast<f32>(edge.z) * P.f3;
        let rest_sq = bitcast<f32>(edge.w);
        for (var o = 0u; o < nc; o++) {
            let ca = contacts[edge.x * nc + o];
            if contact_kind(ca) != OBSTACLE_BOX {
                continue;
            }
            let cb = contacts[edge.y * nc + o];
            // The edge's bounds against the box's, grown by d̂ (box frame: [0, max − min]).
            let lo = min(ca.a.xyz, cb.a.xyz);
            let hi = max(ca.a.xyz, cb.a.xyz);
            let gap = max(-dhat - hi, lo - box_extent(ca) - dhat);
            if max(gap.x, max(gap.y, gap.z)) > 0.0 {
                continue;
            }
            for (var k = 0u; k < 12u; k++) {
                let c = box_edge_contact(ca, cb, k, rest_sq);
                if c.d <= 0.0 {
                    e = bitcast<f32>(0x7f800000u);
                    continue;
                }
                if c.d >= dhat || c.m <= 0.0 {
                    continue;
                }
                let b = barrier(c.d, dhat);
                e += w * c.m * b.x / 2.0;
                let lambda = select(c.s, 1.0 - c.s, at_a);
                let jv = c.normal * lambda;
                let dm = select(c.dm, -c.dm, at_a);
                gb += (jv * (c.m * b.y) + dm * b.x) * w;
                hb += outer_vv(jv, jv) * (w * c.m * b.z);
            }
        }
    }
    venergy[v] += e;
    hbar[v] += hb;
    if vinfo[v].free != 0u {
        g[v] = vec4<f32>(g[v].xyz + gb, 0.0);
    }
}
