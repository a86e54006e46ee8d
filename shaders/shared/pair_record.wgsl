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
