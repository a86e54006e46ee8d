// Device broad phase, pass 2: empties the bucket heads and, in invocation 0, zeroes the counters
// and finishes the two grids' cell sizes (twins::broad::broad_clear). Over n = 2T heads (the
// large-face list after them needs no clearing): heads[k] = EMPTY. Invocation 0, with u0 = the
// face count and u1 = the edge count: sums[2 + p] = 1/h_p for pass p (0 point–triangle, over the
// faces' largest sides summed in sums[0]; 1 edge–edge, over the edges' in sums[1]),
// h_p = CELL_FACTOR × their mean (m), 1/h = 1 m⁻¹ when that is not positive and finite; and
// counters[0..4] = 0.
#import params
#import broad_grid

@group(0) @binding(0) var<storage, read_write> sums: array<f32>;
@group(0) @binding(1) var<storage, read_write> heads: array<u32>;
@group(0) @binding(2) var<storage, read_write> counters: array<u32>;

const CELL_FACTOR: f32 = 2.0;

fn inverse_cell(sum: f32, count: u32) -> f32 {
    if count == 0u {
        return 1.0;
    }
    let inv = 1.0 / (CELL_FACTOR * (sum / f32(count)));
    if inv > 0.0 && inv < 3.4028235e38 {
        return inv;
    }
    return 1.0;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_group(wid) * 256u + lid.x;
    if i >= P.n {
        return;
    }
    heads[i] = EMPTY;
    if i == 0u {
        sums[2] = inverse_cell(sums[0], P.u0);
        sums[3] = inverse_cell(sums[1], P.u1);
        for (var k = 0u; k < 4u; k++) {
            counters[k] = 0u;
        }
    }
}
