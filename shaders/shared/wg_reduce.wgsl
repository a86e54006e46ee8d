// Workgroup tree reductions over 256 invocations (the device backend's kernels, one item per
// invocation). Every invocation of the workgroup must call them (they contain barriers); the
// result is valid in invocation 0. Summation order: stride 128, 64, …, 1 — the order the CPU
// twins (src/gpu/twins/backend.rs) mirror.

var<workgroup> wg_acc: array<vec3<f32>, 256>;

// Component-wise sum of v over the workgroup.
fn wg_sum3(lid: u32, v: vec3<f32>) -> vec3<f32> {
    wg_acc[lid] = v;
    for (var s = 128u; s > 0u; s >>= 1u) {
        workgroupBarrier();
        if lid < s {
            wg_acc[lid] += wg_acc[lid + s];
        }
    }
    return wg_acc[0];
}

// Component-wise max of v over the workgroup.
fn wg_max3(lid: u32, v: vec3<f32>) -> vec3<f32> {
    wg_acc[lid] = v;
    for (var s = 128u; s > 0u; s >>= 1u) {
        workgroupBarrier();
        if lid < s {
            wg_acc[lid] = max(wg_acc[lid], wg_acc[lid + s]);
        }
    }
    return wg_acc[0];
}

var<workgroup> wg_bits: array<u32, 256>;

// Bitwise AND of v over the workgroup.
fn wg_and(lid: u32, v: u32) -> u32 {
    wg_bits[lid] = v;
    for (var s = 128u; s > 0u; s >>= 1u) {
        workgroupBarrier();
        if lid < s {
            wg_bits[lid] &= wg_bits[lid + s];
        }
    }
    return wg_bits[0];
}

// Number of 256-item workgroups over n items.
fn wg_groups(n: u32) -> u32 {
    return (n + 255u) / 256u;
}
