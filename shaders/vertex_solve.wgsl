// Per listed vertex k < n: i = lists[u1 + k]; δ = −(A + H_b)⁻¹ r by Cholesky with H_b = hbar[i]
// the barrier curvature; u0 & 3 picks the system: 0 = primary, on failure the fallback (JGS2
// with its VBD fallback); 1 = primary only; 2 = fallback only. A failed solve gives δ = 0. δ is
// then limited to 0.9 × its first time of impact with any obstacle, then by t = the least
// conservative time of impact (`face_toi`) of its surface triangles (vfaces[vfaces[i] ..
// vfaces[i + 1]], corners tris[f].xyz) with only this corner moving, against every sphere and
// box, keeping the separation f3 (`face_toi`'s thickness) (solver.rs: local_steps, filter;
// potential.rs: vertex_surface_step; from the contact records, nc = len(contacts) / nv per
// vertex), and written to dirs[(u0 >> 4)·nv + i], nv = len(hbar).
#import params
#import jgs2
#import surface

@group(0) @binding(0) var<storage, read> lists: array<u32>;
@group(0) @binding(1) var<storage, read> sys: array<LocalSystem>;
@group(0) @binding(2) var<storage, read> hbar: array<mat3x3<f32>>;
@group(0) @binding(3) var<storage, read> contacts: array<Contact>;
@group(0) @binding(4) var<storage, read> vfaces: array<u32>;
@group(0) @binding(5) var<storage, read> tris: array<vec4<u32>>;
@group(0) @binding(6) var<storage, read_write> dirs: array<vec4<f32>>;

// The fraction of vertex i's own move d (the other corners held) before one of its surface
// triangles comes within the separation f3 of a sphere or box; pairs whose gap bound already
// exceeds the move (0.9·(gap − f3) ≥ |d|: the first advance of `face_toi` reaches t = 1) are
// skipped.
fn vertex_face_step(i: u32, nc: u32, d: vec3<f32>) -> f32 {
    if all(d == vec3<f32>(0.0)) {
        return 1.0;
    }
    let speed = length(d);
    var t = 1.0;
    for (var j = vfaces[i]; j < vfaces[i + 1u]; j++) {
        let tri = tris[vfaces[j]];
        let zero = vec3<f32>(0.0);
        let d0 = select(zero, d, tri.x == i);
        let d1 = select(zero, d, tri.y == i);
        let d2 = select(zero, d, tri.z == i);
        for (var o = 0u; o < nc; o++) {
            let c0 = contacts[tri.x * nc + o];
            if !acts_on_faces(contact_kind(c0)) {
                continue;
            }
            let c1 = contacts[tri.y * nc + o];
            let c2 = contacts[tri.z * nc + o];
            if 0.9 * (face_bounds_gap(c0, c1, c2, zero, zero, zero) - P.f3) >= speed {
                continue;
            }
            t = min(t, face_toi(c0, c1, c2, d0, d1, d2, P.f3));
        }
    }
    return t;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let k = linear_group(wid) * 64u + lid.x;
    if k >= P.n {
        return;
    }
    let i = lists[P.u1 + k];
    let s = sys[i];
    let hb = hbar[i];
    let mode = P.u0 & 3u;
    var res: Solve3;
    res.ok = false;
    res.d = vec3<f32>(0.0);
    if mode != 2u {
        res = chol_solve3(s.a + hb, s.r.xyz);
    }
    if !res.ok && mode != 1u {
        res = chol_solve3(s.af + hb, s.rf.xyz);
    }
    var d = vec3<f32>(0.0);
    if res.ok {
        d = res.d;
    }
    let nv = arrayLength(&hbar);
    let nc = arrayLength(&contacts) / nv;
    d = d * contact_step_bound(i, nc, d);
    d = d * vertex_face_step(i, nc, d);
    dirs[(P.u0 >> 4u) * nv + i] = vec4<f32>(d, 0.0);
}
