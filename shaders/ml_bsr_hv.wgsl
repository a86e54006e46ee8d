// Multilevel solver: a block-sparse (3×3 BSR) matrix-vector product per vertex v < n, with an
// optional addend — the `base` term of jello::solver::multilevel::HessianOperator::apply
// (inertia, obstacle barrier, surface pairs, identity on pinned rows, and at the full-space level
// the lagged elastic Hessian), each row holding both triangles of the symmetric matrix so the
// product gathers per row (no scatter, no atomics):
//   y[v].xyz = Σ_{k in row v} blocks[k] · x[cols[k]].xyz  (+ add[v].xyz when u0 & 1),  y[v].w = 0
// The addend is the element and contact terms already gathered per vertex (`ml_element_hv` +
// `gather_gradient`), so one full-space H·x is three dispatches. A block-diagonal matrix with
// the inverse diagonal is the Jacobi preconditioner.
#import params

@group(0) @binding(0) var<storage, read> rowptr: array<u32>;
@group(0) @binding(1) var<storage, read> cols: array<u32>;
@group(0) @binding(2) var<storage, read> blocks: array<mat3x3<f32>>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> add: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> y: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let v = linear_group(wid) * 64u + lid.x;
    if v >= P.n {
        return;
    }
    var acc = vec3<f32>(0.0);
    for (var k = rowptr[v]; k < rowptr[v + 1u]; k++) {
        acc += blocks[k] * x[cols[k]].xyz;
    }
    if (P.u0 & 1u) != 0u {
        acc += add[v].xyz;
    }
    y[v] = vec4<f32>(acc, 0.0);
}
