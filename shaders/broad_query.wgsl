// Device broad phase, pass 4: each edge and surface vertex queries its grid and appends its
// candidate pairs (twins::broad::broad_query documents the rules). Over n = edges + vertices
// (u0 = the face count, u1 = the edge count; query primitive p = u0 + invocation): a vertex
// against the faces (grid 0), an edge against the higher edges (grid 1). A pair is appended
// (atomicAdd on counters[0]; written when below the capacity of `pairs`, counted either way)
// when the boxes overlap, it shares no vertex and its bodies may touch. Each pair once: in the
// grid, only from the cell holding the lower corner of the boxes' intersection; a large query
// tests every primitive of the other set; a non-large vertex tests the large-face list; a pair of
// edges with a large member is found by the large one (the lower one when both are).
// Edge–edge records carry eps_x = (10⁻³·ℓa²)·ℓb² (m⁴) from the rest lengths² `len2`.
#import params
#import broad_grid
#import pair_record

@group(0) @binding(0) var<storage, read> prims: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> boxes: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> sums: array<f32>;
@group(0) @binding(3) var<storage, read> heads: array<u32>;
@group(0) @binding(4) var<storage, read> entries: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read> len2: array<f32>;
@group(0) @binding(6) var<storage, read_write> pairs: array<Pair>;
@group(0) @binding(7) var<storage, read_write> counters: array<atomic<u32>>;

fn emit(v: vec4<u32>, kind: u32, eps_x: f32) {
    let k = atomicAdd(&counters[0], 1u);
    if k < arrayLength(&pairs) {
        pairs[k] = Pair(v, kind, eps_x, 0u, 0u);
    }
}

// The pair of query primitive p and primitive i of the other set, after the exclusions.
fn candidate(p: u32, i: u32, grid: u32) {
    let a = prims[p];
    let b = prims[i];
    if !bodies_may_touch(a.w, b.w) {
        return;
    }
    if grid == 0u {
        if a.x == b.x || a.x == b.y || a.x == b.z {
            return;
        }
        emit(vec4<u32>(a.x, b.x, b.y, b.z), 0u, 0.0);
    } else {
        if a.x == b.x || a.x == b.y || a.y == b.x || a.y == b.y {
            return;
        }
        let lo = min(p, i);
        let hi = max(p, i);
        let el = prims[lo];
        let eh = prims[hi];
        let eps = (1e-3 * len2[lo - P.u0]) * len2[hi - P.u0];
        emit(vec4<u32>(el.x, el.y, eh.x, eh.y), 1u, eps);
    }
}

fn prim_large(i: u32, inv: f32) -> bool {
    return is_large(cell_span(cell_of(boxes[2u * i].xyz, inv), cell_of(boxes[2u * i + 1u].xyz, inv)));
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let q = linear_group(wid) * 256u + lid.x;
    if q >= P.n {
        return;
    }
    let nf = P.u0;
    let ne = P.u1;
    let p = nf + q;
    let t = (arrayLength(&heads) - nf) / 2u;
    let grid = select(0u, 1u, p < nf + ne);
    let inv = sums[2u + grid];
    let alo = boxes[2u * p].xyz;
    let ahi = boxes[2u * p + 1u].xyz;
    let lo = cell_of(alo, inv);
    let hi = cell_of(ahi, inv);
    let first = select(0u, nf, grid == 1u);
    let end = select(nf, nf + ne, grid == 1u);
    if is_large(cell_span(lo, hi)) {
        for (var i = first; i < end; i++) {
            if i == p || !boxes_overlap(alo, ahi, boxes[2u * i].xyz, boxes[2u * i + 1u].xyz) {
                continue;
            }
            if grid == 0u || i > p || !prim_large(i, inv) {
                candidate(p, i, grid);
            }
        }
        return;
    }
    for (var cx = lo.x; cx <= hi.x; cx++) {
        for (var cy = lo.y; cy <= hi.y; cy++) {
            for (var cz = lo.z; cz <= hi.z; cz++) {
                let cell = vec3<i32>(cx, cy, cz);
                let u = cell_biased(cell);
                let key = cell_key(u);
                var e = heads[grid * t + cell_bucket(u, t)];
                while e < arrayLength(&entries) {
                    let ent = entries[e];
                    e = ent.w;
                    let i = ent.x;
                    if ent.y != key.x || ent.z != key.y || (grid == 1u && i <= p) {
                        continue;
                    }
                    let blo = boxes[2u * i].xyz;
                    if boxes_overlap(alo, ahi, blo, boxes[2u * i + 1u].xyz)
                        && all(max(lo, cell_of(blo, inv)) == cell) {
                        candidate(p, i, grid);
                    }
                }
            }
        }
    }
    if grid == 0u {
        let nl = min(atomicLoad(&counters[2]), nf);
        for (var k = 0u; k < nl; k++) {
            let i = heads[2u * t + k];
            if boxes_overlap(alo, ahi, boxes[2u * i].xyz, boxes[2u * i + 1u].xyz) {
                candidate(p, i, grid);
            }
        }
    }
}
