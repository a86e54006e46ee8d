// Per vertex v < n, the surface barrier against spheres and boxes, added to what
// `jgs2_vertex_terms` wrote (f1 = κ, f2 = d̂, f3 = the barrier's 1/h², not the inertia weight
// under BDF2: integrator.rs). For every surface triangle f of v
// (vfaces[vfaces[v] .. vfaces[v + 1]], corners tris[f].xyz, surface mass m_f = bits of tris[f].w)
// and every pair of f with a sphere (its closest point: `face_contact`) or with a box corner
// (`corner_tri_contact`, 8 per box) nearer than d̂ (from the corners' contact records,
// nc = len(contacts) / n per vertex), with w = κ m_f/h², c the corner v is and J = bary_c·n
// (∂d/∂x_v):
//   g[v].xyz   += w b'(d) J                  (free vertices only)
//   venergy[v] += w b(d) / 3                 (each corner takes a third: Σ_v = Σ_f w b)
//   hbar[v]    += w b''(d) J Jᵀ              (the Gauss–Newton diagonal block)
// (potential.rs: face_barrier_at_vertex, barrier_energy). A triangle on or inside an obstacle
// (d ≤ 0) makes venergy[v] = +∞ and adds no force.
#import params
#import jgs2
#import surface

@group(0) @binding(0) var<storage, read> contacts: array<Contact>;
@group(0) @binding(1) var<storage, read> vfaces: array<u32>;
@group(0) @binding(2) var<storage, read> tris: array<vec4<u32>>;
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
    for (var j = vfaces[v]; j < vfaces[v + 1u]; j++) {
        let tri = tris[vfaces[j]];
        let corner = face_corner(tri, v);
        let w = P.f1 * bitcast<f32>(tri.w) * P.f3;
        for (var o = 0u; o < nc; o++) {
            let c0 = contacts[tri.x * nc + o];
            if !acts_on_faces(contact_kind(c0)) {
                continue;
            }
            let c1 = contacts[tri.y * nc + o];
            let c2 = contacts[tri.z * nc + o];
            let zero = vec3<f32>(0.0);
            if face_bounds_gap(c0, c1, c2, zero, zero, zero) > dhat {
                continue;
            }
            // A sphere: one pair (its closest point). A box: one pair per corner (its
            // edges are `jgs2_edge_terms`', its faces act on the vertices).
            let kind = contact_kind(c0);
            let pairs = select(1u, 8u, kind == OBSTACLE_BOX);
            for (var k = 0u; k < pairs; k++) {
                var c: TriContact;
                if kind == OBSTACLE_BOX {
                    c = corner_tri_contact(c0, c1, c2, k);
                } else {
                    c = face_contact(c0, c1, c2);
                }
                if c.d >= dhat {
                    continue;
                }
                let b = barrier(c.d, dhat);
                e += w * b.x / 3.0;
                if c.d > 0.0 {
                    let jv = c.normal * c.bary[corner];
                    gb += jv * (w * b.y);
                    hb += outer_vv(jv, jv) * (w * b.z);
                }
            }
        }
    }
    venergy[v] += e;
    hbar[v] += hb;
    if vinfo[v].free != 0u {
        g[v] = vec4<f32>(g[v].xyz + gb, 0.0);
    }
}
