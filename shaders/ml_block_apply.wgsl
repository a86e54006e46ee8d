// Multilevel solver: the block-Jacobi application z_h = B_h r_h for the inverted 12×12 Galerkin
// blocks (jello::solver::multilevel::invert_blocks), one invocation per handle row i < n
// (n = 3 × handles; handle h = i / 3, row r = i % 3 of its [A | t] layout):
//   z[i][c] = Σ_{k=0..2} dot(blocks[36h + 3(4r + c) + k], rv[3h + k])      (c = 0..3)
// blocks holds each row-major 12×12 block as 36 vec4s (row j = vec4s 3j, 3j+1, 3j+2).
#import params

@group(0) @binding(0) var<storage, read> blocks: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> rv: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> z: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_group(wid) * 64u + lid.x;
    if i >= P.n {
        return;
    }
    let h = i / 3u;
    let r = i % 3u;
    let r0 = rv[3u * h];
    let r1 = rv[3u * h + 1u];
    let r2 = rv[3u * h + 2u];
    var out = vec4<f32>(0.0);
    for (var c = 0u; c < 4u; c++) {
        let b = 36u * h + 3u * (4u * r + c);
        out[c] = dot(blocks[b], r0) + dot(blocks[b + 1u], r1) + dot(blocks[b + 2u], r2);
    }
    z[i] = out;
}
