// Per-dispatch parameters, bound at @group(1) @binding(0) with a dynamic offset.
// Layout mirrors `jello::gpu::Params` (8 × 4 bytes = 32 bytes, no padding).
struct Params {
    // Number of logical items (threads, elements, vertices, floats) this dispatch covers.
    n: u32,
    // Workgroups per dispatch row: dispatches over 65535 groups use a 2-D grid.
    row: u32,
    // Kernel-specific integer and float parameters (see each kernel's header).
    u0: u32,
    u1: u32,
    f0: f32,
    f1: f32,
    f2: f32,
    f3: f32,
}

@group(1) @binding(0) var<uniform> P: Params;

// Linear workgroup index of a (possibly 2-D) dispatch.
fn linear_group(wid: vec3<u32>) -> u32 {
    return wid.y * P.row + wid.x;
}
