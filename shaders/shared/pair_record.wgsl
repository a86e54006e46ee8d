// One IPC contact pair record (Rust: crate::gpu::GpuPair, 32 bytes): kind 0 point–triangle
// (v = point, t0, t1, t2), kind 1 edge–edge (v = a0, a1, b0, b1), vertex indices; eps_x the
// edge–edge mollifier threshold (m⁴).

struct Pair {
    v: vec4<u32>,
    kind: u32,
    eps_x: f32,
    pad0: u32,
    pad1: u32,
}

// A pair's four vertices relative to its first, from positions split in two parts p = h + f
// (`ipc_pairs` and `ipc_ccd` with u1 > 0: h the step start's f32 position, f the rest —
// its low part plus the step's displacement; f = 0 for plain f32 positions):
// r_k = (h_k − h_0) + (f_k − f_0). Translation leaves a pair's distance and its derivatives
// unchanged, and differences of nearby coordinates round with the pair's size and the step's
// displacement, not with the distance from the origin (an f32 coordinate 0.3 m out resolves
// 3e-8 m): each component of r_k is within ε(|r_k| + |f_k − f_0|) of the exact difference
// (three roundings of half an ulp; h_k − h_0 is exact by Sterbenz for coordinates within a
// factor of 2). Twin: src/gpu/twins/ipc.rs (`pair_relative`).
fn pair_relative(h: array<vec3<f32>, 4>, f: array<vec3<f32>, 4>) -> array<vec3<f32>, 4> {
    var r: array<vec3<f32>, 4>;
    r[0] = vec3<f32>(0.0);
    for (var k = 1u; k < 4u; k++) {
        r[k] = (h[k] - h[0]) + (f[k] - f[0]);
    }
    return r;
}
