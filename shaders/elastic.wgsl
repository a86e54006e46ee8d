// Per element e < n: energy V·Ψ(F), gradient V·P·Dm⁻ᵀ scattered to the 4 corners, and the
// 12×12 Hessian V·Bᵀ(∂P/∂F)B from the eigen-decomposition of ∂P/∂F (3 scaling modes from the
// σ-space Hessian, 3 flip and 3 twist modes); PSD projection clamps those 9 eigenvalues at 0.
// u0 flags: 1 = write gradient, 2 = write Hessian, 4 = project the Hessian to PSD, 8 = strict
// inversion: an element with det F < f0 gets energy 1e30 (a sentinel the host reads as +∞),
// 16 = the absolute-value filter (|λ| for the 9 eigenvalues; overrides 4), 32 = no filter for
// the stable Neo-Hookeans (models 0 and 1: their exact diagonal blocks are PSD; overrides 4, 16).
// Outputs: energy[e] (J); grad[4e + a].xyz (N, w = 0); hess[144e + 12r + c] (N/m, row-major,
// dofs vertex-major [x0 y0 z0 x1 …]).
#import params
#import elastic_element

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> tets: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> dm_inv: array<mat3x3<f32>>;
@group(0) @binding(3) var<storage, read> elem: array<ElemParams>;
@group(0) @binding(4) var<storage, read_write> energy: array<f32>;
@group(0) @binding(5) var<storage, read_write> grad: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> hess: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let e = linear_group(wid) * 64u + lid.x;
    if e >= P.n {
        return;
    }
    // The element body is shared with `elastic_list` (shaders/shared/elastic_element.wgsl).
    elastic_element(e, P.u0, P.f0);
}
