// ADMM-PD local step, one element per invocation (jello::solver::backend::AdmmBackend):
//   u0 = 0 (reset):  z[e] = F(x),  u[e] = 0
//   u0 = 1 (PD) or 2 (hyperelastic):  v = F(x) + u[e],  z' = prox(v),  u[e] = v − z',
//     corner[8e + a]     = w2[e]·(z' − u[e])·∇N_a      (the x-step's Σ w²Dᵀ(z − ū), a = 0..3)
//     corner[8e + 4 + a] = w2[e]·(z' − z[e])·∇N_a      (the dual residual's DᵀW²(zⁿ⁺¹ − zⁿ))
//     z[e] = z'
// F = Ds·Dm⁻¹ (F form: F = Σ x_a∇N_aᵀ), ∇N_a for a = 1..3 the rows of Dm⁻¹, ∇N_0 = −Σ.
#import params
#import admm_prox

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> tets: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> dm_inv: array<mat3x3<f32>>;
@group(0) @binding(3) var<storage, read> elem: array<ElemParams>;
@group(0) @binding(4) var<storage, read> w2: array<f32>;
@group(0) @binding(5) var<storage, read_write> z: array<mat3x3<f32>>;
@group(0) @binding(6) var<storage, read_write> u: array<mat3x3<f32>>;
@group(0) @binding(7) var<storage, read_write> corner: array<vec4<f32>>;

// D_eᵀG as the four corner forces G·∇N_a.
fn admm_corners(base: u32, g: mat3x3<f32>, dmi: mat3x3<f32>) {
    let h = g * transpose(dmi);
    corner[base] = vec4<f32>(-(h[0] + h[1] + h[2]), 0.0);
    corner[base + 1u] = vec4<f32>(h[0], 0.0);
    corner[base + 2u] = vec4<f32>(h[1], 0.0);
    corner[base + 3u] = vec4<f32>(h[2], 0.0);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let e = linear_group(wid) * 64u + lid.x;
    if e >= P.n {
        return;
    }
    let t = tets[e];
    let dmi = dm_inv[e];
    let f = deformation_gradient(x[t.x].xyz, x[t.y].xyz, x[t.z].xyz, x[t.w].xyz, dmi);
    if P.u0 == 0u {
        z[e] = f;
        u[e] = mat3x3<f32>(vec3<f32>(0.0), vec3<f32>(0.0), vec3<f32>(0.0));
        return;
    }
    let p = elem[e];
    let we = w2[e];
    let v = f + u[e];
    var zn: mat3x3<f32>;
    if P.u0 == 1u {
        zn = admm_prox_pd(p, v, we);
    } else {
        zn = admm_prox_hyperelastic(p, v, we);
    }
    let un = v - zn;
    admm_corners(8u * e, (zn - un) * we, dmi);
    admm_corners(8u * e + 4u, (zn - z[e]) * we, dmi);
    z[e] = zn;
    u[e] = un;
}
