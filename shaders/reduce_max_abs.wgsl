// Partial max-abs: out[u0 + g] = max |a[i]| over block g (1024 items = 256 threads × 4).
// The partials are non-negative, so the same kernel finishes the reduction. No atomics.
#import params

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

const WG: u32 = 256u;
const ITEMS: u32 = 4u;
var<workgroup> sh: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let g = linear_group(wid);
    let base = g * WG * ITEMS;
    var acc = 0.0;
    for (var k = 0u; k < ITEMS; k++) {
        let i = base + k * WG + lid.x;
        if i < P.n {
            acc = max(acc, abs(a[i]));
        }
    }
    sh[lid.x] = acc;
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        workgroupBarrier();
        if lid.x < s {
            sh[lid.x] = max(sh[lid.x], sh[lid.x + s]);
        }
    }
    if lid.x == 0u {
        out[P.u0 + g] = sh[0];
    }
}
