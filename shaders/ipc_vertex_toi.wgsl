// Per-vertex minimum of the pairs' times of impact (ipc_ccd's toi) over the vertex→(pair, slot)
// CSR built on the host (VertexCsr::from_pairs; offsets and pair ids, no atomics), 256 vertices
// per workgroup:
//   toi[v] = min(f0, min over k in offsets[v]..offsets[v + 1] of pair_toi[csr_pairs[k]])
// (f0 = t_max; a vertex in no pair gets f0): the per-vertex step bound of JGS2/VBD. And per
// workgroup g, part[g] = max over its vertices of 1/max(toi[v], 1e-30) — dev_step_bound's
// layout, so reduce_max_abs finishes the global maximum M and the global minimum is 1/M (within
// 2 ulp; the twin's docs). n = number of vertices. Twin: twins::ccd::ipc_vertex_toi.
#import params
#import wg_reduce

@group(0) @binding(0) var<storage, read> pair_toi: array<f32>;
@group(0) @binding(1) var<storage, read> offsets: array<u32>;
@group(0) @binding(2) var<storage, read> csr_pairs: array<u32>;
@group(0) @binding(3) var<storage, read_write> toi: array<f32>;
@group(0) @binding(4) var<storage, read_write> part: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let g = linear_group(wid);
    let v = g * 256u + lid.x;
    var inv = 0.0;
    if v < P.n {
        var m = P.f0;
        for (var k = offsets[v]; k < offsets[v + 1u]; k++) {
            m = min(m, pair_toi[csr_pairs[k]]);
        }
        toi[v] = m;
        inv = 1.0 / max(m, 1e-30);
    }
    let r = wg_max3(lid.x, vec3<f32>(inv, 0.0, 0.0));
    if lid.x == 0u {
        part[g] = r.x;
    }
}
