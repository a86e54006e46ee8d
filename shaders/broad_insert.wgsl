// Device broad phase, pass 3: inserts the faces and edges into their grids
// (twins::broad::broad_insert). Over n = faces + edges primitives (u0 = the face count; grid 0
// the faces' grid, grid 1 the edges'), with heads = 2T bucket heads (grid p's at p·T) and the
// large-face list after them: a primitive whose box spans a cell range of at most LARGE_CELLS
// cells (at 1/h = sums[2 + p]) reserves that many entries with one atomicAdd on counters[1] and,
// when they fit in `entries`, pushes one entry vec4(prim, key.x, key.y, next) per cell onto its
// bucket's list (atomicExchange of the head); a reservation past the end writes nothing (the
// counter still tells the host how many entries the grid needed). A large face is appended to
// the large-face list (counters[2]); a large edge is found by its own query instead.
#import params
#import broad_grid

@group(0) @binding(0) var<storage, read> boxes: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> sums: array<f32>;
@group(0) @binding(2) var<storage, read_write> heads: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read_write> entries: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> counters: array<atomic<u32>>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_group(wid) * 256u + lid.x;
    if i >= P.n {
        return;
    }
    let nf = P.u0;
    let t = (arrayLength(&heads) - nf) / 2u;
    let grid = select(1u, 0u, i < nf);
    let inv = sums[2u + grid];
    let lo = cell_of(boxes[2u * i].xyz, inv);
    let hi = cell_of(boxes[2u * i + 1u].xyz, inv);
    let span = cell_span(lo, hi);
    if is_large(span) {
        if grid == 0u {
            let k = atomicAdd(&counters[2], 1u);
            atomicStore(&heads[2u * t + k], i);
        }
        return;
    }
    let cells = span.x * span.y * span.z;
    let base = atomicAdd(&counters[1], cells);
    if base + cells > arrayLength(&entries) || base + cells < base {
        return;
    }
    var e = base;
    for (var cx = lo.x; cx <= hi.x; cx++) {
        for (var cy = lo.y; cy <= hi.y; cy++) {
            for (var cz = lo.z; cz <= hi.z; cz++) {
                let u = cell_biased(vec3<i32>(cx, cy, cz));
                let key = cell_key(u);
                let old = atomicExchange(&heads[grid * t + cell_bucket(u, t)], e);
                entries[e] = vec4<u32>(i, key.x, key.y, old);
                e++;
            }
        }
    }
}
