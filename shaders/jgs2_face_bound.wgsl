// Per vertex v < n: the surface part of the safeguarded step's obstacle bound (after
// `jgs2_combine`): bound[v] = max(bound[v], 1/t_v), t_v = the least conservative time of
// impact (`face_toi`) of v's surface triangles (vfaces[vfaces[v] .. vfaces[v + 1]], corners
// tris[f].xyz) moving by step (every corner its own) against every sphere and box, from the
// corners' contact records (nc = len(contacts) / n per vertex), keeping the separation
// f3 (`face_toi`'s thickness); pairs whose swept bounds miss the obstacle's by more are skipped. Every triangle is gathered by each of its corners, so
// max_v bound[v] = 1/min(vertex bound, every triangle's time of impact): the
// `max_obstacle_step` of potential.rs (there the triangles move by the vertex-bounded step).
#import params
#import surface

@group(0) @binding(0) var<storage, read> step: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> contacts: array<Contact>;
@group(0) @binding(2) var<storage, read> vfaces: array<u32>;
@group(0) @binding(3) var<storage, read> tris: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> bound: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let v = linear_group(wid) * 64u + lid.x;
    if v >= P.n {
        return;
    }
    let nc = arrayLength(&contacts) / P.n;
    var t = 1.0;
    for (var j = vfaces[v]; j < vfaces[v + 1u]; j++) {
        let tri = tris[vfaces[j]];
        let d0 = step[tri.x].xyz;
        let d1 = step[tri.y].xyz;
        let d2 = step[tri.z].xyz;
        if all(d0 == vec3<f32>(0.0)) && all(d1 == vec3<f32>(0.0)) && all(d2 == vec3<f32>(0.0)) {
            continue;
        }
        for (var o = 0u; o < nc; o++) {
            let c0 = contacts[tri.x * nc + o];
            if !acts_on_faces(contact_kind(c0)) {
                continue;
            }
            let c1 = contacts[tri.y * nc + o];
            let c2 = contacts[tri.z * nc + o];
            if face_bounds_gap(c0, c1, c2, d0, d1, d2) > P.f3 {
                continue;
            }
            t = min(t, face_toi(c0, c1, c2, d0, d1, d2, P.f3));
        }
    }
    bound[v] = max(bound[v], 1.0 / max(t, 1e-30));
}
